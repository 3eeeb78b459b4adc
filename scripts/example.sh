#!/usr/bin/env bash
# Installs dependencies, builds, and fuses the bundled example graph.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
mkdir -p out
./build/hfuse fuse examples/towers_small.json -o out/towers_small.fused.json --report out/towers_small.report.json
echo "fused graph: out/towers_small.fused.json   report: out/towers_small.report.json"
