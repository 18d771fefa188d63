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
targets=(//bench:card_check //tests/optimizers:cuda_test
         //tests/memory/interop:thrust_cuda_test)
# Shared libraries for the Python checks, carried in .device/lib.
libs=(//memory/interop:libzero_allocator.so)

case "${1:-}" in
  build)
    bash bazel/setup.sh || exit 1
    # Fully static (tests otherwise link our libraries as .so files).
    bazel build -c opt --dynamic_mode=off "${targets[@]}" "${libs[@]}" || exit 1
    rm -rf .device/bin .device/lib && mkdir -p .device/bin .device/lib
    for t in "${targets[@]}"; do
      path="bazel-bin/${t#//}"; path="${path/://}"
      cp -L "$path" .device/bin/
    done
    for t in "${libs[@]}"; do
      path="bazel-bin/${t#//}"; path="${path/://}"
      cp -L "$path" .device/lib/
    done
    # Debian's abseil (and libatomic) are shared libraries the card's image
    # lacks: carry the ones the carried files need.
    for f in .device/bin/* .device/lib/*.so; do
      ldd "$f" | awk '/libabsl_|libatomic/ { print $1, $3 }' |
        while read -r name path; do cp -Ln "$path" ".device/lib/$name"; done
    done
    ls -la .device/bin .device/lib | head -20 ;;
  run)
    # NCCL comes from the card image's torch wheel (BUILD_NOTES.md).
    nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) + "/lib")' 2>/dev/null)
    export LD_LIBRARY_PATH="$PWD/.device/lib:${nccl:+$nccl:}${LD_LIBRARY_PATH:-}"
    status=0
    for bin in .device/bin/*; do
      echo "== $(basename "$bin")"
      timeout 120 "$bin" || status=1
    done
    # PyTorch on the pool through libzero_allocator.so (SKIP without torch).
    echo "== torch_card_check.py"
    timeout 180 python3 bench/torch_card_check.py .device/lib/libzero_allocator.so || status=1
    exit $status ;;
  *) echo "usage: $0 build|run" >&2; exit 2 ;;
esac
