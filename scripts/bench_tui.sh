#!/usr/bin/env bash
# The live view's CPU at 1 s refresh next to nvitop, top and htop: now the
# live section of bench/run.sh (BENCHMARKS.md, "Against the peers").
#   N=1000 SECS=60 scripts/bench_tui.sh
BENCH_SECTIONS=live BENCH_LIVE_N=${N:-${BENCH_LIVE_N:-1000}} BENCH_LIVE_SECS=${SECS:-${BENCH_LIVE_SECS:-60}} \
  exec "$(dirname "$0")/../bench/run.sh"
