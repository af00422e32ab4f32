#!/bin/bash
# The numerics library's portable builds (no x86 kernels) against the shipped one: each digest
# program prints a line per case (numerics_digest.cc), and every build must print the first's.
# On a difference, the cases that differ, a few of them, and their count.
set -euo pipefail
shipped=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$shipped" >"$tmp/shipped"
echo "$(basename "$shipped"): $(wc -l <"$tmp/shipped") cases"
status=0
for other in "$@"; do
  name=$(basename "$other")
  if [[ $name == *avx2* ]] && ! grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
    echo "$name: skipped (this CPU has no AVX2)"
    continue
  fi
  "$other" >"$tmp/$name"
  if cmp -s "$tmp/shipped" "$tmp/$name"; then
    echo "$name: the same bits in every case"
    continue
  fi
  status=1
  differ=$(diff "$tmp/shipped" "$tmp/$name" | grep -c '^<' || true)
  echo "$name differs from $(basename "$shipped") in $differ cases, e.g.:"
  diff "$tmp/shipped" "$tmp/$name" | grep "^[<>]" | head -12 || true
done
exit $status
