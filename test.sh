#!/usr/bin/env bash
# Builds and runs every test; extra args go to `bazel test` (e.g. --config=asan).
# Last line printed: "N passed, N failed". Exits non-zero if anything failed,
# nothing ran, or bazel itself failed.
set -uo pipefail
cd "$(dirname "$0")"
bash bazel/setup.sh || exit 1

flags=(--keep_going --test_output=errors)
# CI logs: no cursor tricks, fewer progress lines.
[[ -n "${CI:-}" ]] && flags+=(--curses=no --show_progress_rate_limit=30)

log=$(mktemp)
trap 'rm -f "$log"' EXIT
bazel test "${flags[@]}" "$@" //... 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}

# Summary lines look like "//pkg:name   (cached) PASSED in 0.1s" or
# "//pkg:name   FAILED TO BUILD"; FLAKY means it passed on a retry.
summary=$(sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^//[^ ]+ +(\(cached\) )?[A-Z]')
passed=$(grep -cE ' (\(cached\) )?(PASSED|FLAKY)' <<<"$summary")
failed=$(grep -cvE ' (\(cached\) )?(PASSED|FLAKY)' <<<"$summary")
[[ -z "$summary" ]] && failed=0
if ((rc != 0 && failed == 0)); then echo "bazel test exited with $rc"; fi
echo "$passed passed, $failed failed"
((rc == 0 && failed == 0 && passed > 0))
