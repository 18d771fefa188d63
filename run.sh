#!/usr/bin/env bash
# The main job. Until the footprint experiment lands (issue: memory-footprint
# experiments), it is the pool demonstration: a transformer training trace
# replayed on a simulated device, printing the pool's statistics. Args go to
# the program (e.g. --layers=24 --hidden=1024 --zero_devices=host:1x32GiB).
set -euo pipefail
cd "$(dirname "$0")"
bash bazel/setup.sh
bazel run -c opt //bench:pool_demo -- "$@"
