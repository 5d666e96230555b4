#!/usr/bin/env bash
# The long reliability checks of RELIABILITY.md, one after another:
#   1. every cargo-fuzz target in fuzz/ for FUZZ_SECS seconds each (default
#      600), one at a time under nice, new inputs kept in fuzz/corpus-tmp/
#      (the committed seeds in fuzz/corpus/ are only read);
#   2. the churn test (tests/churn.rs) for CHURN_SECS seconds (default 300):
#      the live view under 1000 process starts and exits a second.
#
#   scripts/long-checks.sh                    # everything, 10 min per target
#   FUZZ_SECS=60 scripts/long-checks.sh       # a quick pass
#   scripts/long-checks.sh drm_fdinfo proc_files   # some targets, no churn
#   SKIP_FUZZ=1 scripts/long-checks.sh        # only the churn run
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`) and tmux. The fuzzers run on
# stable Rust through RUSTC_BOOTSTRAP=1. A crash stops the script with the
# target's name; libFuzzer leaves the input in fuzz/artifacts/TARGET/.
# Results: one line a target in fuzz/target/long-checks/results.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
FUZZ_SECS=${FUZZ_SECS:-600}
CHURN_SECS=${CHURN_SECS:-300}
logs=$root/fuzz/target/long-checks
mkdir -p "$logs"

all_targets() {
  sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^gputaskman-fuzz$'
}

run_churn=1
if [ $# -gt 0 ]; then
  targets=("$@")
  run_churn=0
else
  mapfile -t targets < <(all_targets)
fi

if [ -z "${SKIP_FUZZ:-}" ]; then
  # Built once; the binaries are then run directly, so that a source file
  # changed meanwhile does not rebuild (and re-time) the next target.
  (cd fuzz && RUSTC_BOOTSTRAP=1 nice -n 19 cargo fuzz build)
  bin=$root/fuzz/target/x86_64-unknown-linux-gnu/release
  for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus-tmp/$t" "fuzz/corpus/$t" "fuzz/artifacts/$t"
    echo "== fuzz $t for ${FUZZ_SECS}s ($(date -u +%H:%M:%S))"
    status=0
    (cd fuzz && nice -n 19 "$bin/$t" "corpus-tmp/$t" "corpus/$t" -artifact_prefix="artifacts/$t/" \
      -max_total_time="$FUZZ_SECS" -rss_limit_mb=2048 -timeout=10 -max_len=65536 \
      -print_final_stats=1) >"$logs/$t.log" 2>&1 || status=$?
    runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1 runs in \2 s/p' "$logs/$t.log" | tail -1)
    if [ "$status" -ne 0 ]; then
      echo "$(date -u +%FT%TZ) $t FAILED (exit $status) $runs: see $logs/$t.log" | tee -a "$logs/results.txt"
      tail -40 "$logs/$t.log"
      exit 1
    fi
    echo "$(date -u +%FT%TZ) $t clean: ${runs:-?}" | tee -a "$logs/results.txt"
  done
fi

if [ "$run_churn" = 1 ]; then
  echo "== churn for ${CHURN_SECS}s ($(date -u +%H:%M:%S))"
  GPUTASKMAN_CHURN_SECS=$CHURN_SECS cargo test --test churn -- --nocapture --test-threads=1 \
    2>&1 | tee "$logs/churn.log"
  echo "$(date -u +%FT%TZ) churn ${CHURN_SECS}s: $(grep -o -m1 'churn: .*' "$logs/churn.log" || echo '?')" >>"$logs/results.txt"
fi
