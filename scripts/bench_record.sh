#!/usr/bin/env bash
# Record and replay benchmark (BENCHMARKS.md, "Record and replay").
#
# Synthesizes one hour at 1 s of 200 processes on 2 devices (3600
# snapshots) with the real snapshot types and the real recording writer
# (tests/record.rs, synthesize_an_hour_of_200_processes), plain and .zst;
# then measures the files' sizes and how long reading them back takes: the
# real reader inside the test (read all, and replay's index: open, then
# parse the snapshots shown), the release binary's `summary` (read +
# summarize), and peers on the same files in the same run: `zstd -dc | wc -l`
# (decompression alone) and Python's json.loads per line (a plain parse).
#
# Usage: scripts/bench_record.sh [OUT_DIR]   (default target/bench-record)
# Env: GPUTASKMAN_BENCH_SNAPSHOTS (default 3600), CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-target/bench-record}")
mkdir -p "$out"
target=${CARGO_TARGET_DIR:-target}

echo "== machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores, $(free -g | awk '/^Mem:/ {print $2}') GiB RAM; $(date -u +%Y-%m-%dT%H:%MZ)"
cargo build --release --quiet
echo "== writing with the real writer, reading with the real reader"
GPUTASKMAN_BENCH_DIR=$out cargo test --release --quiet --test record -- \
  --ignored --exact synthesize_an_hour_of_200_processes --nocapture 2>/dev/null | grep '^BENCH'

plain=$out/hour.jsonl
zst=$out/hour.jsonl.zst
mib() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "== sizes"
echo "plain: $(mib "$plain") ($(wc -l <"$plain") lines)"
echo "zst:   $(mib "$zst") (a zstd flush per line, a frame per 60 lines, level 3)"
zstd -q -3 -c "$plain" >"$out/whole.zst"
echo "peer:  $(mib "$out/whole.zst") (zstd -3 on the whole plain file: one frame, no flushes)"

# Seconds and peak RSS of a command, best of 3.
measure() {
  local best="" rss=""
  for _ in 1 2 3; do
    local line
    line=$( { /usr/bin/time -f '%e %M' bash -c "$1" >/dev/null; } 2>&1 | tail -1)
    local t=${line% *} m=${line#* }
    if [ -z "$best" ] || awk -v a="$t" -v b="$best" 'BEGIN { exit !(a < b) }'; then best=$t; rss=$m; fi
  done
  printf '%-58s %6.2f s  %6.0f MiB peak RSS\n' "$2" "$best" "$(awk -v k="$rss" 'BEGIN { print k / 1024 }')"
}
bin=$target/release/gputaskman
echo "== reading back (best of 3)"
measure "$bin summary '$zst' --json" "gputaskman summary hour.jsonl.zst --json"
measure "$bin summary '$plain' --json" "gputaskman summary hour.jsonl --json"
measure "zstd -dc '$zst' | wc -l" "peer: zstd -dc hour.jsonl.zst | wc -l"
measure "python3 -c 'import json,sys; n=sum(1 for l in open(sys.argv[1]) if json.loads(l)); print(n)' '$plain'" \
  "peer: python3 json.loads per line of hour.jsonl"

# Replay to its first frame, end to end: the release binary in a tmux pane,
# from the command to the title line that says it shows snapshot 1.
first_frame() {
  local session="bench-replay-$$" start now
  start=$(date +%s.%N)
  tmux new-session -d -s "$session" -x 160 -y 50 "$bin replay '$1'"
  for _ in $(seq 1 600); do
    if tmux capture-pane -p -t "$session" 2>/dev/null | grep -q "replay 1/"; then
      now=$(date +%s.%N)
      tmux kill-session -t "$session"
      awk -v a="$start" -v b="$now" 'BEGIN { printf "%.2f\n", b - a }'
      return
    fi
    sleep 0.02
  done
  tmux kill-session -t "$session" 2>/dev/null || true
  echo "no first frame in 12 s"
}
if command -v tmux >/dev/null; then
  echo "== replay: command to first frame on screen (tmux, best of 3)"
  for f in "$zst" "$plain"; do
    best=$( (for _ in 1 2 3; do first_frame "$f"; done) | sort -n | head -1)
    printf '%-58s %6s s\n' "gputaskman replay $(basename "$f")" "$best"
  done
fi
