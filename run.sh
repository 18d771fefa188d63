#!/usr/bin/env bash
# Runs the footprint experiment runner; args go to it.
set -euo pipefail
cd "$(dirname "$0")"
bash bazel/setup.sh && bazel run -c opt //bench:footprint -- "$@"
