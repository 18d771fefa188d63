#!/usr/bin/env bash
# Creates .venv/ (ignored) at the repository root with PyPI's torch, pytest
# and this package importable in place (python/ on its path): what the
# Python tests need.
# Idempotent: a venv whose stamp matches python/requirements.txt is left as
# it is (a second run takes well under a second).
#   bash python/setup_venv.sh        # then .venv/bin/python, .venv/bin/torchrun
# Debian's python3-torch is too old (BUILD_NOTES.md): never use it.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
requirements=python/requirements.txt
stamp="$venv/.zero-requirements"

if [[ -f $stamp ]] && cmp -s "$stamp" "$requirements" && [[ -x $venv/bin/python ]]; then
  exit 0
fi

# Debian's interpreter: present on every Debian 12 machine (pyenv's may not be).
python=/usr/bin/python3
if ! [[ -x $python ]] || ! "$python" -c 'import ensurepip, venv' 2>/dev/null; then
  sudo=()
  [[ $(id -u) -ne 0 ]] && sudo=(sudo)
  echo "setup_venv.sh: installing python3 and python3-venv" >&2
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    python3 python3-venv >/dev/null
fi

start=$SECONDS
[[ -x $venv/bin/python ]] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -r "$requirements"
# The package in place: python/ on sys.path through a .pth file (what pip's
# "compat" editable mode does), so it wins over the C++ zero/ folder (a
# namespace package) when Python runs from the repository root.
"$venv/bin/python" -c 'import site, sys; open(site.getsitepackages()[0] + "/zero-src.pth", "w").write(sys.argv[1] + "\n")' "$PWD/python"
cp "$requirements" "$stamp"
echo "setup_venv.sh: $venv ready in $((SECONDS - start)) s" >&2
