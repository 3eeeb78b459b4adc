#!/usr/bin/env bash
# Installs dependencies, builds, and fuses the bundled examples (graph JSON, ONNX).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
mkdir -p out
./build/hfuse fuse examples/towers_small.json -o out/towers_small.fused.json --report out/towers_small.report.json
echo "fused graph: out/towers_small.fused.json   report: out/towers_small.report.json"
# The ONNX example (scripts/make_example_onnx.py made it): a PyTorch ranking
# model in, a fused ONNX model (group ops in domain ai.hfuse) out.
./build/hfuse fuse examples/ranking_small.onnx -o out/ranking_small.fused.onnx --report out/ranking_small.report.json
echo "fused model: out/ranking_small.fused.onnx   report: out/ranking_small.report.json"
