#!/usr/bin/env python3
"""Turn scripts/measure_gpu.py's e2e tables into validation rows for
`trainbench simulate --validate-published` (the format of data/published/training-throughput.csv).

Usage: measured_to_validation.py data/measured > data/measured/training-throughput.csv

One row per (config, format, layout) and device folder: the throughput of the median, over the
folder's e2e*.csv and fp8e2e*.csv files (one per fresh process), of the wall time per step.
Rows with PyTorch's fused attention are left out: trainbench's gpt composes attention, so no
config describes them. Of the fp8 tables, the amp-bf16 rows and the FP8 rows whose casts ran as
eager ATen kernels (format amp-fp8-eager@current in trainbench's names) are kept; FP8 rows
with torch.compile's casts are left out: their amax reduction ran 10-70x slower than ATen's
(data/measured/README.md), an implementation no trainbench recipe describes.
The folder's name is the trainbench platform the GPU is."""
import csv
import glob
import os
import re
import statistics
import sys


def facts_file(folder, e2e):
    """The facts of the lease an e2e table was measured in: facts-runK.txt for the largest K
    up to the table's run number (a lease's later processes share its facts), else facts.txt."""
    m = re.search(r"run(\d+)\.csv$", e2e)
    if m:
        for k in range(int(m.group(1)), 0, -1):
            path = os.path.join(folder, f"facts-run{k}.txt")
            if os.path.exists(path):
                return path
    return os.path.join(folder, "facts.txt")


def facts(path):
    out = {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if len(w) >= 2 and w[0] in ("date", "device", "cuda", "python"):
                out[w[0]] = line.strip()
            if "Driver Version" in line:
                out["driver"] = line.split(":")[1].strip()
    return out


def main():
    root = sys.argv[1]
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["config", "platform", "format", "batch", "throughput", "unit", "source", "layout",
                "note"])
    for folder in sorted(glob.glob(os.path.join(root, "*/"))):
        platform = os.path.basename(folder.rstrip("/"))
        files = sorted(glob.glob(os.path.join(folder, "e2e*.csv")) +
                       glob.glob(os.path.join(folder, "fp8e2e*.csv")))
        if not files:
            continue
        runs = {}
        for path in files:
            for r in csv.DictReader(open(path)):
                if r["status"] != "ok" or r.get("attention") == "fused":
                    continue
                if r["format"].startswith("amp-fp8"):
                    if r.get("cast") != "eager":
                        continue
                    r["format"] = "amp-fp8-eager@current"
                r.setdefault("layout", "")
                key = (r["config"], r["format"], r["layout"])
                r["path"] = path
                runs.setdefault(key, []).append(r)
        for (config, fmt, layout), rs in runs.items():
            used = sorted({r["path"] for r in rs})
            fx = facts(facts_file(folder, used[0]))
            wall = statistics.median(float(r["wall_ms_per_step"]) for r in rs)
            per_step = int(rs[0]["examples_per_step"])
            unit = {"resnet50": "images/s", "gpt": "tokens/s"}.get(rs[0]["model"], "examples/s")
            source = (f"measured: scripts/measure_gpu.py, {fx.get('device', '')}, "
                      f"driver {fx.get('driver', '?')}, {fx.get('python', '')}, "
                      f"{fx.get('cuda', '')}, {fx.get('date', '')}; "
                      + "; ".join(os.path.relpath(p) for p in used))
            walls = ", ".join(f"{float(r['wall_ms_per_step']):.2f}" for r in rs)
            note = (f"synthetic data on the GPU; median over {len(rs)} fresh process(es) of the "
                    f"wall time per step after warm-up ({walls} ms); cudnn.benchmark on; "
                    f"peak memory {rs[0]['peak_gib']} GiB")
            if rs[0]["model"] == "gpt":
                note += "; attention composed as trainbench's gpt builds it (scores, mask, softmax)"
            if fmt.startswith("amp-fp8"):
                note += ("; under amp-bf16's autocast, the linear layers' GEMMs in FP8 "
                         "(torch._scaled_mm; e4m3 forward, e5m2 gradients; per-tensor current "
                         "scaling, each cast and transpose an eager ATen kernel), "
                         f"{rs[0]['fp8_layers']} such layers"
                         + (", the tied logits in bf16" if rs[0]["model"] == "gpt" else ""))
            w.writerow([config, platform, fmt, per_step, f"{per_step / wall * 1e3:.1f}", unit,
                        source, layout, note])


if __name__ == "__main__":
    main()
