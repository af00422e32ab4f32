#!/usr/bin/env python3
"""Fit a GPU host's time per training step, host_step_us + operators x host_op_us, from
scripts/measure_gpu.py's host table (data/measured/NAME/host.csv): tiny fc models (width 16,
1 to 16 layers, five optimizers, tf32 and amp-bf16) whose GPU work is negligible, so that a
step's wall time is the host's. `operators` is what `trainbench simulate` counts for the same
config on the GPU's description (forward, backward, autocast's casts, one multi-tensor launch
per pass of the optimizer), so the constants are per operator as the simulator counts them,
not per aten call (host.csv's aten_ops: 1.2-3.1x as many in these fc steps, views, transposes
and detaches among them).

Least squares over the fc rows, both formats pooled (each format's own fit is recorded too).
The table's tiny GPT rows are not fitted: they are printed as a check (a decoder layer
dispatches more per counted operator than a linear layer does). No row of the validation
tables (data/measured/*/e2e*.csv) is used.

Writes JSON to stdout: {"host_step_us", "host_op_us", "rows", "median_abs_error", ...};
scripts/calibrate_gpus.py reads it from data/measured/NAME/host-fit.json.

Usage: scripts/fit_gpu_host.py data/measured/h200-sxm-141gb [--trainbench build/trainbench]
       > data/measured/h200-sxm-141gb/host-fit.json
"""
import argparse
import csv
import json
import os
import statistics
import subprocess
import sys


def operators(tb, platform, config, fmt):
    out = subprocess.run([tb, "simulate", config, "--platform", platform, "--format", fmt,
                          "--json"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)["results"][0]["operators"]["total"]


def config_of(r):
    if r["model"] == "fc":
        return (f"fc:layers={r['layers']},nodes=16,input=16,output=16,batch=16,"
                f"optimizer={r['optimizer']}")
    return f"gpt:layers={r['layers']},d_model=64,heads=2,seq=16,positions=16,vocab=64,batch=2"


def lstsq2(xs, ys):
    """y = a + b x, ordinary least squares."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--trainbench", default=os.path.join(os.path.dirname(__file__), "..",
                                                         "build", "trainbench"))
    a = ap.parse_args()
    platform = os.path.basename(a.folder.rstrip("/"))
    path = os.path.join(a.folder, "host.csv")
    rows = list(csv.DictReader(open(path)))
    for r in rows:
        r["ops"] = operators(a.trainbench, platform, config_of(r), r["format"])
        r["wall_us"] = float(r["wall_ms"]) * 1e3
    fc = [r for r in rows if r["model"] == "fc"]
    step, per_op = lstsq2([r["ops"] for r in fc], [r["wall_us"] for r in fc])
    err = lambda r: abs(step + per_op * r["ops"] - r["wall_us"]) / r["wall_us"]
    errs = sorted(err(r) for r in fc)
    by_format = {}
    for fmt in sorted({r["format"] for r in fc}):
        sel = [r for r in fc if r["format"] == fmt]
        a, b = lstsq2([r["ops"] for r in sel], [r["wall_us"] for r in sel])
        signed = [(step + per_op * r["ops"] - r["wall_us"]) / r["wall_us"] for r in sel]
        by_format[fmt] = {"own_fit": {"host_step_us": round(a, 1), "host_op_us": round(b, 2)},
                          "pooled_fit_median_signed_error": round(statistics.median(signed), 3)}
    check = [{"config": config_of(r), "format": r["format"], "operators": r["ops"],
              "measured_us": round(r["wall_us"], 1),
              "predicted_us": round(step + per_op * r["ops"], 1)}
             for r in rows if r["model"] != "fc"]
    json.dump({"source": os.path.relpath(path), "fitted": "fc rows, tf32 and amp-bf16 pooled",
               "host_step_us": round(step, 1), "host_op_us": round(per_op, 2), "rows": len(fc),
               "median_abs_error": round(statistics.median(errs), 3),
               "max_abs_error": round(errs[-1], 3), "by_format": by_format,
               "check_not_fitted": check},
              sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
