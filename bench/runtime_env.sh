#!/usr/bin/env bash
# The runtime variables trainbench sets for itself (src/runner/threads.cc kRuntimeEnv), and
# thread pinning, re-measured: each variant below against trainbench's own settings, on
# small and large configs, every variant of a config back to back in fresh processes,
# repeated --reps times (default 3). The figure is the median over the processes of each
# variant's mean step time, as a ratio to trainbench's default in the same rounds.
#
#   bench/runtime_env.sh [--build-dir DIR] [--out FILE] [--reps N] [--budget S] [CONFIG ...]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build="$here/../build"
out=""
reps=3
budget=5
configs=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --budget) budget="$2"; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) configs+=("$1"); shift ;;
  esac
done
[[ ${#configs[@]} -gt 0 ]] || configs=(
  "fc:layers=4,nodes=32,input=2000,output=200,batch=64"
  "rnn:cell=lstm,layers=1,embed=128,length=20,vocab=1000,batch=32"
  "cnn:block=residual,blocks=1,filters=16,image=32,output=10,batch=32"
  "fc:layers=4,nodes=2048,input=2000,output=200,batch=512")
tb="$build/trainbench"
[[ -x "$tb" ]] || { echo "runtime_env: $tb not built" >&2; exit 1; }
[[ -n "$out" ]] || out="$build/bench/results/runtime_env.json"
mkdir -p "$(dirname "$out")"
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
blas=/usr/lib/$arch/openblas-openmp

# The OpenBLAS kernels trainbench asks for on this CPU, if any (docs/stacks.md): every variant
# runs on them, so that what differs is the variable under test.
core=$(env -u OPENBLAS_CORETYPE "$tb" run fc:layers=1,nodes=8,input=8,output=2,batch=2 --steps 2 --json 2>/dev/null |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["context"]["runtime"]["environment"].get("OPENBLAS_CORETYPE",""))' || true)
kernels=${core:+OPENBLAS_CORETYPE=$core}
# name | environment (trainbench keeps what is set; TB_RUNTIME_ENV=1 makes it set nothing,
# the BLAS and its kernels then given as trainbench would give them)
variants=(
  "trainbench|"
  "spin-300000|GOMP_SPINCOUNT=300000"
  "passive|OMP_WAIT_POLICY=PASSIVE"
  "nothing-set|TB_RUNTIME_ENV=1 TB_STACK_BLAS=openblas-openmp LD_LIBRARY_PATH=$blas $kernels"
  "pinned|OMP_PROC_BIND=close OMP_PLACES=cores"
)
clean=(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u MALLOC_MMAP_THRESHOLD_ -u MALLOC_TRIM_THRESHOLD_
       -u TB_RUNTIME_ENV -u OMP_PROC_BIND -u OMP_PLACES -u TB_STACK_BLAS -u LD_LIBRARY_PATH
       -u TB_USER_LD_LIBRARY_PATH -u OPENBLAS_CORETYPE)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=$SECONDS
for ((rep = 1; rep <= reps; rep++)); do
  i=0
  for cfg in "${configs[@]}"; do
    for v in "${variants[@]}"; do
      name=${v%%|*}; vars=${v#*|}
      # shellcheck disable=SC2086
      "${clean[@]}" $vars "$tb" run "$cfg" --json --budget "$budget" > "$work/c$i.$name.$rep.json" 2>/dev/null || true
    done
    echo "round $rep/$reps: $cfg"
    i=$((i + 1))
  done
done
python3 - "$out" "$work" "$reps" "$((SECONDS - start))" "${configs[@]}" <<'PY'
import json, statistics, sys, glob, os
out, work, reps, wall, configs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5:]
names = ["trainbench", "spin-300000", "passive", "nothing-set", "pinned"]
res = []
for i, cfg in enumerate(configs):
    row = {"config": cfg, "variants": {}}
    for n in names:
        means, blas, env = [], set(), None
        for rep in range(1, reps + 1):
            try:
                d = json.load(open(f"{work}/c{i}.{n}.{rep}.json"))
            except Exception:
                continue
            r = d["results"][0]
            if r["status"] == "ok":
                means.append(r["timing"]["mean_s"])
            blas.add(d["context"]["libraries"]["blas"]["library"])
            env = d["context"]["runtime"]["environment"]
        row["variants"][n] = {"means_s": means, "median_s": statistics.median(means) if means else None,
                              "blas": sorted(blas), "environment": env}
    base = row["variants"]["trainbench"]["median_s"]
    for n in names:
        m = row["variants"][n]["median_s"]
        row["variants"][n]["ratio_to_trainbench"] = m / base if m and base else None
    res.append(row)
json.dump({"schema_version": 1, "kind": "trainbench.bench.runtime_env", "wall_s": wall,
           "method": f"{reps} rounds; per round every config under every variant back to back, each a fresh "
                     "`trainbench run --json` process; median over rounds of each variant's mean step time",
           "results": res}, open(out, "w"), indent=2)
print(f"{'config':<70}" + "".join(f"{n:>13}" for n in names))
for row in res:
    line = f"{row['config'][:70]:<70}"
    for n in names:
        v = row["variants"][n]
        line += f"{'-' if v['median_s'] is None else '%.3f ms' % (1e3 * v['median_s']):>13}"
    print(line)
    print(f"{'  ratio to trainbench':<70}" + "".join(
        f"{'-' if row['variants'][n]['ratio_to_trainbench'] is None else '%.3fx' % row['variants'][n]['ratio_to_trainbench']:>13}" for n in names))
print(f"SUMMARY runtime_env: {len(res)} configs x {len(names)} variants x {reps} processes in {wall} s; see {out}")
PY
