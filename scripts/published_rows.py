#!/usr/bin/env python3
"""Derives data/published/training-throughput.csv (what `trainbench simulate
--validate-published` reads) from data/published/sources.csv (every single-GPU training
throughput found in the public sources, copied verbatim with its source and commit; how they
were read: data/published/NOTES.md).

Kept: the models trainbench has on the GPUs trainbench describes (platforms/*.json):
ResNet-50 v1.5 (torchvision's resnet50), images/s with `batch` images per step; and
DeepLearningExamples' Transformer-big (fairseq's transformer_wmt_en_de_big_t2t: 6 + 6 pre-norm
layers, d_model 1024, 16 heads, ffn 4096, shared embeddings over 33712 entries: 33708 BPE types
and 4 specials, preprocess.py --nwordssrc/--nwordstgt 33712), tokens/s with `batch` =
--max-tokens tokens per step. trainbench's transformer family computes batch x seq padded tokens
per side; the config takes seq 32 (a length-bucketed batch of WMT14 sentences; the prediction
moves by under 3% between seq 16 and 64, attention's seq^2 terms being small at d_model 1024) and
batch = max-tokens / 32. fairseq counts non-padding target tokens (ntokens), at most max-tokens
per step: the published step is taken as max-tokens / throughput, which makes a prediction
look more optimistic than it is by the share of a step's tokens that are padding or source-only.
GNMT v2 (a 4+4-layer LSTM with Bahdanau attention), BERT (an encoder with a masked-LM head on
15% of tokens), SSD300 and Mask R-CNN are not trainbench families and stay out.
Each source's precision becomes a simulate format:
FP32 -> fp32; TF32 -> tf32; automatic mixed precision (and MXNet's float16 training, which
keeps fp32 master weights) -> amp-fp16; Lambda's "fp32" on Ampere and Hopper -> tf32, because
PyTorch runs cuDNN convolutions in TF32 by default (torch.backends.cudnn.allow_tf32 = True) and
the source does not say it changed that. Everything else is left out, and listed on stderr.
The layout column is what the source states of the activations' memory layout (its notes name
NCHW or NHWC; Lambda's logs say memory_format nchw), empty where it says nothing.

Usage: scripts/published_rows.py > data/published/training-throughput.csv
"""
import csv
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCES = os.path.join(HERE, "..", "data", "published", "sources.csv")

PLATFORMS = {
    "NVIDIA DGX-1 16GB (8x V100 16GB)": "v100-sxm2-16gb",
    "NVIDIA DGX-1 (8x V100 16G)": "v100-sxm2-16gb",
    "NVIDIA DGX-1 (8x V100 16GB)": "v100-sxm2-16gb",
    "NVIDIA DGX-1 32GB (8x V100 32GB)": "v100-sxm2-32gb",
    "NVIDIA DGX-1 (8x V100 32GB)": "v100-sxm2-32gb",
    "NVIDIA DGX-1 (8x V100 32G)": "v100-sxm2-32gb",
    "NVIDIA DGX A100 (8x A100 80GB)": "a100-sxm4-80gb",
    "A100 80GB SXM4": "a100-sxm4-80gb",
    "NVIDIA DGX A100 (8x A100 40GB)": "a100-sxm4-40gb",
    "H100 80GB SXM5": "h100-sxm5-80gb",
}
AMPERE_OR_LATER = ("a100", "h100", "h200")
TRANSFORMER_SEQ = 32
# model key in sources.csv -> (trainbench config for a row's batch, the unit the source gives)
CONFIGS = {
    "resnet50": (lambda batch: f"resnet50:batch={batch}", "img/s"),
    "transformer_big": (lambda tokens: "transformer:layers=6,d_model=1024,heads=16,ff=4096,"
                        f"vocab=33712,seq={TRANSFORMER_SEQ},batch={sentences(tokens)}",
                        "tokens/s"),
}


def sentences(tokens):
    # trainbench refuses a tokens row whose config holds another number of tokens.
    assert tokens % TRANSFORMER_SEQ == 0, f"{tokens} tokens are not sentences of {TRANSFORMER_SEQ}"
    return tokens // TRANSFORMER_SEQ


def platform_of(gpu):
    if gpu in PLATFORMS:
        return PLATFORMS[gpu]
    if gpu.startswith("H100 80GB SXM5 (1x)"):
        return "h100-sxm5-80gb"
    if gpu.startswith("H200 140GB SXM (1x)"):
        return "h200-sxm-141gb"
    return None


def format_of(precision, platform):
    p = precision.lower()
    if p.startswith("fp32 (no amp"):  # Lambda
        if platform.startswith(AMPERE_OR_LATER):
            return "tf32", "PyTorch's default: cuDNN convolutions in TF32"
        return "fp32", ""
    if p.startswith("tf32"):
        return "tf32", ""
    if p.startswith("fp32"):
        return "fp32", ""
    if "mixed precision" in p or p.startswith("fp16 (amp)"):
        note = "fp16 training with fp32 master weights" if "--dtype float16" in p else ""
        return "amp-fp16", note
    return None, ""


def main():
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(["config", "platform", "format", "batch", "throughput", "unit", "source",
                  "layout", "note"])
    with open(SOURCES, newline="") as f:
        for row in csv.DictReader(f):
            why = None
            platform = platform_of(row["platform_gpu"])
            if row["model"] not in CONFIGS:
                why = "no trainbench family for " + row["model"]
            elif platform is None:
                why = "no description for " + row["platform_gpu"]
            fmt, note = format_of(row["precision"], platform or "")
            if why is None and fmt is None:
                why = "precision " + row["precision"]
            if why is None and row["unit"] != CONFIGS[row["model"]][1]:
                why = "unit " + row["unit"]
            if why:
                print(f"left out: {row['source_model_name']}, {row['platform_gpu']}, "
                      f"{row['precision']}: {why}", file=sys.stderr)
                continue
            source = (f"{row['source_repo']}@{row['source_commit'][:12]} {row['source_path']}: "
                      f"{row['source_table']}; {row['source_model_name']}, {row['platform_gpu']}, "
                      f"{row['precision']}")
            config, unit = CONFIGS[row["model"]]
            if unit == "tokens/s":
                note = "; ".join(x for x in (note, "fairseq counts non-padding target tokens; "
                                             "the step is taken as max-tokens / throughput, "
                                             "the most tokens a step holds") if x)
            notes = "; ".join(x for x in (note, row["extra"]) if x)
            layout = "nchw" if "NCHW" in row["extra"] else "nhwc" if "NHWC" in row["extra"] else ""
            out.writerow([config(int(row["batch"])), platform, fmt, row["batch"],
                          row["throughput"], "images/s" if unit == "img/s" else unit, source,
                          layout, notes])


if __name__ == "__main__":
    main()
