#!/usr/bin/env python3
"""Writes the `efficiency` of the NVIDIA GPU descriptions (platforms/*.json) from published
kernel measurements, so that `trainbench simulate` runs GEMMs, convolutions and memory-bound
layers at the rates such kernels reach instead of at the datasheet roofs. Inputs (each row
names its source): data/deepbench/ (DeepBench's V100 GEMM and convolution times) and
data/gpu-kernels/ (GEMM throughput by shape on A100, H100 and H200; STREAM-like bandwidth;
per-kernel start-up time); data/gpu-kernels/README.md lists the sources.

What it does, and what it assumes:
- GEMM curves. Every measured GEMM of the device and precision gives a point (equivalent
  square n = 3MNK / (MK + KN + MN), fraction of peak = 2MNK / time / peak); points are grouped
  in octave bins of n, each bin giving its median n and median fraction (capped at 1).
  V100: DeepBench ("Float" is fp32, "16 bit inputs, 16 bit multiplication, 32 bit addition"
  fp16). A100 fp16/bf16: Azure's cuBLASLt table (A100-SXM4-80GB; the 40 GB part has the same
  SMs and clocks). H100 and H200 bf16/fp16/tf32: XLA's measured sm_90 table (H200 has the
  H100's SMs and clocks); fp8: Azure's cuBLASLt tables of each. Where a GPU has no table for a
  format (A100 tf32, every fp32 SIMT curve), the V100's curve of the same unit (tensor core or
  SIMT) is taken as a fraction of the GPU's own peak: an assumption, named in `source`.
- TITAN Xp: its own DeepBench GEMM and convolution times (fp32); no bandwidth or start-up
  figure is published for it, so those stay unstated.
- Convolution curves. Measured only on the V100 (DeepBench: each convolution's im2col GEMM,
  forward + backward times). Elsewhere: the V100's convolution curve times the ratio of the
  GPU's large-GEMM efficiency (median fraction over points with n >= 2048) to the V100's, i.e.
  convolutions are assumed to lose to large GEMMs what they lose on the V100.
- Wave quantization: every measured point is divided by the wave utilization of its own
  shape on the GPU that measured it (CUTLASS's tile menus, split-K; wave_utilization below,
  the same arithmetic as trainbench's), so the curves are per-SM efficiencies; the
  descriptions state the menus as gemm_tiles and the simulator multiplies each GEMM's own
  utilization back in. A curve carried to another GPU (the V100's convolutions, fp32, A100
  tf32) thus transfers per SM, and that GPU's SM count decides how a shape fills it.
- memory_fraction: the median over the GPU's STREAM triad measurements of achieved / stated
  bandwidth (V100: gpu-stream; A100: gpu-stream and BabelStream; H100, H200: BabelStream).
- op_overhead_us: the start-up time of back-to-back kernels (fit t = a + V/b of small-kernel
  stream launches): A100 measured; H200 measured and taken for H100 (the same SMs); V100
  assumed the mean of the two.
- host_op_us, host_step_us (H100, H200): the host's time per training step, fitted on tiny
  models' steps on the lent H200's host (scripts/fit_gpu_host.py -> data/measured/
  h200-sxm-141gb/host-fit.json); the H100's scaled by the ratio of its host's dispatch of one
  trivial eager operator (data/measured/NAME/launch.csv) to the H200 host's. A property of
  the host's CPU and of the framework more than of the GPU. Not stated for the others.
- gemm_alignment (H100, H200): GEMMs whose leading dimension is off a multiple of 16 bytes,
  against aligned ones of the same size, measured on the lent H200 (data/measured/
  h200-sxm-141gb/align.csv, alignment() below). Unmeasured, so unstated, elsewhere.
Nothing here is taken from the published end-to-end throughputs (data/published/) or the
measured ones (data/measured/*/e2e*.csv): those stay validation rows.

After writing, it prints (stderr) how well the V100's tensor-core GEMM curve predicts the
A100's and H100's measured GEMM tables, as a fraction of peak and per SM with wave
quantization: a kernel-level check of the transfer the convolution curves rely on.

Usage: scripts/calibrate_gpus.py   (rewrites the descriptions in place)
"""
import csv
import json
import math
import os
import statistics
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
DEEPBENCH = os.path.join(ROOT, "data", "deepbench")
MEASURED = os.path.join(ROOT, "data", "measured")
PLATFORMS = os.path.join(ROOT, "platforms")
DEVICE = "NVIDIA V100"
# Descriptions whose own kernels DeepBench measured (fp32 only beyond the V100).
DEEPBENCH_OWN = {"titan-xp": ("NVIDIA GTX TitanXp", {"fp32": 12.15e12})}
PRECISIONS = {"Float": "fp32",
              "16 bit inputs, 16 bit multiplication, 32 bit addition": "fp16"}
V100_PEAK = {"fp32": 15.7e12, "fp16": 125e12}
KERNELS = os.path.join(ROOT, "data", "gpu-kernels")
SOURCE = "efficiency: scripts/calibrate_gpus.py from published kernel measurements"
XLA_H100 = "NVIDIA H100 (sm_90; SKU not stated)"
# Per description prefix: which measured GEMM table gives which format's curve.
GEMM_TABLES = {
    "a100": {"fp16": ("NVIDIA A100-SXM4-80GB", "fp16"), "bf16": ("NVIDIA A100-SXM4-80GB", "fp16")},
    "h100": {"bf16": (XLA_H100, "bf16"), "fp16": (XLA_H100, "bf16"), "tf32": (XLA_H100, "tf32"),
             "fp8": ("NVIDIA H100 80GB HBM3", "fp8")},
    "h200": {"bf16": (XLA_H100, "bf16"), "fp16": (XLA_H100, "bf16"), "tf32": (XLA_H100, "tf32"),
             "fp8": ("NVIDIA H200 141GB", "fp8")},
}
BANDWIDTH = {
    "v100": ["NVIDIA V100 (900 GB/s; SKU not stated)"],
    "a100-sxm4-40gb": ["NVIDIA A100-SXM4-40GB"],
    "a100-sxm4-80gb": ["NVIDIA A100-SXM4-80GB"],
    "h100": ["NVIDIA H100 80GB HBM3"],
    "h200": ["NVIDIA H200 141GB"],
}
STARTUP = {"a100": ["NVIDIA A100-SXM4-80GB"], "h100": ["NVIDIA H200"], "h200": ["NVIDIA H200"],
           "v100": ["NVIDIA A100-SXM4-80GB", "NVIDIA H200"]}
LARGE_N = 2048
# The output tiles a GEMM library picks among, per unit: CUTLASS's generated kernels
# (python/cutlass_library/generator.py at NVIDIA/cutlass@7107b05535f8: GenerateSM50_Simt for
# CUDA-core fp32, GenerateSM70_TensorOp_884 and GenerateSM80_TensorOp_16816 for tensor cores;
# Hopper assumed to pick among the SM80 shapes). Measured fractions are divided by the wave
# utilization of their shape on the GPU that measured them, so the curves hold per-SM
# efficiency and transfer across SM counts; the simulator multiplies the utilization back in.
SIMT_TILES = [(128, 128), (128, 64), (64, 128), (64, 64), (128, 32), (32, 128)]
TENSOR_TILES = [(256, 128), (128, 256), (128, 128), (256, 64), (64, 256), (64, 128), (128, 64),
                (64, 64)]
SMS = {"NVIDIA V100": 80, "NVIDIA GTX TitanXp": 30, "NVIDIA A100-SXM4-80GB": 108,
       XLA_H100: 132, "NVIDIA H100 80GB HBM3": 132, "NVIDIA H200 141GB": 132}


def eq_n(m, n, k):
    return 3 * m * n * k / (m * k + k * n + m * n)


MIN_SPLIT_K = 128  # PlatformDescription::kMinSplitK


def wave_utilization(m, n, k, sms, tiles):
    """trainbench's PlatformDescription::wave_utilization: the share of sms x tile that an m x n
    output (reducing over k) keeps busy in whole waves, on the tile of the menu and the split of
    k into 1, 2, 4, 8 or 16 slices (each at least MIN_SPLIT_K deep) that keep most of it busy."""
    best = 0.0
    for tm, tn in tiles:
        s = 1
        while s <= 16 and (s == 1 or k / s >= MIN_SPLIT_K):
            ctas = math.ceil(m / tm) * math.ceil(n / tn) * s
            waves = math.ceil(ctas / sms)
            best = max(best, m * n * s / (waves * sms * tm * tn))
            s *= 2
    return min(best, 1.0)


def tiles_for(dtype):
    return SIMT_TILES if dtype in ("fp32", "fp64") else TENSOR_TILES


def number(text):
    try:
        return float(text)
    except ValueError:
        return None


def points(kind, device=DEVICE, peak=None, per_sm=True):
    """(equivalent square n, fraction of peak) per measured kernel; per_sm divides each by the
    wave utilization its shape gets on `device`, the simulator's arithmetic run backwards."""
    peak = peak or V100_PEAK
    out = {"fp32": [], "fp16": []}
    with open(os.path.join(DEEPBENCH, kind + ".csv"), newline="") as f:
        for r in csv.DictReader(f):
            dtype = PRECISIONS.get(r["precision"])
            if r["device"] != device or dtype not in peak:
                continue
            tiles, sms = tiles_for(dtype), SMS[device]
            if kind == "gemm":
                m, n, k, t = (number(r[c]) for c in ("m", "n", "k", "time_ms"))
                if not t:
                    continue
                flops, seconds = 2 * m * n * k, t * 1e-3
                util = wave_utilization(m, n, k, sms, tiles)
            else:
                m = number(r["n"]) * number(r["p"]) * number(r["q"])
                n, k = number(r["k"]), number(r["c"]) * number(r["r"]) * number(r["s"])
                times = [number(r[c]) for c in ("forward_ms", "backward_inputs_ms",
                                                "backward_params_ms")]
                if all(times):
                    flops, seconds = 3 * 2 * m * n * k, sum(times) * 1e-3
                    # Three phases of equal FLOPs, each at its own utilization (as the simulator
                    # runs them: m x n over k, dX m x k over n, dW k x n over m): their summed
                    # time divides by the harmonic mean of the three.
                    us = (wave_utilization(m, n, k, sms, tiles),
                          wave_utilization(m, k, n, sms, tiles),
                          wave_utilization(k, n, m, sms, tiles))
                    util = 3 / sum(1 / u for u in us)
                elif times[0]:
                    flops, seconds = 2 * m * n * k, times[0] * 1e-3
                    util = wave_utilization(m, n, k, sms, tiles)
                else:
                    continue
            frac = flops / seconds / peak[dtype]
            out[dtype].append((eq_n(m, n, k), frac / util if per_sm else frac))
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


def rows(name):
    with open(os.path.join(KERNELS, name), newline="") as f:
        return list(csv.DictReader(f))


def table_points(device, precision, peak_tflops):
    tiles = tiles_for(precision)
    return [(eq_n(float(r["m"]), float(r["n"]), float(r["k"])),
             float(r["tflops"]) / peak_tflops /
             wave_utilization(float(r["m"]), float(r["n"]), float(r["k"]), SMS[device], tiles))
            for r in rows("gemm.csv") if r["device"] == device and r["precision"] == precision]


def large(pts):
    return statistics.median(f for n, f in pts if n >= LARGE_N)


def for_prefix(table, name):
    for prefix, value in table.items():
        if name.startswith(prefix):
            return value
    return None


def write(path, name, desc):
    with open(path, "w") as f:
        json.dump(desc, f, indent=2)
        f.write("\n")
    print(name, {k: {d: len(c) for d, c in v.items()} for k, v in desc["efficiency"].items()
                 if isinstance(v, dict)})


def main():
    gemm, conv = points("gemm"), points("conv")
    curves = {"gemm": {d: curve(p) for d, p in gemm.items()},
              "conv": {d: curve(p) for d, p in conv.items()}}
    bandwidth = rows("bandwidth.csv")
    startup = {r["device"]: float(r["startup_us"]) for r in rows("kernel-startup.csv")}
    for name in sorted(os.listdir(PLATFORMS)):
        path = os.path.join(PLATFORMS, name)
        with open(path) as f:
            desc = json.load(f)
        own = for_prefix(DEEPBENCH_OWN, name)
        if own:
            device, peak = own
            g, c = points("gemm", device, peak), points("conv", device, peak)
            # No bandwidth or start-up measurement is published for it: those stay unstated.
            desc["efficiency"] = {"gemm": {d: curve(p) for d, p in g.items() if p},
                                  "conv": {d: curve(p) for d, p in c.items() if p}}
            desc["efficiency"]["gemm_tiles"] = {d: [list(t) for t in tiles_for(d)]
                                                for d in desc["efficiency"]["gemm"]}
            base = desc["source"].split("; efficiency: ")[0]
            desc["source"] = (base + "; efficiency: scripts/calibrate_gpus.py from DeepBench's "
                              f"{device} kernel times (data/deepbench, fp32 GEMM and "
                              "convolution; no bandwidth or kernel start-up figures published)")
            write(path, name, desc)
            continue
        if desc.get("kind") != "gpu" or not name.startswith(("v100", "a100", "h100", "h200")):
            continue
        tables = for_prefix(GEMM_TABLES, name) or {}
        eff = {"op_overhead_us": round(statistics.mean(startup[d] for d in
                                                       for_prefix(STARTUP, name)), 3),
               "memory_fraction": round(statistics.median(
                   float(r["gbps"]) / float(r["peak_gbps"]) for r in bandwidth
                   if r["device"] in for_prefix(BANDWIDTH, name)), 3),
               "gemm": {}, "conv": {}}
        assumed = []
        for dtype in desc["peak_tflops"]:
            if dtype in ("fp64", "int8"):
                continue
            unit = "fp32" if dtype == "fp32" else "fp16"
            if dtype in tables:
                pts = table_points(*tables[dtype], desc["peak_tflops"][dtype])
                eff["gemm"][dtype] = curve(pts)
                ratio = large(pts) / large(gemm[unit])
                eff["conv"][dtype] = [{"n": p["n"], "fraction_of_peak":
                                       round(min(1.0, p["fraction_of_peak"] * ratio), 4)}
                                      for p in curves["conv"][unit]]
            else:
                eff["gemm"][dtype] = curves["gemm"][unit]
                eff["conv"][dtype] = curves["conv"][unit]
                if not name.startswith("v100"):
                    assumed.append(dtype)
        eff["gemm_tiles"] = {d: [list(t) for t in tiles_for(d)] for d in eff["gemm"]}
        host = host_dispatch_us(name)
        fit = host_fit(name)
        if fit is not None:
            eff["host_op_us"], eff["host_step_us"] = fit[0], fit[1]
        elif host is not None:
            eff["host_op_us"] = host
        align = alignment(name)
        if align:
            eff["gemm_alignment"] = align
        desc["efficiency"] = eff
        note = SOURCE + ": GEMM " + ("DeepBench V100" if name.startswith("v100") else
                                     ", ".join(f"{d} {dev} {p}" for d, (dev, p) in tables.items()))
        if not name.startswith("v100"):
            note += ("; convolutions: DeepBench V100's curve scaled by this GPU's large-GEMM "
                     "efficiency over the V100's")
        if assumed:
            note += ("; assumed (no table): the V100's curves as fractions of this GPU's peak for "
                     + ", ".join(assumed))
        note += ("; curves per SM (wave quantization on CUTLASS's tile menus taken out, "
                 "gemm_tiles)")
        note += (f"; memory_fraction: STREAM triad ({', '.join(for_prefix(BANDWIDTH, name))}); "
                 f"op_overhead_us: kernel start-up fit ({', '.join(for_prefix(STARTUP, name))}"
                 f"{', mean, assumed' if name.startswith('v100') else ''})")
        if fit is not None:
            note += "; host_op_us, host_step_us: " + fit[2]
        elif host is not None:
            note += (f"; host_op_us: eager dispatch of a trivial operator from Python on the "
                     f"lent GPU's host (data/measured/{os.path.splitext(name)[0]}/launch.csv)")
        if align:
            note += ("; gemm_alignment: GEMMs with a leading dimension off 16 bytes against "
                     f"aligned ones of the same size, {ALIGN_SOURCE}"
                     + ("" if name.startswith("h200") else " (the H200's: same SMs and cuBLAS)"))
        note += "; data/gpu-kernels/README.md"
        base = desc["source"].split("; efficiency: ")[0]
        desc["source"] = base + "; " + note
        write(path, name, desc)


# The GPU whose host table (scripts/fit_gpu_host.py) and alignment table were measured; the
# H100 (same SMs, same libraries) takes them, the host's scaled by its own dispatch time,
# until its own folder has a host-fit.json.
HOST_FIT = os.path.join(MEASURED, "h200-sxm-141gb", "host-fit.json")
ALIGN_SOURCE = "data/measured/h200-sxm-141gb/align.csv"
SM90 = ("h100", "h200")


def host_fit(name):
    """(host_op_us, host_step_us, note) from this GPU's own host's fitted training-step table
    where one was measured, else the H200 host's scaled by the ratio of the two hosts'
    trivial-operator dispatch (launch.csv), an assumption: the same framework on a faster or
    slower CPU."""
    own_fit = os.path.join(MEASURED, os.path.splitext(name)[0], "host-fit.json")
    if name.startswith(SM90) and os.path.exists(own_fit):
        with open(own_fit) as f:
            fit = json.load(f)
        return (round(fit["host_op_us"], 2), round(fit["host_step_us"], 1),
                f"training steps of tiny models on the lent GPU's host (scripts/fit_gpu_host.py, "
                f"{os.path.relpath(own_fit, ROOT)})")
    if not name.startswith(SM90) or not os.path.exists(HOST_FIT):
        return None
    with open(HOST_FIT) as f:
        fit = json.load(f)
    own, ref = host_dispatch_us(name), host_dispatch_us("h200-sxm-141gb.json")
    scale = own / ref if own and ref else 1.0
    note = ("training steps of tiny models on the lent H200's host (scripts/fit_gpu_host.py, "
            "data/measured/h200-sxm-141gb/host-fit.json)")
    if scale != 1.0:
        note += (f", times this GPU's host's trivial-operator dispatch over the H200 host's "
                 f"({own} / {ref} us, launch.csv)")
    return round(fit["host_op_us"] * scale, 2), round(fit["host_step_us"] * scale, 1), note


def alignment(name):
    """Per dtype, {bytes: fraction}: the median, over the table's GEMMs whose n or k (a leading
    dimension of row-major operands) is a multiple of only `bytes` bytes, of their throughput
    over that of the same base size's 16-byte-aligned neighbours (n or k + 8, or + 4 in
    TF32): the power-of-two base itself is left out, cuBLAS's best case. m is no leading
    dimension and the fp32 (SIMT) rows showed no effect; neither enters."""
    path = os.path.join(ROOT, ALIGN_SOURCE)
    if not name.startswith(SM90) or not os.path.exists(path):
        return {}
    rows = list(csv.DictReader(open(path)))
    out = {}
    for fmt, dtype, eb in [("amp-bf16", "bf16", 2), ("amp-fp16", "fp16", 2), ("tf32", "tf32", 4)]:
        groups = {}
        for base in sorted({int(r["k"]) for r in rows if r["case"] == "mm m+0"}):
            for dim in "nk":
                sel = [r for r in rows if r["format"] == fmt and r["case"].startswith(f"mm {dim}")
                       and int(r["m"]) == base and int(r["nk".replace(dim, "")]) == base]
                aligned = [float(r["tflops"]) for r in sel
                           if int(r[dim]) != base and int(r[dim]) * eb % 16 == 0]
                if not aligned:
                    continue
                ref = statistics.median(aligned)
                for r in sel:
                    by = int(r[dim]) * eb
                    by = by & -by
                    if by < 16:
                        groups.setdefault(by, []).append(float(r["tflops"]) / ref)
        if groups:
            out[dtype] = {str(b): round(statistics.median(v), 3) for b, v in sorted(groups.items())}
    return out


def host_dispatch_us(name):
    """The eager host loop's microseconds per operator measured on this GPU's host, or None."""
    path = os.path.join(MEASURED, os.path.splitext(name)[0], "launch.csv")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        for r in csv.DictReader(f):
            if r["what"].startswith("eager add_ on 1 element"):
                return round(float(r["us_per_op"]), 2)
    return None


def interpolate(curve_pts, n):
    """trainbench's log-log interpolation in a curve, clamped at its ends."""
    if n <= curve_pts[0]["n"]:
        return curve_pts[0]["fraction_of_peak"]
    if n >= curve_pts[-1]["n"]:
        return curve_pts[-1]["fraction_of_peak"]
    for a, b in zip(curve_pts, curve_pts[1:]):
        if a["n"] <= n <= b["n"]:
            t = math.log(n / a["n"]) / math.log(b["n"] / a["n"])
            return math.exp(math.log(a["fraction_of_peak"]) + t * (
                math.log(b["fraction_of_peak"]) - math.log(a["fraction_of_peak"])))
    return curve_pts[-1]["fraction_of_peak"]


def transfer_check():
    """How well the V100's tensor-core GEMM curve predicts the newer GPUs' measured GEMM tables
    (kernel level; no end-to-end row involved), carried as a fraction of peak (what the
    descriptions did before wave quantization) and per SM times the target's wave utilization
    (what they do now). Printed to stderr: the median and p90 of |predicted - measured| /
    measured throughput per table."""
    as_fraction = curve(points("gemm", per_sm=False)["fp16"])
    per_sm = curve(points("gemm")["fp16"])
    for platform, (device, precision) in (("a100-sxm4-80gb", GEMM_TABLES["a100"]["fp16"]),
                                          ("h100-sxm5-80gb", GEMM_TABLES["h100"]["bf16"])):
        with open(os.path.join(PLATFORMS, platform + ".json")) as f:
            peak = json.load(f)["peak_tflops"][precision] * 1e12
        errs = {"fraction of peak": [], "per SM x waves": []}
        for r in rows("gemm.csv"):
            if r["device"] != device or r["precision"] != precision:
                continue
            m, n, k = float(r["m"]), float(r["n"]), float(r["k"])
            measured = float(r["tflops"]) * 1e12 / peak
            e = eq_n(m, n, k)
            old = interpolate(as_fraction, e)
            new = interpolate(per_sm, e) * wave_utilization(m, n, k, SMS[device], TENSOR_TILES)
            errs["fraction of peak"].append(abs(old - measured) / measured)
            errs["per SM x waves"].append(abs(new - measured) / measured)
        for how, v in errs.items():
            v.sort()
            print(f"transfer V100 fp16 -> {device} {precision} ({len(v)} GEMMs), {how}: "
                  f"median {100 * statistics.median(v):.1f}%, "
                  f"p90 {100 * v[int(0.9 * (len(v) - 1))]:.1f}%", file=sys.stderr)


if __name__ == "__main__":
    main()
    transfer_check()
