#!/usr/bin/env bash
# The sanitizer job of CI: builds hfuse, the unit and bad-input tests and the
# fuzz targets with clang-14 under ASan + UBSan (-fno-sanitize-recover: any
# report fails), in build-asan/, then runs those tests and each fuzz target
# for a short smoke run. Only what the run needs is built (no CUDA, no
# benchmarks, no Python-driven tests, and not the long random sweeps the
# Release job already runs).
#
#   bash scripts/sanitize.sh            # FUZZ_SECONDS=60 per fuzz target
#   FUZZ_SECONDS=0 bash scripts/sanitize.sh   # tests only
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-asan}
SHARED=${SHARED:-$(pwd)/../shared}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
bash scripts/setup.sh >/dev/null  # clang-14, libclang-rt-14-dev, libomp-14-dev
tests=(permute_test graph_test graph_json_test graph_json_paths_test bad_input_test hostile_input_test file_test
       canonical_order_test fuse_group_ops_test cli_test cpu_executor_test
       fused_equals_unfused_test strided_views_test fuse_mm_elementwise_test einsum_to_matmul_test
       onnx_import_test
       onnx_hostile_test)
fuzzers=(graph_json onnx_import npz pipeline)

CXX=clang++-14 CC=clang-14 cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DHFUSE_SANITIZE=ON -DHFUSE_FUZZ=ON -DHFUSE_CUDA=OFF -DHFUSE_BUILD_BENCH=OFF \
  -DHFUSE_SHARED_DIR="$SHARED" >/dev/null
targets=(hfuse hfuse-gen plan_check "${tests[@]}")
for f in "${fuzzers[@]}"; do targets+=("${f}_fuzz"); done
cmake --build "$BUILD" -j"$(nproc)" --target "${targets[@]}"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:symbolize=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# ctest names tests by suite, not by executable: run each executable's tests.
status=0
# The fused-equals-unfused sweep takes the AITemplate and edge cases here;
# its 150 random graphs (and the scale case) run in the Release job and, as
# generated graphs, in the pipeline fuzz target: under ASan they alone would
# take a quarter of CI's time.
declare -A filter=([fused_equals_unfused_test]='-*random_case*:*scale*')
for t in "${tests[@]}"; do
  echo "sanitize: $t"
  "$BUILD/tests/$t" --gtest_brief=1 ${filter[$t]:+--gtest_filter="${filter[$t]}"} >"$BUILD/$t.log" 2>&1 \
    || { status=1; tail -40 "$BUILD/$t.log"; }
  tail -1 "$BUILD/$t.log"
done
# The CUDA backend's host-side plan (constants, views, memory), replayed
# against the CPU reference on the examples.
for m in examples/ranking_small.onnx examples/towers_small.json; do
  echo "sanitize: plan_check $m"
  "$BUILD/tests/plan_check" "$m" >"$BUILD/plan_check.log" 2>&1 || { status=1; tail -20 "$BUILD/plan_check.log"; }
  tail -1 "$BUILD/plan_check.log"
done
((status == 0)) || { echo "sanitize: tests failed under ASan/UBSan" >&2; exit 1; }

if ((FUZZ_SECONDS > 0)); then
  for f in "${fuzzers[@]}"; do
    echo "sanitize: fuzz $f for ${FUZZ_SECONDS}s"
    BUILD=$BUILD bash scripts/fuzz.sh "$f" "$FUZZ_SECONDS" >"$BUILD/fuzz_$f.log" 2>&1 \
      || { tail -60 "$BUILD/fuzz_$f.log"; echo "sanitize: fuzz $f found a problem" >&2; exit 1; }
    grep -E "^#[0-9]+.*DONE|stat::number_of_executed_units|stat::peak_rss_mb" "$BUILD/fuzz_$f.log" | tr '\n' ' '
    echo
  done
fi
echo "sanitize: all passed"
