#!/usr/bin/env bash
# The fleet view's refresh in its steady state at 1000 hosts: a real
# Prometheus scraping 1000 live targets every 15 s (its usual interval),
# read by `gputaskman --prometheus URL serve --interval 1` (the rounds the
# live view and the web view make). The targets are one exposition server
# (python3) answering `/host/N` with the exposition a real `serve` wrote
# for a fake-NVML scenario (BENCH_FLEET_GPUS GPUs, BENCH_FLEET_PROCS real
# processes), each target its own `instance`; every scrape is a new
# sample, so each second about 1/15 of the hosts have new figures.
# Measured over BENCH_FLEET_SECONDS (60): each round's duration (the
# served gputaskman_fleet_round_seconds, read every second), the view's CPU
# and peak RSS, Prometheus's and the targets' CPU, and the load.
# (scripts/bench_fleet.sh measures the first round, which reads every
# host, on backfilled data.) Needs prometheus (Debian's), curl, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
hosts=${BENCH_FLEET_HOSTS:-1000}
gpus=${BENCH_FLEET_GPUS:-8}
nprocs=${BENCH_FLEET_PROCS:-12}
seconds=${BENCH_FLEET_SECONDS:-60}
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

# One host's exposition, from a real serve.
fleet_template
kill "${pids[-1]}"
per_host=$(grep -vc '^#' "$work/template.prom")

# The targets: one server, a path per host.
tport=$(free_port)
python3 - "$work/template.prom" "$tport" > "$work/targets.log" 2>&1 <<'EOF' &
import http.server, sys
body = open(sys.argv[1], "rb").read()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), H).serve_forever()
EOF
targets_pid=$!
pids+=("$targets_pid")
{
  printf 'global:\n  scrape_interval: 15s\n  scrape_timeout: 10s\nscrape_configs:\n  - job_name: gpu\n    static_configs:\n'
  for h in $(seq 0 $((hosts - 1))); do
    printf '      - targets: ["127.0.0.1:%s"]\n        labels: {instance: "node-%04d:9464", __metrics_path__: "/host/%d"}\n' "$tport" "$h" "$h"
  done
} > "$work/prometheus.yml"
pport=$(free_port)
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address="127.0.0.1:$pport" > "$work/prometheus.log" 2>&1 &
prom=$!
pids+=("$prom")
url="http://127.0.0.1:$pport"
for _ in $(seq 1 600); do curl -sf -o /dev/null "$url/-/ready" && break; sleep 0.1; done
# Every target scraped once, and once more (the second scrape of a target
# is when its series are all in the head).
for _ in $(seq 1 120); do
  n=$(curl -sf "$url/api/v1/query" --data-urlencode 'query=count(up == 1)' \
    | python3 -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else 0)')
  [ "$n" = "$hosts" ] && break
  sleep 1
done
[ "$n" = "$hosts" ] || { echo "Prometheus scrapes $n of $hosts targets" >&2; exit 1; }
sleep 15

vport=$(free_port)
"$bin" --prometheus "$url" serve --interval 1 --listen "127.0.0.1:$vport" > "$work/view.out" 2> "$work/view.err" &
view=$!
pids+=("$view")
for _ in $(seq 1 600); do grep -q ready "$work/view.out" 2>/dev/null && break; sleep 0.1; done
first=$(curl -sf "http://127.0.0.1:$vport/metrics" | awk '/^gputaskman_fleet_round_seconds / {print $2}')
sleep 5 # past the first rounds

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r); $(date -u +'%F %H:%M UTC'); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "fleet: $hosts live targets scraped every 15 s, $per_host series each ($((per_host * hosts)) in Prometheus, $(prometheus --version 2>&1 | awk 'NR==1{print $3}')); view: --prometheus URL serve --interval 1"
v0=$(cpu_ticks "$view"); p0=$(cpu_ticks "$prom"); t0=$(cpu_ticks "$targets_pid")
rounds=()
for _ in $(seq 1 "$seconds"); do
  sleep 1
  metrics=$(curl -sf "http://127.0.0.1:$vport/metrics")
  rounds+=("$(awk '/^gputaskman_fleet_round_seconds / {print $2}' <<< "$metrics")")
done
v1=$(cpu_ticks "$view"); p1=$(cpu_ticks "$prom"); t1=$(cpu_ticks "$targets_pid")
up=$(awk '/^gputaskman_fleet_host_up/ && / 1$/ {n++} END {print n + 0}' <<< "$metrics")
stats=$(printf '%s\n' "${rounds[@]}" | sort -g | awk '{a[NR]=$1} END {printf "median %.3f s, p90 %.3f s, max %.3f s", a[int((NR+1)/2)], a[int(NR*0.9)], a[NR]}')
pct() { awk -v t="$1" -v hz="$hz" -v s="$seconds" 'BEGIN { printf "%.1f", t / hz / s * 100 }'; }
echo "first round (every host): ${first} s"
echo "steady rounds over ${seconds} s (one a second, the hosts scraped since): $stats; $up of $hosts hosts up"
echo "view (--prometheus URL serve): $(pct $((v1 - v0)))% of a core, peak RSS $(awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$view/status") MiB"
echo "Prometheus: $(pct $((p1 - p0)))% of a core (scraping and answering); the targets' server: $(pct $((t1 - t0)))%"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
