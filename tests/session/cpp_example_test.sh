#!/usr/bin/env bash
# The C++ example against the installed package: installs the build to a
# temporary prefix, configures and builds examples/cpp_session with
# find_package(hfuse), runs it on examples/ranking_small.onnx and checks
# that it computes what `hfuse run` computes on the same inputs (same
# outputs, sums and byte hashes), and that a bad feed is named.
#   cpp_example_test.sh BUILD_DIR SOURCE_DIR HFUSE
set -euo pipefail
build=$1 src=$2 hfuse=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >"$work/install.log"
test -f "$work/prefix/include/hfuse/session/session.h"
test -f "$work/prefix/lib/cmake/hfuse/hfuseConfig.cmake"
cmake -S "$src/examples/cpp_session" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$work/prefix" >"$work/configure.log"
cmake --build "$work/build" -j2 >"$work/build.log"

# Both programs on the same OpenBLAS kernels: hfuse picks the CPU's own set
# where OpenBLAS would fall back to Prescott's (cpu_executor.h), a program
# that links hfuse gets what OpenBLAS picks, and products sum in the order
# of the kernel set that computes them.
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Prescott}
model="$src/examples/ranking_small.onnx"
"$hfuse" run "$model" --seed 3 --save-inputs "$work/in.npz" >"$work/want.txt"
"$work/build/cpp_session" "$model" "$work/in.npz" >"$work/got.txt"
cat "$work/got.txt"
grep -q '^input features: float32, rank 2$' "$work/got.txt"
grep -q '^fused: [0-9]* ops -> [0-9]* ops, 3 groups$' "$work/got.txt"
# Each output line of `hfuse run` (name: dtype [shape] sum=... hash=...).
while read -r line; do
  grep -qxF "$line" "$work/got.txt" || { echo "missing: $line"; exit 1; }
done < <(grep ' hash=' "$work/want.txt")
grep -q "^bad feed: input 'features': shape \[1\], the model wants \[64, 256\]$" "$work/got.txt"
echo "cpp_example: PASS"
