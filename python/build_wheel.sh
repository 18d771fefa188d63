#!/usr/bin/env bash
# Builds a wheel of the zero package with libzero_engine.so inside:
#
#   bash python/build_wheel.sh            # bazel build -c opt, then dist/zero-*.whl
#   bash python/build_wheel.sh --lib PATH # package a library already built (the test's way)
#     --out DIR      where the wheel goes (default: dist/ at the repository root)
#     --python PY    the interpreter that builds it, with setuptools >= 70.1
#                    (default: .venv/bin/python from python/setup_venv.sh, else python3)
#
# Then `pip install dist/zero-*.whl` (torch comes from PyPI as its
# dependency) and `torchrun --nproc_per_node=2 -m zero.examples.gpt` run
# with no environment variable: _lib.py finds the library next to the
# package.
#
# What goes in, under zero/: libzero_engine.so, and in zero/.libs/ the
# shared libraries it needs that a glibc system with a C++ runtime does not
# have (Debian's libabsl_*.so, libatomic.so.1: abseil has no PIC archives
# to link in), found through the library's RPATH $ORIGIN/.libs (zero/capi/
# BUILD). Everything in it is checked against the floor the wheel's tag
# states, manylinux_2_34_x86_64: no GLIBC_ symbol newer than 2.34, no
# GLIBCXX_ newer than 3.4.29 nor CXXABI_ newer than 1.3.13 (gcc 11's
# libstdc++, what glibc 2.34 systems such as RHEL 9 have; libzero_engine.so
# itself links libstdc++ in and asks for none). A newer symbol fails the
# build, naming the file and the symbol.
#
# The tag is py3-none-<platform>: the library is loaded with ctypes, not
# imported, so the wheel suits any Python 3 (3.11 here, 3.12 on the card's
# image), but one platform.
#
# The library is copied into a staging copy of python/ (a temporary folder),
# never into the source tree, and the wheel is built there offline (pip
# wheel --no-build-isolation --no-index: the interpreter's own setuptools).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

platform=manylinux_2_34_x86_64
max_glibc=2.34
max_glibcxx=3.4.29
max_cxxabi=1.3.13
# Libraries every target system has, left to it (manylinux's list, plus
# libstdc++ and libgcc_s, which PyTorch itself needs from the system).
system_libs=" libc.so.6 libm.so.6 libdl.so.2 librt.so.1 libpthread.so.0 ld-linux-x86-64.so.2
              libgcc_s.so.1 libstdc++.so.6 "

die() { echo "build_wheel.sh: $*" >&2; exit 1; }
say() { echo "build_wheel.sh: $*" >&2; }

lib="" out="$root/dist" python=""
while (($#)); do
  case $1 in
    --lib) [[ $# -ge 2 ]] || die "--lib needs a path"; lib=$2; shift 2 ;;
    --out) [[ $# -ge 2 ]] || die "--out needs a folder"; out=$2; shift 2 ;;
    --python) [[ $# -ge 2 ]] || die "--python needs an interpreter"; python=$2; shift 2 ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

if [[ -z $python ]]; then
  python=python3
  [[ -x $root/.venv/bin/python ]] && python=$root/.venv/bin/python
fi
command -v "$python" >/dev/null || die "no interpreter '$python'"
# setuptools 70.1 builds wheels itself (older ones need the 'wheel' package).
"$python" -c 'import setuptools, sys
v = tuple(int(x) for x in setuptools.__version__.split(".")[:2])
sys.exit(v < (70, 1))' 2>/dev/null ||
  die "$python has no setuptools >= 70.1 (bash python/setup_venv.sh installs it into .venv, or pass --python)"
for tool in readelf objdump ldd; do
  command -v "$tool" >/dev/null || die "needs $tool (binutils, libc-bin)"
done

if [[ -z $lib ]]; then
  say "bazel build -c opt //zero/capi:zero_engine"
  bazel build -c opt //zero/capi:zero_engine
  lib="$(bazel info -c opt bazel-bin 2>/dev/null)/zero/capi/libzero_engine.so"
  want_optimized=1
else
  want_optimized=0
fi
[[ -f $lib ]] || die "no library at $lib"
lib=$(realpath "$lib")

# How it was built (its own word, zero_engine_build_info): the real command
# must ship an optimized library; a given one (the test's fastbuild) is
# packaged as it is.
# Prints "optimized" or "unoptimized", then the JSON.
info=$("$python" -c 'import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
lib.zero_engine_build_info.restype = ctypes.c_char_p
text = lib.zero_engine_build_info().decode()
print("optimized" if json.loads(text)["optimized"] else "unoptimized", text)' "$lib") ||
  die "$lib does not load"
say "library $lib: $info"
if ((want_optimized)) && [[ $info != optimized* ]]; then
  die "bazel -c opt gave an unoptimized library ($info)"
fi

# Its RPATH must name $ORIGIN/.libs, or the bundled libraries go unseen.
rpath=$(readelf -d "$lib" | sed -n 's/.*(RPATH) *Library rpath: \[\(.*\)\]/\1/p')
# shellcheck disable=SC2016  # a literal $ORIGIN, as the loader reads it
[[ ":$rpath:" == *':$ORIGIN/.libs:'* ]] ||
  die "$lib has RPATH '$rpath', not \$ORIGIN/.libs: build it from this checkout's zero/capi/BUILD"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stage=$tmp/src
mkdir -p "$stage"
cp python/pyproject.toml "$stage/"
# The package's sources, without caches or any library copied in by hand.
tar -C python --exclude=__pycache__ --exclude='*.so' --exclude='*.so.*' --exclude='zero/.libs' \
  -cf - zero | tar -C "$stage" -xf -
# The wheel's tag (a setup.cfg in the staging copy only): the package has no
# extension module, so setuptools would call it py3-none-any.
printf '[bdist_wheel]\npython_tag = py3\nplat_name = %s\n' "$platform" >"$stage/setup.cfg"
cp "$lib" "$stage/zero/libzero_engine.so"
chmod u+w "$stage/zero/libzero_engine.so"

# ldd lists the whole closure (what the bundled libraries need in turn too).
mkdir -p "$stage/zero/.libs"
bundled=()
while read -r name arrow path _; do
  [[ $arrow == "=>" ]] || continue
  [[ $system_libs == *" $name "* ]] && continue
  [[ -f $path ]] || die "$lib needs $name, which is not found here ($path)"
  cp -L "$path" "$stage/zero/.libs/$name"
  bundled+=("$name")
done < <(ldd "$lib")

# The staged library must find each bundled one beside it, not the system's.
while read -r name arrow path _; do
  [[ $arrow == "=>" && $system_libs != *" $name "* ]] || continue
  [[ $path == "$stage/zero/.libs/$name" ]] ||
    die "the staged library finds $name at $path, not in zero/.libs/ (RPATH?)"
done < <(ldd "$stage/zero/libzero_engine.so")

# It exports the C ABI and nothing else: a C++ symbol of its own or of its
# libstdc++ would interpose on PyTorch's in the same process.
leaked=$(objdump -T "$stage/zero/libzero_engine.so" |
  awk '$2 == "g" && $0 !~ /\*UND\*/ && $NF !~ /^zero_/ { print $NF }' | head -5 | tr '\n' ' ')
[[ -z $leaked ]] || die "libzero_engine.so exports more than zero_*: ${leaked}(zero/capi/BUILD's linkopts?)"

# The newest version a file asks for in one family (GLIBC, GLIBCXX, ...), or "none".
newest() {
  objdump -T "$2" | grep -oE "\(${1}_[0-9.]+\)" | tr -d '()' | sed "s/^${1}_//" |
    sort -uV | tail -1 | grep . || echo none
}
# Fails when `newest` exceeds the floor.
check_floor() {  # family, file, max
  local got
  got=$(newest "$1" "$2")
  [[ $got == none ]] && return 0
  [[ $(printf '%s\n%s\n' "$got" "$3" | sort -V | tail -1) == "$3" ]] ||
    die "$(basename "$2") needs ${1}_$got, newer than ${1}_$3 that $platform allows: $(
      objdump -T "$2" | grep -E "\(${1}_$got\)" | awk '{print $NF}' | head -5 | tr '\n' ' ')"
}
for f in "$stage/zero/libzero_engine.so" "$stage"/zero/.libs/*; do
  check_floor GLIBC "$f" "$max_glibc"
  check_floor GLIBCXX "$f" "$max_glibcxx"
  check_floor CXXABI "$f" "$max_cxxabi"
done

main_glibc=$(newest GLIBC "$stage/zero/libzero_engine.so")
main_glibcxx=$(newest GLIBCXX "$stage/zero/libzero_engine.so")
all_glibcxx=$(for f in "$stage"/zero/.libs/*; do newest GLIBCXX "$f"; done | grep -v none | sort -uV | tail -1)
# What it needs from the system (the rest is in .libs/).
from_system=$(readelf -d "$stage/zero/libzero_engine.so" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
  while read -r name; do [[ -e $stage/zero/.libs/$name ]] || printf '%s ' "$name"; done)
say "libzero_engine.so: GLIBC_$main_glibc at most; GLIBCXX_: ${main_glibcxx/none/none (libstdc++ linked in)}; from the system: ${from_system}"
say "${#bundled[@]} bundled in zero/.libs/ (GLIBCXX_${all_glibcxx:-none} at most): ${bundled[*]}"

say "pip wheel (offline)"
"$python" -m pip wheel -q --no-deps --no-build-isolation --no-index --wheel-dir "$tmp/wheel" "$stage" ||
  die "pip wheel failed"
wheels=("$tmp"/wheel/*.whl)
((${#wheels[@]} == 1)) || die "expected one wheel, got: ${wheels[*]}"
wheel=${wheels[0]}
[[ $wheel == *"-py3-none-$platform.whl" ]] || die "wheel $(basename "$wheel") is not tagged py3-none-$platform"
# What it holds: the library and every bundled file.
"$python" - "$wheel" "${bundled[@]}" <<'EOF' || die "the wheel lacks the library or a bundled file"
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
want = ["zero/libzero_engine.so", "zero/__init__.py", "zero/examples/gpt.py"]
want += ["zero/.libs/" + name for name in sys.argv[2:]]
missing = [w for w in want if w not in names]
if missing:
    sys.exit("missing from the wheel: %s" % ", ".join(missing))
EOF

mkdir -p "$out"
cp -f "$wheel" "$out/"
final="$out/$(basename "$wheel")"
say "$final: $(du -k "$final" | cut -f1) KiB ($(stat -c %s "$final") bytes)"
echo "$final"
