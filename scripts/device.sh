#!/usr/bin/env bash
# On the GPU machine (one H200): builds hfuse with the CUDA backend (16
# cores), runs the GPU tests, then the benchmarks, in one call. Results go
# to $OUT (the device tool's output folder) or out/device.
#
#   bash scripts/device.sh [build|tests|bench|all]
#
# SHARED= the shared/ folder (default ../shared); BUILD= the build folder
# (default build-device). The GPU machine reaches no package registry, so
# CUTLASS's headers come from the nvidia-cutlass 4.2.0.0 wheel brought along
# with the tree: CUTLASS_WHEEL= its path (default .whl/nvidia_cutlass-4.2.0.0-*.whl),
# unpacked once into $BUILD/cutlass-wheel (a wheel is a zip: no pip needed).
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
SHARED=${SHARED:-$(pwd)/../shared}
OUT=${OUT:-$(pwd)/out/device}
BUILD=${BUILD:-build-device}
mkdir -p "$OUT" "$BUILD"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
start=$SECONDS

cutlass_args=()
if [[ -z ${CUTLASS_INCLUDE_DIR:-} ]]; then
  wheel=${CUTLASS_WHEEL:-$(ls .whl/nvidia_cutlass-4.2.0.0-*.whl 2>/dev/null | head -1)}
  if [[ -n $wheel && ! -f $BUILD/cutlass-wheel/cutlass_library/source/include/cutlass/cutlass.h ]]; then
    python3 -m zipfile -e "$wheel" "$BUILD/cutlass-wheel" || { echo "device: cannot unpack $wheel"; exit 1; }
  fi
  CUTLASS_INCLUDE_DIR=$(pwd)/$BUILD/cutlass-wheel/cutlass_library/source/include
  [[ $BUILD = /* ]] && CUTLASS_INCLUDE_DIR=$BUILD/cutlass-wheel/cutlass_library/source/include
fi
cutlass_args=(-DCUTLASS_INCLUDE_DIR="$CUTLASS_INCLUDE_DIR")

# The GPU machine's image has no OpenBLAS: the CPU reference uses its plain loop there.
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DHFUSE_WERROR=ON -DHFUSE_CUDA=ON \
  -DHFUSE_REQUIRE_BLAS=OFF -DHFUSE_REQUIRE_ONNX=OFF -DHFUSE_BUILD_BENCH=OFF -DHFUSE_SHARED_DIR="$SHARED" \
  "${cutlass_args[@]}" >"$OUT/cmake.log" 2>&1 \
  || { tail -30 "$OUT/cmake.log"; exit 1; }
cmake --build "$BUILD" -j16 --target hfuse cuda_executor_test >"$OUT/build.log" 2>&1 \
  || { grep -E "error" -A5 "$OUT/build.log" | head -60; exit 1; }
echo "device: built in $((SECONDS - start)) s"
[[ $what == build ]] && exit 0

status=0
if [[ $what == tests || $what == all ]]; then
  t0=$SECONDS
  (cd "$BUILD" && ctest -L gpu --output-on-failure --timeout 1200) >"$OUT/gpu_tests.log" 2>&1 || status=1
  grep -E "tests passed|tests failed|Failed|\*\*\*" "$OUT/gpu_tests.log" | tail -20
  grep -E -A6 "Failure$" "$OUT/gpu_tests.log" | head -80
  echo "device: GPU tests took $((SECONDS - t0)) s"
fi

if [[ $what == bench || $what == all ]]; then
  t0=$SECONDS
  : >"$OUT/bench.log"
  # The towers graphs: unfused, fused with the seed's rules and with hfuse's,
  # and with each group GEMM path forced; the profile of each launch for the
  # largest.
  for g in "$SHARED"/bench/towers_*.json; do
    profile=()
    [[ $g == *towers_mixed_T64_M2048* || -n ${PROFILE:-} ]] && profile=(--profile)
    ./"$BUILD"/hfuse bench "$g" "${profile[@]}" --gemm-paths --json "$OUT/$(basename "$g" .json).bench.json" >>"$OUT/bench.log" 2>&1 || status=1
  done
  # The grouped-GEMM micro-benchmark, each group GEMM path forced as well
  # (cuBLAS grouped, CUTLASS at either tile: the measurement behind the tile rule).
  tmp=$(mktemp -d)
  for t in 8 16 32 64 128; do
    python3 scripts/gen_gemm_group.py --members $t --rows 2048 --mixed -o "$tmp/mixed_$t.json"
    python3 scripts/gen_gemm_group.py --members $t --rows 2048 --mixed --op gemm_rcr_bias_relu -o "$tmp/relu_$t.json"
    python3 scripts/gen_gemm_group.py --members $t --rows 256 --k 128 --n 128 -o "$tmp/uniform_$t.json"
    ./"$BUILD"/hfuse bench "$tmp/mixed_$t.json" --rules hfuse --gemm-paths --json "$OUT/gemm_mixed_T$t.bench.json" >>"$OUT/bench.log" 2>&1 || status=1
    ./"$BUILD"/hfuse bench "$tmp/relu_$t.json" --rules hfuse --gemm-paths --json "$OUT/gemm_relu_T$t.bench.json" >>"$OUT/bench.log" 2>&1 || status=1
    ./"$BUILD"/hfuse bench "$tmp/uniform_$t.json" --rules hfuse --grouped-too --json "$OUT/gemm_uniform_T$t.bench.json" >>"$OUT/bench.log" 2>&1 || status=1
  done
  if [[ -f "$SHARED/bench/peer_torch.py" ]]; then
    python3 "$SHARED/bench/peer_torch.py" "$OUT/peers_same_call.json" "$SHARED"/bench/towers_*.json --no-compile >"$OUT/peers.log" 2>&1 || status=1
  fi
  grep -v -E "^ +profile|GB/s" "$OUT/bench.log"; grep -E "GB/s" "$OUT/bench.log" | head -12
  echo "device: benchmarks took $((SECONDS - t0)) s"
fi
# Everything in one file: the device tool brings back at most 8.
# The rest moves three folders down, where the tool does not look.
(cd "$OUT" && tar czf /tmp/device_results.tgz . && mkdir -p all/of/it && \
  find . -maxdepth 1 -type f -exec mv {} all/of/it/ \; && mv /tmp/device_results.tgz .) 2>/dev/null
exit $status
