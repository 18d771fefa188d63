#!/usr/bin/env bash
# The main job: the footprint experiment. The real engine of one rank of an
# N-rank ZeRO job runs real training steps on a meta device (addresses, no
# bytes); its measured memory per rank and traffic per step print beside
# the ZeRO paper's formulas and DeepSpeed's estimators. With no arguments:
# the paper's 7.5B model, bf16 AdamW, 8 and 64 ranks, stages 0-3 (Table 1).
# Arguments go to the program (see footprint/README.md, or --help), e.g.
#   ./run.sh --model=llama2-70b --ranks=1024 --stage=3 --svg=footprint.svg
set -euo pipefail
cd "$(dirname "$0")"
bash bazel/setup.sh
bazel run -c opt //footprint -- "$@"
