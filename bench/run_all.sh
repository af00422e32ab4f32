#!/usr/bin/env bash
# Runs every trainbench benchmark and prints a summary (the SUMMARY lines each prints).
# `make -C build bench` calls this after building them.
#
#   bench/run_all.sh [--build-dir DIR] [--out-dir DIR] [--only NAME]...
#
# The machine is expected to be shared and noisy: each benchmark compares two things
# measured in the same run, interleaved, and reports medians. About 15-20 minutes in all
# (harness_overhead and measurement_cost run 5 fresh processes each; the adaptive runs stop
# later on a busier machine), plus 3-4 for scale_out, about 6 for runtime_env and 30-40 for
# reproducibility (two sweeps, 5 processes per config, two stacks).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build="$here/../build-bench"
outdir=""
only=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build="$2"; shift 2 ;;
    --out-dir) outdir="$2"; shift 2 ;;
    --only) only+=("$2"); shift 2 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "run_all.sh: unexpected argument '$1'" >&2; exit 2 ;;
  esac
done
build=$(cd "$build" && pwd)
[[ -n "$outdir" ]] || outdir="$build/bench/results"
mkdir -p "$outdir"

selected() {
  [[ ${#only[@]} -eq 0 ]] && return 0
  local n
  for n in "${only[@]}"; do [[ "$n" == "$1" ]] && return 0; done
  return 1
}

summary=()
failed=()
run_one() {
  local name="$1"; shift
  selected "$name" || return 0
  local log="$outdir/$name.log" start=$SECONDS rc
  echo
  echo "################ $name"
  "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  local took=$((SECONDS - start))
  if [[ $rc -eq 3 && "$name" == python_compare ]]; then
    summary+=("$name: skipped (no PyTorch for /usr/bin/python3)")
  elif [[ $rc -ne 0 ]]; then
    failed+=("$name (exit $rc)")
    summary+=("$name: FAILED with exit status $rc after ${took}s, see $log")
  else
    while IFS= read -r line; do summary+=("${line#SUMMARY }"); done < <(grep '^SUMMARY ' "$log")
    summary+=("  ($name took ${took}s; $outdir/$name.json)")
  fi
}

total_start=$SECONDS
run_one harness_overhead "$build/bench/harness_overhead" --out "$outdir/harness_overhead.json"
run_one python_compare "$here/python_compare.sh" --build-dir "$build" \
  --out "$outdir/python_compare.json"
run_one measurement_cost "$build/bench/measurement_cost" --out "$outdir/measurement_cost.json"
run_one gemm_efficiency "$build/bench/gemm_efficiency" --out "$outdir/gemm_efficiency.json"
run_one report_scale "$build/bench/report_scale" --out "$outdir/report_scale.json"
run_one numerics_throughput "$build/bench/numerics_throughput" --out "$outdir/numerics_throughput.json"
run_one scale_out "$here/scale_out.sh" --build-dir "$build" --out "$outdir/scale_out.json"
run_one runtime_env "$here/runtime_env.sh" --build-dir "$build" --out "$outdir/runtime_env.json"
run_one reproducibility "$here/reproducibility.sh" --build-dir "$build" \
  --out "$outdir/reproducibility.json"

echo
echo "================ summary ($((SECONDS - total_start))s in all)"
printf '%s\n' "${summary[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "failed: ${failed[*]}"
  exit 1
fi
exit 0
