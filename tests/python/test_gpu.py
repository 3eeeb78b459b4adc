"""The Python module on CUDA: against onnxruntime (CPU) and against `hfuse run
--device cuda`, DLPack in and out (torch, CuPy) with the pointers checked,
IOBinding with a poisoned output buffer reused from run to run, the stream,
and the errors. Every test skips, saying why, without a CUDA device (or
without torch built with CUDA); with HFUSE_REQUIRE_GPU=1 (scripts/device.sh
sets it) a missing device fails instead, so that the GPU machine cannot
pass by skipping.

    PYTHONPATH=build/python HFUSE_TOOL=build/hfuse python3 -m pytest -rs tests/python/test_gpu.py

Models: examples/ranking_small.onnx and examples/towers_small.json, and
torch-rechub's MMOE and DeepFM (tests/onnx/dynamo, weight-stripped: seeded
weights go back in with scripts/onnx_skeleton.py, which needs onnx >= 1.13)
at batch 7 and 512.
"""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import hfuse

SOURCE = os.path.abspath(os.environ.get("HFUSE_SOURCE_DIR",
                                        os.path.join(os.path.dirname(__file__), "..", "..")))
RANKING = os.path.join(SOURCE, "examples", "ranking_small.onnx")
TOWERS = os.path.join(SOURCE, "examples", "towers_small.json")
DYNAMO = os.path.join(SOURCE, "tests", "onnx", "dynamo")
TOOL = os.environ.get("HFUSE_TOOL")
sys.path.insert(0, os.path.join(SOURCE, "tests", "onnx"))

CUDA, WHY = hfuse.cuda_available()
REQUIRED = os.environ.get("HFUSE_REQUIRE_GPU") == "1"


def _torch_why():
    try:
        import torch
    except ImportError as e:
        return None, f"no torch ({e})"
    if not torch.cuda.is_available():
        return None, f"torch {torch.__version__} has no CUDA device"
    return torch, ""


torch, TORCH_WHY = _torch_why() if CUDA else (None, "")
needs_gpu = pytest.mark.skipif(not CUDA, reason=f"no CUDA device: {WHY}")
needs_torch = pytest.mark.skipif(not CUDA or torch is None,
                                 reason=f"no CUDA device: {WHY}" if not CUDA else TORCH_WHY)


def test_a_gpu_is_there_when_one_is_required():
    if not REQUIRED:
        pytest.skip("HFUSE_REQUIRE_GPU is not 1: the CUDA tests may skip here")
    assert CUDA, f"HFUSE_REQUIRE_GPU=1 but hfuse has no CUDA device: {WHY}"
    assert torch is not None, TORCH_WHY


def close(want, got, tol):
    want, got = np.asarray(want, np.float64), np.asarray(got, np.float64)
    assert want.shape == got.shape
    assert np.isfinite(got).all(), "non-finite values"
    err = np.abs(want - got).max(initial=0.0) / max(np.abs(want).max(initial=0.0), 1e-30)
    assert err <= tol, f"normalised error {err:.3g} > {tol}"


def ort_run(model, feeds):
    import onnxruntime as ort
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)


def hfuse_run(model, feeds, dims, tmp_path):
    """`hfuse run --device cuda` on these feeds: its outputs, by name."""
    if not TOOL:
        pytest.skip("HFUSE_TOOL is not set: no hfuse binary to compare with")
    inputs, outputs = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, **feeds)
    args = [a for k, v in dims.items() for a in ("--dim", f"{k}={v}")]
    r = subprocess.run([TOOL, "run", model, "--device", "cuda", "--inputs", str(inputs),
                        "-o", str(outputs)] + args, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with np.load(outputs) as z:
        return {k: z[k] for k in z.files}


def cuda_feeds(feeds):
    return {k: torch.from_numpy(np.ascontiguousarray(v)).cuda() for k, v in feeds.items()}


def ranking_input(seed):
    return np.random.default_rng(seed).standard_normal((64, 256)).astype(np.float32)


# ---- providers ------------------------------------------------------------------

@needs_gpu
def test_cuda_is_an_available_provider():
    assert hfuse.get_available_providers() == ["CUDAExecutionProvider", "CPUExecutionProvider"]
    sess = hfuse.InferenceSession(RANKING, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert sess.get_providers() == ["CUDAExecutionProvider"] and sess.device == "cuda"
    assert sess.fusion_report()["rules"] == "hfuse"


# ---- the examples ---------------------------------------------------------------

@needs_gpu
def test_ranking_numpy_in_and_out(tmp_path):
    x = ranking_input(1)
    sess = hfuse.InferenceSession(RANKING, providers=["CUDAExecutionProvider"])
    (got,) = sess.run(None, {"features": x})
    assert isinstance(got, np.ndarray) and got.dtype == np.float32 and got.shape == (64, 1)
    close(ort_run(RANKING, {"features": x})[0], got, 1e-5)
    close(hfuse_run(RANKING, {"features": x}, {}, tmp_path)["score"], got, 1e-6)


@needs_torch
def test_ranking_torch_in_and_out(tmp_path):
    x = ranking_input(2)
    sess = hfuse.InferenceSession(RANKING, providers=["CUDAExecutionProvider"])
    (out,) = sess.run(["score"], {"features": torch.from_numpy(x).cuda()})
    score = torch.from_dlpack(out)
    assert score.is_cuda and score.dtype == torch.float32 and tuple(score.shape) == (64, 1)
    close(ort_run(RANKING, {"features": x})[0], score.cpu().numpy(), 1e-5)
    close(hfuse_run(RANKING, {"features": x}, {}, tmp_path)["score"], score.cpu().numpy(), 1e-6)


@needs_torch
def test_towers_graph_json_float16_like_the_cli(tmp_path):
    """examples/towers_small.json (float16, weights fed): the inputs `hfuse
    run` drew, fed to the module as torch CUDA tensors."""
    if not TOOL:
        pytest.skip("HFUSE_TOOL is not set: no hfuse binary to compare with")
    inputs, outputs = tmp_path / "in.npz", tmp_path / "out.npz"
    r = subprocess.run([TOOL, "run", TOWERS, "--device", "cuda", "--save-inputs", str(inputs),
                        "-o", str(outputs)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with np.load(inputs) as z:
        feeds = {k: z[k] for k in z.files}
    with np.load(outputs) as z:
        want = {k: z[k] for k in z.files}
    sess = hfuse.InferenceSession(TOWERS, providers=["CUDAExecutionProvider"])
    assert sorted(feeds) == sorted(i.name for i in sess.get_inputs())
    names = [o.name for o in sess.get_outputs()]
    got = sess.run(names, cuda_feeds(feeds))
    for name, value in zip(names, got):
        t = torch.from_dlpack(value)
        assert t.dtype == torch.float16
        close(want[name], t.cpu().numpy(), 1e-3)
    # numpy in and out: the same plan, the same values.
    for name, value in zip(names, sess.run(names, feeds)):
        close(want[name], value, 1e-3)


# ---- torch-rechub's MMOE and DeepFM ---------------------------------------------

@pytest.fixture(scope="module")
def rechub(tmp_path_factory):
    """{name: (refilled model path, its NAME.json)}."""
    pytest.importorskip("onnx")
    work = tmp_path_factory.mktemp("rechub")
    out = {}
    for name in ("MMOE", "DeepFM"):
        path = str(work / f"{name}.onnx")
        r = subprocess.run([sys.executable, os.path.join(SOURCE, "scripts", "onnx_skeleton.py"),
                            "refill", os.path.join(DYNAMO, f"{name}.dynamic.onnx"), path,
                            "--seed", "5"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        out[name] = (path, os.path.join(DYNAMO, f"{name}.json"))
    return out


@needs_torch
@pytest.mark.parametrize("name", ["MMOE", "DeepFM"])
def test_rechub_models_at_two_batches(rechub, name, tmp_path):
    import onnx
    from model_inputs import feeds_for
    path, info = rechub[name]
    proto = onnx.load(path, load_external_data=False)
    batch_dim = next(d.dim_param for d in proto.graph.input[0].type.tensor_type.shape.dim)
    sess = hfuse.InferenceSession(path, providers=["CUDAExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    for batch in (7, 512):
        feeds = feeds_for(info, batch, seed=batch)
        got = [torch.from_dlpack(o).cpu().numpy() for o in sess.run(names, cuda_feeds(feeds))]
        want = ort_run(path, feeds)
        cli = hfuse_run(path, feeds, {batch_dim: batch}, tmp_path)
        for n, g, w in zip(names, got, want):
            assert g.shape[0] == batch
            close(w, g, 1e-4)
            close(cli[n], g, 1e-5)
    report = sess.fusion_report()
    assert report["groups"] and report["ops_after"] < report["ops_before"]


# ---- DLPack: pointers -----------------------------------------------------------

@needs_torch
def test_outputs_view_the_sessions_buffers_and_feeds_copy_only_when_foreign():
    sess = hfuse.InferenceSession(RANKING, providers=["CUDAExecutionProvider"])
    x = torch.from_numpy(ranking_input(3)).cuda()
    first = torch.from_dlpack(sess.run(None, {"features": x})[0])
    # A foreign array is copied device to device into the session's buffer (once).
    assert sess.last_device_copy_bytes == x.numel() * 4
    buffers = sess.input_buffers({"features": [64, 256]})
    assert list(buffers) == ["features"]
    features = torch.from_dlpack(buffers["features"])
    assert features.is_cuda and tuple(features.shape) == (64, 256)
    # The session's own input buffer: the foreign feed was copied there.
    assert torch.equal(features, x)
    features.copy_(torch.from_numpy(ranking_input(4)).cuda())
    second = torch.from_dlpack(sess.run(None, {"features": features})[0])
    assert sess.last_device_copy_bytes == 0, "the session's own buffer was copied"
    # Both outputs view the same session buffer: the second run overwrote the first.
    assert second.data_ptr() == first.data_ptr()
    assert sess.input_buffers({"features": [64, 256]})["features"].__dlpack_device__() == (2, 0)
    assert torch.from_dlpack(sess.input_buffers({"features": [64, 256]})["features"]).data_ptr() \
        == features.data_ptr()
    close(ort_run(RANKING, {"features": ranking_input(4)})[0], second.cpu().numpy(), 1e-5)


@needs_torch
def test_cupy_in_and_out():
    cupy = pytest.importorskip("cupy")
    x = ranking_input(5)
    sess = hfuse.InferenceSession(RANKING, providers=["CUDAExecutionProvider"])
    (out,) = sess.run(None, {"features": cupy.asarray(x)})
    score = cupy.from_dlpack(out)
    assert isinstance(score, cupy.ndarray) and score.shape == (64, 1)
    close(ort_run(RANKING, {"features": x})[0], cupy.asnumpy(score), 1e-5)


# ---- IOBinding ------------------------------------------------------------------

@needs_torch
def test_a_poisoned_output_buffer_is_written_at_every_run():
    sess = hfuse.InferenceSession(RANKING, providers=["CUDAExecutionProvider"])
    binding = sess.io_binding()
    x = torch.empty(64, 256, device="cuda")
    out = torch.full((64, 1), float("nan"), device="cuda")
    binding.bind_input("features", x)
    binding.bind_output("score", out)
    ptr = out.data_ptr()
    for seed in (6, 7, 8):
        host = ranking_input(seed)
        x.copy_(torch.from_numpy(host))
        out.fill_(float("nan"))  # poisoned again: the run must write every element
        sess.run_with_iobinding(binding)
        (got,) = binding.get_outputs()
        assert got is out and out.data_ptr() == ptr
        close(ort_run(RANKING, {"features": host})[0], out.cpu().numpy(), 1e-5)
        np.testing.assert_array_equal(binding.copy_outputs_to_cpu()[0], out.cpu().numpy())
        # The bound input read where it lies; the output copied into `out`.
        assert sess.last_device_copy_bytes == out.numel() * 4
    # An input 4 bytes past an allocation's start (not 256-byte aligned, which
    # the plan's kernels assume): copied into the session's buffer instead.
    odd = torch.empty(64 * 256 + 1, device="cuda")[1:].view(64, 256)
    assert odd.data_ptr() % 256 != 0
    host = ranking_input(15)
    odd.copy_(torch.from_numpy(host))
    binding.bind_input("features", odd)
    sess.run_with_iobinding(binding)
    assert sess.last_device_copy_bytes == odd.numel() * 4 + out.numel() * 4
    close(ort_run(RANKING, {"features": host})[0], out.cpu().numpy(), 1e-5)


@needs_torch
def test_binding_the_sessions_own_buffers_copies_nothing():
    sess = hfuse.InferenceSession(RANKING, providers=["CUDAExecutionProvider"])
    features = torch.from_dlpack(sess.input_buffers({"features": [64, 256]})["features"])
    binding = sess.io_binding()
    binding.bind_input("features", features)
    binding.bind_output("score", "cuda")  # the session's own buffer
    views = []
    for seed in (9, 10):
        host = ranking_input(seed)
        features.copy_(torch.from_numpy(host))
        sess.run_with_iobinding(binding)
        assert sess.last_device_copy_bytes == 0
        (score,) = binding.get_outputs()
        views.append(score)
        close(ort_run(RANKING, {"features": host})[0], torch.from_dlpack(score).cpu().numpy(), 1e-5)
    assert views[0] is views[1], "a new output object per run"
    # onnxruntime's pointer form, on the same memory.
    other = sess.io_binding()
    other.bind_input("features", "cuda", 0, np.float32, [64, 256], features.data_ptr())
    out = torch.full((64, 1), float("nan"), device="cuda")
    other.bind_output("score", "cuda", 0, np.float32, [64, 1], out.data_ptr())
    sess.run_with_iobinding(other)
    close(ort_run(RANKING, {"features": host})[0], out.cpu().numpy(), 1e-5)
    assert sess.last_device_copy_bytes == out.numel() * 4


# ---- the stream -----------------------------------------------------------------

@needs_torch
def test_runs_go_on_the_stream_set_after_its_work():
    """A feed written on the stream behind a long sleep: a run that did not
    wait for that stream would read the old values (zeros)."""
    stream = torch.cuda.Stream()
    sess = hfuse.InferenceSession(RANKING, providers=["CUDAExecutionProvider"], stream=stream)
    assert sess.stream == stream.cuda_stream
    binding = sess.io_binding()
    x = torch.zeros(64, 256, device="cuda")
    binding.bind_input("features", x)
    binding.bind_output("score", None)
    torch.cuda.synchronize()
    host = ranking_input(11)
    new = torch.from_numpy(host).pin_memory()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(200_000_000)  # about 0.1 s of GPU time
        x.copy_(new, non_blocking=True)
        sess.run_with_iobinding(binding)
    close(ort_run(RANKING, {"features": host})[0],
          torch.from_dlpack(binding.get_outputs()[0]).cpu().numpy(), 1e-5)
    # Unset: the session's own stream, after the legacy default stream (torch's default).
    sess.stream = None
    assert sess.stream == 0
    host = ranking_input(12)
    torch.cuda._sleep(200_000_000)
    x.copy_(torch.from_numpy(host).pin_memory(), non_blocking=True)
    (out,) = sess.run(None, {"features": x})
    close(ort_run(RANKING, {"features": host})[0], torch.from_dlpack(out).cpu().numpy(), 1e-5)
    # onnxruntime's provider option names a stream too.
    ort_style = hfuse.InferenceSession(
        RANKING, providers=[("CUDAExecutionProvider", {"user_compute_stream": str(stream.cuda_stream)})])
    assert ort_style.stream == stream.cuda_stream


@needs_gpu
def test_graph_and_plain_launches_on_a_stream_agree():
    x = ranking_input(13)
    want = ort_run(RANKING, {"features": x})[0]
    for graph in (True, False):
        sess = hfuse.InferenceSession(RANKING, providers=["CUDAExecutionProvider"], cuda_graph=graph)
        close(want, sess.run(None, {"features": x})[0], 1e-5)


# ---- errors ---------------------------------------------------------------------

@needs_torch
def test_device_errors_are_input_errors():
    x = torch.from_numpy(ranking_input(14)).cuda()
    cpu = hfuse.InferenceSession(RANKING, providers=["CPUExecutionProvider"])
    with pytest.raises(hfuse.InputError, match="input 'features': a CUDA array; this session runs on the cpu"):
        cpu.run(None, {"features": x})
    sess = hfuse.InferenceSession(RANKING, providers=["CUDAExecutionProvider"])
    with pytest.raises(hfuse.InputError, match="input 'features': dtype float64, the model wants float32"):
        sess.run(None, {"features": x.double()})
    with pytest.raises(hfuse.InputError, match=r"input 'features': shape \[64, 255\]"):
        sess.run(None, {"features": x[:, :255].contiguous()})
    with pytest.raises(hfuse.InputError, match="not C-contiguous"):
        sess.run(None, {"features": x.t().contiguous().t()})
    with pytest.raises(hfuse.InputError, match="feed 'nope': the model has no input named so"):
        sess.run(None, {"features": x, "nope": x})
    binding = sess.io_binding()
    with pytest.raises(hfuse.InputError, match="input 'features': a host array; this session binds CUDA"):
        binding.bind_input("features", x.cpu())
    with pytest.raises(hfuse.InputError, match="output 'score': an array on DLPack device type 1"):
        binding.bind_output("score", torch.empty(64, 1))
    with pytest.raises(hfuse.InputError, match="output 'score': dtype float16, the model wants float32"):
        binding.bind_output("score", torch.empty(64, 1, device="cuda", dtype=torch.float16))
    with pytest.raises(hfuse.InputError, match="input 'features': on CUDA device 1, the session runs on device 0"):
        binding.bind_input("features", "cuda", 1, np.float32, [64, 256], x.data_ptr())
    with pytest.raises(hfuse.InputError, match="output 'nope': the model has no output named so"):
        binding.bind_output("nope", None)
    binding.bind_input("features", x)
    binding.bind_output("score", torch.empty(8, 1, device="cuda"))
    with pytest.raises(hfuse.InputError, match=r"output 'score': the buffer bound is float32 \[8, 1\]"):
        sess.run_with_iobinding(binding)
    with pytest.raises(hfuse.InputError, match="a host array among CUDA arrays"):
        sess.run(None, {"features": x, "other": np.zeros(3, np.float32)})
    with pytest.raises(hfuse.InputError, match="stream"):
        sess.stream = "fast"


# ---- README -------------------------------------------------------------------

def readme_gpu_example():
    """The second ```python block of README.md's "## Python" section (the first
    is the CPU one, tests/python_install runs it)."""
    with open(os.path.join(SOURCE, "README.md"), encoding="utf-8") as f:
        text = f.read()
    (python,) = [s for s in re.split(r"^## ", text, flags=re.M) if s.startswith("Python\n")]
    blocks = re.findall(r"^```python\n(.*?)^```", python, flags=re.S | re.M)
    assert len(blocks) >= 2, "README.md's Python section has no GPU ```python block"
    return blocks[1]


def test_readme_gpu_example_says_what_it_prints():
    code = readme_gpu_example()
    compile(code, "README.md", "exec")
    assert "CUDAExecutionProvider" in code and "torch.from_dlpack" in code
    prints = [line for line in code.splitlines() if line.startswith("print(")]
    assert prints and all(re.search(r"\)\s*#\s*\S", line) for line in prints)


@needs_torch
def test_readme_gpu_example_runs_as_it_stands():
    code = readme_gpu_example()
    want = [re.search(r"\)\s*#\s*(.*)$", line).group(1).strip()
            for line in code.splitlines() if line.startswith("print(")]
    r = subprocess.run([sys.executable, "-c", code], cwd=SOURCE, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stdout.splitlines() == want
