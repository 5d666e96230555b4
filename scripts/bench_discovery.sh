#!/usr/bin/env bash
# One --once with 0, 1 and 20 model processes: now the discovery section of
# bench/run.sh (BENCHMARKS.md, "Against the peers").
BENCH_SECTIONS=discovery exec "$(dirname "$0")/../bench/run.sh"
