#!/usr/bin/env bash
# Issue-9 benchmark: data-parallel scaling of an FC and a CNN config from 1 to 2 and 4
# workers (one thread each), first as local processes (a sweep into a results store, read
# back with `trainbench analyze scaling`), then with every worker in its own network
# namespace behind a veth pair into a bridge, unshaped vs shaped to 1 Gbit/s (tc tbf).
#
#   bench/scale_out.sh [--build-dir DIR] [--out FILE] [--budget SECONDS] [--no-netns]
#
# Needs root (CAP_NET_ADMIN) and iproute2 for the network part; without them it says so
# and measures the local part only. Traffic stays inside the namespaces it makes.
# About 3-4 minutes with the default budget.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build="$here/../build"
out=""
budget=4
netns=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --budget) budget="$2"; shift 2 ;;
    --no-netns) netns=0; shift ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "scale_out.sh: unexpected argument '$1'" >&2; exit 2 ;;
  esac
done
tb="$(cd "$build" && pwd)/trainbench"
[[ -x "$tb" ]] || { echo "scale_out.sh: no trainbench at $tb" >&2; exit 2; }
dir=$(mktemp -d)
[[ -n "$out" ]] || out="$dir/scale_out.json"

fc="fc:layers=4,nodes=1024,input=2000,output=200,batch=128,threads=1"
cnn="cnn:block=residual,blocks=1,filters=16,image=32,output=10,batch=16,threads=1"

cat > "$dir/scale.toml" <<TOML
name = "scale-out"
description = "FC and CNN over 1, 2 and 4 data-parallel workers, one thread each"
budget = $budget
target_ci = 0.02
[[grid]]
family = "fc"
layers = 4
nodes = 1024
input = 2000
output = 200
batch = 128
threads = 1
workers = [1, 2, 4]
[[grid]]
family = "cnn"
block = "residual"
blocks = 1
filters = 16
image = 32
output = 10
batch = 16
threads = 1
workers = [1, 2, 4]
TOML

echo "== local workers (one machine, $(nproc) cores): sweep into $dir/scale.db"
"$tb" sweep "$dir/scale.toml" --store "$dir/scale.db" >/dev/null
"$tb" analyze scaling "$dir/scale.db" | grep -v "threads=\*" || true

# ---- network namespaces: N workers, each in its own namespace, joined by a bridge.
declare -a spaces=()
hub=""
teardown() {
  local s
  for s in "${spaces[@]}"; do ip netns del "$s" 2>/dev/null; done
  [[ -n "$hub" ]] && ip netns del "$hub" 2>/dev/null
  spaces=()
  hub=""
}
trap teardown EXIT
subnet=$((100 + $$ % 100))
make_net() {  # make_net N shaped|unshaped
  local n=$1 mode=$2 i
  hub="tbhub$$"
  ip netns add "$hub" && ip -n "$hub" link add tbbr type bridge && ip -n "$hub" link set tbbr up || return 1
  for ((i = 0; i < n; ++i)); do
    local ns="tbw$$-$i" h="tbh$$$i" w="tbv$$$i"
    spaces+=("$ns")
    ip netns add "$ns" &&
      ip link add "$h" type veth peer name "$w" &&
      ip link set "$h" netns "$hub" && ip link set "$w" netns "$ns" &&
      ip -n "$hub" link set "$h" master tbbr && ip -n "$hub" link set "$h" up &&
      ip -n "$ns" addr add "10.$subnet.0.$((i + 1))/24" dev "$w" &&
      ip -n "$ns" link set "$w" up && ip -n "$ns" link set lo up || return 1
    if [[ $mode == shaped ]]; then  # both directions of every worker's link
      ip netns exec "$ns" tc qdisc add dev "$w" root tbf rate 1gbit burst 128kb latency 50ms &&
        ip netns exec "$hub" tc qdisc add dev "$h" root tbf rate 1gbit burst 128kb latency 50ms || return 1
    fi
  done
}
run_net() {  # run_net CONFIG N -> rank 0's JSON document on stdout
  local cfg=$1 n=$2 i pids=()
  for ((i = n - 1; i >= 0; --i)); do
    ip netns exec "tbw$$-$i" env RANK=$i WORLD_SIZE=$n MASTER_ADDR="10.$subnet.0.1" MASTER_PORT=29500 \
      GLOO_SOCKET_IFNAME="tbv$$$i" "$tb" run "$cfg" --workers "$n" --budget "$budget" --target-ci 0.02 \
      --dist-timeout 60 --json >"$dir/net-$i.json" 2>"$dir/net-$i.err" &
    pids+=($!)
  done
  wait "${pids[@]}"
  cat "$dir/net-0.json"
}

: >"$dir/net.jsonl"
if [[ $netns -eq 1 ]]; then
  if [[ $(id -u) -ne 0 ]] || ! command -v ip >/dev/null || ! ip netns add "tbprobe$$" 2>/dev/null; then
    echo "== network namespaces: SKIPPED (needs root with CAP_NET_ADMIN and iproute2)"
    netns=0
  else
    ip netns del "tbprobe$$"
    for mode in unshaped shaped; do
      for n in 2 4; do
        teardown
        make_net "$n" "$mode" || { echo "scale_out.sh: cannot build the $mode network" >&2; exit 1; }
        for cfg in "$fc" "$cnn"; do
          doc=$(run_net "$cfg" "$n")
          echo "$doc" | /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); r=d['results'][0]; r['net']='$mode'; print(json.dumps(r))" >>"$dir/net.jsonl" ||
            { echo "scale_out.sh: $mode $n workers of $cfg failed: $(cat "$dir"/net-*.err)" >&2; }
        done
      done
    done
    teardown
  fi
fi

/usr/bin/python3 - "$dir/scale.db" "$dir/net.jsonl" "$out" "$(nproc)" <<'PY'
import json, sqlite3, sys
db, netfile, out, cores = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rows = [json.loads(r[0]) for r in sqlite3.connect(db).execute("SELECT result FROM run")]
net = [json.loads(l) for l in open(netfile) if l.strip()]

def key(cfg):
    return ",".join(kv for kv in cfg.split(",") if not kv.startswith("workers="))

def workers(cfg):  # workers=1 is left out of the config text
    w = [kv for kv in cfg.split(",") if kv.startswith("workers=")]
    return int(w[0].split("=")[1]) if w else 1

def amdahl(t):  # same fit as src/analysis/analysis.cc
    num = den = 0.0
    for n, thr in t.items():
        if n <= 1: continue
        x = 1 - 1 / n
        num += x * (t[1] / thr - 1 / n)
        den += x * x
    return min(max(num / den, 0.0), 1.0)

base, table = {}, []
for r in rows:
    if r["status"] == "ok" and workers(r["config"]) == 1:
        base[key(r["config"])] = r["metrics"]["examples_per_s"]
series = {}
for net_name, rs in [("local", rows)] + [(m, [r for r in net if r["net"] == m]) for m in ("unshaped", "shaped")]:
    for r in rs:
        k, n = key(r["config"]), workers(r["config"])
        if r["status"] != "ok":
            table.append({"net": net_name, "config": k, "workers": n, "status": r["status"], "error": r.get("error")})
            continue
        thr = r["metrics"]["examples_per_s"]
        d = r.get("distributed", {})
        eff = thr / (n * base[k]) if k in base else None
        series.setdefault((net_name, k), {1: base.get(k)})[n] = thr
        table.append({"net": net_name, "config": k, "workers": n, "examples_per_s": thr,
                      "per_worker_examples_per_s": d.get("per_worker_examples_per_s", thr),
                      "scaling_efficiency": eff, "comm_share": d.get("comm_share", 0.0),
                      "allreduce_bytes_per_step": d.get("allreduce_bytes_per_step", 0)})
print(f"\n{'net':<9} {'family':<4} {'N':>2} {'examples/s':>11} {'per worker':>11} {'efficiency':>10} {'comm':>6} {'MB/step':>8}")
for t in table:
    if "examples_per_s" not in t:
        print(f"{t['net']:<9} {t['config'].split(':')[0]:<4} {t['workers']:>2} {t['status']}: {t['error']}")
        continue
    eff = "-" if t["scaling_efficiency"] is None else f"{100 * t['scaling_efficiency']:.0f}%"
    print(f"{t['net']:<9} {t['config'].split(':')[0]:<4} {t['workers']:>2} {t['examples_per_s']:>11.1f} "
          f"{t['per_worker_examples_per_s']:>11.1f} {eff:>10} {100 * t['comm_share']:>5.0f}% "
          f"{t['allreduce_bytes_per_step'] / 1e6:>8.2f}")
fits = {}
for (net_name, k), t in series.items():
    t = {n: v for n, v in t.items() if v}
    if 1 in t and len(t) > 1:
        fits[f"{net_name} {k}"] = amdahl(t)
        effs = ", ".join(f"{n}: {100 * v / (n * t[1]):.0f}%" for n, v in sorted(t.items()) if n > 1)
        print(f"SUMMARY scale_out {net_name:<8} {k.split(':')[0]:<3} efficiency {effs}; Amdahl serial fraction {fits[f'{net_name} {k}']:.2f}")
print(f"(this machine has {cores} cores: 4 one-thread workers oversubscribe it, so efficiency at 4 "
      "measures sharing the cores as much as communication)")
json.dump({"schema_version": 1, "kind": "trainbench.bench.scale_out", "cores": cores, "runs": table, "amdahl_serial_fraction": fits}, open(out, "w"), indent=2)
print(f"results: {out}")
PY
