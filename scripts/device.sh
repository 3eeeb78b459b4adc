#!/usr/bin/env bash
# On the GPU machine (one H200): builds hfuse with the CUDA backend (16
# cores), runs the GPU tests, then the benchmarks, in one call. Results go
# to $OUT (the device tool's output folder) or out/device.
#
#   bash scripts/device.sh [tests|bench|all]      (SHARED= the shared/ folder)
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
SHARED=${SHARED:-$(pwd)/../shared}
OUT=${OUT:-$(pwd)/out/device}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"

# The GPU machine's image has no OpenBLAS: the CPU reference uses its plain loop there.
cmake -S . -B build-device -DCMAKE_BUILD_TYPE=Release -DHFUSE_WERROR=ON -DHFUSE_CUDA=ON \
  -DHFUSE_REQUIRE_BLAS=OFF -DHFUSE_REQUIRE_ONNX=OFF -DHFUSE_BUILD_BENCH=OFF -DHFUSE_SHARED_DIR="$SHARED" >"$OUT/cmake.log" 2>&1 \
  || { tail -30 "$OUT/cmake.log"; exit 1; }
cmake --build build-device -j16 --target hfuse cuda_executor_test >"$OUT/build.log" 2>&1 \
  || { grep -E "error" -A5 "$OUT/build.log" | head -60; exit 1; }

status=0
if [[ $what == tests || $what == all ]]; then
  (cd build-device && ctest -L gpu --output-on-failure --timeout 1200) >"$OUT/gpu_tests.log" 2>&1 || status=1
  grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/gpu_tests.log" | tail -20
  grep -E -A6 "Failure$" "$OUT/gpu_tests.log" | head -80
fi

if [[ $what == bench || $what == all ]]; then
  : >"$OUT/bench.log"
  for g in "$SHARED"/bench/towers_*.json; do
    ./build-device/hfuse bench "$g" ${PROFILE:+--profile} --json "$OUT/$(basename "$g" .json).bench.json" >>"$OUT/bench.log" 2>&1 || status=1
  done
  tmp=$(mktemp -d)
  for t in 8 16 32 64 128; do
    python3 scripts/gen_gemm_group.py --members $t --rows 2048 --mixed -o "$tmp/mixed_$t.json"
    python3 scripts/gen_gemm_group.py --members $t --rows 256 --k 128 --n 128 -o "$tmp/uniform_$t.json"
    ./build-device/hfuse bench "$tmp/mixed_$t.json" --json "$OUT/gemm_mixed_T$t.bench.json" >>"$OUT/bench.log" 2>&1 || status=1
    ./build-device/hfuse bench "$tmp/uniform_$t.json" --grouped-too --json "$OUT/gemm_uniform_T$t.bench.json" >>"$OUT/bench.log" 2>&1 || status=1
  done
  if [[ -f "$SHARED/bench/peer_torch.py" ]]; then
    python3 "$SHARED/bench/peer_torch.py" "$OUT/peers_same_call.json" "$SHARED"/bench/towers_*.json --no-compile >"$OUT/peers.log" 2>&1 || status=1
  fi
  cat "$OUT/bench.log"
fi
# Everything in one file: the device tool brings back at most 8.
# The rest moves three folders down, where the tool does not look.
(cd "$OUT" && tar czf /tmp/device_results.tgz . && mkdir -p all/of/it && \
  find . -maxdepth 1 -type f -exec mv {} all/of/it/ \; && mv /tmp/device_results.tgz .) 2>/dev/null
exit $status
