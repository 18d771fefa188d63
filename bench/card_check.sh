#!/usr/bin/env bash
# The card checks, in two halves (see BUILD_NOTES.md: the card machine has no
# Bazel, so binaries are built here and carried there):
#   bash bench/card_check.sh build   # here: builds into .device/bin (ignored)
#   bash bench/card_check.sh run [--allow-skip=NAME,...]   # there, on a card
#   bash bench/card_check.sh local   # a machine without a card: the same run,
#                                    # where SKIP is a skip, not a failure
# With the device tool: run(command="bash bench/card_check.sh run
#   --allow-skip=peer_copy", carry=[".device"], timeout_s=300) on a one-card
#   machine (peer_copy needs two cards).
#
# Prints one line per check: "PASS name", "FAIL name: why" or "SKIP name:
# why" (GoogleTest's cases are turned into such lines), then
# "card checks: N passed, N failed, N skipped". In `run` mode every SKIP is a
# FAIL (a broken driver or a library that was not carried skips everything),
# except checks named by --allow-skip. A binary's own exit status must agree:
# 0, or 77 when it skipped (card_check, torch_card_check.py) and each of its
# skips was accepted. Exits 1 when any check failed.
set -uo pipefail
cd "$(dirname "$0")/.."
# Each later issue adds its binaries here; each prints PASS/FAIL/SKIP lines
# or is a GoogleTest binary.
targets=(//bench:card_check //bench:card_timing //tests/optimizers:cuda_test
         //tests/compute:elementwise_cuda_test //tests/compute:quantize_cuda_test
         //tests/memory/interop:thrust_cuda_test
         //tests/zero:card_training_test
         //tests/zero/checkpoint:card_checkpoint_test
         //tests/zero/comm:nccl_test)
# Shared libraries for the Python checks, carried in .device/lib.
libs=(//memory/interop:libzero_allocator.so //zero/capi:libzero_engine.so)
# Programs a Python check runs, carried in .device/tools.
tools=(//footprint)
# GoogleTest cases that check behaviour without a card; they skip on a card by
# design, so `run` leaves them out.
no_card_cases='*WithoutACard*'

build() {
  bash bazel/setup.sh || exit 1
  # Fully static (tests otherwise link our libraries as .so files).
  bazel build -c opt --dynamic_mode=off "${targets[@]}" "${libs[@]}" "${tools[@]}" || exit 1
  rm -rf .device/bin .device/lib .device/tools && mkdir -p .device/bin .device/lib .device/tools
  for t in "${targets[@]}"; do
    path="bazel-bin/${t#//}"; path="${path/://}"
    cp -L "$path" .device/bin/
  done
  for t in "${libs[@]}"; do
    path="bazel-bin/${t#//}"; path="${path/://}"
    cp -L "$path" .device/lib/
  done
  for t in "${tools[@]}"; do
    path="bazel-bin/${t#//}"; path="${path/://}"; [[ $t == *:* ]] || path+="/${t##*/}"
    cp -L "$path" .device/tools/
  done
  # Debian's abseil (and libatomic) are shared libraries the card's image
  # lacks: carry the ones the carried files need.
  for f in .device/bin/* .device/lib/*.so .device/tools/*; do
    ldd "$f" | awk '/libabsl_|libatomic/ { print $1, $3 }' |
      while read -r name path; do cp -Ln "$path" ".device/lib/$name"; done
  done
  ls -la .device/bin .device/lib | head -20
}

mode="" allowed=","
passed=0 failed=0 skipped=0

# One binary's output as one line per check: "PASS name", "FAIL name: ...",
# "SKIP name: ...", from our own lines and GoogleTest's per-case lines (those
# with a time; the closing summary repeats names without one). A
# parameterized case's line puts ", where GetParam() = ..." between its name
# and its time: the name is the fourth field without its comma.
check_lines() {
  awk 'function name() { n = $4; sub(/,$/, "", n); return n }
       /^(PASS|FAIL|SKIP) / { print; next }
       /^\[       OK \] [^ ]+(, where .*)? \([0-9]+ ms\)$/ { print "PASS " name(); next }
       /^\[  FAILED  \] [^ ]+(, where .*)? \([0-9]+ ms\)$/ {
         print "FAIL " name() ": see the output above"; next }
       /^\[  SKIPPED \] [^ ]+(, where .*)? \([0-9]+ ms\)$/ {
         print "SKIP " name() ": skipped by GoogleTest" }' "$1"
}

# Runs one check program, prints its check lines under the mode's policy and
# counts them; prints its full output when it failed.
judge() {
  local label=$1 out rc line name ok=1 lines=0 skipped_here=0
  shift
  out=$(mktemp)
  timeout 120 "$@" >"$out" 2>&1
  rc=$?
  echo "== $label (exit $rc)"
  while IFS= read -r line; do
    ((++lines))
    name=${line#* }; name=${name%%:*}
    case $line in
      PASS*) ((++passed)); echo "$line" ;;
      FAIL*) ((++failed)); ok=0; echo "$line" ;;
      SKIP*)
        if [[ $mode == local || $allowed == *",$name,"* ]]; then
          ((++skipped)); ((++skipped_here)); echo "$line"
        else
          ((++failed)); ok=0
          echo "FAIL $name: skipped, and run mode counts a skip as a failure (${line#*: })"
        fi ;;
    esac
  done < <(check_lines "$out")
  if ((lines == 0)); then
    ((++failed)); ok=0; echo "FAIL $label: printed no check line"
  elif ((ok)) && ! ((rc == 0 || (rc == 77 && skipped_here > 0))); then
    ((++failed)); ok=0; echo "FAIL $label: exited with $rc"
  fi
  ((ok)) || sed 's/^/    | /' "$out" | tail -40
  rm -f "$out"
}

run_all() {
  for arg in "$@"; do
    case $arg in
      --allow-skip=*) allowed+="${arg#--allow-skip=},"; ;;
      *) echo "unknown argument: $arg" >&2; exit 2 ;;
    esac
  done
  # NCCL comes from the card image's torch wheel (BUILD_NOTES.md).
  nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) + "/lib")' 2>/dev/null)
  export LD_LIBRARY_PATH="$PWD/.device/lib:${nccl:+$nccl:}${LD_LIBRARY_PATH:-}"
  for t in "${targets[@]}"; do
    local bin=".device/bin/${t##*:}"
    if [[ ! -x $bin ]]; then
      ((++failed)); echo "FAIL ${t##*:}: $bin missing (carry .device after card_check.sh build)"
      continue
    fi
    if [[ $mode == run && $t == //tests/* ]]; then
      judge "${t##*:}" "$bin" "--gtest_filter=-$no_card_cases"
    else
      judge "${t##*:}" "$bin"
    fi
  done
  # PyTorch on the pool through libzero_allocator.so.
  judge torch_card_check.py python3 bench/torch_card_check.py .device/lib/libzero_allocator.so
  # The Python package (zero.wrap) training the example GPT on the card.
  judge torch_card_package.py python3 bench/torch_card_package.py .device/lib/libzero_engine.so
  # The footprint's peak against torch.cuda.max_memory_allocated (issue 44).
  judge torch_card_footprint.py python3 bench/torch_card_footprint.py .device/tools/footprint
  echo "card checks ($mode): $passed passed, $failed failed, $skipped skipped"
  ((failed == 0))
}

case "${1:-}" in
  build) build ;;
  run|local) mode=$1; shift; run_all "$@" ;;
  *) echo "usage: $0 build | run [--allow-skip=NAME,...] | local" >&2; exit 2 ;;
esac
