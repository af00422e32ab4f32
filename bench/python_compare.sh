#!/usr/bin/env bash
# trainbench vs PyTorch eager (Debian's python3-torch) on the same fc configs.
# Each repetition runs, in this order: `trainbench run CONFIG --json`, python_compare.py
# with the default environment, python_compare.py with the environment trainbench sets
# for itself (src/runner/threads.cc kRuntimeEnv); both Python runs on the BLAS trainbench
# runs on (OpenBLAS's OpenMP build, through LD_LIBRARY_PATH, as trainbench selects it). The figure is the median over the
# repetitions of python mean step / trainbench mean step (> 1: trainbench is faster).
#
#   bench/python_compare.sh [--build-dir DIR] [--out FILE] [--reps N] [CONFIG ...]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build="$here/../build-bench"
out=""
reps=3
configs=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) configs+=("$1"); shift ;;
  esac
done
if [[ ${#configs[@]} -eq 0 ]]; then
  configs=("fc:layers=4,nodes=32,input=2000,output=200,batch=64"
           "fc:layers=4,nodes=2048,input=2000,output=200,batch=512")
fi
[[ -n "$out" ]] || out="$build/bench/results/python_compare.json"
tb="$build/trainbench"
py=/usr/bin/python3
[[ -x "$tb" ]] || { echo "python_compare: $tb not built" >&2; exit 1; }
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "python_compare: $py has no torch (apt-get install python3-torch); skipped" >&2
  exit 3
fi

# The variables trainbench applies to itself when they are unset (kRuntimeEnv).
tb_env=(GOMP_SPINCOUNT=10000 MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=68719476736)
# Both sides on the same BLAS: the one trainbench selects for itself by default (OpenBLAS's
# OpenMP build, docs/stacks.md), given to Python through the library path as trainbench does.
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
blas_dir=/usr/lib/$arch/openblas-openmp
[[ -r "$blas_dir/libblas.so.3" ]] || { echo "python_compare: $blas_dir missing (apt-get install libopenblas0-openmp)" >&2; exit 1; }
py_blas=(LD_LIBRARY_PATH="$blas_dir")
# And on the same kernels: trainbench asks OpenBLAS for the CPU's own where it would fall back
# to generic ones (OPENBLAS_CORETYPE, docs/stacks.md); Python gets what trainbench chose.
core=$(env -u OPENBLAS_CORETYPE "$tb" run fc:layers=1,nodes=8,input=8,output=2,batch=2 --steps 2 --json 2>/dev/null |
  "$py" -c 'import json,sys; print(json.load(sys.stdin)["context"]["runtime"]["environment"].get("OPENBLAS_CORETYPE",""))' || true)
[[ -n "$core" ]] && py_blas+=(OPENBLAS_CORETYPE="$core")
echo "python_compare: Python on $blas_dir${core:+ with OPENBLAS_CORETYPE=$core}"
# Start every process from the same environment, without any of them already set.
clean=(env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u MALLOC_MMAP_THRESHOLD_ -u MALLOC_TRIM_THRESHOLD_ -u TB_RUNTIME_ENV
       -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS -u LD_LIBRARY_PATH -u TB_STACK_BLAS
       -u TB_USER_LD_LIBRARY_PATH -u OPENBLAS_CORETYPE)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for ((rep = 1; rep <= reps; rep++)); do
  i=0
  for cfg in "${configs[@]}"; do
    label="c$i"; i=$((i + 1))
    echo "rep $rep/$reps $cfg"
    # trainbench exits 1 when a config is not ok; the summary reports the status.
    "${clean[@]}" "$tb" run "$cfg" --json > "$work/$label.tb.$rep.json" || true
    "${clean[@]}" "${py_blas[@]}" "$py" "$here/python_compare.py" --config "$cfg" > "$work/$label.py_default.$rep.json"
    "${clean[@]}" "${py_blas[@]}" "${tb_env[@]}" "$py" "$here/python_compare.py" --config "$cfg" \
      > "$work/$label.py_tbenv.$rep.json"
  done
done
"$py" "$here/python_compare.py" --summarize "$work" --out "$out"
