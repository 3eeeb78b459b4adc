#!/usr/bin/env bash
# Builds and runs one libFuzzer target (fuzz/) under ASan + UBSan, every
# report fatal (-fno-sanitize-recover), in build-asan/ (clang-14; the CUDA
# backend and the benchmarks are left out).
#
#   bash scripts/fuzz.sh TARGET [SECONDS]   TARGET: graph_json, onnx_import, npz, pipeline
#   RUNS=1000000 bash scripts/fuzz.sh TARGET   stop after RUNS executions instead
#
# SECONDS defaults to 60. The corpus grows in out/fuzz/corpus/TARGET, seeded
# from ../shared/conformance and examples/ (graph JSON and ONNX) and from
# fuzz/seeds/TARGET (fuzz/make_seeds.py writes those); a crash, hang, leak or
# sanitizer report stops the run with exit 1 and leaves the input in
# out/fuzz/crashes/TARGET. The last line is libFuzzer's summary (executions,
# coverage). FUZZ_ARGS adds libFuzzer flags; NO_BUILD=1 skips the build step.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: fuzz.sh graph_json|onnx_import|npz|pipeline [SECONDS]}
seconds=${2:-60}
BUILD=${BUILD:-build-asan}
SHARED=${SHARED:-$(pwd)/../shared}
case $target in
  graph_json|onnx_import|npz|pipeline) ;;
  *) echo "fuzz.sh: unknown target '$target' (graph_json, onnx_import, npz, pipeline)" >&2; exit 2 ;;
esac

if [[ ! -f $BUILD/CMakeCache.txt ]]; then
  CXX=clang++-14 CC=clang-14 cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DHFUSE_SANITIZE=ON -DHFUSE_FUZZ=ON -DHFUSE_CUDA=OFF -DHFUSE_BUILD_BENCH=OFF \
    -DHFUSE_SHARED_DIR="$SHARED" >/dev/null
fi
[[ -n ${NO_BUILD:-} ]] || cmake --build "$BUILD" -j"$(nproc)" --target "${target}_fuzz" >/dev/null

corpus=out/fuzz/corpus/$target
crashes=out/fuzz/crashes/$target
mkdir -p "$corpus" "$crashes"
if [[ -z $(ls -A "$corpus") ]]; then
  case $target in
    graph_json|pipeline)
      # Small graphs only: a seed of hundreds of KB makes every execution slow.
      find "$SHARED/conformance" examples -name '*.json' ! -name '*.expected.json' -size -8k \
        -exec sh -c 'for f; do cp "$f" "$0/$(echo "$f" | tr / _)"; done' "$corpus" {} + ;;
    onnx_import) cp fuzz/seeds/onnx_import/* examples/*.onnx "$corpus"/ ;;
    npz) cp fuzz/seeds/npz/* "$corpus"/ ;;
  esac
fi
flags=(-timeout=25 -rss_limit_mb=2560 -print_final_stats=1 -artifact_prefix="$crashes/")
case $target in
  graph_json) flags+=(-dict=fuzz/graph_json.dict -max_len=8192) ;;
  # Entropic scheduling spent half of each pipeline execution updating the
  # frequencies of its ~30,000 features: the classic schedule runs it 2.4x
  # as fast.
  pipeline) flags+=(-dict=fuzz/graph_json.dict -max_len=8192 -entropic=0) ;;
  onnx_import) flags+=(-max_len=262144) ;;  # examples/ranking_small.onnx whole
  npz) flags+=(-max_len=4096) ;;
esac
if [[ -n ${RUNS:-} ]]; then flags+=(-runs="$RUNS"); else flags+=(-max_total_time="$seconds"); fi
# Leaks are findings; a short symbolised trace is enough. The pipeline
# target records 5 frames per allocation instead of 30 (18% of its time went
# to unwinding; a finding's input reruns with full stacks).
asan=detect_leaks=1:abort_on_error=1:symbolize=1
[[ $target != pipeline ]] || asan+=:malloc_context_size=5
export ASAN_OPTIONS=${ASAN_OPTIONS:-$asan}
# One thread: OpenBLAS's spinning workers slowed the pipeline target's GEMMs
# on a shared machine.
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# shellcheck disable=SC2086
exec "$BUILD/fuzz/${target}_fuzz" "${flags[@]}" ${FUZZ_ARGS:-} "$corpus"
