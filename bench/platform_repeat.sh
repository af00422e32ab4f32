#!/usr/bin/env bash
# Issue-3 benchmark: characterize this machine N times (default 5) and report the spread of
# each roof (median-to-max, target <= 5%), measured fp32 GEMM peak vs theoretical, and the
# STREAM triad bandwidth.  Usage: bench/platform_repeat.sh [build-dir] [N]
set -euo pipefail
build=${1:-build}
n=${2:-5}
out=$(mktemp -d)
for i in $(seq 1 "$n"); do
  TRAINBENCH_CACHE_DIR="$out/cache$i" /usr/bin/time -f "%e" -o "$out/time$i" \
    "$build"/trainbench platform --refresh --json > "$out/p$i.json" 2>/dev/null
done
/usr/bin/python3 - "$out" "$n" <<'PY'
import json, statistics, sys
out, n = sys.argv[1], int(sys.argv[2])
docs = [json.load(open(f"{out}/p{i}.json")) for i in range(1, n + 1)]
secs = [float(open(f"{out}/time{i}").read()) for i in range(1, n + 1)]
def row(name, values, unit):
    med, mx = statistics.median(values), max(values)
    print(f"{name:<22} " + " ".join(f"{v:8.1f}" for v in values) +
          f" | median {med:8.1f} {unit}, median-to-max {100 * (mx - med) / med:4.1f}%")
print(f"{n} characterizations, wall time each: " + ", ".join(f"{s:.1f} s" for s in secs))
row("fp32 GEMM peak", [d["peak_tflops"]["fp32"] * 1000 for d in docs], "GFLOP/s")
row("bf16 GEMM peak", [d["peak_tflops"]["bf16"] * 1000 for d in docs], "GFLOP/s")
# The same trials summarized by the best per-size median instead of the best single window.
for dt in ("fp32", "bf16"):
    row(f"{dt} GEMM best median", [max(s["median"] for s in d["measurements"]["gemm"][dt]["sizes"]) for d in docs], "GFLOP/s")
row("STREAM triad", [d["memory_bandwidth_gbps"] for d in docs], "GB/s")
for level in ("l1", "l2", "l3"):
    if all(level in d.get("cache_bandwidth_gbps", {}) for d in docs):
        row(f"{level} bandwidth", [d["cache_bandwidth_gbps"][level] for d in docs], "GB/s")
spec = docs[0]["spec_peak_tflops"]
fp32 = statistics.median(d["peak_tflops"]["fp32"] for d in docs)
bf16 = statistics.median(d["peak_tflops"]["bf16"] for d in docs)
print(f"fp32 measured/theoretical: {fp32 * 1000:.1f} / {spec['fp32'] * 1000:.1f} GFLOP/s = {100 * fp32 / spec['fp32']:.0f}%"
      f"   ({docs[0]['spec_peak_formula']['fp32']})")
print(f"bf16 measured/theoretical: {bf16 * 1000:.1f} / {spec['bf16'] * 1000:.1f} GFLOP/s = {100 * bf16 / spec['bf16']:.0f}%"
      f"   ({docs[0]['spec_peak_formula']['bf16']})")
PY
rm -rf "$out"
