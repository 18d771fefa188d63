#!/usr/bin/env bash
# The card checks, in two halves (see BUILD_NOTES.md: the card machine has no
# Bazel, so binaries are built here and carried there):
#   bash bench/card_check.sh build   # here: builds into .device/bin (ignored)
#   bash bench/card_check.sh run     # there: runs each, one line per check
# With the device tool: run(command="bash bench/card_check.sh run",
#                           carry=[".device"], timeout_s=300).
set -uo pipefail
cd "$(dirname "$0")/.."
# Each later issue adds its binaries here; each prints PASS/FAIL/SKIP lines.
targets=(//bench:card_check //tests/optimizers:cuda_test)

case "${1:-}" in
  build)
    bash bazel/setup.sh || exit 1
    # Fully static (tests otherwise link our libraries as .so files).
    bazel build -c opt --dynamic_mode=off "${targets[@]}" || exit 1
    rm -rf .device/bin && mkdir -p .device/bin
    for t in "${targets[@]}"; do
      path="bazel-bin/${t#//}"; path="${path/://}"
      cp -L "$path" .device/bin/
    done
    ls -la .device/bin ;;
  run)
    # NCCL comes from the card image's torch wheel (BUILD_NOTES.md).
    nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) + "/lib")' 2>/dev/null)
    export LD_LIBRARY_PATH="${nccl:+$nccl:}${LD_LIBRARY_PATH:-}"
    status=0
    for bin in .device/bin/*; do
      echo "== $(basename "$bin")"
      timeout 120 "$bin" || status=1
    done
    exit $status ;;
  *) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
