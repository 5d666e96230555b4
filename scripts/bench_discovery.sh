#!/usr/bin/env bash
# Does model discovery make `gputaskman --json` slower? Times it with no
# model process running and with 20 stand-in llama.cpp servers (each a
# process named llama-server with a real model path on its command line,
# answering /props, /slots and /v1/models with recorded responses), in one
# hyperfine run, and prints the difference next to the probe budget.
# Needs: hyperfine, a release build, scripts/test-env.sh's Python.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/test-env.sh)"
cargo build --release --quiet
bin=$PWD/target/release/gputaskman
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT

ln -s "$(readlink -f "$GPUTASKMAN_TEST_PYTHON")" "$work/llama-server"
data=tests/data/llama-server
start_servers() {
  for i in $(seq 1 20); do
    port=$((21000 + i))
    "$work/llama-server" tests/servers/fake_api.py --port "$port" \
      "/props=$data/props.json" "/slots=$data/slots.json" "/v1/models=$data/v1_models.json" \
      -m "$GPUTASKMAN_GEMMA_GGUF" -c 4096 < /dev/null > "$work/ready.$i" &
    pids+=($!)
  done
  for i in $(seq 1 20); do
    for _ in $(seq 1 100); do grep -q ready "$work/ready.$i" 2>/dev/null && break; sleep 0.05; done
  done
}

export GPUTASKMAN_NVML_LIB=/nonexistent/libnvidia-ml.so.1
hyperfine --warmup 2 --runs 20 --export-markdown "$work/none.md" -n "no model process" "$bin --json"
start_servers
found=$("$bin" --json | python3 -c 'import json,sys; s=json.load(sys.stdin); print(sum(len(p["models"]) for p in s["processes"] if p["name"]=="llama-server"))')
echo "models found in one snapshot: $found of 20"
hyperfine --warmup 2 --runs 20 --export-markdown "$work/twenty.md" -n "20 llama.cpp servers" "$bin --json"
cat "$work/none.md" "$work/twenty.md"
