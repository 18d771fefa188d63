#!/usr/bin/env bash
# The long versions of the soak and crash tests (CI runs them for seconds):
#   bash bench/soak.sh [SECONDS]     (default 300: the pool's and the pager's run)
# - the pool: 8 host devices, 4 threads, delayed streams, trims, full devices
#   (tests/memory:pool_random_test, PoolRandomTest.Soak*);
# - the pager: delayed streams, a budget that moves (tests/offload:pager_stress_test);
# - the engine: 2,000 fp16 steps on 4 ranks, a checkpoint every 100, overflows,
#   a restart from a random one (tests/zero/checkpoint:engine_soak_test);
# - crash consistency at every step of a save, killed and disk full
#   (tests/zero/checkpoint:crash_test with ZERO_CRASH_POINTS past the count).
# One line per check ("soak: NAME passed in N s: ..."), then "soak: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
bash bazel/setup.sh || exit 1
seconds=${1:-300}

targets=(//tests/memory:pool_random_test //tests/offload:pager_stress_test
         //tests/zero/checkpoint:engine_soak_test //tests/zero/checkpoint:crash_test)
bazel build "${targets[@]}" || { echo "soak: build failed"; exit 1; }
bin=$(bazel info bazel-bin 2>/dev/null)/tests
export TEST_TMPDIR=${TEST_TMPDIR:-$(mktemp -d)}

passed=0 failed=0
check() {  # NAME ENV... -- BINARY ARGS...
  local name=$1 envs=() start log
  shift
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  log=$(mktemp)
  start=$SECONDS
  if env "${envs[@]}" "$@" >"$log" 2>&1; then
    echo "soak: $name passed in $((SECONDS - start)) s: $(grep -hE '^(pool soak|pager soak|soak|crash):' "$log" | tr '\n' ' ')"
    ((++passed))
  else
    echo "soak: $name FAILED after $((SECONDS - start)) s"
    tail -30 "$log" | sed "s/^/  $name: /"
    ((++failed))
  fi
  rm -f "$log"
}

check pool ZERO_SOAK_SECONDS="$seconds" -- "$bin/memory/pool_random_test" --gtest_filter='*Soak*'
check pager ZERO_SOAK_SECONDS="$seconds" -- "$bin/offload/pager_stress_test" --gtest_filter='PagerSoak*'
check engine ZERO_SOAK_STEPS=2000 ZERO_SOAK_CHECKPOINT_EVERY=100 -- \
  "$bin/zero/checkpoint/engine_soak_test"
check crash ZERO_CRASH_POINTS=1000000 -- "$bin/zero/checkpoint/crash_test"
echo "soak: $passed passed, $failed failed"
((failed == 0))
