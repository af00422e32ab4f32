#!/bin/bash
# The GPU measurement scripts as CI can run them (no GPU): the validation file regenerates
# from the committed tables unchanged (Python's standard library alone), and measure_gpu.py's
# fp8 section runs its smoke test on the CPU (layouts, scales and the autograd plumbing; bf16
# stand-ins where PyTorch has no fp8), where Debian's python3-torch is installed.
set -euo pipefail
root=$1
py=/usr/bin/python3
if [ ! -x "$py" ]; then
  echo "python3 not installed: skipped"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$root"
"$py" scripts/measured_to_validation.py data/measured >"$tmp/rows.csv"
if ! cmp -s "$tmp/rows.csv" data/measured/training-throughput.csv; then
  echo "data/measured/training-throughput.csv is not what scripts/measured_to_validation.py makes of data/measured:"
  diff "$tmp/rows.csv" data/measured/training-throughput.csv | head -20
  exit 1
fi
echo "validation file: consistent with data/measured"
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "fp8 smoke test: python3-torch not installed: skipped"
  exit 0
fi
"$py" scripts/measure_gpu.py "$tmp/out" --smoke --sections fp8 >"$tmp/log" 2>&1 || {
  cat "$tmp/log"
  exit 1
}
for f in fp8e2e.csv fp8gemm.csv fp8cast.csv fp8profile.csv; do
  [ -s "$tmp/out/$f" ] || { echo "fp8 smoke test wrote no $f"; cat "$tmp/log"; exit 1; }
done
ok=$(tr -d '\r' <"$tmp/out/fp8e2e.csv" | grep -c ',ok$' || true)
if [ "$ok" -lt 12 ]; then
  echo "fp8 smoke test: $ok of 12 training rows ok"
  cat "$tmp/out/fp8e2e.csv" "$tmp/log"
  exit 1
fi
echo "fp8 smoke test: $ok rows ok"
