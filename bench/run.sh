#!/usr/bin/env bash
# gputaskman against the tools people use today, side by side, on one
# machine in one run; prints the table and writes it into BENCHMARKS.md
# ("Against the peers"). Sections:
#   snapshot   one snapshot of the same fake GPUs (crates/fake-nvml): 1, 4, 8
#              GPUs with 8, 64, 256 processes (real sleepers), gputaskman
#              --once / --json against nvitop -1 / gpustat --json; wall time,
#              CPU and peak RSS, interleaved runs, medians; first checks that
#              the three tools agree on every per-process memory figure
#   live       CPU per refresh of the live view at 1 s with 100, 1000, 3000
#              and 10000 sleepers on the machine, next to nvitop's live
#              mode, top and htop, all in tmux panes over the same window
#   gguf       gputaskman's GGUF reader against the gguf package's GGUFReader
#              on the real gemma-3-270m file and on a generated 256k-vocabulary
#              header: time, and bytes of the file read
#   discovery  one --once with 0, 1 and 20 model processes (real llama.cpp
#              servers: xllamacpp serving the gemma file)
#   rss        the live view's peak RSS after BENCH_RSS_MINUTES (10) minutes at
#              1 s with BENCH_RSS_N (1000) sleepers and four idle model servers
#   serve      one /metrics scrape and one /snapshot of `serve` at
#              BENCH_SERVE_PROCS (1000) GPU processes: server CPU each
#   record     `record --interval 1` at as many GPU processes: CPU, and zstd
#              bytes per snapshot line
#   churn      the live view (`a`) while BENCH_CHURN_RATE (1000) processes a
#              second start and exit for BENCH_CHURN_MINUTES (30): RSS over
#              the run, and no row of a gone process a refresh after
#
# The load average is recorded at the start and the end of the run and of
# every live and rss case; the table warns where it exceeded the core count
# (wall times and the peers' start-up are then not a quiet machine's).
#
#   bench/run.sh                      # everything (about 50 min on 2 cores, 30 of them churn), writes BENCHMARKS.md
#   BENCH_QUICK=1 bench/run.sh        # a smoke run, seconds per section, writes nothing
#   BENCH_SECTIONS="gguf" bench/run.sh
#   unshare --pid --fork --mount-proc bench/run.sh   # as root: only its own processes in /proc
#
# Settings (environment): BENCH_QUICK, BENCH_SECTIONS, BENCH_RUNS (10),
# BENCH_SIZES ("1:8 4:64 8:256", GPUS:PROCESSES), BENCH_LIVE_N ("100 1000
# 3000"), BENCH_LIVE_SECS (60), BENCH_LIVE_SERVERS (the sleeper counts
# measured again with four idle model servers running: "1000"),
# BENCH_RSS_MINUTES (10), BENCH_RSS_N (1000), BENCH_GGUF_PY_RUNS (3), BENCH_DISCOVERY
# ("0 1 20"), BENCH_DISCOVERY_KIND (server, or mapped: idle Python processes
# mapping the GGUF file), BENCH_WRITE (1 for a full run: replace the generated
# block of BENCHMARKS.md), BENCH_RESULTS (keep the raw JSON lines there).
#
# Needs: the README's install (a Rust toolchain), python3 with venv, tmux,
# fincore (util-linux); top and htop are measured where installed. Python
# packages go into .venv (scripts/test-env.sh; nvitop and gpustat are
# installed there, pinned, when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
started=$(date +%s)

quick=${BENCH_QUICK:-0}
if [ "$quick" = 1 ]; then
  RUNS=${BENCH_RUNS:-3}
  LIVE_N=${BENCH_LIVE_N:-100}
  LIVE_SECS=${BENCH_LIVE_SECS:-5}
  GGUF_PY_RUNS=${BENCH_GGUF_PY_RUNS:-1}
  DISCOVERY=${BENCH_DISCOVERY:-0 1}
  SIZES=${BENCH_SIZES:-1:8 4:64}
  LIVE_SERVERS=${BENCH_LIVE_SERVERS:-}
  RSS_MINUTES=${BENCH_RSS_MINUTES:-0.2}
  RSS_N=${BENCH_RSS_N:-100}
  CHURN_MINUTES=${BENCH_CHURN_MINUTES:-0.5}
else
  RUNS=${BENCH_RUNS:-10}
  LIVE_N=${BENCH_LIVE_N:-100 1000 3000 10000}
  LIVE_SECS=${BENCH_LIVE_SECS:-60}
  GGUF_PY_RUNS=${BENCH_GGUF_PY_RUNS:-3}
  DISCOVERY=${BENCH_DISCOVERY:-0 1 20}
  SIZES=${BENCH_SIZES:-1:8 4:64 8:256}
  LIVE_SERVERS=${BENCH_LIVE_SERVERS:-1000}
  RSS_MINUTES=${BENCH_RSS_MINUTES:-10}
  RSS_N=${BENCH_RSS_N:-1000}
  CHURN_MINUTES=${BENCH_CHURN_MINUTES:-30}
fi
CHURN_RATE=${BENCH_CHURN_RATE:-1000}
SERVE_PROCS=${BENCH_SERVE_PROCS:-1000}
SERVE_SCRAPES=${BENCH_SERVE_SCRAPES:-2000}
RECORD_SECS=${BENCH_RECORD_SECS:-70}
CHURN_LIFE=${BENCH_CHURN_LIFE:-0.02}
CHURN_N=${BENCH_CHURN_N:-1000}
ALL_SECTIONS="snapshot live gguf discovery rss serve record churn"
SECTIONS=${BENCH_SECTIONS:-$ALL_SECTIONS}
DISCOVERY_KIND=${BENCH_DISCOVERY_KIND:-server}
# Only a full run replaces the recorded table.
if [ "$quick" = 0 ] && [ "$SECTIONS" = "$ALL_SECTIONS" ]; then
  WRITE=${BENCH_WRITE:-1}
else
  WRITE=${BENCH_WRITE:-0}
fi
want() { [[ " $SECTIONS " == *" $1 "* ]]; }

command -v fincore >/dev/null || { echo "fincore is needed (util-linux)" >&2; exit 1; }
if want live || want rss || want churn; then command -v tmux >/dev/null || { echo "tmux is needed (apt-get install -y tmux)" >&2; exit 1; }; fi

# ---------------------------------------------------------------- set-up
eval "$(scripts/test-env.sh)"
py=$GPUTASKMAN_TEST_PYTHON
venv_bin=$(dirname "$py")
if ! "$py" -c 'import nvitop, gpustat' 2>/dev/null; then
  "$venv_bin/pip" install --quiet --disable-pip-version-check nvitop==1.7.2 gpustat==1.1.1 >&2
fi
bench_py() { "$py" "$root/bench/bench.py" "$@"; }

cargo build --release --quiet -p gputaskman -p fake-nvml
target=$(realpath "${CARGO_TARGET_DIR:-target}")
bin=$target/release/gputaskman
lib=$target/release/libnvidia_ml.so

work=$(mktemp -d)
results=${BENCH_RESULTS:-$work/results.jsonl}
: >"$results"
socket=bench-run-$$
sleepers=()
servers=()
cleanup() {
  tmux -L "$socket" kill-server 2>/dev/null || true
  stop_sleepers
  if [ ${#servers[@]} -gt 0 ]; then kill "${servers[@]}" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_sleepers N: N more idle processes (PIDs in $sleepers).
start_sleepers() {
  local i
  for ((i = 0; i < $1; i++)); do
    sleep 100000 &
    sleepers+=($!)
  done
}
stop_sleepers() {
  if [ ${#sleepers[@]} -gt 0 ]; then
    kill "${sleepers[@]}" 2>/dev/null || true
    wait "${sleepers[@]}" 2>/dev/null || true
  fi
  sleepers=()
}
# start_models N KIND: N model processes, ready (PIDs in $servers): real
# llama.cpp servers (KIND server: xllamacpp serving the gemma file) or idle
# Python processes mapping the GGUF file (KIND mapped). stop_models ends them.
# Each server of a run gets a port no earlier one had: a port just given
# up by a stopped server can still be held (a full run once saw the fifth
# of 20 servers never get ready, right after the servers of the case before
# were stopped on the same ports).
port_next=$((20000 + $$ % 20000))
start_models() {
  local i
  if [ ! -p "$work/hold" ]; then
    mkfifo "$work/hold"
    # The model processes' stdin: they stop when this script's copy closes.
    # shellcheck disable=SC2034 # held open, never read
    exec {hold}<>"$work/hold"
  fi
  for ((i = 0; i < $1; i++)); do
    if [ "$2" = server ]; then
      "$py" tests/servers/llama_server.py --model "$GPUTASKMAN_GEMMA_GGUF" --port "$port_next" \
        -c 1024 -np 1 <"$work/hold" >"$work/ready.$i" 2>/dev/null &
      port_next=$((port_next + 1))
    else
      "$py" -c 'import mmap, sys; f = open(sys.argv[1], "rb"); m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ); print("ready", flush=True); sys.stdin.read()' \
        "$GPUTASKMAN_GEMMA_GGUF" <"$work/hold" >"$work/ready.$i" &
    fi
    servers+=($!)
  done
  for ((i = 0; i < $1; i++)); do
    for _ in $(seq 1 1200); do grep -q ready "$work/ready.$i" 2>/dev/null && break; sleep 0.1; done
    grep -q ready "$work/ready.$i" || { echo "model process $i never got ready" >&2; exit 1; }
  done
}
stop_models() {
  if [ ${#servers[@]} -gt 0 ]; then
    kill "${servers[@]}" 2>/dev/null || true
    wait "${servers[@]}" 2>/dev/null || true
  fi
  servers=()
  rm -f "$work"/ready.*
}
nprocs() { find /proc -maxdepth 1 -name '[0-9]*' | wc -l; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

# The peers load libnvidia-ml.so.1 from the library path; gputaskman is told.
mkdir "$work/lib"
ln -s "$lib" "$work/lib/libnvidia-ml.so.1"
export LD_LIBRARY_PATH=$work/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export GPUTASKMAN_NVML_LIB=$lib
export FAKE_NVML_SCENARIO=$work/scenario.json

version() { "$py" -c 'import sys; from importlib.metadata import version; print(version(sys.argv[1]))' "$1"; }
commit=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then commit="$commit (with local changes)"; fi
load_start=$(load)
echo "== bench/run.sh: $(date -u +%Y-%m-%dT%H:%MZ), load average $load_start, sections: $SECTIONS"

# ---------------------------------------------------------------- 1. snapshot
if want snapshot; then
  echo "== 1. one snapshot: gputaskman vs nvitop -1 and gpustat --json ($RUNS runs each, interleaved)"
  for size in $SIZES; do
    gpus=${size%%:*}
    procs=${size##*:}
    case="$gpus GPU$([ "$gpus" = 1 ] || echo s), $procs processes"
    start_sleepers "$procs"
    bench_py scenario "$FAKE_NVML_SCENARIO" "$gpus" "${sleepers[@]}"
    bench_py agree "$results" "$case" "$FAKE_NVML_SCENARIO" "$py" "$venv_bin/gpustat" "$bin"
    bench_py time "$results" snapshot "$case" "$RUNS" \
      "gputaskman --once=$bin --once" "nvitop -1=$venv_bin/nvitop -1" \
      "gputaskman --json=$bin --json" "gpustat --json=$venv_bin/gpustat --json"
    stop_sleepers
  done
fi

# ---------------------------------------------------------------- 2. live
tmux_() { tmux -L "$socket" -f /dev/null "$@"; }
ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
# launch_live: the live view in its own tmux pane; sets first_ms (launch to
# first figures on screen).
launch_live() {
  local launched
  launched=$(date +%s%N)
  tmux_ new-session -d -s gputaskman -x 160 -y 45 "exec $bin --interval 1"
  until tmux_ capture-pane -p -t gputaskman | grep -q "used of"; do sleep 0.005; done
  first_ms=$((($(date +%s%N) - launched) / 1000000))
}
if want live; then
  echo "== 2. live view: CPU per refresh at 1 s over ${LIVE_SECS} s"
  hz=$(getconf CLK_TCK)
  live_cases=()
  for n in $LIVE_N; do live_cases+=("$n:0"); done
  for n in $LIVE_SERVERS; do live_cases+=("$n:4"); done
  for lc in "${live_cases[@]}"; do
    n=${lc%%:*}
    nserv=${lc##*:}
    case=$n
    [ "$nserv" = 0 ] || case="$n+$nserv servers"
    start_sleepers "$n"
    [ "$nserv" = 0 ] || start_models "$nserv" server
    # Five of the sleepers hold GPU memory, on one GPU.
    bench_py scenario "$FAKE_NVML_SCENARIO" 1 "${sleepers[@]:0:5}"
    load_before=$(load)
    launch_live
    names=(gputaskman nvitop)
    tmux_ new-session -d -s nvitop -x 160 -y 45 "exec $venv_bin/nvitop --interval 1"
    if command -v top >/dev/null; then
      tmux_ new-session -d -s top -x 160 -y 45 "exec top -b -d 1 >/dev/null"
      names+=(top)
    fi
    if command -v htop >/dev/null; then
      tmux_ new-session -d -s htop -x 160 -y 45 "exec htop -d 10"
      names+=(htop)
    fi
    sleep 5 # every program past its start-up
    declare -A pid=() before=()
    for p in "${names[@]}"; do
      pid[$p]=$(tmux_ display-message -p -t "$p" '#{pane_pid}')
      before[$p]=$(ticks "${pid[$p]}")
    done
    sleep "$LIVE_SECS"
    on_machine=$(nprocs)
    for p in "${names[@]}"; do
      after=$(ticks "${pid[$p]}")
      cpu=$(awk -v a="$after" -v b="${before[$p]}" -v hz="$hz" 'BEGIN { print (a - b) / hz }')
      extra=""
      [ "$p" = gputaskman ] && extra=", \"first_ms\": $first_ms"
      bench_py record "$results" "{\"section\": \"live\", \"case\": \"$case\", \"name\": \"$p\", \"cpu_s\": $cpu, \"secs\": $LIVE_SECS, \"procs\": $on_machine, \"load\": \"$load_before / $(load)\"$extra}"
      awk -v c="$cpu" -v s="$LIVE_SECS" -v n="$case" -v p="$p" \
        'BEGIN { printf "  %-18s %-12s %7.2f ms per refresh, %6.2f %% of a core\n", n, p, c / s * 1000, c / s * 100 }'
    done
    echo "  gputaskman's first figures after ${first_ms} ms; $on_machine processes on the machine; load $load_before / $(load)"
    tmux_ kill-server
    stop_models
    stop_sleepers
  done
fi

# ---------------------------------------------------------------- 3. gguf
if want gguf; then
  echo "== 3. GGUF header: gputaskman model vs GGUFReader"
  # Private copies: nobody else maps them, so they can be evicted from the page cache.
  cp "$GPUTASKMAN_GEMMA_GGUF" "$work/gemma-3-270m-q4_k_m.gguf"
  bench_py gguf-gen "$work/generated-256k-vocab.gguf"
  reader='import sys; from gguf import GGUFReader; GGUFReader(sys.argv[1])'
  for f in "$work/gemma-3-270m-q4_k_m.gguf" "$work/generated-256k-vocab.gguf"; do
    case=$(basename "$f")
    GPUTASKMAN_NVML_LIB=/nonexistent/libnvidia-ml.so.1 bench_py file-read "$results" "$case" "gputaskman model" "$f" strace "$bin" model "$f"
    bench_py file-read "$results" "$case" GGUFReader "$f" smaps "$py"
    GPUTASKMAN_NVML_LIB=/nonexistent/libnvidia-ml.so.1 bench_py time "$results" gguf "$case" "$RUNS" \
      "gputaskman model=$bin model $f" "import gguf=$py -c 'import gguf'"
    # GGUFReader takes seconds a read: fewer runs, and the file-read run above was its warm-up.
    bench_py time --no-warmup "$results" gguf "$case" "$GGUF_PY_RUNS" "GGUFReader=$py -c '$reader' $f"
  done
fi

# ---------------------------------------------------------------- 4. discovery
if want discovery; then
  echo "== 4. discovery: gputaskman --once with model processes ($DISCOVERY_KIND)"
  for n in $DISCOVERY; do
    start_models "$n" "$DISCOVERY_KIND"
    found=$(GPUTASKMAN_NVML_LIB=/nonexistent/libnvidia-ml.so.1 "$bin" --json | "$py" -c '
import json, sys
mine = {int(p) for p in sys.argv[1:]}
s = json.load(sys.stdin)
print(sum(1 for p in s["processes"] if p["pid"] in mine and p.get("models")))' ${servers[@]+"${servers[@]}"})
    echo "  $n model processes: models found in $found"
    bench_py record "$results" "{\"section\": \"discovery-info\", \"case\": \"$n\", \"name\": \"info\", \"found\": $found, \"kind\": \"$DISCOVERY_KIND\"}"
    GPUTASKMAN_NVML_LIB=/nonexistent/libnvidia-ml.so.1 bench_py time "$results" discovery "$n" "$RUNS" "gputaskman --once=$bin --once"
    stop_models
  done
fi

# ---------------------------------------------------------------- 5. rss
if want rss; then
  echo "== 5. live view: peak RSS after $RSS_MINUTES min at 1 s, $RSS_N sleepers and four idle model servers"
  start_sleepers "$RSS_N"
  start_models 4 server
  bench_py scenario "$FAKE_NVML_SCENARIO" 1 "${sleepers[@]:0:5}"
  load_before=$(load)
  launch_live
  view=$(tmux_ display-message -p -t gputaskman '#{pane_pid}')
  total=$(awk -v m="$RSS_MINUTES" 'BEGIN { print int(m * 60) }')
  first=$((total < 60 ? total : 60))
  sleep "$first"
  at_minute=$(awk '/^VmRSS/ { print $2 }' "/proc/$view/status")
  sleep $((total - first))
  hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$view/status")
  rss_end=$(awk '/^VmRSS/ { print $2 }' "/proc/$view/status")
  echo "  peak RSS ${hwm} KiB (RSS ${at_minute} KiB after a minute, ${rss_end} KiB at the end); load $load_before / $(load)"
  bench_py record "$results" "{\"section\": \"rss\", \"case\": \"$RSS_N\", \"name\": \"gputaskman\", \"minutes\": $RSS_MINUTES, \"hwm_kib\": $hwm, \"rss_minute_kib\": $at_minute, \"rss_end_kib\": $rss_end, \"procs\": $(nprocs), \"load\": \"$load_before / $(load)\"}"
  tmux_ kill-server
  stop_models
  stop_sleepers
fi

# ---------------------------------------------------------------- 7. serve, record
# serve: what one /metrics scrape and one /snapshot cost the server at
# BENCH_SERVE_PROCS (1000) GPU processes (scripts/bench_serve.sh).
# record: `record --interval 1` for RECORD_SECS with as many GPU processes
# (real sleepers on eight fake GPUs): its CPU, and the zstd bytes per line.
if want serve; then
  echo "== 7. serve at $SERVE_PROCS GPU processes"
  BENCH_SERVE_PROCS=$SERVE_PROCS scripts/bench_serve.sh "$SERVE_SCRAPES" | tee "$work/serve.txt"
  per_scrape() { grep -F "| gputaskman serve, $1 |" "$work/serve.txt" | awk -F'|' '{ gsub(/[ ms]/, "", $5); print $5 }'; }
  bench_py record "$results" "{\"section\": \"serve\", \"case\": \"$SERVE_PROCS\", \"name\": \"gputaskman\", \"metrics_ms\": $(per_scrape /metrics), \"snapshot_ms\": $(per_scrape "/snapshot (a web view refresh)"), \"load\": \"$(load)\"}"
fi
if want record; then
  echo "== 7. record at 1 s for ${RECORD_SECS} s, $SERVE_PROCS GPU processes"
  start_sleepers "$SERVE_PROCS"
  # Eight GPUs: their processes' memory fits each one's 80 GiB.
  bench_py scenario "$FAKE_NVML_SCENARIO" 8 "${sleepers[@]}"
  load_before=$(load)
  "$bin" record --interval 1 --duration "$RECORD_SECS" --output "$work/record.jsonl.zst" 2>/dev/null &
  recorder=$!
  sleep 5 # past its first samples
  before=$(ticks "$recorder")
  sleep $((RECORD_SECS - 10))
  after=$(ticks "$recorder")
  wait "$recorder"
  lines=$(zstd -dc "$work/record.jsonl.zst" | wc -l)
  per_line=$(($(stat -c %s "$work/record.jsonl.zst") / lines))
  plain=$(($(zstd -dc "$work/record.jsonl.zst" | wc -c) / lines))
  cpu=$(awk -v a="$after" -v b="$before" -v s="$((RECORD_SECS - 10))" -v hz="$(getconf CLK_TCK)" 'BEGIN { print (a - b) / hz / s * 100 }')
  echo "  record: ${cpu} % of a core; $lines lines, $per_line bytes a line with zstd ($plain plain); load $load_before / $(load)"
  bench_py record "$results" "{\"section\": \"record\", \"case\": \"$SERVE_PROCS\", \"name\": \"gputaskman\", \"cpu_percent\": $cpu, \"zstd_bytes_per_line\": $per_line, \"plain_bytes_per_line\": $plain, \"lines\": $lines, \"load\": \"$load_before / $(load)\"}"
  stop_sleepers
fi

# ---------------------------------------------------------------- 6. churn
if want churn; then
  echo "== 6. live view under churn: $CHURN_RATE processes a second for $CHURN_MINUTES min, RSS and stale rows"
  # Each churned process is an AI process by its name (llama-server, a
  # link to sleep) living CHURN_LIFE seconds: the `a` view lists those
  # alive, so a row of one gone would show.
  mkdir -p "$work/churn"
  ln -sf "$(command -v sleep)" "$work/churn/llama-server"
  start_sleepers "$CHURN_N"
  bench_py scenario "$FAKE_NVML_SCENARIO" 1 "${sleepers[@]:0:5}"
  load_before=$(load)
  launch_live
  tmux_ send-keys -t gputaskman a
  view=$(tmux_ display-message -p -t gputaskman '#{pane_pid}')
  total=$(awk -v m="$CHURN_MINUTES" 'BEGIN { print int(m * 60) }')
  bench_py churn "$CHURN_RATE" "$total" "$work/churn/llama-server" "$CHURN_LIFE" "$work/churn/done.json" &
  churner=$!
  rows_max=0 rss_first=0 rss_last=0 t=0
  rss_log=""
  while kill -0 "$churner" 2>/dev/null; do
    sleep 10
    t=$((t + 10))
    rows=$(tmux_ capture-pane -p -t gputaskman | grep -c 'llama-server' || true)
    rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$view/status")
    [ "$rows" -gt "$rows_max" ] && rows_max=$rows
    [ "$t" -le 60 ] && rss_first=$rss
    rss_last=$rss
    rss_log="$rss_log $rss"
  done
  wait "$churner"
  sleep 3 # a refresh after the last churned process exited
  rows_after=$(tmux_ capture-pane -p -t gputaskman | grep -c 'llama-server' || true)
  hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$view/status")
  done_json=$(cat "$work/churn/done.json")
  echo "  $done_json; rows of churned processes: at most $rows_max a refresh, $rows_after after the churn"
  echo "  RSS ${rss_first} KiB after a minute, ${rss_last} KiB at the end, peak ${hwm} KiB; load $load_before / $(load)"
  echo "  RSS every 10 s (KiB):$rss_log"
  bench_py record "$results" "{\"section\": \"churn\", \"case\": \"$CHURN_RATE/s\", \"name\": \"gputaskman\", \"minutes\": $CHURN_MINUTES, \"churn\": $done_json, \"rows_max\": $rows_max, \"rows_after\": $rows_after, \"hwm_kib\": $hwm, \"rss_minute_kib\": $rss_first, \"rss_end_kib\": $rss_last, \"procs\": $(nprocs), \"load\": \"$load_before / $(load)\"}"
  tmux_ kill-server
  stop_sleepers
  [ "$rows_after" = 0 ] || { echo "stale rows after the churn: $rows_after" >&2; exit 1; }
fi

# ---------------------------------------------------------------- report
secs=$(($(date +%s) - started))
mem=$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
meta=$("$py" -c 'import json, sys; print(json.dumps(dict(zip(sys.argv[1::2], sys.argv[2::2]))))' \
  section meta case - name - \
  date "$(date -u +%Y-%m-%d)" \
  machine "$cpu, $(nproc) cores, $mem RAM" \
  os "Linux $(uname -r)" \
  commit "$commit" \
  versions "$(rustc --version | cut -d' ' -f1-2), $("$py" --version), nvitop $(version nvitop), gpustat $(version gpustat), nvidia-ml-py $(version nvidia-ml-py), gguf $(version gguf)" \
  load_start "$load_start" load_end "$(load)" cores "$(nproc)" \
  duration "$((secs / 60)) min $((secs % 60)) s" \
  settings "BENCH_RUNS=$RUNS, BENCH_LIVE_SECS=$LIVE_SECS, BENCH_LIVE_SERVERS=$LIVE_SERVERS, BENCH_RSS_MINUTES=$RSS_MINUTES, BENCH_RSS_N=$RSS_N, BENCH_GGUF_PY_RUNS=$GGUF_PY_RUNS, BENCH_DISCOVERY_KIND=$DISCOVERY_KIND")
bench_py record "$results" "$meta"
echo "== table"
if [ "$WRITE" = 1 ]; then
  bench_py report "$results" "$root/BENCHMARKS.md"
else
  bench_py report "$results"
fi
