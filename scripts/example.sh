#!/usr/bin/env bash
# Installs what building hfuse needs, builds the hfuse tool alone (in
# build-example/), and fuses the bundled examples (graph JSON, ONNX).
#
# The CUDA backend is left out unless HFUSE_CUDA=ON is set or a GPU is
# present (then setup.sh installs CUTLASS's headers too); the tests, the
# benchmarks and the Python module are scripts/test.sh's.
set -euo pipefail
cd "$(dirname "$0")/.."
cuda=${HFUSE_CUDA:-}
if [[ -z $cuda ]]; then
  cuda=OFF
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && cuda=ON
fi
if [[ $cuda == ON ]]; then
  bash scripts/setup.sh
else
  bash scripts/setup.sh build
fi
cmake -S . -B build-example -DCMAKE_BUILD_TYPE=Release -DHFUSE_CUDA="$cuda" -DHFUSE_BUILD_TESTS=OFF \
  -DHFUSE_BUILD_BENCH=OFF -DHFUSE_PYTHON=OFF >/dev/null
cmake --build build-example --target hfuse -j"$(nproc)"
mkdir -p out
./build-example/hfuse fuse examples/towers_small.json -o out/towers_small.fused.json --report out/towers_small.report.json
echo "fused graph: out/towers_small.fused.json   report: out/towers_small.report.json"
# The ONNX example (scripts/make_example_onnx.py made it): a PyTorch ranking
# model in, a fused ONNX model (group ops in domain ai.hfuse) out.
./build-example/hfuse fuse examples/ranking_small.onnx -o out/ranking_small.fused.onnx --report out/ranking_small.report.json
echo "fused model: out/ranking_small.fused.onnx   report: out/ranking_small.report.json"
