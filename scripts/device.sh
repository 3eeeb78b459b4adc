#!/usr/bin/env bash
# On the GPU machine (one H200): builds hfuse with the CUDA backend (16
# cores), runs the GPU tests, then the benchmarks, in one call. Results go
# to $OUT (the device tool's output folder) or out/device.
#
#   bash scripts/device.sh [build|tests|python|bench|real|all|models]   (or a list: tests,real)
#
# SHARED= the shared/ folder (default ../shared); BUILD= the build folder
# (default build-device, relative or absolute); BIN= a folder holding an
# hfuse and a cuda_executor_test built elsewhere for sm_90a (then nothing is
# built); DEB_DIR= the Debian packages' folder (default .deb); REAL_ARGS=
# more arguments of bench/real_models.py (`real`: that alone, without the
# towers and micro-benchmarks of `bench`). The GPU machine reaches no
# package registry:
#   - CUTLASS's headers come from the nvidia-cutlass 4.2.0.0 wheel brought
#     along with the tree: CUTLASS_WHEEL= its path (default
#     .whl/nvidia_cutlass-4.2.0.0-*.whl), unpacked once into
#     $BUILD/cutlass-wheel (a wheel is a zip: no pip needed);
#   - libonnx and protobuf (and OpenBLAS), which its image lacks, are
#     Debian's packages brought along in .deb/ (`apt-get download libonnx1
#     libonnx-dev libonnxifi libprotobuf32 libprotobuf-dev
#     libprotobuf-lite32` here), unpacked into / first, so that hfuse builds
#     with its ONNX frontend; without them the build goes on without ONNX;
#   - torch-rechub and pytorch-widedeep, for the models and PyTorch's
#     times, are wheels in .whl/ (pip install --no-deps --target).
# `python` (part of `tests` too, unless SKIP_PYTHON=1) installs the Python module with
# `pip install .` (CUDA on, into the same build folder, so the libraries
# built for hfuse are reused: offline, --no-build-isolation; building the
# extension needs the -dev packages in $DEB_DIR as well: libonnx-dev
# libonnxifi libprotobuf-dev libprotobuf-lite32 zlib1g-dev libfmt-dev
# nlohmann-json3-dev libcli11-dev libopenblas-pthread-dev, and for the
# gtests of `tests` libgtest-dev libgmock-dev), then runs tests/python/test_gpu.py and
# test_hfuse.py against the installed package (HFUSE_REQUIRE_GPU=1: a
# missing GPU fails, not skips) and bench/session_overhead.py --device cuda;
# logs: pip_install.log, python_tests.log, session_overhead.log.
# `models` exports the models that need PyTorch 2.11 (pytorch-widedeep's,
# both exporters) into $OUT/models.tgz; `tests` runs the GPU tests (the
# executor's gtest, check_gpu_models.py on every ONNX model, the rechub
# models as the TorchScript exporter of this PyTorch writes them too);
# `bench` the towers, the grouped-GEMM micro-benchmark and the real models
# against PyTorch (bench/real_models.py), in this call.
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
want() { [[ $what == all || ,$what, == *,$1,* ]]; }
SHARED=${SHARED:-$(pwd)/../shared}
OUT=${OUT:-$(pwd)/out/device}
BUILD=${BUILD:-build-device}
JOBS=${JOBS:-16}  # compile jobs (the GPU machine's 16 cores)
[[ $BUILD = /* ]] || BUILD=$(pwd)/$BUILD
mkdir -p "$OUT" "$BUILD"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
start=$SECONDS
export PYTHONUNBUFFERED=1

# The Python packages brought along as wheels, for the models and the peers.
if compgen -G ".whl/*.whl" >/dev/null; then
  for w in .whl/torch_rechub-*.whl .whl/pytorch_widedeep-*.whl; do
    [[ -f $w ]] && python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$w" 2>/dev/null
  done
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

if [[ $what == models ]]; then
  status=0
  for e in dynamo torchscript; do
    python3 scripts/make_widedeep_models.py "$OUT/models/widedeep_$e" --exporter $e \
      >"$OUT/models_$e.log" 2>&1 || status=1
    tail -8 "$OUT/models_$e.log"
  done
  # Without their weights (seeded ones go back in for the tests), so that they come back and fit the repo.
  for f in "$OUT"/models/*/*.onnx; do
    python3 scripts/onnx_skeleton.py strip "$f" "$f.skel" && mv "$f.skel" "$f" || status=1
  done
  tar czf "$OUT/models.tgz" -C "$OUT" models && rm -rf "$OUT/models"
  echo "device: models exported in $((SECONDS - start)) s"
  exit $status
fi

have_debs=OFF
DEB_DIR=${DEB_DIR:-.deb}
if compgen -G "$DEB_DIR/*.deb" >/dev/null; then
  for f in "$DEB_DIR"/*.deb; do
    # the image's own libgfortran, where it has one, stays
    [[ $f == *libgfortran5* && -e /usr/lib/x86_64-linux-gnu/libgfortran.so.5 ]] && continue
    dpkg -x "$f" / || { echo "device: cannot unpack $f"; exit 1; }
  done
  echo /usr/lib/x86_64-linux-gnu/openblas-pthread >/etc/ld.so.conf.d/hfuse-openblas.conf
  ldconfig
  # zlib1g-dev's libz.so names Debian's libz.so.1.2.13, which the image may
  # lack (it has its own libz.so.1): link it to the image's, and drop the
  # static libz.a, which is not position-independent and breaks the
  # extension's link when the linker falls back to it.
  z=/usr/lib/x86_64-linux-gnu/libz.so
  if [[ -L $z && ! -e $z ]]; then
    image_z=$(ldconfig -p | awk '/libz\.so\.1 .*x86-64/ {print $NF; exit}')
    [[ -n $image_z ]] && ln -sf "$image_z" "$z"
  fi
  rm -f /usr/lib/x86_64-linux-gnu/libz.a
  have_debs=ON
fi

# One generator for device.sh's build and pip's (scikit-build-core takes
# CMAKE_GENERATOR), which share $BUILD.
export CMAKE_GENERATOR=${CMAKE_GENERATOR:-Unix Makefiles}
if [[ -z ${CUTLASS_INCLUDE_DIR:-} ]]; then
  wheel=${CUTLASS_WHEEL:-$(ls .whl/nvidia_cutlass-4.2.0.0-*.whl 2>/dev/null | head -1)}
  if [[ -n $wheel && ! -f $BUILD/cutlass-wheel/cutlass_library/source/include/cutlass/cutlass.h ]]; then
    python3 -m zipfile -e "$wheel" "$BUILD/cutlass-wheel" || { echo "device: cannot unpack $wheel"; exit 1; }
  fi
  CUTLASS_INCLUDE_DIR=$BUILD/cutlass-wheel/cutlass_library/source/include
fi
if [[ -n ${BIN:-} ]]; then
  HFUSE=$BIN/hfuse
  GTEST=$BIN/cuda_executor_test
  SESSION_TEST=$BIN/session_test
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
else
  HFUSE=$BUILD/hfuse
  GTEST=$BUILD/tests/cuda_executor_test
  SESSION_TEST=$BUILD/tests/session_test
  # The gtests only where they run (they need GTest); HFUSE_BUILD_TESTS is
  # given either way, since a pip install into $BUILD turns it off.
  targets=(hfuse)
  build_tests=OFF
  if want tests || [[ $what == build ]]; then
    targets+=(cuda_executor_test session_test)
    build_tests=ON
  fi
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DHFUSE_WERROR=ON -DHFUSE_CUDA=ON \
    -DHFUSE_REQUIRE_BLAS=$have_debs -DHFUSE_REQUIRE_ONNX=$have_debs -DHFUSE_BUILD_BENCH=OFF \
    -DHFUSE_BUILD_TESTS=$build_tests -DCMAKE_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread \
    -DHFUSE_SHARED_DIR="$SHARED" -DCUTLASS_INCLUDE_DIR="$CUTLASS_INCLUDE_DIR" >"$OUT/cmake.log" 2>&1 \
    || { tail -30 "$OUT/cmake.log"; exit 1; }
  cmake --build "$BUILD" -j"$JOBS" --target "${targets[@]}" >"$OUT/build.log" 2>&1 \
    || { grep -E "error" -A5 "$OUT/build.log" | head -60; exit 1; }
  echo "device: built in $((SECONDS - start)) s"
fi
[[ $what == build ]] && exit 0

status=0
if want tests; then
  t0=$SECONDS
  "$GTEST" >"$OUT/gpu_tests.log" 2>&1 || status=1
  grep -E "PASSED|FAILED" "$OUT/gpu_tests.log" | head -20
  if [[ -x $SESSION_TEST ]]; then
    "$SESSION_TEST" >"$OUT/session_tests.log" 2>&1 || status=1
    grep -E "PASSED|FAILED|SKIPPED \]" "$OUT/session_tests.log" | head -20
  fi
  dirs=(tests/onnx/dynamo tests/onnx/widedeep/dynamo tests/onnx/widedeep/torchscript)
  # torch-rechub's models as this PyTorch's TorchScript exporter writes them.
  if python3 -c "import torch_rechub" 2>/dev/null; then
    python3 scripts/make_rechub_models.py /tmp/rechub_torchscript --exporter torchscript --opset 17 \
      >"$OUT/rechub_torchscript.log" 2>&1 && dirs+=(/tmp/rechub_torchscript)
  fi
  # The hand-written pattern models (tensordot and einsum attention, kernel-1
  # Conv1d heads and CIN, vector cross layers), by both of this PyTorch's exporters.
  for e in dynamo torchscript; do
    python3 scripts/make_canonical_models.py /tmp/canonical_$e --exporter $e >"$OUT/canonical_$e.log" 2>&1 \
      && dirs+=(/tmp/canonical_$e)
  done
  python3 tests/onnx/check_gpu_models.py "$HFUSE" "${dirs[@]}" >"$OUT/gpu_models.log" 2>&1 || status=1
  echo "device: check_gpu_models: $(grep -c '^ok' "$OUT/gpu_models.log") ok, $(grep -c '^FAIL' "$OUT/gpu_models.log") failed"
  grep '^FAIL' "$OUT/gpu_models.log" | cut -c1-300 | head -30
  echo "device: GPU tests took $((SECONDS - t0)) s"
fi

if want python || { want tests && [[ -z ${SKIP_PYTHON:-} ]]; }; then
  t0=$SECONDS
  # `pip install .`, CUDA on, offline, into $BUILD (scikit-build-core
  # reconfigures it for the extension; the libraries built above are reused).
  PIP_BREAK_SYSTEM_PACKAGES=1 CMAKE_BUILD_PARALLEL_LEVEL=$JOBS CUDACXX=${CUDACXX:-/usr/local/cuda/bin/nvcc} \
    python3 -m pip install -v --no-build-isolation --no-deps --no-index . \
      --config-settings=build-dir="$BUILD" --config-settings=cmake.define.HFUSE_CUDA=ON \
      --config-settings=cmake.define.CUTLASS_INCLUDE_DIR="$CUTLASS_INCLUDE_DIR" \
      --config-settings=cmake.define.HFUSE_REQUIRE_BLAS=$have_debs --config-settings=cmake.define.HFUSE_REQUIRE_ONNX=$have_debs \
      --config-settings=cmake.define.CMAKE_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread \
      --config-settings=cmake.define.HFUSE_SHARED_DIR="$SHARED" >"$OUT/pip_install.log" 2>&1
  if [[ $? -ne 0 ]]; then
    status=1
    echo "device: pip install . failed:"; grep -E "error|Error" -A3 "$OUT/pip_install.log" | head -40
  else
    echo "device: pip install . took $((SECONDS - t0)) s"
    # From outside the tree: the installed package, not python/hfuse.
    (cd / && python3 -c "import hfuse; print('device: hfuse', hfuse.__file__, hfuse.get_available_providers(), hfuse.cuda_available())") \
      | tee "$OUT/python_providers.txt"
    HFUSE_REQUIRE_GPU=1 HFUSE_SOURCE_DIR=$(pwd) HFUSE_TOOL=$HFUSE \
      python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_gpu.py tests/python/test_hfuse.py \
      >"$OUT/python_tests.log" 2>&1 || status=1
    tail -25 "$OUT/python_tests.log"
    python3 bench/session_overhead.py --device cuda >"$OUT/session_overhead.log" 2>&1 || status=1
    cat "$OUT/session_overhead.log"
  fi
  echo "device: Python on the GPU took $((SECONDS - t0)) s"
fi

if want bench; then
  t0=$SECONDS
  : >"$OUT/bench.log"
  if [[ -d $SHARED/bench ]]; then
    # The towers graphs: unfused, fused with the seed's rules and with hfuse's,
    # and with each group GEMM path forced; the profile of each launch for the
    # largest.
    for g in "$SHARED"/bench/towers_*.json; do
      profile=()
      [[ $g == *towers_mixed_T64_M2048* || -n ${PROFILE:-} ]] && profile=(--profile)
      "$HFUSE" bench "$g" "${profile[@]}" --gemm-paths --json "$OUT/$(basename "$g" .json).bench.json" >>"$OUT/bench.log" 2>&1 || status=1
    done
    if [[ -f "$SHARED/bench/peer_torch.py" ]]; then
      python3 "$SHARED/bench/peer_torch.py" "$OUT/peers_same_call.json" "$SHARED"/bench/towers_*.json --no-compile >"$OUT/peers.log" 2>&1 || status=1
    fi
  fi
  # The grouped-GEMM micro-benchmark, each group GEMM path forced as well
  # (cuBLAS grouped, CUTLASS at either tile: the measurement behind the tile rule).
  tmp=$(mktemp -d)
  for t in 8 16 32 64 128; do
    python3 scripts/gen_gemm_group.py --members $t --rows 2048 --mixed -o "$tmp/mixed_$t.json"
    python3 scripts/gen_gemm_group.py --members $t --rows 2048 --mixed --op gemm_rcr_bias_relu -o "$tmp/relu_$t.json"
    python3 scripts/gen_gemm_group.py --members $t --rows 256 --k 128 --n 128 -o "$tmp/uniform_$t.json"
    python3 scripts/gen_gemm_group.py --members $t --rows 2048 --mixed --dtype float32 --op gemm_rcr_bias_relu -o "$tmp/f32_$t.json"
    "$HFUSE" bench "$tmp/f32_$t.json" --rules hfuse --gemm-paths --json "$OUT/gemm_f32_T$t.bench.json" >>"$OUT/bench.log" 2>&1 || status=1
    "$HFUSE" bench "$tmp/mixed_$t.json" --rules hfuse --gemm-paths --json "$OUT/gemm_mixed_T$t.bench.json" >>"$OUT/bench.log" 2>&1 || status=1
    "$HFUSE" bench "$tmp/relu_$t.json" --rules hfuse --gemm-paths --json "$OUT/gemm_relu_T$t.bench.json" >>"$OUT/bench.log" 2>&1 || status=1
    "$HFUSE" bench "$tmp/uniform_$t.json" --rules hfuse --grouped-too --json "$OUT/gemm_uniform_T$t.bench.json" >>"$OUT/bench.log" 2>&1 || status=1
  done
  grep -v -E "^ +profile|GB/s" "$OUT/bench.log"; grep -E "GB/s" "$OUT/bench.log" | head -12
  # The real models against PyTorch (eager, CUDA graph, torch.compile), same call.
  python3 bench/real_models.py "$OUT/real" --hfuse "$HFUSE" \
    --profile rechub:MMOE,rechub:DeepFM,rechub:FiBiNet,widedeep:SAINT >"$OUT/real_models.log" 2>&1 || status=1
  tail -45 "$OUT/real_models.log"
  echo "device: benchmarks took $((SECONDS - t0)) s"
fi
if [[ ,$what, == *,real,* ]]; then
  t0=$SECONDS
  # shellcheck disable=SC2086  # REAL_ARGS is a list of arguments
  python3 bench/real_models.py "$OUT/real" --hfuse "$HFUSE" ${REAL_ARGS:-} >"$OUT/real_models.log" 2>&1 || status=1
  tail -50 "$OUT/real_models.log"
  echo "device: real models took $((SECONDS - t0)) s"
fi
# Everything in one file: the device tool brings back at most 8.
# The rest moves three folders down, where the tool does not look.
(cd "$OUT" && tar czf /tmp/device_results.tgz --exclude=./real/models --exclude="*.npz" . && mkdir -p all/of/it && \
  find . -maxdepth 1 -type f -exec mv {} all/of/it/ \; && mv /tmp/device_results.tgz .) 2>/dev/null
exit $status
