#!/usr/bin/env bash
# Clang's thread-safety analysis, as errors, over every source that locks a
# base/mutex.h Mutex: each ABSL_GUARDED_BY member read or written without its
# mutex, each ABSL_EXCLUSIVE_LOCKS_REQUIRED function called without it, fails.
# gcc (the normal build) ignores the annotations, so this is what checks them.
#   bash bench/thread_safety.sh [FILE.cc...]    (default: every such source)
# The sources: those that include base/mutex.h, and those whose own header
# does. Syntax only (no objects), two at a time: about half a minute here.
# One line per failing file with clang's messages; last line
# "thread-safety: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
bash bazel/setup.sh fuzz >/dev/null || exit 1  # clang comes with the fuzz tools

if (($#)); then
  files=("$@")
else
  mapfile -t files < <(
    git ls-files '*.cc' | while read -r cc; do
      h=${cc%.cc}.h
      if grep -q '"base/mutex.h"' "$cc" || { [[ -f $h ]] && grep -q '"base/mutex.h"' "$h"; }; then
        echo "$cc"
      fi
    done)
fi

check() {
  local out
  out=$(clang++ -std=c++20 -fsyntax-only -Wthread-safety -Werror=thread-safety -I. \
          -isystem /usr/local/cuda/include -isystem /usr/local/cuda/include/cccl "$1" 2>&1)
  local rc=$?
  if ((rc == 0)); then
    echo "ok $1"
  else
    echo "FAILED $1"
    grep -E 'error|warning' <<<"$out" | head -20 | sed 's/^/  /'
  fi
}
export -f check
results=$(printf '%s\n' "${files[@]}" | xargs -P 2 -I{} bash -c 'check "$@"' _ {})
grep -v '^ok ' <<<"$results"
passed=$(grep -c '^ok ' <<<"$results")
failed=$(grep -c '^FAILED ' <<<"$results")
echo "thread-safety: $passed passed, $failed failed"
((failed == 0 && passed > 0))
