#!/usr/bin/env bash
# The project's test command (README.md, .ci/run): sets up the Python side
# of the tests, then runs every test in the workspace.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/test-env.sh)"
# Every test binary runs, so one failure never hides another's.
cargo test --workspace --no-fail-fast "$@"
