#!/usr/bin/env bash
# Reference models in trainbench vs the same models in PyTorch eager (Debian's python3-torch):
# steps/s of resnet50:batch=32 and transformer:batch=16 by default. Each repetition runs,
# for every config in turn, `trainbench run CONFIG --json` then suite_vs_eager.py (the eager
# twin: torchvision ResNet-50 with SGD momentum; Transformer-base, shared embedding and tied
# output, label-smoothed CE, Adam), so both sides see the same machine load. The figures are
# the medians over the repetitions of each side's steps/s (trainbench: 1 / median step of its
# steady-state window; eager: 1 / median of --steps timed steps) and their ratio
# (> 1: trainbench is faster). Needs the reference families (resnet50, transformer) built in.
#
#   bench/suite_vs_eager.sh [--build-dir DIR] [--out FILE] [--reps N] [--budget S]
#                           [--steps N] [--plumbing] [CONFIG ...]
#
#   --plumbing  small fc configs instead (both sides mirror the fc family), to check the
#               script itself on a build without the reference families
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build="$here/../build"
out=""
reps=3
budget=30
steps=5
configs=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --reps) reps="$2"; shift 2 ;;
    --budget) budget="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --plumbing) configs=("fc:layers=2,nodes=256,input=512,output=10,batch=32,optimizer=momentum"
                         "fc:layers=1,nodes=128,input=64,output=10,batch=16,optimizer=adam"); shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) configs+=("$1"); shift ;;
  esac
done
[[ ${#configs[@]} -gt 0 ]] || configs=("resnet50:batch=32" "transformer:batch=16")
[[ -n "$out" ]] || out="$build/bench/results/suite_vs_eager.json"
tb="$build/trainbench"
py=/usr/bin/python3
[[ -x "$tb" ]] || { echo "suite_vs_eager: $tb not built" >&2; exit 1; }
if ! "$py" -c 'import torch, torchvision' 2>/dev/null; then
  echo "suite_vs_eager: $py has no torch/torchvision (apt-get install python3-torchvision); skipped" >&2
  exit 3
fi
for cfg in "${configs[@]}"; do  # refuse a config this build cannot run before measuring anything
  "$tb" cost "$cfg" > /dev/null 2>&1 || "$tb" run "$cfg" --steps 2 --json > /dev/null 2>&1 || {
    echo "suite_vs_eager: trainbench cannot run '$cfg' (is its family built in? see trainbench suite --list)" >&2
    exit 2
  }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for ((rep = 1; rep <= reps; rep++)); do
  i=0
  for cfg in "${configs[@]}"; do
    label="c$i"; i=$((i + 1))
    echo "rep $rep/$reps $cfg" >&2
    # trainbench exits 1 when a config is not ok; the summary reports the status.
    "$tb" run "$cfg" --json --budget "$budget" > "$work/$label.tb.$rep.json" || true
    "$py" "$here/suite_vs_eager.py" --config "$cfg" --steps "$steps" > "$work/$label.eager.$rep.json"
  done
done
"$py" "$here/suite_vs_eager.py" --summarize "$work" --out "$out"
