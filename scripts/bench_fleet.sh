#!/usr/bin/env bash
# What does one refresh of the fleet view cost at 1000 hosts read through
# Prometheus (`gputaskman --prometheus URL`)? Scraping 1000 loopback
# `serve` instances is more than two cores carry, so the hosts are
# simulated where Prometheus keeps them: one real `serve` (a fake-NVML
# scenario of BENCH_FLEET_GPUS GPUs and BENCH_FLEET_PROCS real processes)
# is scraped once, its exposition is written out for BENCH_FLEET_HOSTS
# (job, instance) pairs as OpenMetrics with three samples each, and
# promtool's TSDB backfill turns that into blocks a real Prometheus serves.
# Measured, on the same data in the same run:
# - `--prometheus URL --json` and `--once`: wall, CPU and peak RSS of the
#   whole one-shot (start, one round of four queries, the rebuild, output);
# - the live view in tmux at --interval 1: its CPU over 30 s, and that it
#   counts every host;
# - the peer: curl asking Prometheus the same four queries in parallel,
#   the floor any client of Prometheus pays, and Prometheus's own CPU.
# Needs: prometheus and promtool (Debian's), curl, tmux, python3; a release
# build (built here). Loopback only. Usage: scripts/bench_fleet.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
hosts=${BENCH_FLEET_HOSTS:-1000}
gpus=${BENCH_FLEET_GPUS:-8}
nprocs=${BENCH_FLEET_PROCS:-12}
target=${CARGO_TARGET_DIR:-$PWD/target}
cargo build --release --quiet --bin gputaskman
cargo build --release --quiet -p fake-nvml
bin=$target/release/gputaskman
lib=$target/release/libnvidia_ml.so
work=$(mktemp -d)
pids=()
session="bench-fleet-$$"
cleanup() {
  tmux kill-session -t "$session" 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap cleanup EXIT
. scripts/bench-lib.sh

# One host's template: real processes on a fake-NVML scenario.
fleet_template

# The fleet as OpenMetrics: every series of the template for every host,
# at three times (now - 120 s, - 60 s, - 15 s), with `up`. Families stay
# together and each series' samples are in time order, as the format asks.
now=$(date +%s)
python3 - "$work/template.prom" "$work/fleet.om" "$hosts" "$now" <<'EOF'
import sys
template, out, hosts, now = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
times = [now - 120, now - 60, now - 15]
series = []
for line in open(template):
    if line.startswith("#") or not line.strip():
        continue
    head, value = line.rsplit(" ", 1)
    name, _, labels = head.partition("{")
    series.append((name, labels.rstrip("}"), value.strip()))
series.append(("up", "", "1"))
with open(out, "w") as f:
    for name, labels, value in series:
        for h in range(hosts):
            own = f'job="gpu",instance="node-{h:04d}:9400"'
            lab = f"{labels},{own}" if labels else own
            for t in times:
                v = str(t) if name == "gputaskman_sample_timestamp_seconds" else value
                f.write(f"{name}{{{lab}}} {v} {t}\n")
    f.write("# EOF\n")
EOF
per_host=$(grep -vc '^#' "$work/template.prom")
samples=$(( (per_host + 1) * hosts * 3 ))
start=$(date +%s.%N)
promtool tsdb create-blocks-from openmetrics "$work/fleet.om" "$work/data" > "$work/backfill.log" 2>&1 \
  || { cat "$work/backfill.log" >&2; exit 1; }
backfill_s=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", e - s }')
rm -f "$work/fleet.om"

pport=$(free_port)
printf 'global:\n  scrape_interval: 1h\n' > "$work/prometheus.yml"
# The samples are minutes old by the time the rounds run: a lookback of an
# hour keeps them the latest, as a live scrape's would be.
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address="127.0.0.1:$pport" --query.lookback-delta=1h > "$work/prometheus.log" 2>&1 &
prom=$!
pids+=("$prom")
url="http://127.0.0.1:$pport"
for _ in $(seq 1 600); do curl -sf -o /dev/null "$url/-/ready" && break; sleep 0.1; done
answering=$(curl -sf "$url/api/v1/query" --data-urlencode 'query=count(up)' | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"]["result"][0]["value"][1])')
[ "$answering" = "$hosts" ] || { echo "Prometheus holds $answering hosts, not $hosts" >&2; exit 1; }
"$bin" --prometheus "$url" --json > /dev/null # warm Prometheus's caches once

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -r); $(date -u +'%F %H:%M UTC'); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "fleet: $hosts hosts x $gpus GPUs and $nprocs processes; $per_host series per host, $(( per_host * hosts )) in Prometheus ($(prometheus --version 2>&1 | awk 'NR==1{print $3}')), $samples samples backfilled in $backfill_s s"
# The data query the view asks (prometheus::data_query): the families
# rebuild.rs reads, by one regex.
families=$(sed -n '/^pub const FAMILIES/,/^];/p' src/serve/prometheus/rebuild.rs | grep -o '"gputaskman_[a-z_]*"' \
  | tr -d '"' | sed 's/^gputaskman_//' | paste -sd'|')
data_query="{__name__=~\"gputaskman_($families)\"}"
echo
echo "| what | median wall | median CPU (user+sys) | peak RSS | output |"
echo "|---|---:|---:|---:|---:|"
oneshot() { # name args...
  local name=$1; shift
  local walls=() cpus=() rss=0 bytes=0
  for _ in $(seq 1 "$rounds"); do
    /usr/bin/time -f '%e %U %S %M' -o "$work/time" "$bin" --prometheus "$url" "$@" > "$work/out"
    read -r w u s m < "$work/time"
    walls+=("$w"); cpus+=("$(awk -v u="$u" -v s="$s" 'BEGIN { print u + s }')")
    [ "$m" -gt "$rss" ] && rss=$m
    bytes=$(wc -c < "$work/out")
  done
  local mw mc
  mw=$(printf '%s\n' "${walls[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  mc=$(printf '%s\n' "${cpus[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf '| %s | %.2f s | %.2f s | %d MiB | %d KiB |\n' "$name" "$mw" "$mc" "$((rss / 1024))" "$((bytes / 1024))"
}
oneshot "gputaskman --prometheus URL --json (one round, $hosts hosts)" --json
oneshot "gputaskman --prometheus URL --once (one round, $hosts hosts)" --once --wide

# The peer: the same four queries by curl, in parallel, as one round.
queries=("$data_query" up 'timestamp(up)' 'max by (job, instance) (last_over_time(gputaskman_sample_timestamp_seconds[1h]))')
walls=(); before=$(cpu_ticks "$prom")
for _ in $(seq 1 "$rounds"); do
  s=$(date +%s.%N)
  asked=()
  for q in "${queries[@]}"; do
    curl -sf -o /dev/null "$url/api/v1/query" --data-urlencode "query=$q" &
    asked+=($!)
  done
  wait "${asked[@]}"
  walls+=("$(awk -v s="$s" -v e="$(date +%s.%N)" 'BEGIN { print e - s }')")
done
after=$(cpu_ticks "$prom")
answer_bytes=$(curl -sf "$url/api/v1/query" --data-urlencode "query=$data_query" | wc -c)
mw=$(printf '%s\n' "${walls[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
printf '| peer: curl, the same four queries in parallel | %.2f s | Prometheus: %.2f s a round | | data answer %d KiB |\n' \
  "$mw" "$(awk -v t="$((after - before))" -v hz="$hz" -v n="$rounds" 'BEGIN { print t / hz / n }')" "$((answer_bytes / 1024))"

# The live view: one round a second for 30 s, its CPU and what it counts.
tmux new-session -d -s "$session" -x 200 -y 50 "$bin --prometheus $url --interval 1"
for _ in $(seq 1 300); do
  tmux capture-pane -p -t "$session" | grep -q "$hosts answering" && break
  sleep 0.1
done
view=$(pgrep -f -n -- "--prometheus $url --interval 1")
before=$(cpu_ticks "$view"); sleep 30; after=$(cpu_ticks "$view")
status=$(tmux capture-pane -p -t "$session" | grep -o "prometheus, every 1.0 s: [^│]*" | head -1 | sed 's/ *$//')
rss=$(awk '/VmHWM/ {print int($2 / 1024)}' "/proc/$view/status")
echo
echo "live view at --interval 1 over 30 s: $(awk -v t="$((after - before))" -v hz="$hz" 'BEGIN { printf "%.1f", t / hz / 30 * 100 }')% of a core, peak RSS $rss MiB; status line: \"$status\""
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
