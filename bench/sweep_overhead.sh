#!/usr/bin/env bash
# Issue-4 benchmark: per-config overhead of the sweep machinery (spawn, start-up, record,
# commit) against the timed loop of a tiny config, and the wall time of each CPU preset.
# Usage: bench/sweep_overhead.sh [build-dir] [--presets]
set -euo pipefail
build=${1:-build}
dir=$(mktemp -d)
cat > "$dir/tiny.toml" <<'TOML'
name = "tiny"
budget = 0.2
target_ci = 0.05
[[grid]]
family = "fc"
layers = 1
nodes = 16
input = 16
output = 4
batch = "1..20 +1"
TOML
start=$(date +%s.%N)
"$build"/trainbench sweep "$dir/tiny.toml" --store "$dir/tiny.db" > /dev/null 2>&1
end=$(date +%s.%N)
/usr/bin/python3 - "$dir/tiny.db" "$start" "$end" <<'PY'
import json, sqlite3, statistics, sys
db, start, end = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
rows = [json.loads(r[0]) for r in sqlite3.connect(db).execute("SELECT result FROM run")]
timed = [r["timing"]["timed_wall_s"] for r in rows]
total = end - start
n = len(rows)
print(f"tiny configs: {n}, sweep wall {total:.2f} s, timed loops {sum(timed):.2f} s "
      f"(median {statistics.median(timed):.3f} s per config)")
print(f"per-config overhead (spawn + start-up + model build + record + commit): "
      f"{(total - sum(timed)) / n:.3f} s, i.e. {100 * (total - sum(timed)) / total:.0f}% of a tiny config's wall time")
PY
if [ "${2:-}" = "--presets" ]; then
  for preset in fc-cpu cnn-cpu rnn-cpu; do
    s=$(date +%s.%N)
    "$build"/trainbench sweep "$preset" --store "$dir/$preset.db" > /dev/null 2>&1
    e=$(date +%s.%N)
    runs=$(sqlite3 "$dir/$preset.db" "SELECT COUNT(*) || ' runs, ' || SUM(status='ok') || ' ok' FROM run")
    /usr/bin/python3 -c "print(f'preset $preset: {$e - $s:.1f} s wall, $runs')"
  done
fi
rm -rf "$dir"
