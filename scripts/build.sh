#!/usr/bin/env bash
# Configures and builds hfuse into build/ (Release, warnings as errors).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DHFUSE_WERROR=ON -DHFUSE_PYTHON=ON >/dev/null
cmake --build build -j"$(nproc)"
