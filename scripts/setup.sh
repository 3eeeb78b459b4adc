#!/usr/bin/env bash
# Installs what hfuse needs, in two steps:
#
#   bash scripts/setup.sh build   what building and running the hfuse tool needs
#                                 (compiler, CMake, nlohmann-json, CLI11, fmt,
#                                 OpenBLAS, libonnx-dev, protobuf): Debian's packages
#   bash scripts/setup.sh         that, and what the tests, benchmarks, Python
#                                 module and CUDA build need (GoogleTest, Google
#                                 Benchmark, PyTorch, Chromium, ...; from PyPI into
#                                 .venv: onnxruntime, torch-rechub, mypy, CUTLASS's headers)
#
# scripts/example.sh asks for the first; scripts/test.sh and .ci/run for the
# second. Idempotent: packages already present are not fetched again.
set -euo pipefail

# ---- build: the hfuse tool (scripts/example.sh) ----
build_packages=(
  build-essential cmake
  nlohmann-json3-dev libcli11-dev libfmt-dev
  libopenblas-dev zlib1g-dev
  # ONNX 1.12 and protobuf for C++: the ONNX frontend (src/onnx).
  libonnx-dev libprotobuf-dev protobuf-compiler
)
packages=(
  "${build_packages[@]}"
  libgtest-dev libgmock-dev libbenchmark-dev python3-numpy
  # ---- ONNX tests (tests/onnx) ----
  # Debian's PyTorch (CPU only) and ONNX for exporting test models;
  # python3-venv for the onnxruntime venv below.
  python3-onnx python3-torch python3-venv
  # What torch-rechub (the real-model tests, below) imports besides torch.
  python3-tqdm python3-pandas python3-sklearn
  # ---- end ONNX ----
  # ---- Python module (python/, tests/python) ----
  # Python's headers for the nanobind extension; pytest for its tests.
  python3-dev python3-pytest
  # ---- end Python module ----
  # ---- sanitizers and fuzzing (scripts/sanitize.sh, scripts/fuzz.sh) ----
  # clang with libFuzzer and the ASan/UBSan runtimes, OpenMP for clang, and
  # llvm-symbolizer for readable reports.
  clang-14 libclang-rt-14-dev libomp-14-dev llvm-14
  # ---- end sanitizers ----
  # ---- pictures: hfuse report renders its SVGs with Graphviz's dot; the
  # tests check every hfuse dot output with it and open the report in
  # headless Chromium ----
  graphviz chromium
  # ---- end pictures ----
)

step=${1:-all}
case $step in
  build) packages=("${build_packages[@]}") ;;
  all) ;;
  *) echo "setup: unknown step '$step' (build, or none for everything)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -eq 0 ]] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: system packages ready"
[[ $step == build ]] && exit 0

# ---- ONNX tests: onnxruntime, which Debian lacks, from PyPI in .venv ----
# The venv sees Debian's torch and numpy (--system-site-packages); PyPI's
# torch would pull several GB of GPU libraries, so it is never installed here.
# A current onnx (its checker, version_converter and helper, for the newest
# opsets) and onnxruntime (which runs them) come from PyPI, with numpy held
# at Debian's, which Debian's torch is built against.
ONNX_VERSION=1.23.2
ORT_VERSION=1.32.0
root="$(cd "$(dirname "$0")/.." && pwd)"
if [[ ! -x "$root/.venv/bin/python" ]]; then
  echo "setup: making .venv"
  /usr/bin/python3 -m venv --system-site-packages "$root/.venv"
fi
if ! "$root/.venv/bin/python" -c "
import onnx, onnxruntime, torch
assert onnx.__version__ == '$ONNX_VERSION' and onnxruntime.__version__ == '$ORT_VERSION'" 2>/dev/null; then
  echo "setup: installing onnx $ONNX_VERSION, onnxruntime $ORT_VERSION into .venv"
  constraints="$(mktemp)"
  /usr/bin/python3 -c "import numpy; print('numpy==' + numpy.__version__)" >"$constraints"
  "$root/.venv/bin/pip" install -q -c "$constraints" "onnx==$ONNX_VERSION" "onnxruntime==$ORT_VERSION"
  rm -f "$constraints"
fi
echo "setup: .venv (onnx, onnxruntime) ready"

# ---- Real-model tests (tests/onnx/rechub): torch-rechub's own model classes,
# exported by scripts/make_rechub_models.py. --no-deps: its requirements name
# PyPI's torch; Debian's torch and the packages above are what it imports.
RECHUB_VERSION=0.9.0
if ! "$root/.venv/bin/python" -c "import torch_rechub.models.multi_task" 2>/dev/null; then
  echo "setup: installing torch-rechub $RECHUB_VERSION into .venv"
  "$root/.venv/bin/pip" install -q --no-deps "torch-rechub==$RECHUB_VERSION"
fi
echo "setup: .venv (torch-rechub) ready"
# ---- end ONNX ----

# ---- Python module: nanobind and scikit-build-core, from PyPI in .venv ----
# The CMake build finds nanobind through .venv's python; `pip install .`
# (pyproject.toml) fetches the same into its isolated build environment.
NANOBIND_VERSION=2.15.0
SKBUILD_VERSION=1.1.2
if ! "$root/.venv/bin/python" -c "import nanobind, scikit_build_core" 2>/dev/null; then
  echo "setup: installing nanobind $NANOBIND_VERSION, scikit-build-core $SKBUILD_VERSION into .venv"
  "$root/.venv/bin/pip" install -q "nanobind==$NANOBIND_VERSION" "scikit-build-core==$SKBUILD_VERSION"
fi
echo "setup: .venv (nanobind, scikit-build-core) ready"
# mypy, for tests/python/test_stubs.py (the type stub and annotations checked
# with mypy --strict).
MYPY_VERSION=2.4.1
if ! "$root/.venv/bin/python" -c "import mypy" 2>/dev/null; then
  echo "setup: installing mypy $MYPY_VERSION into .venv"
  "$root/.venv/bin/pip" install -q "mypy==$MYPY_VERSION"
fi
echo "setup: .venv (mypy) ready"
# ---- end Python module ----
# ---- CUDA backend: CUTLASS 4.2's headers, from PyPI's wheel, into .venv ----
# (headers only: --no-deps; CMake finds them under .venv's site-packages).
CUTLASS_VERSION=4.2.0.0
if ! compgen -G "$root/.venv/lib/python3*/site-packages/cutlass_library/source/include/cutlass/cutlass.h" >/dev/null; then
  echo "setup: installing nvidia-cutlass $CUTLASS_VERSION (headers) into .venv"
  "$root/.venv/bin/pip" install -q --no-deps "nvidia-cutlass==$CUTLASS_VERSION"
fi
echo "setup: CUTLASS headers ready"
# ---- end CUDA ----
