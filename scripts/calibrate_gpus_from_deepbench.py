#!/usr/bin/env python3
"""Writes the `efficiency` of the NVIDIA GPU descriptions (platforms/*.json) from DeepBench's
kernel times (data/deepbench/gemm.csv, conv.csv; data/deepbench/README.md), so that
`trainbench simulate` runs GEMMs and convolutions at the fraction of peak such kernels reach
instead of at the peak.

What it does, and what it assumes:
- V100 (measured): every DeepBench GEMM of the device and precision gives a point
  (equivalent square n = 3MNK / (MK + KN + MN), fraction of peak = 2MNK / time / peak); every
  convolution gives one for its im2col GEMM (M = N P Q, N = K, K = C R S) from the sum of its
  forward, backward-input and backward-parameter times (forward only where a time is missing).
  Points are grouped in octave bins of n; each bin gives its median n and median
  fraction (capped at 1: cuDNN's Winograd and FFT convolutions beat the direct count).
  "Float" is the fp32 curve, "16 bit inputs, 16 bit multiplication, 32 bit addition" the fp16
  tensor-core curve.
- A100, H100, H200 (assumed, no kernel tables are published): the V100's tensor-core curve
  for their tensor-core formats (fp16, bf16, tf32, fp8) and its fp32 curve for fp32, each as a
  fraction of the newer GPU's own peak. Wave quantization and tile shapes are not modelled.
- No per-operator overhead is stated (op_overhead_us 0).
Nothing here is taken from the published end-to-end throughputs (data/published/): those stay
validation rows.

Usage: scripts/calibrate_gpus_from_deepbench.py   (rewrites the descriptions in place)
"""
import csv
import json
import math
import os
import statistics

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DEEPBENCH = os.path.join(ROOT, "data", "deepbench")
PLATFORMS = os.path.join(ROOT, "platforms")
DEVICE = "NVIDIA V100"
PRECISIONS = {"Float": "fp32",
              "16 bit inputs, 16 bit multiplication, 32 bit addition": "fp16"}
V100_PEAK = {"fp32": 15.7e12, "fp16": 125e12}
SOURCE = ("efficiency: DeepBench V100 kernel times (data/deepbench, baidu-research/DeepBench@"
          "da81ba78) by scripts/calibrate_gpus_from_deepbench.py")


def eq_n(m, n, k):
    return 3 * m * n * k / (m * k + k * n + m * n)


def number(text):
    try:
        return float(text)
    except ValueError:
        return None


def points(kind):
    out = {"fp32": [], "fp16": []}
    with open(os.path.join(DEEPBENCH, kind + ".csv"), newline="") as f:
        for r in csv.DictReader(f):
            dtype = PRECISIONS.get(r["precision"])
            if r["device"] != DEVICE or dtype is None:
                continue
            if kind == "gemm":
                m, n, k, t = (number(r[c]) for c in ("m", "n", "k", "time_ms"))
                if not t:
                    continue
                flops, seconds = 2 * m * n * k, t * 1e-3
            else:
                m = number(r["n"]) * number(r["p"]) * number(r["q"])
                n, k = number(r["k"]), number(r["c"]) * number(r["r"]) * number(r["s"])
                times = [number(r[c]) for c in ("forward_ms", "backward_inputs_ms",
                                                "backward_params_ms")]
                if all(times):
                    flops, seconds = 3 * 2 * m * n * k, sum(times) * 1e-3
                elif times[0]:
                    flops, seconds = 2 * m * n * k, times[0] * 1e-3
                else:
                    continue
            out[dtype].append((eq_n(m, n, k), flops / seconds / V100_PEAK[dtype]))
    return out


def curve(pts):
    bins = {}
    for n, frac in pts:
        bins.setdefault(math.floor(math.log2(n)), []).append((n, frac))
    result = []
    for key in sorted(bins):
        b = bins[key]
        n = int(round(statistics.median(p[0] for p in b)))
        frac = min(1.0, statistics.median(p[1] for p in b))
        if result and result[-1]["n"] == n:
            continue
        result.append({"n": n, "fraction_of_peak": round(frac, 4)})
    return result


def main():
    gemm, conv = points("gemm"), points("conv")
    curves = {"gemm": {d: curve(p) for d, p in gemm.items()},
              "conv": {d: curve(p) for d, p in conv.items()}}
    for name in sorted(os.listdir(PLATFORMS)):
        path = os.path.join(PLATFORMS, name)
        with open(path) as f:
            desc = json.load(f)
        if desc.get("kind") != "gpu" or not name.startswith(("v100", "a100", "h100", "h200")):
            continue
        measured = name.startswith("v100")
        eff = {"op_overhead_us": 0, "gemm": {}, "conv": {}}
        for dtype in desc["peak_tflops"]:
            source = "fp32" if dtype in ("fp32", "fp64") else "fp16"
            if dtype in ("fp64", "int8"):
                continue
            for kind in ("gemm", "conv"):
                eff[kind][dtype] = curves[kind][source]
        desc["efficiency"] = eff
        note = SOURCE + ("" if measured else "; assumed: the V100's curves as fractions of this "
                         "GPU's own peaks (no kernel tables published), tensor-core curve for "
                         "fp16/bf16/tf32/fp8")
        base = desc["source"].split("; efficiency: ")[0]
        desc["source"] = base + "; " + note
        with open(path, "w") as f:
            json.dump(desc, f, indent=2)
            f.write("\n")
        print(name, {k: {d: len(c) for d, c in v.items()} for k, v in eff.items()
                     if isinstance(v, dict)})


if __name__ == "__main__":
    main()
