#!/usr/bin/env bash
# The live view's CPU use at 1 s refresh with N (1000) processes on the
# machine, next to peers measured over the same window in the same run:
# top -b -d 1, htop -d 10 and nvitop --interval 1 (against the fake NVML),
# each where installed. Every program runs in its own tmux pane at 160x45;
# CPU is utime+stime from /proc/PID/stat over SECS (60) seconds, in % of
# one core. Also prints how long the view took to show its first figures.
#
#   scripts/bench_tui.sh                 # N=1000 SECS=60
#   N=200 SECS=10 scripts/bench_tui.sh   # a quick look
#   NVITOP=/tmp/venv/bin/nvitop scripts/bench_tui.sh
#
# Needs tmux. nvitop: python3 -m venv /tmp/nvitop-venv &&
# /tmp/nvitop-venv/bin/pip install nvitop (then NVITOP=... or on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-1000}
SECS=${SECS:-60}
TARGET=${CARGO_TARGET_DIR:-target}
NVITOP=${NVITOP:-$(command -v nvitop || true)}

command -v tmux >/dev/null || { echo "tmux is needed (apt-get install -y tmux)" >&2; exit 1; }
cargo build --release --quiet -p gputaskman -p fake-nvml
BIN=$TARGET/release/gputaskman
LIB=$(realpath "$TARGET/release/libnvidia_ml.so")

work=$(mktemp -d)
socket=bench-tui-$$
pids=()
cleanup() {
  tmux -L "$socket" kill-server 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

for _ in $(seq "$N"); do
  sleep 100000 &
  pids+=($!)
done

# Five of them hold GPU memory in the scenario (an RTX 4080 SUPER desktop).
cat >"$work/scenario.json" <<EOF
{ "driver_version": "580.159.03", "cuda_driver_version": 13000,
  "devices": [ { "name": "NVIDIA GeForce RTX 4080 SUPER", "uuid": "GPU-3f2a9c1e-5b7d-4e21-9a0c-0123456789ab",
      "pci_bus_id": "00000000:01:00.0",
      "memory": {"total": 17171480576, "used": 5379194880, "free": 11792285696},
      "utilization": {"gpu": 15, "memory": 30}, "temperature_c": 37, "power_mw": 26000, "power_limit_mw": 320000,
      "compute_processes": [ {"pid": ${pids[0]}, "used_memory": 1406669824}, {"pid": ${pids[1]}, "used_memory": 100663296} ],
      "graphics_processes": [ {"pid": ${pids[2]}, "used_memory": 2340757176}, {"pid": ${pids[3]}, "used_memory": 641728512},
                              {"pid": ${pids[4]}, "used_memory": null} ],
      "process_utilization": [ {"pid": ${pids[0]}, "sm": 15, "mem": 3} ] } ] }
EOF
mkdir -p "$work/lib"
ln -s "$LIB" "$work/lib/libnvidia-ml.so.1"
env_fake="FAKE_NVML_SCENARIO=$work/scenario.json"

# start NAME COMMAND: a tmux session running COMMAND.
start() {
  tmux -L "$socket" -f /dev/null new-session -d -s "$1" -x 160 -y 45 "$2"
}
# The PID of the program a session runs (the pane's shell execs it).
pid_of() {
  tmux -L "$socket" display-message -p -t "$1" '#{pane_pid}'
}
ticks() {
  # utime + stime: fields 14 and 15 of /proc/PID/stat (after the comm).
  sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'
}

# Time to the first frame and to the first figures, from launch (tmux's
# own start-up included: an upper bound).
launched=$(date +%s%N)
start view "exec env $env_fake $BIN --nvml-lib $LIB --interval 1"
until tmux -L "$socket" capture-pane -p -t view | grep -q "^gputaskman"; do
  sleep 0.005
done
frame_ms=$((($(date +%s%N) - launched) / 1000000))
until tmux -L "$socket" capture-pane -p -t view | grep -q "used of"; do
  sleep 0.005
done
first_ms=$((($(date +%s%N) - launched) / 1000000))

names=(gputaskman)
start top "exec top -b -d 1 >/dev/null"
names+=(top)
if command -v htop >/dev/null; then
  start htop "exec htop -d 10"
  names+=(htop)
fi
if [ -n "$NVITOP" ]; then
  start nvitop "exec env $env_fake LD_LIBRARY_PATH=$work/lib $NVITOP --interval 1"
  names+=(nvitop)
fi

sleep 5 # everyone past start-up
declare -A before pid
for n in "${names[@]}"; do
  s=$n
  [ "$n" = gputaskman ] && s=view
  pid[$n]=$(pid_of "$s")
  before[$n]=$(ticks "${pid[$n]}")
done
sleep "$SECS"
hz=$(getconf CLK_TCK)
echo "processes on the machine: $(ls -d /proc/[0-9]* | wc -l); window ${SECS} s"
echo "gputaskman: first frame after ${frame_ms} ms, first figures after ${first_ms} ms (from launch in tmux)"
printf '%-12s %8s\n' program "CPU %"
for n in "${names[@]}"; do
  after=$(ticks "${pid[$n]}")
  awk -v a="$after" -v b="${before[$n]}" -v hz="$hz" -v s="$SECS" -v n="$n" \
    'BEGIN { printf "%-12s %8.2f\n", n, (a - b) / hz / s * 100 }'
done
