#!/usr/bin/env bash
# The real-driver check: on a machine with an NVIDIA GPU and its driver (no
# CUDA toolkit, no Python packages), does gputaskman say what nvidia-smi
# says? It builds nothing: BIN_DIR holds binaries built elsewhere with
#
#   cargo build --release -p gputaskman -p gpu-hog
#   # -> target/release/{gputaskman,gpu-hog,gpu-check}
#
# Usage: scripts/device-check.sh BIN_DIR [OUT_DIR]
#
# It measures what a CUDA context alone costs on each GPU (gpu-hog
# --context-only, nvidia-smi's figure per GPU and driver in
# driver-context.csv), starts two holders of device memory (gpu-hog: 2 GiB
# and 5 GiB through the CUDA driver API), compares `gputaskman --json` with nvidia-smi's
# --query-gpu and --query-compute-apps (gpu-check: device totals within
# nvidia-smi's rounding, both holders found with their sizes), runs the live
# view in tmux for 20 s while `gputaskman record` records the same seconds,
# and writes report.md, the recording and every raw output into OUT_DIR
# (default: device-check-<host>-<time>). It finishes in well under 5
# minutes, reads only, and changes no GPU setting (no nvidia-smi -pm, -c,
# -mig, -lgc or the like). Exit status: 0 when every check passed, 1 when
# one failed, 2 when the kit could not run (missing binary or nvidia-smi).
set -u

# The whole check under one deadline: whatever hangs (a driver call, a
# holder that never allocates), it ends by then, holders stopped.
LIMIT_SECS=${DEVICE_CHECK_LIMIT_SECS:-280}
if [ -z "${DEVICE_CHECK_INNER:-}" ]; then
    DEVICE_CHECK_INNER=1 exec timeout --kill-after=30 "$LIMIT_SECS" "$0" "$@"
fi

BIN_DIR=${1:-}
if [ -z "$BIN_DIR" ] || [ ! -d "$BIN_DIR" ]; then
    echo "usage: $0 BIN_DIR [OUT_DIR]   (BIN_DIR: gputaskman, gpu-hog, gpu-check)" >&2
    exit 2
fi
BIN_DIR=$(cd "$BIN_DIR" && pwd)
OUT=${2:-device-check-$(hostname)-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
REPORT=$OUT/report.md
# Seconds the live view and the recording run.
VIEW_SECS=${DEVICE_CHECK_VIEW_SECS:-20}
STARTED=$(date +%s)
FAILED=0
HOGS=()
TMUX_SOCKET=gputaskman-device-check-$$

say() { printf '%s\n' "$*" | tee -a "$REPORT"; }
# Runs a command with a time limit, in the background so that a stop
# signal is taken at once (bash defers traps until a foreground job ends).
bounded() { # bounded SECS COMMAND...
    timeout "$@" &
    wait $!
}
pause() { sleep "$1" & wait $!; }
check() { # check PASS|FAIL what
    say "- $1: $2"
    [ "$1" = PASS ] || FAILED=1
}

record_pid=""
cleanup() {
    [ -z "$record_pid" ] || kill -TERM "$record_pid" 2>/dev/null
    for pid in "${HOGS[@]}"; do
        kill -TERM "$pid" 2>/dev/null
    done
    for pid in "${HOGS[@]}"; do
        wait "$pid" 2>/dev/null
    done
    tmux -L "$TMUX_SOCKET" kill-server 2>/dev/null
}
trap cleanup EXIT
trap 'say ""; say "RESULT: FAILED (stopped after $(($(date +%s) - STARTED)) s: the check ran past its ${LIMIT_SECS} s limit or was interrupted)"; exit 124' TERM INT

: >"$REPORT"
say "# gputaskman device check"
say ""
say "Output folder: $OUT"
say ""

for tool in gputaskman gpu-hog gpu-check; do
    if [ ! -x "$BIN_DIR/$tool" ]; then
        say "cannot run: $BIN_DIR/$tool is missing (build with: cargo build --release -p gputaskman -p gpu-hog)"
        exit 2
    fi
done
if ! command -v nvidia-smi >/dev/null; then
    say "cannot run: nvidia-smi is not on PATH (no NVIDIA driver installed?)"
    exit 2
fi
GT=$BIN_DIR/gputaskman

say "## Machine"
say ""
{
    echo '```'
    bounded 20 nvidia-smi -L
    bounded 20 nvidia-smi --query-gpu=index,name,driver_version,memory.total,mig.mode.current --format=csv
    bounded 20 "$GT" --version
    uname -sr
    echo '```'
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt" >>"$REPORT"
bounded 30 "$GT" --list-gpus >"$OUT/list-gpus.txt" 2>&1
# Health as the driver's own tool reads it (read-only queries), beside
# gputaskman's health in snapshot.json: throttle reasons, ECC, remapped
# rows, the temperature thresholds, power limits, NVLink states.
{
    bounded 30 nvidia-smi -q -d PERFORMANCE,ECC,ROW_REMAPPER,TEMPERATURE,POWER
    bounded 20 nvidia-smi nvlink -s
} >"$OUT/nvidia-smi-health.txt" 2>&1
say ""

# Each holder prints "gpu-hog: pid P holds N bytes on CUDA device D" once
# its memory is allocated; 60 s covers a cold driver's first context.
start_hog() { # start_hog LABEL SPEC GPU-HOG-ARGS...: SPEC is gpu-check's PID:SPEC
    local label=$1 spec=$2
    shift 2
    local log=$OUT/gpu-hog-$label.log
    "$BIN_DIR/gpu-hog" "$@" >"$log" 2>&1 &
    HOGS+=("$!")
    local pid=$!
    for _ in $(seq 1 600); do
        if grep -q " holds " "$log"; then
            check PASS "gpu-hog $* (pid $pid): $(grep ' holds ' "$log")"
            HOLDERS+=("--holder" "$pid:$spec")
            [ "$spec" != context ] || CONTEXT_PIDS+=("$pid")
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            check FAIL "gpu-hog $* could not hold memory: $(tr '\n' ' ' <"$log")"
            return 1
        fi
        pause 0.1
    done
    check FAIL "gpu-hog $* did not report its allocation within 60 s"
    return 1
}
HOLDERS=()
CONTEXT_PIDS=()

say "## Driver context"
say ""
# What a CUDA context costs before any buffer, per GPU and driver: a holder
# per GPU creates one and allocates nothing, and nvidia-smi's figure for it
# goes into driver-context.csv (gputaskman's reconciliation estimates this
# part where no measurement exists: src/snapshot/reconcile.rs).
gpu_count=$(bounded 20 nvidia-smi --query-gpu=index --format=csv,noheader | grep -c .)
for i in $(seq 0 $((gpu_count - 1))); do
    start_hog "context-$i" context --context-only --device "$i"
done
pause 2
bounded 30 nvidia-smi --query-gpu=index,pci.bus_id,name,driver_version --format=csv,noheader \
    >"$OUT/smi-context-gpus.csv" 2>&1
bounded 30 nvidia-smi --query-compute-apps=pid,gpu_bus_id,used_memory --format=csv,noheader,nounits \
    >"$OUT/smi-context-apps.csv" 2>&1
{
    echo "gpu_index,name,pci_bus_id,driver_version,pid,context_mib"
    awk -F', *' -v pids=" ${CONTEXT_PIDS[*]} " '
        NR == FNR { gpu[$2] = $1 "," $3 "," $2 "," $4; next }
        index(pids, " " $1 " ") && ($2 in gpu) { print gpu[$2] "," $1 "," $3 }
    ' "$OUT/smi-context-gpus.csv" "$OUT/smi-context-apps.csv"
} >"$OUT/driver-context.csv"
contexts=$(($(wc -l <"$OUT/driver-context.csv") - 1))
if [ "$contexts" -ge 1 ] && [ "$contexts" = "$gpu_count" ]; then
    check PASS "a context measured on each of $gpu_count GPUs (driver-context.csv)"
else
    check FAIL "contexts measured on $contexts of $gpu_count GPUs: see smi-context-apps.csv"
fi
{
    echo '```'
    cat "$OUT/driver-context.csv"
    echo '```'
} >>"$REPORT"
say ""

say "## Holders"
say ""
if ! start_hog 2GiB 2GiB 2GiB || ! start_hog 5GiB 5GiB 5GiB; then
    say ""
    say "Stopped: without both holders there is nothing to compare."
    say ""
    say "RESULT: FAILED ($(($(date +%s) - STARTED)) s)"
    exit 1
fi
# Let the driver's per-process accounting settle.
pause 2
say ""

say "## gputaskman --json against nvidia-smi"
say ""
bounded 30 "$GT" --json >"$OUT/snapshot.json" 2>"$OUT/snapshot.stderr"
bounded 30 nvidia-smi --query-gpu=index,memory.total,memory.used --format=csv,noheader,nounits >"$OUT/smi-gpus.csv" 2>&1
bounded 30 nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits >"$OUT/smi-apps.csv" 2>&1
# The same moment in nvidia-smi's own words, for the reader.
bounded 30 nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1
bounded 30 "$BIN_DIR/gpu-check" --snapshot "$OUT/snapshot.json" --smi-gpus "$OUT/smi-gpus.csv" \
    --smi-apps "$OUT/smi-apps.csv" "${HOLDERS[@]}" >"$OUT/compare.txt" 2>&1
compare_rc=$?
{
    echo '```'
    cat "$OUT/compare.txt"
    echo '```'
} >>"$REPORT"
[ "$compare_rc" = 0 ] || FAILED=1
say ""

say "## Live view and recording ($VIEW_SECS s)"
say ""
timeout $((VIEW_SECS + 30)) "$GT" record -o "$OUT/recording.jsonl" --interval 1 --duration "$VIEW_SECS" \
    >"$OUT/record.log" 2>&1 &
record_pid=$!
if command -v tmux >/dev/null; then
    tmux -L "$TMUX_SOCKET" new-session -d -x 160 -y 50 "$GT --interval 1; echo EXITED \$?; sleep 600"
    pause 3
    tmux -L "$TMUX_SOCKET" capture-pane -p >"$OUT/live-view-first.txt"
    pause $((VIEW_SECS > 3 ? VIEW_SECS - 3 : 0))
    tmux -L "$TMUX_SOCKET" capture-pane -p >"$OUT/live-view-last.txt"
    tmux -L "$TMUX_SOCKET" send-keys q
    pause 1
    tmux -L "$TMUX_SOCKET" capture-pane -p >"$OUT/live-view-after-q.txt"
    tmux -L "$TMUX_SOCKET" kill-server 2>/dev/null
    if grep -q "EXITED 0" "$OUT/live-view-after-q.txt"; then
        check PASS "the live view ran $VIEW_SECS s and quit on q (screens: live-view-first.txt, live-view-last.txt)"
    else
        check FAIL "the live view did not quit cleanly on q: see live-view-after-q.txt"
    fi
    for pid in "${HOGS[@]}"; do
        if grep -qw "$pid" "$OUT/live-view-last.txt"; then
            check PASS "holder $pid is on the live view's screen"
        else
            check FAIL "holder $pid is not on the live view's screen"
        fi
    done
else
    check FAIL "tmux is not installed: the live view was not run (apt-get install tmux)"
fi
wait "$record_pid"
record_rc=$?
lines=$(wc -l <"$OUT/recording.jsonl" 2>/dev/null || echo 0)
if [ "$record_rc" = 0 ] && [ "$lines" -ge $((VIEW_SECS / 2)) ]; then
    check PASS "record wrote $lines snapshots to recording.jsonl (gputaskman replay / summary read it)"
else
    check FAIL "record exited $record_rc with $lines snapshots: see record.log"
fi
bounded 30 "$GT" summary "$OUT/recording.jsonl" >"$OUT/summary.txt" 2>&1 ||
    check FAIL "gputaskman summary could not read the recording: see summary.txt"
say ""

say "## Holders stop on SIGTERM"
say ""
for pid in "${HOGS[@]}"; do
    kill -TERM "$pid"
    wait "$pid"
    rc=$?
    if [ "$rc" = 0 ]; then
        check PASS "holder $pid freed its memory and exited 0"
    else
        check FAIL "holder $pid exited $rc on SIGTERM"
    fi
done
HOGS=()
say ""

elapsed=$(($(date +%s) - STARTED))
if [ "$FAILED" = 0 ]; then
    say "RESULT: PASSED ($elapsed s)"
else
    say "RESULT: FAILED ($elapsed s)"
fi
exit "$FAILED"
