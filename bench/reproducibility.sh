#!/usr/bin/env bash
# Reproducibility across fresh processes: every config of the given sweeps (default: demo
# and rnn-cpu, as shipped: their own budgets, CI targets and thread axes) measured in N
# fresh processes each (default 5), interleaved (every config's first process, then every
# config's second, ...), once on trainbench's default BLAS (OpenBLAS's OpenMP build, which
# shares LibTorch's OpenMP runtime) and once on OpenBLAS's pthread build (its own thread
# pool), the two stacks of one config back to back in the same minutes. The figure per
# config and stack is max/min of its per-process mean step times; the target is that
# >= 95% of the default stack's configs have max/min <= 1.05.
# After every round of processes, bench/machine_floor (plain C++, no LibTorch, no BLAS) runs in
# fresh processes too, on 1 and 2 threads, its core-bound, its memory-bound and its vector (FMA)
# work, for as long as a config's timed loop: its max/min is
# what the machine alone contributes, measured in the same minutes. A floor above 1.05 means
# the target cannot be met on this machine at that time, whatever trainbench does.
# Last, after the rounds, a control with no fresh process in it: one trainbench process of one
# config at one thread for --control S seconds (default 60; 0 skips it), its step times after
# the warm-up cut into 3-second windows. Heap, threads and BLAS are the same in every window,
# so the max/min of the windows' medians is what the machine's drift does to trainbench's own
# work within one process. The floor above, whose small loops stay in a core, can miss that
# drift (on a 2-vCPU EPYC VM the floor stayed within 1.05 while one process's windows moved by
# up to 1.7x). More and shorter windows than a config's processes widen max/min a little by
# themselves: read it as the machine's, not as an exact bound.
#
#   bench/reproducibility.sh [--build-dir DIR] [--out FILE] [--reps N] [--control S] [SWEEP ...]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build="$here/../build"
out=""
reps=5
control=60
control_config="cnn:block=residual,blocks=1,filters=16,image=32,output=10,batch=16,threads=1"
sweeps=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --control)
      [[ "${2:-}" =~ ^[0-9]+$ ]] || { echo "reproducibility: --control wants whole seconds (0 skips it), not '${2:-}'" >&2; exit 2; }
      control="$2"; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    *) sweeps+=("$1"); shift ;;
  esac
done
[[ ${#sweeps[@]} -gt 0 ]] || sweeps=(demo rnn-cpu)
tb="$build/trainbench"
[[ -x "$tb" ]] || { echo "reproducibility: $tb not built" >&2; exit 1; }
[[ -n "$out" ]] || out="$build/bench/results/reproducibility.json"
mkdir -p "$(dirname "$out")"
for lib in openblas-openmp openblas-pthread; do
  [[ -r "/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)/$lib/libblas.so.3" ]] ||
    { echo "reproducibility: lib$lib missing (apt-get install libopenblas0-${lib#openblas-})" >&2; exit 1; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$SECONDS
floor="$build/bench/machine_floor"
[[ -x "$floor" ]] || { echo "reproducibility: $floor not built (make machine_floor)" >&2; exit 1; }
# One round is every config's next process on both stacks (a resumed sweep tops a config up
# by one repetition), then the floor's processes.
for ((r = 1; r <= reps; r++)); do
  for s in "${sweeps[@]}"; do
    echo "== $s: round $r of $reps"
    "$tb" sweep "$s" --store "$work/$(basename "$s" .toml).db" --repetitions "$r" \
      --stack blas=default --stack blas=openblas-pthread 2>&1 | tail -n 2
  done
  # Core speed (a chain of dependent arithmetic), memory bandwidth (a sum over arrays past the
  # last-level cache), the shared cache (a sum over twice a core's L2) and the vector units (a
  # GEMM's inner loop): a neighbour on the host can move any of them without moving the others.
  for t in 1 2; do
    for w in scalar stream cache simd; do "$floor" --threads "$t" --work "$w" --seconds 1.5 >> "$work/floor.jsonl"; done
  done
done
if [[ "$control" != 0 ]]; then
  echo "== control: one process of $control_config for $control s"
  # A CI target no run reaches: the process stops on its budget, not on convergence.
  "$tb" run "$control_config" --budget "$control" --target-ci 0.0001 --json > "$work/control.json" \
    2> "$work/control.err" ||
    echo "reproducibility: the control run failed: $(tail -n 1 "$work/control.err")" >&2
fi
wall=$((SECONDS - start))
python3 - "$out" "$reps" "$wall" "$work" "${sweeps[@]}" <<'PY'
import json, os, sqlite3, statistics, sys
out, reps, wall, work, sweeps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:]
def control():
    path = os.path.join(work, "control.json")
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return None
    try:
        r = json.load(open(path))["results"][0]
    except (ValueError, KeyError, IndexError) as e:
        return {"error": f"control.json unreadable: {e}"}
    timing = r.get("timing", {})
    windows, cur, acc = [], [], 0.0
    for t in r.get("step_times_s", [])[timing.get("warmup_steps", 0):]:
        cur.append(t); acc += t
        if acc >= 3.0:
            windows.append(statistics.median(cur)); cur, acc = [], 0.0
    if len(windows) < 2:
        return {"config": r["config"], "status": r["status"], "windows": len(windows),
                "end_reason": timing.get("end_reason")}
    return {"config": r["config"], "status": r["status"], "end_reason": timing.get("end_reason"),
            "window_s": 3.0,
            "window_medians_s": windows, "max_over_min": max(windows) / min(windows)}
rows = []
for s in sweeps:
    db = sqlite3.connect(f"{work}/{os.path.basename(s).removesuffix('.toml')}.db")
    q = ("SELECT run.config, stack.identity, run.status, run.result FROM run "
         "JOIN stack ON stack.id = run.stack_id")
    for config, identity, status, result in db.execute(q):
        ident = json.loads(identity)
        stack = "pthread" if "openblas-pthread" in ident.get("requested", "") else "default"
        r = json.loads(result)
        runs = r.get("repetitions", {}).get("runs", [])
        means = [e["timing"]["mean_s"] for e in runs]
        cis = [e["timing"]["ci95_relative"] for e in runs]
        ends = [e["timing"]["end_reason"] for e in runs]
        rows.append({"sweep": s, "config": config, "stack": stack, "status": status,
                     "means_s": means, "ci95_relative": cis, "end_reasons": ends,
                     "max_over_min": max(means) / min(means) if len(means) >= 2 else None,
                     "unstable": r.get("unstable", False)})
def table(stack):
    rs = [r for r in rows if r["stack"] == stack and r["max_over_min"] is not None]
    ratios = sorted(r["max_over_min"] for r in rs)
    if not ratios:
        return {"configs": 0}
    q = lambda p: ratios[min(len(ratios) - 1, int(round(p / 100 * (len(ratios) - 1))))]
    worst = max(rs, key=lambda r: r["max_over_min"])
    ends = [e for r in rs for e in r["end_reasons"]]
    return {"configs": len(rs),
            "share_within_1_05": sum(x <= 1.05 for x in ratios) / len(ratios),
            "max_over_min_quantiles": {"p50": q(50), "p90": q(90), "p100": ratios[-1]},
            "unstable": sum(r["unstable"] for r in rs),
            "processes_converged": sum(e == "converged" for e in ends) / max(1, len(ends)),
            "worst": {"config": worst["config"], "max_over_min": worst["max_over_min"],
                      "means_s": worst["means_s"]}}
floor = {}
for line in open(os.path.join(work, "floor.jsonl")):
    f = json.loads(line)
    floor.setdefault(f"{f['work']}_{f['threads']}_threads", []).append(f["mean_s"])
floor = {k: {"means_s": v, "max_over_min": max(v) / min(v)} for k, v in floor.items()}
# Round by round, every config's process against that config's median over the rounds: a round
# whose configs all move together is the machine's state in those minutes (a drift that hits
# every config alike), where configs moving apart within one round is each process's own.
def by_round(stack):
    rel = [[m / statistics.median(r["means_s"]) for m in r["means_s"]]
           for r in rows if r["stack"] == stack and len(r["means_s"]) == reps]
    out = []
    for i in range(reps if rel else 0):
        xs = sorted(x[i] for x in rel)
        out.append({"round": i + 1, "median": statistics.median(xs), "min": xs[0], "max": xs[-1]})
    return out
rounds = {"default": by_round("default"), "openblas_pthread": by_round("pthread")}
doc = {"schema_version": 1, "kind": "trainbench.bench.reproducibility",
       "method": f"sweeps {', '.join(sweeps)} as shipped, {reps} fresh processes per config and "
                 "stack, interleaved; stacks blas=default and blas=openblas-pthread back to back",
       "wall_s": wall, "target": ">= 95% of the default stack's configs with max/min <= 1.05",
       "default": table("default"), "openblas_pthread": table("pthread"),
       "machine_floor": floor, "within_one_process": control(), "rounds": rounds, "rows": rows}
json.dump(doc, open(out, "w"), indent=2)
for name in ("default", "openblas_pthread"):
    t = doc[name]
    if not t.get("configs"):
        print(f"{name}: no repeated configs"); continue
    print(f"{name:>16}: {t['configs']} configs, {100*t['share_within_1_05']:.0f}% with max/min <= 1.05; "
          f"max/min p50 {t['max_over_min_quantiles']['p50']:.3f} p90 {t['max_over_min_quantiles']['p90']:.3f} "
          f"max {t['max_over_min_quantiles']['p100']:.3f} ({t['worst']['config']}); {t['unstable']} unstable; "
          f"{100*t['processes_converged']:.0f}% of processes converged")
for k, f in floor.items():
    print(f"{'floor ' + k:>24}: max/min {f['max_over_min']:.3f} over {len(f['means_s'])} processes "
          f"(plain C++, {', '.join(f'{1e3*m:.3f}' for m in f['means_s'])} ms)")
c = doc["within_one_process"]
if c and c.get("max_over_min"):
    print(f"{'one process':>24}: {len(c['window_medians_s'])} windows of 3 s, medians max/min "
          f"{c['max_over_min']:.3f} ({', '.join(f'{1e3*m:.2f}' for m in c['window_medians_s'])} ms; "
          f"{c['config']}; ended on {c['end_reason']})")
for r in rounds["default"]:
    print(f"{'round ' + str(r['round']):>24}: default stack, each config against its own median: "
          f"median {r['median']:.3f}, {r['min']:.3f}..{r['max']:.3f}")
d = doc["default"]
ok = d.get("configs") and d["share_within_1_05"] >= 0.95
print(f"SUMMARY reproducibility: {100*d.get('share_within_1_05',0):.0f}% of {d.get('configs',0)} configs "
      f"within 1.05 on the default stack (target >= 95%: {'PASS' if ok else 'FAIL'}); "
      f"openblas-pthread {100*doc['openblas_pthread'].get('share_within_1_05',0):.0f}%; machine floor "
      f"max/min {max((f['max_over_min'] for f in floor.values()), default=0):.3f}; one process's "
      f"windows max/min {c['max_over_min'] if c and c.get('max_over_min') else float('nan'):.3f}; {wall} s")
PY
