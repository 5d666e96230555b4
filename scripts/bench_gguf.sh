#!/usr/bin/env bash
# Times reading the header of the real gemma-3-270m Q4_K_M file (253 MB):
# our reader (crates/gguf, example gguf_dump, release build) against the
# Python gguf package's GGUFReader, in the same run, on the same warm file.
# Results go in BENCHMARKS.md, "GGUF header read".
#
#   scripts/bench_gguf.sh [FILE]
#
# FILE defaults to $GPUTASKMAN_GEMMA_GGUF, then target/models/ (both set up
# by scripts/test-env.sh); Python is $GPUTASKMAN_TEST_PYTHON or .venv, with
# the gguf package installed. Needs hyperfine (Debian: apt-get install hyperfine).
set -euo pipefail
cd "$(dirname "$0")/.."

file=${1:-${GPUTASKMAN_GEMMA_GGUF:-target/models/gemma-3-270m-q4_k_m.gguf}}
py=${GPUTASKMAN_TEST_PYTHON:-.venv/bin/python}
[ -s "$file" ] || { echo "no model file at $file (run scripts/test-env.sh or pass FILE)" >&2; exit 1; }
"$py" -c 'import gguf' 2>/dev/null || { echo "$py cannot import gguf (pip install gguf)" >&2; exit 1; }
command -v hyperfine >/dev/null || { echo "hyperfine not found (apt-get install hyperfine)" >&2; exit 1; }

cargo build --release --quiet -p gguf --example gguf_dump
dump=${CARGO_TARGET_DIR:-target}/release/examples/gguf_dump

echo "== machine"
echo "date:   $(date -u +%Y-%m-%dT%H:%MZ)"
echo "cpu:    $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') ($(nproc) cores)"
echo "kernel: $(uname -r)"
echo "rustc:  $(rustc --version)"
echo "python: $("$py" --version), gguf $("$py" -c 'from importlib.metadata import version; print(version("gguf"))')"
echo "file:   $file ($(stat -c %s "$file") bytes)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== whole process, warm page cache (hyperfine)"
hyperfine -N --warmup 3 --runs 30 --export-json "$tmp/rust.json" \
  -n "gguf_dump (Rust, this crate)" "$dump $file" \
  -n "python -c 'import gguf' (startup baseline)" "$py -c 'import gguf'"
# GGUFReader takes tens of seconds on this file: fewer runs.
hyperfine -N --warmup 1 --runs 3 --export-json "$tmp/python.json" \
  -n "python GGUFReader" "$py -c 'import sys; from gguf import GGUFReader; GGUFReader(sys.argv[1])' $file"
"$py" - "$tmp/rust.json" "$tmp/python.json" <<'PY'
import json, sys
rust = json.load(open(sys.argv[1]))["results"][0]["mean"]
python = json.load(open(sys.argv[2]))["results"][0]["mean"]
print(f"ratio: GGUFReader / gguf_dump = {python / rust:,.0f}x ({python:.3f} s vs {rust * 1e3:.2f} ms)")
PY

echo "== one header read inside the process (startup excluded)"
"$dump" --repeat 200 "$file" | grep 'header read'
"$py" - "$file" <<'PY'
import sys, time
from gguf import GGUFReader
n = 2
start = time.perf_counter()
for _ in range(n):
    GGUFReader(sys.argv[1])
print(f"  GGUFReader: {(time.perf_counter() - start) / n * 1e3:.1f} ms mean over {n} reads")
PY
