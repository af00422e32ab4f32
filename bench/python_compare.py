#!/usr/bin/python3
"""PyTorch-eager twin of trainbench's fc family, for bench/python_compare.sh.

measure mode (default): builds input -> layers x (Linear(nodes)+ReLU) -> Linear(output),
cross-entropy, RMSprop(lr=1e-3, alpha=0.9, momentum=0.9, eps=1.0) as trainbench does,
drops a warm-up, times a steady window and prints one JSON object.

  /usr/bin/python3 bench/python_compare.py --config fc:layers=4,nodes=32,...,batch=64

summarize mode: reads the files python_compare.sh collected and prints the medians.

  /usr/bin/python3 bench/python_compare.py --summarize DIR --out results.json

Run it with Debian's /usr/bin/python3 (python3-torch); the pyenv python3 on PATH has no
torch. The environment trainbench sets for itself (GOMP_SPINCOUNT, MALLOC_*) is read by
the OpenMP runtime and glibc at process start, so it can only be given from outside.
"""
import argparse
import json
import os
import statistics
import sys
import time

FC_DEFAULTS = {"layers": "4", "nodes": "1024", "input": "2000", "output": "200",
               "batch": "512", "dtype": "fp32", "optimizer": "rmsprop", "threads": "0",
               "device": "cpu"}
RUNTIME_ENV = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def parse_config(text):
    family, _, rest = text.partition(":")
    if family != "fc":
        sys.exit(f"python_compare.py: only the fc family is mirrored, not '{family}'")
    cfg = dict(FC_DEFAULTS)
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        if key not in cfg:
            sys.exit(f"python_compare.py: unknown fc parameter '{key}'")
        cfg[key] = value
    if cfg["dtype"] != "fp32" or cfg["optimizer"] != "rmsprop" or cfg["device"] != "cpu":
        sys.exit("python_compare.py: only dtype=fp32, optimizer=rmsprop, device=cpu are mirrored")
    return cfg


def openblas_threads():
    """The BLAS's own thread count, asked of the loaded OpenBLAS (None where there is none).
    torch's libraries are loaded RTLD_LOCAL, so the library is found in /proc/self/maps."""
    import ctypes
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "blas" in line and "/" in line}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            fn = ctypes.CDLL(path).openblas_get_num_threads
        except (AttributeError, OSError):
            continue
        fn.restype = ctypes.c_int
        return fn()
    return None


def blas_library():
    """The BLAS library mapped into this process (its real path), or None."""
    try:
        with open("/proc/self/maps") as f:
            paths = {os.path.realpath(line.split()[-1]) for line in f
                     if ("blas" in line or "blis" in line) and "/" in line}
    except OSError:
        return None
    return ", ".join(sorted(paths)) or None


def measure(args):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    cfg = parse_config(args.config)
    layers, nodes, inp, out, batch = (int(cfg[k]) for k in
                                      ("layers", "nodes", "input", "output", "batch"))
    threads = args.threads if args.threads > 0 else (int(cfg["threads"]) or os.cpu_count())
    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)  # trainbench's prepare_runtime() does the same
    torch.manual_seed(args.seed)

    mods, width = [], inp
    for _ in range(layers):
        mods += [nn.Linear(width, nodes), nn.ReLU()]
        width = nodes
    mods.append(nn.Linear(width, out))
    model = nn.Sequential(*mods).train()
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-3, alpha=0.9, momentum=0.9, eps=1.0)

    torch.manual_seed(args.seed)
    x = torch.rand(batch, inp) - 0.5  # uniform(-0.5, 0.5), as ParaDnn and trainbench
    y = torch.randint(0, out, (batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()

    # Warm-up: --warmup steps, cut short after --warmup-time seconds (at least 3 steps),
    # so that a 0.5 s step does not spend 10 s warming up.
    t0 = time.perf_counter()
    warm = 0
    while warm < args.warmup and (warm < 3 or time.perf_counter() - t0 < args.warmup_time):
        step()
        warm += 1
    warm_s = time.perf_counter() - t0

    times = []
    start = time.perf_counter()
    now = start
    while len(times) < args.min_steps or now - start < args.min_time:
        t = time.perf_counter()
        step()
        now = time.perf_counter()
        times.append(now - t)
    window = now - start
    print(json.dumps({
        "config": args.config,
        "torch_version": torch.__version__,
        "python": sys.version.split()[0],
        "threads": torch.get_num_threads(),
        "blas_threads": openblas_threads(),
        "blas_library": blas_library(),
        "flush_denormal": True,
        "load_average": open("/proc/loadavg").read().split()[:3],
        "environment": {k: os.environ.get(k, "") for k in RUNTIME_ENV},
        "warmup_steps": warm,
        "warmup_s": warm_s,
        "steps": len(times),
        "window_s": window,
        "mean_s": window / len(times),
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
    }))


def summarize(args):
    """DIR holds <label>.<kind>.<rep>.json: kind tb (trainbench run --json), py_default,
    py_tbenv (this script's measure mode, without / with trainbench's environment)."""
    runs = {}
    configs = {}
    for name in sorted(os.listdir(args.summarize)):
        parts = name.split(".")
        if len(parts) != 4 or parts[3] != "json":
            continue
        label, kind, rep = parts[0], parts[1], int(parts[2])
        with open(os.path.join(args.summarize, name)) as f:
            doc = json.load(f)
        if kind == "tb":
            res = doc["results"][0]
            if res["status"] != "ok":
                sys.exit(f"trainbench run failed for {label}: {res['status']} {res['error']}")
            t = res["timing"]
            row = {"mean_s": t["mean_s"], "median_s": t["median_s"], "steps": t["steps"],
                   "warmup": t["warmup_steps"], "end_reason": t["end_reason"],
                   "config": res["config"], "threads": res["threads"],
                   "blas_threads": res["blas_threads"],
                   "environment": doc["context"]["runtime"]["environment"]}
            configs[label] = res["config"]
        else:
            row = doc
        runs.setdefault(label, {}).setdefault(kind, {})[rep] = row

    out = {"schema_version": 1, "kind": "trainbench.bench.python_compare",
           "benchmark": "python_compare",
           "method": "per repetition: trainbench run CONFIG --json (its steady-state mean), "
                     "then PyTorch eager (python_compare.py: warm-up dropped, mean over a "
                     "steady window) with the default environment, then with trainbench's "
                     "runtime environment; ratio = python mean / trainbench mean per "
                     "repetition, median over repetitions",
           "results": []}
    summary = []
    print()
    for label, kinds in runs.items():
        tb = kinds.get("tb", {})
        entry = {"label": label, "config": configs.get(label), "repetitions": []}
        print(f"== {label}: {configs.get(label)}")
        reps = sorted(tb)
        for rep in reps:
            row = {"rep": rep, "trainbench": tb[rep]}
            line = f"rep {rep}: trainbench {tb[rep]['mean_s'] * 1e3:.3f} ms"
            for kind in ("py_default", "py_tbenv"):
                py = kinds.get(kind, {}).get(rep)
                if py is None:
                    continue
                row[kind] = py
                row[kind + "_ratio"] = py["mean_s"] / tb[rep]["mean_s"]
                line += (f" | {kind} {py['mean_s'] * 1e3:.3f} ms ({py['steps']} steps) "
                         f"ratio {row[kind + '_ratio']:.3f}")
            entry["repetitions"].append(row)
            print(line)
        tb_med = statistics.median(tb[r]["mean_s"] for r in reps)
        entry["median_trainbench_mean_s"] = tb_med
        text = f"median trainbench {tb_med * 1e3:.3f} ms"
        short = []
        for kind in ("py_default", "py_tbenv"):
            ratios = [r[kind + "_ratio"] for r in entry["repetitions"] if kind + "_ratio" in r]
            if not ratios:
                continue
            py_med = statistics.median(r[kind]["mean_s"] for r in entry["repetitions"]
                                       if kind in r)
            entry[f"median_{kind}_mean_s"] = py_med
            entry[f"median_{kind}_ratio"] = statistics.median(ratios)
            entry[f"{kind}_ratio_of_medians"] = py_med / tb_med
            text += (f" | {kind} {py_med * 1e3:.3f} ms, median ratio python/trainbench "
                     f"{statistics.median(ratios):.3f} (min {min(ratios):.3f}, "
                     f"max {max(ratios):.3f})")
            short.append(f"{kind} {statistics.median(ratios):.3f}")
        print(text)
        summary.append(f"python_compare {configs.get(label)}: median python/trainbench step "
                       f"time {', '.join(short)}")
        out["results"].append(entry)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(out, f, indent=2)
        print(f"wrote {args.out}")
    for s in summary:
        print("SUMMARY " + s)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", help="fc config string, as trainbench takes it")
    p.add_argument("--warmup", type=int, default=20, help="untimed warm-up steps")
    p.add_argument("--warmup-time", type=float, default=3.0,
                   help="stop the warm-up after this many seconds (at least 3 steps)")
    p.add_argument("--min-time", type=float, default=3.0, help="seconds of timed steps, at least")
    p.add_argument("--min-steps", type=int, default=5, help="timed steps, at least")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (0: config)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--summarize", metavar="DIR", help="summarize a python_compare.sh run")
    p.add_argument("--out", help="summary JSON path (with --summarize)")
    args = p.parse_args()
    if args.summarize:
        summarize(args)
    elif args.config:
        measure(args)
    else:
        p.error("give --config or --summarize")


if __name__ == "__main__":
    main()
