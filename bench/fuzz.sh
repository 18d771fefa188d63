#!/usr/bin/env bash
# Runs the fuzz targets (tests/fuzz/: libFuzzer under ASan and UBSan, built
# with clang by --config=fuzz) for SECONDS each, two at a time:
#   bash bench/fuzz.sh [SECONDS] [NAME...]     (default 60 s, every target)
# Each starts from its checked-in seeds (tests/fuzz/corpus/NAME/) and what
# earlier runs here found ($FUZZ_WORK/NAME/corpus, default .fuzz/, ignored
# by git). One line per target, "fuzz: NAME passed (...)" or "fuzz: NAME
# FAILED (...)" with the crashing input kept under $FUZZ_WORK/NAME/ and the
# end of its log; last line "fuzz: N passed, N failed". To keep a finding
# as a regression, copy the input into tests/fuzz/corpus/NAME/ (the normal
# build's NAME_corpus_test replays it) and add a named test beside the code.
set -uo pipefail
cd "$(dirname "$0")/.."
bash bazel/setup.sh fuzz || exit 1

seconds=${1:-60}
(($#)) && shift
names=("$@")
((${#names[@]})) || names=(json_fuzzer model_file_fuzzer footprint_cli_fuzzer allocator_fuzzer
                            checkpoint_fuzzer)
work=${FUZZ_WORK:-.fuzz}
flags=(--config=fuzz)
[[ -n ${CI:-} ]] && flags+=(--curses=no --show_progress_rate_limit=30)

# The sanitizer build's own output (a few minutes of progress lines) goes
# to a log, shown only when it fails.
mkdir -p "$work"
build_log=$work/build.log
echo "fuzz: building ${names[*]} with clang under --config=fuzz (log: $build_log)"
start=$SECONDS
if ! bazel build "${flags[@]}" "${names[@]/#/\/\/tests/fuzz:}" >"$build_log" 2>&1; then
  tail -60 "$build_log"
  echo "fuzz: build failed"
  echo "fuzz: 0 passed, ${#names[@]} failed"
  exit 1
fi
echo "fuzz: built in $((SECONDS - start)) s"
bin=$(bazel info "${flags[@]}" bazel-bin 2>/dev/null)/tests/fuzz

run_one() {
  local name=$1 dir=$work/$1
  mkdir -p "$dir/corpus"
  rm -f "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-*
  "$bin/$name" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 -print_final_stats=1 \
    -artifact_prefix="$dir/" "$dir/corpus" "tests/fuzz/corpus/${name%_fuzzer}" >"$dir/log" 2>&1
  local rc=$? runs
  runs=$(grep -oE 'number_of_executed_units: *[0-9]+' "$dir/log" | grep -oE '[0-9]+$')
  if ((rc == 0)); then
    echo "fuzz: $name passed (${runs:-0} inputs in ${seconds} s)"
  else
    echo "fuzz: $name FAILED (exit $rc after ${runs:-?} inputs; log $dir/log;" \
         "input: $(ls "$dir" | grep -E '^(crash|leak|timeout|oom)-' | head -1))"
    tail -40 "$dir/log" | sed "s/^/  $name: /"
  fi
}

results=$(mktemp)
trap 'rm -f "$results"' EXIT
for name in "${names[@]}"; do
  while (($(jobs -rp | wc -l) >= 2)); do wait -n; done
  run_one "$name" >>"$results" &
done
wait
cat "$results"
passed=$(grep -c '^fuzz: .* passed' "$results")
failed=$(grep -c '^fuzz: .* FAILED' "$results")
echo "fuzz: $passed passed, $failed failed"
((failed == 0))
