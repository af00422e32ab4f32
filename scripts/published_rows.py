#!/usr/bin/env python3
"""Derives data/published/training-throughput.csv (what `trainbench simulate
--validate-published` reads) from data/published/sources.csv (every single-GPU training
throughput found in the public sources, copied verbatim with its source and commit; how they
were read: data/published/NOTES.md).

Kept: the models trainbench has (ResNet-50 v1.5, which torchvision's resnet50 is) on the GPUs
trainbench describes (platforms/*.json). Each source's precision becomes a simulate format:
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
            if row["model"] != "resnet50":
                why = "no trainbench family for " + row["model"]
            elif platform is None:
                why = "no description for " + row["platform_gpu"]
            fmt, note = format_of(row["precision"], platform or "")
            if why is None and fmt is None:
                why = "precision " + row["precision"]
            if why is None and row["unit"] != "img/s":
                why = "unit " + row["unit"]
            if why:
                print(f"left out: {row['source_model_name']}, {row['platform_gpu']}, "
                      f"{row['precision']}: {why}", file=sys.stderr)
                continue
            source = (f"{row['source_repo']}@{row['source_commit'][:12]} {row['source_path']}: "
                      f"{row['source_table']}; {row['source_model_name']}, {row['platform_gpu']}, "
                      f"{row['precision']}")
            notes = "; ".join(x for x in (note, row["extra"]) if x)
            layout = "nchw" if "NCHW" in row["extra"] else "nhwc" if "NHWC" in row["extra"] else ""
            out.writerow([f"resnet50:batch={row['batch']}", platform, fmt, row["batch"],
                          row["throughput"], "images/s", source, layout, notes])


if __name__ == "__main__":
    main()
