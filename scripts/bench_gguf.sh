#!/usr/bin/env bash
# The GGUF header read against the gguf package's GGUFReader: now the gguf
# section of bench/run.sh (BENCHMARKS.md, "Against the peers").
BENCH_SECTIONS=gguf exec "$(dirname "$0")/../bench/run.sh"
