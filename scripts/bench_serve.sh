#!/usr/bin/env bash
# What does one Prometheus scrape of `gputaskman serve` cost the server, at
# 200 GPU processes (BENCH_SERVE_PROCS), and one refresh of the web view
# (a GET of /snapshot), and what does the page weigh on its first load?
# Starts that many real processes, a fake-NVML scenario that
# lists them on two devices (VRAM and per-process utilization each), and
# `gputaskman serve --interval 3600` (so no sample is taken while scrapes
# run), then scrapes /metrics N times with one curl and reads the server's
# utime+stime from /proc/PID/stat before and after. The peer in the same
# run is prometheus-node-exporter (default collectors), if installed.
# Needs: curl; a release build (built here). Loopback only.
# Usage: scripts/bench_serve.sh [SCRAPES]   (default 5000)
set -euo pipefail
cd "$(dirname "$0")/.."
scrapes=${1:-5000}
n=${BENCH_SERVE_PROCS:-200}
half=$((n / 2))
target=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release --quiet --bin gputaskman
cargo build --release --quiet -p fake-nvml
bin=$target/release/gputaskman
lib=$target/release/libnvidia_ml.so
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

. scripts/bench-lib.sh

# N processes named like what runs on GPUs, each with a command line.
names=(python3 llama-server ollama vllm comfyui)
for i in $(seq 1 "$n"); do
  name=${names[$((i % ${#names[@]}))]}
  [ -e "$work/$name" ] || ln -s "$(command -v sleep)" "$work/$name"
  "$work/$name" 100000 &
  pids+=($!)
done
procs=("${pids[@]}")

python3 - "$work/scenario.json" "$half" "${procs[@]}" <<'EOF'
import json, sys
out, half, pids = sys.argv[1], int(sys.argv[2]), [int(p) for p in sys.argv[3:]]
def device(i, mine):
    return {
        "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-0000000{i}-1111-2222-3333-444444444444",
        "pci_bus_id": f"00000000:0{i + 1}:00.0",
        "memory": {"total": 85520809984, "used": 60000000000, "free": 25520809984, "reserved": 0},
        "utilization": {"gpu": 87, "memory": 41}, "temperature_c": 61, "power_mw": 420000, "power_limit_mw": 700000,
        "fan_percent": 40,
        "clocks": {"graphics_mhz": 1980, "sm_mhz": 1980, "memory_mhz": 2619},
        "max_clocks": {"graphics_mhz": 1980, "sm_mhz": 1980, "memory_mhz": 2619},
        "pcie": {"gen": 5, "width": 16, "max_gen": 5, "max_width": 16, "tx_kbps": 1000, "rx_kbps": 2000},
        "compute_processes": [{"pid": p, "used_memory": 256 * 2**20 + p} for p in mine],
        "graphics_processes": [],
        "process_utilization": [{"pid": p, "sm": p % 100, "mem": p % 50} for p in mine],
    }
json.dump({"driver_version": "580.159.03", "cuda_driver_version": 13000,
           "devices": [device(0, pids[:half]), device(1, pids[half:])]}, open(out, "w"))
EOF

port=$(free_port)
FAKE_NVML_SCENARIO=$work/scenario.json "$bin" --nvml-lib "$lib" serve --listen "127.0.0.1:$port" --interval 3600 \
  > "$work/serve.out" 2> "$work/serve.err" &
server=$!
pids+=("$server")
for _ in $(seq 1 200); do grep -q ready "$work/serve.out" 2>/dev/null && break; sleep 0.05; done
sleep 1 # the second sample (250 ms after the first) has CPU%; the next is an hour away
curl -s "http://127.0.0.1:$port/metrics" > "$work/metrics.txt"
series=$(grep -vc '^#' "$work/metrics.txt" || true)
vram=$(grep -c '^gputaskman_process_vram_bytes{' "$work/metrics.txt" || true)
if [ "$vram" != "$n" ]; then
  echo "expected $n process VRAM series, found $vram:" >&2
  grep '^gputaskman_backend_up' "$work/metrics.txt" >&2
  exit 1
fi
bytes=$(wc -c < "$work/metrics.txt")
render=$(awk '/^gputaskman_render_duration_seconds /{print $2 * 1000}' "$work/metrics.txt")
sample=$(awk '/^gputaskman_sample_duration_seconds /{print $2 * 1000}' "$work/metrics.txt")

# Scrapes of URL/[1-N]: one curl, N requests in a row (the query string is
# ignored; the server closes each connection).
measure() { # name pid url n
  local before after start end
  before=$(cpu_ticks "$2"); start=$(date +%s.%N)
  curl -s -o /dev/null "$3?[1-$4]"
  end=$(date +%s.%N); after=$(cpu_ticks "$2")
  awk -v n="$4" -v t="$((after - before))" -v hz="$hz" -v s="$start" -v e="$end" -v name="$1" \
    'BEGIN { printf "| %s | %d | %.1f ms | %.3f ms | %.3f ms |\n", name, n, t * 1000 / hz, t * 1000 / hz / n, (e - s) * 1000 / n }'
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r); $(date -u +%F)"
snapshot_bytes=$(curl -s "http://127.0.0.1:$port/snapshot" | wc -c)
page_bytes=0
for f in / /page.js /page.css /favicon.svg; do
  page_bytes=$((page_bytes + $(curl -s "http://127.0.0.1:$port$f" | wc -c)))
done
echo "gputaskman /metrics at $n processes: $series series ($vram process VRAM series), $bytes bytes;" \
  "rendered once per sample in $render ms (sample: $sample ms)"
echo "web view: first load $page_bytes bytes (/, page.js, page.css, favicon.svg, uncompressed); each refresh is /snapshot, $snapshot_bytes bytes"
echo
echo "| server | scrapes | server CPU (utime+stime) | CPU per scrape | wall per scrape |"
echo "|---|---:|---:|---:|---:|"
measure "gputaskman serve, /metrics" "$server" "http://127.0.0.1:$port/metrics" "$scrapes"
measure "gputaskman serve, /snapshot (a web view refresh)" "$server" "http://127.0.0.1:$port/snapshot" "$((scrapes / 5))"
measure "gputaskman serve, / (the page)" "$server" "http://127.0.0.1:$port/" "$scrapes"
measure "gputaskman serve, /healthz" "$server" "http://127.0.0.1:$port/healthz" "$scrapes"

if command -v prometheus-node-exporter >/dev/null 2>&1; then
  nport=$(free_port)
  prometheus-node-exporter --web.listen-address="127.0.0.1:$nport" > "$work/ne.log" 2>&1 &
  ne=$!
  pids+=("$ne")
  for _ in $(seq 1 100); do curl -sf -o /dev/null "http://127.0.0.1:$nport/metrics" && break; sleep 0.05; done
  measure "prometheus-node-exporter $(prometheus-node-exporter --version 2>&1 | awk 'NR==1{print $3}'), /metrics (default collectors)" \
    "$ne" "http://127.0.0.1:$nport/metrics" "$((scrapes / 10))"
  echo
  echo "node_exporter /metrics: $(curl -s "http://127.0.0.1:$nport/metrics" | grep -vc '^#') series, $(curl -s "http://127.0.0.1:$nport/metrics" | wc -c) bytes"
else
  echo "(prometheus-node-exporter not installed: no peer in this run)"
fi
