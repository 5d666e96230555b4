#!/usr/bin/env bash
# A profile of the live view at 1 s with N sleepers on the machine and the
# fake NVML (five of them on its GPU), as bench/run.sh's live case runs it:
# `perf record -F 499 --call-graph dwarf` of the view's process for SECS
# seconds after a warm-up, then the report by shared object and by symbol
# (self time), with the view's CPU over the window and the load averages.
#
#   scripts/profile_live.sh [N] [SECS] [BIN]    (10000, 30, a line-tables build)
#
# BIN defaults to target/prof/release/gputaskman, built here without LTO and
# with line tables so perf can name the code (BENCHMARKS.md quotes these).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}
secs=${2:-30}
eval "$(scripts/test-env.sh)"
if [ -z "${3:-}" ]; then
  CARGO_TARGET_DIR=target/prof CARGO_PROFILE_RELEASE_DEBUG=line-tables-only CARGO_PROFILE_RELEASE_STRIP=none \
    CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    cargo build --release --quiet -p gputaskman -p fake-nvml
fi
bin=$(realpath "${3:-target/prof/release/gputaskman}")
lib=$(dirname "$bin")/libnvidia_ml.so
[ -e "$lib" ] || lib=$(realpath target/release/libnvidia_ml.so)
work=$(mktemp -d)
sleepers=()
cleanup() {
  tmux -L "profile-$$" kill-server 2>/dev/null || true
  if [ ${#sleepers[@]} -gt 0 ]; then kill "${sleepers[@]}" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
for ((i = 0; i < n; i++)); do
  sleep 100000 &
  sleepers+=($!)
done
"$GPUTASKMAN_TEST_PYTHON" bench/bench.py scenario "$work/scenario.json" 1 "${sleepers[@]:0:5}"
sleep 5
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
FAKE_NVML_SCENARIO=$work/scenario.json tmux -L "profile-$$" -f /dev/null new-session -d -x 160 -y 45 \
  "exec $bin --nvml-lib $lib --interval 1"
sleep "${PROFILE_WARMUP:-10}" # past the first samples (PROFILE_WARMUP: seconds)
pid=$(tmux -L "profile-$$" display-message -p '#{pane_pid}')
ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
before=$(ticks "$pid")
perf record -q -F 499 --call-graph dwarf,16384 -o "$work/perf.data" -p "$pid" -- sleep "$secs" 2>/dev/null
after=$(ticks "$pid")
[ -z "${PROFILE_DATA:-}" ] || cp "$work/perf.data" "$PROFILE_DATA"
echo "== $n sleepers, $(find /proc -maxdepth 1 -name '[0-9]*' | wc -l) processes on the machine; load $load_before / $(cut -d' ' -f1-3 /proc/loadavg)"
awk -v a="$after" -v b="$before" -v s="$secs" -v hz="$(getconf CLK_TCK)" \
  'BEGIN { printf "the view (perf sampling included): %.2f ms a refresh, %.2f %% of a core\n", (a - b) / hz / s * 1000, (a - b) / hz / s * 100 }'
echo "== by shared object (self)"
perf report -i "$work/perf.data" --no-children --sort dso --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -8
echo "== by symbol (self)"
perf report -i "$work/perf.data" --no-children --sort sym --stdio -g none 2>/dev/null | grep -E '^ +[0-9]' | head -40
