#!/usr/bin/env bash
# Installs what the build needs, only when missing (idempotent, quiet).
#   bash bazel/setup.sh [fuzz]    (fuzz: also clang and libFuzzer, for bench/fuzz.sh)
set -euo pipefail

packages=(bazel-bootstrap g++ libabsl-dev libgtest-dev libbenchmark-dev nlohmann-json3-dev pkg-config)
[[ ${1:-} == fuzz ]] && packages+=(clang libclang-rt-14-dev lld)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done

if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    sudo=()
  elif command -v sudo >/dev/null; then
    sudo=(sudo)
  else
    echo "setup.sh: need root or sudo to install: ${missing[*]}" >&2
    exit 1
  fi
  echo "setup.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "setup.sh: /usr/local/cuda/bin/nvcc not found: the CUDA 13 toolkit must be" \
       "installed at /usr/local/cuda (every cuda_library needs it)" >&2
  exit 1
fi
