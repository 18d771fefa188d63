#!/usr/bin/env bash
# Builds and runs every test:
#   ./test.sh [bazel test flags] [-- targets]     (targets default to //...)
# e.g. ./test.sh --config=asan, or ./test.sh -- //tests/memory/...
#
# Each test target counts once, by what its result files say, not only by
# Bazel's word PASSED (a target whose every case was skipped is PASSED to
# Bazel):
#   passed   Bazel says PASSED and at least one test case ran;
#   skipped  Bazel says PASSED but no case ran (every case skipped, or none);
#   failed   anything else, including FLAKY: a target that failed and then
#            passed on a retry failed once, so it counts as failed and is
#            named on a "flaky:" line.
# Then the Python package's pytest suite (tests/python/, in .venv/ made by
# python/setup_venv.sh), when the whole suite runs without extra flags (a
# sanitizer build of libzero_engine.so cannot load into Python) and
# ZERO_SKIP_PYTHON is unset; each pytest case counts once. Then, on the same
# condition with ZERO_SKIP_FUZZ unset, each fuzz target's short run
# (bench/fuzz.sh, ZERO_FUZZ_SECONDS each, default 10) counts once. By
# default only the fuzzers whose sanitizer build is cheap run here (the
# JSON and model-file readers, the allocator's C ABI: about 2 minutes of
# clang build); the checkpoint and footprint-CLI fuzzers link the whole
# engine, a further 4-6 minutes of sanitizer build on 2 cores, so they run
# with ZERO_FUZZ_TARGETS=all or bench/fuzz.sh (their seeds and findings
# are replayed by the normal build's corpus tests either way). Last, clang's
# thread-safety analysis of the lock annotations (bench/thread_safety.sh,
# about half a minute; ZERO_SKIP_THREAD_SAFETY skips it) counts once.
# Each part starts with a "== " heading; the summary comes last, one line
# per part, then "N passed, N failed, N skipped". Exits non-zero if
# anything failed, nothing passed, or bazel itself failed.
set -uo pipefail
cd "$(dirname "$0")"
section() { printf '\n== %s\n' "$*"; }
section "Setup (bazel/setup.sh: Debian packages, the CUDA toolkit)"
bash bazel/setup.sh || exit 1

flags=(--keep_going --test_output=errors)
# CI logs: no cursor tricks, fewer progress lines.
[[ -n "${CI:-}" ]] && flags+=(--curses=no --show_progress_rate_limit=30)
targets=(//...)
whole_suite=$(( $# == 0 ))
for ((i = 1; i <= $#; ++i)); do
  if [[ ${!i} == -- ]]; then
    targets=("${@:i+1}")
    set -- "${@:1:i-1}"
    [[ $# -eq 0 && ${targets[*]} == //... ]] || whole_suite=0
    break
  fi
done

# The whole suite builds what the tests need and no more: the benchmark and
# fuzz-driver binaries (about 20, each a link of most of the runtime) cost
# the CI run 2-3 minutes on 2 cores. `bazel build //...` builds them. (Not
# in `flags`: `bazel build` would then ignore the library built below.)
only_tests=()
((whole_suite)) && only_tests=(--build_tests_only)

log=$(mktemp)
trap 'rm -f "$log"' EXIT
section "C++ tests: bazel test ${targets[*]} (build progress, then one line per test target)"
bazel test "${flags[@]}" "${only_tests[@]}" "$@" -- "${targets[@]}" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

# Test cases in a target's result files (one test.xml, or one per shard;
# retries under test_attempts/ are left out): prints "ran skipped".
# GoogleTest marks a skipped case with a <skipped> child or result="skipped",
# a disabled one with status="notrun".
count_cases() {
  local dir="bazel-testlogs/${1#//}"
  dir="${dir/://}"
  find "$dir" -name test.xml -not -path '*/test_attempts/*' -print0 2>/dev/null |
    xargs -0 -r cat |
    awk 'BEGIN { RS = "<testcase"; ran = 0; skipped = 0 }
         NR > 1 {
           end = index($0, "</testcase>"); body = end ? substr($0, 1, end) : $0
           tag = substr(body, 1, index(body, ">"))
           if (body ~ /<skipped/ || tag ~ /status="notrun"|result="skipped"/) ++skipped
           else ++ran
         }
         END { print ran, skipped }'
}

# Summary lines look like "//pkg:name   (cached) PASSED in 0.1s",
# "//pkg:name   FLAKY, failed in 1 out of 2 in 3.4s" or
# "//pkg:name   FAILED TO BUILD".
passed=0 failed=0 skipped=0 flaky=() summary=()
while read -r target status; do
  status=${status#(cached) }
  if [[ $status == PASSED* ]]; then
    read -r ran not_run < <(count_cases "$target")
    if ((ran > 0)); then
      ((++passed))
    else
      ((++skipped))
      echo "skipped: $target (no test case ran; $not_run skipped)"
    fi
  else
    ((++failed))
    [[ $status == FLAKY* ]] && flaky+=("$target")
  fi
done < <(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^//[^ ]+ +(\(cached\) )?[A-Z]')
summary+=("C++ test targets|$passed passed, $failed failed, $skipped skipped")

# pytest's closing line ("3 passed, 1 failed, 2 skipped in 9.1s") into the counts.
if ((whole_suite)) && [[ -z ${ZERO_SKIP_PYTHON:-} ]]; then
  section "Python tests: pytest tests/python (torchrun, gloo; .venv from python/setup_venv.sh)"
  if bash python/setup_venv.sh &&
     bazel build "${flags[@]}" //zero/capi:zero_engine //footprint >/dev/null 2>&1; then
    ZERO_ENGINE_LIB="$PWD/bazel-bin/zero/capi/libzero_engine.so" \
    FOOTPRINT_BIN="$PWD/bazel-bin/footprint/footprint" \
      .venv/bin/python -m pytest -q -p no:cacheprovider tests/python 2>&1 | tee "$log"
    line=$(grep -E '^(=+ )?[0-9]+ (passed|failed|error)' "$log" | tail -1)
    summary+=("Python tests|${line:-no result line}")
    for kind in passed failed skipped error; do
      n=$(grep -oE "[0-9]+ ${kind}s?\b" <<<"$line" | grep -oE '^[0-9]+' || true)
      case $kind in
        passed) ((passed += ${n:-0})) ;;
        skipped) ((skipped += ${n:-0})) ;;
        *) ((failed += ${n:-0})) ;;
      esac
    done
    [[ -z $line ]] && { echo "python tests: no result line"; ((++failed)); }
  else
    echo "python tests: setup (python/setup_venv.sh) or libzero_engine.so build failed"
    summary+=("Python tests|setup or library build failed")
    ((++failed))
  fi
fi

# bench/fuzz.sh's closing line: "fuzz: 5 passed, 0 failed".
if ((whole_suite)) && [[ -z ${ZERO_SKIP_FUZZ:-} ]]; then
  fuzz_targets=(json_fuzzer model_file_fuzzer allocator_fuzzer)
  [[ ${ZERO_FUZZ_TARGETS:-} == all ]] && fuzz_targets=()
  [[ -n ${ZERO_FUZZ_TARGETS:-} && ${ZERO_FUZZ_TARGETS} != all ]] && read -ra fuzz_targets <<<"$ZERO_FUZZ_TARGETS"
  section "Fuzzers: ${fuzz_targets[*]:-all} for ${ZERO_FUZZ_SECONDS:-10} s each (libFuzzer, clang, ASan and UBSan)"
  bash bench/fuzz.sh "${ZERO_FUZZ_SECONDS:-10}" "${fuzz_targets[@]}" 2>&1 | tee "$log"
  line=$(grep -E '^fuzz: [0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
  summary+=("Fuzzers|${line#fuzz: }")
  if [[ -n $line ]]; then
    read -r fuzz_passed fuzz_failed < <(grep -oE '[0-9]+' <<<"$line" | tr '\n' ' ')
    ((passed += fuzz_passed, failed += fuzz_failed))
  else
    echo "fuzz: no result line"
    ((++failed))
  fi
fi

# bench/thread_safety.sh (clang's lock analysis over the sources that use
# base/mutex.h) counts once; its closing line: "thread-safety: N passed, N failed".
if ((whole_suite)) && [[ -z ${ZERO_SKIP_THREAD_SAFETY:-} ]]; then
  section "Lock annotations: clang -Wthread-safety over the sources that use base/mutex.h"
  bash bench/thread_safety.sh 2>&1 | tee "$log"
  line=$(grep -E '^thread-safety: [0-9]+ passed, [0-9]+ failed' "$log" | tail -1)
  summary+=("Lock annotations|${line#thread-safety: } (files; counts once)")
  if [[ $line == *", 0 failed" ]]; then ((++passed)); else echo "thread-safety: failed"; ((++failed)); fi
fi

section "Summary"
for row in "${summary[@]}"; do printf '  %-18s %s\n' "${row%%|*}" "${row#*|}"; done

((${#flaky[@]})) && echo "flaky (failed, then passed on a retry; counted as failed): ${flaky[*]}"
if ((rc != 0 && failed == 0)); then echo "bazel test exited with $rc"; fi
echo "$passed passed, $failed failed, $skipped skipped"
((rc == 0 && failed == 0 && passed > 0))
