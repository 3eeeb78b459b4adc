"""The Python module hfuse against onnxruntime, on the CPU (and on CUDA where
a GPU exists; those tests skip, saying so, without one).

    PYTHONPATH=build/python .venv/bin/python -m pytest tests/python

Models: examples/ranking_small.onnx (ONNX), and a graph JSON of three towers
(GEMM + bias + ReLU, LayerNorm, concatenate; dynamic batch) next to the same
model built as ONNX for onnxruntime, with the same weights.
"""
import json
import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import hfuse

SOURCE = os.environ.get("HFUSE_SOURCE_DIR",
                        os.path.join(os.path.dirname(__file__), "..", ".."))
RANKING = os.path.join(SOURCE, "examples", "ranking_small.onnx")
TOWERS = 3
K, N = 16, 12


def close(want, got, tol=1e-5):
    want, got = np.asarray(want, np.float64), np.asarray(got, np.float64)
    assert want.shape == got.shape
    err = np.abs(want - got).max(initial=0.0) / max(np.abs(want).max(initial=0.0), 1e-30)
    assert err <= tol, f"normalised error {err:.3g} > {tol}"


def ort_session(model):
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"])


# ---- ONNX: examples/ranking_small.onnx ------------------------------------------

def test_ranking_metadata_is_onnxruntimes():
    sess, ref = hfuse.InferenceSession(RANKING), ort_session(RANKING)
    for mine, theirs in [(sess.get_inputs(), ref.get_inputs()),
                         (sess.get_outputs(), ref.get_outputs())]:
        assert [(a.name, a.shape, a.type) for a in mine] == \
               [(b.name, b.shape, b.type) for b in theirs]
    assert sess.get_providers() == ["CPUExecutionProvider"]


def test_ranking_runs_like_onnxruntime():
    sess = hfuse.InferenceSession(RANKING, providers=["CPUExecutionProvider"])
    report = sess.fusion_report()
    assert report["rules"] == "hfuse" and len(report["groups"]) == 3  # the session's default
    x = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32)
    (want,) = ort_session(RANKING).run(None, {"features": x})
    (got,) = sess.run(None, {"features": x})
    assert got.dtype == np.float32 and got.shape == (64, 1)
    close(want, got)
    (named,) = sess.run(["score"], {"features": x})
    np.testing.assert_array_equal(named, got)
    # A non-contiguous view is taken too (made contiguous first).
    wide = np.repeat(x, 2, axis=1)[:, ::2]
    (again,) = sess.run(None, {"features": wide})
    np.testing.assert_array_equal(again, got)


def test_unfused_and_either_rule_set_compute_the_same_bytes():
    # On the CPU a group op runs each member with the ungrouped op's kernel.
    x = np.random.default_rng(1).standard_normal((64, 256)).astype(np.float32)
    (fused,) = hfuse.InferenceSession(RANKING).run(None, {"features": x})
    (plain,) = hfuse.InferenceSession(RANKING, fuse=False).run(None, {"features": x})
    seed = hfuse.InferenceSession(RANKING, rules="seed")
    assert seed.fusion_report()["rules"] == "seed"
    (seed_rules,) = seed.run(None, {"features": x})
    np.testing.assert_array_equal(fused, plain)
    np.testing.assert_array_equal(seed_rules, plain)


def test_fuse_matches_the_cli(tmp_path):
    fused, report = hfuse.fuse(RANKING)
    assert [g["op"] for g in report["groups"]] == \
           ["group_gemm_rcr_bias", "group_gemm_rcr_bias_relu", "group_layernorm_sigmoid_mul"]
    assert report["ops_before"] > report["ops_after"]
    tool = os.environ.get("HFUSE_TOOL")
    if tool:
        out, rep = tmp_path / "f.onnx", tmp_path / "r.json"
        subprocess.run([tool, "fuse", RANKING, "-o", str(out), "--report", str(rep)], check=True,
                       stdout=subprocess.DEVNULL)
        assert out.read_bytes() == fused
        # The CLI's report also explains the ops left ungrouped ("ungrouped");
        # the Python report has the rest of it, the same.
        cli = json.loads(rep.read_text())
        assert {k: v for k, v in cli.items() if k != "ungrouped"} == report
    # The fused model runs in hfuse (ai.hfuse ops) and computes what the original does.
    x = np.random.default_rng(2).standard_normal((64, 256)).astype(np.float32)
    (want,) = ort_session(RANKING).run(None, {"features": x})
    (got,) = hfuse.InferenceSession(fused, fuse=False).run(None, {"features": x})
    close(want, got)
    assert onnx.load_from_string(fused).graph.node  # a valid ModelProto


# ---- graph JSON, against the same model in ONNX ---------------------------------

def towers_json():
    t = [{"name": "x", "shape": ["batch", K], "dtype": "float32", "role": "input"}]
    ops = []
    for i in range(TOWERS):
        t += [{"name": f"w{i}", "shape": [N, K], "dtype": "float32", "role": "param"},
              {"name": f"b{i}", "shape": [N], "dtype": "float32", "role": "param"},
              {"name": f"g{i}", "shape": [N], "dtype": "float32", "role": "param"},
              {"name": f"be{i}", "shape": [N], "dtype": "float32", "role": "param"},
              {"name": f"h{i}", "shape": ["batch", N], "dtype": "float32"},
              {"name": f"y{i}", "shape": ["batch", N], "dtype": "float32"}]
        ops += [{"name": f"fc{i}", "op": "gemm_rcr_bias_relu", "inputs": [f"x", f"w{i}", f"b{i}"],
                 "outputs": [f"h{i}"]},
                {"name": f"ln{i}", "op": "layernorm", "inputs": [f"h{i}", f"g{i}", f"be{i}"],
                 "outputs": [f"y{i}"], "normalized_shape": [N]}]
    t.append({"name": "out", "shape": ["batch", N * TOWERS], "dtype": "float32"})
    ops.append({"name": "cat", "op": "concatenate", "inputs": [f"y{i}" for i in range(TOWERS)],
                "outputs": ["out"], "dim": 1})
    return {"graph_format": 1, "name": "towers", "dims": [{"name": "batch", "min": 1, "max": 64}],
            "tensors": t, "ops": ops, "outputs": ["out"]}


def towers_weights():
    rng = np.random.default_rng(3)
    w = {}
    for i in range(TOWERS):
        w[f"w{i}"] = rng.standard_normal((N, K)).astype(np.float32) / 4
        w[f"b{i}"] = rng.standard_normal(N).astype(np.float32)
        w[f"g{i}"] = rng.uniform(0.5, 1.5, N).astype(np.float32)
        w[f"be{i}"] = rng.standard_normal(N).astype(np.float32)
    return w


def towers_onnx(weights):
    nodes = []
    for i in range(TOWERS):
        nodes += [helper.make_node("Gemm", ["x", f"w{i}", f"b{i}"], [f"mm{i}"], transB=1),
                  helper.make_node("Relu", [f"mm{i}"], [f"h{i}"]),
                  helper.make_node("LayerNormalization", [f"h{i}", f"g{i}", f"be{i}"], [f"y{i}"],
                                   axis=-1, epsilon=1e-5)]
    nodes.append(helper.make_node("Concat", [f"y{i}" for i in range(TOWERS)], ["out"], axis=1))
    graph = helper.make_graph(
        nodes, "towers", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", K])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", N * TOWERS])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    # The IR version opset 17 came with: a newer onnx writes its own newest
    # by default, which an older onnxruntime refuses (the GPU machine's
    # onnx and onnxruntime differ so).
    model.ir_version = 8
    return model.SerializeToString()


@pytest.fixture
def towers(tmp_path):
    path = tmp_path / "towers.json"
    path.write_text(json.dumps(towers_json()))
    return str(path)


def test_graph_json_runs_like_onnxruntime(towers):
    weights = towers_weights()
    ref = ort.InferenceSession(towers_onnx(weights), providers=["CPUExecutionProvider"])
    sess = hfuse.InferenceSession(towers)
    # Graph JSON carries no weights: its params are inputs, after the graph's.
    names = [i.name for i in sess.get_inputs()]
    assert names[0] == "x" and sorted(names[1:]) == sorted(weights)
    assert sess.get_inputs()[0].shape == ["batch", K]
    assert sess.get_inputs()[0].type == "tensor(float)"
    assert [(o.name, o.shape) for o in sess.get_outputs()] == [("out", ["batch", N * TOWERS])]
    # The hfuse rules (the default) group the GEMMs of the dynamic batch too.
    assert sess.fusion_report()["rules"] == "hfuse"
    assert sorted(g["op"] for g in sess.fusion_report()["groups"]) == \
           ["group_gemm_rcr_bias_relu", "group_layernorm"]
    for batch in (5, 64):
        x = np.random.default_rng(batch).standard_normal((batch, K)).astype(np.float32)
        (want,) = ref.run(None, {"x": x})
        (got,) = sess.run(["out"], {"x": x, **weights})
        assert got.shape == (batch, N * TOWERS)
        close(want, got)


def test_bound_dims_are_static_so_gemms_group_under_the_seed_rules(towers):
    weights = towers_weights()
    unbound = hfuse.InferenceSession(towers, rules="seed")
    assert [g["op"] for g in unbound.fusion_report()["groups"]] == ["group_layernorm"]
    sess = hfuse.InferenceSession(towers, rules="seed", dims={"batch": 8})
    assert sess.get_inputs()[0].shape == [8, K]
    assert sorted(g["op"] for g in sess.fusion_report()["groups"]) == \
           ["group_gemm_rcr_bias_relu", "group_layernorm"]
    x = np.random.default_rng(4).standard_normal((8, K)).astype(np.float32)
    (want,) = ort.InferenceSession(towers_onnx(weights)).run(None, {"x": x})
    close(want, sess.run(None, {"x": x, **weights})[0])
    # hfuse.fuse binds them the same way: the fused graph JSON is static.
    fused, report = hfuse.fuse(towers, dims={"batch": 8})
    assert report == sess.fusion_report()
    g = json.loads(fused)
    assert g["tensors"][0]["shape"] == [8, K]


def test_bytes_and_json_format(towers):
    text = open(towers, "rb").read()
    a = hfuse.InferenceSession(text)  # format from the bytes
    b = hfuse.InferenceSession(towers)
    assert [i.name for i in a.get_inputs()] == [i.name for i in b.get_inputs()]
    assert hfuse.fuse(text)[0] == hfuse.fuse(towers)[0]


def test_float16_and_bfloat16(tmp_path):
    for dtype in ("float16", "bfloat16"):
        g = towers_json()
        for t in g["tensors"]:
            t["dtype"] = dtype
        path = tmp_path / f"{dtype}.json"
        path.write_text(json.dumps(g))
        sess = hfuse.InferenceSession(str(path))
        assert sess.get_inputs()[0].type == f"tensor({dtype})"
        weights = towers_weights()
        x = np.random.default_rng(5).standard_normal((4, K)).astype(np.float32)
        (want,) = ort.InferenceSession(towers_onnx(weights)).run(None, {"x": x})
        # float32 arrays are rounded to the input's dtype.
        (got,) = sess.run(None, {"x": x, **weights})
        if dtype == "float16":
            assert got.dtype == np.float16
            close(want, got, tol=1e-2)
            # float16 arrays as they are.
            (again,) = sess.run(None, {"x": x.astype(np.float16),
                                       **{k: v.astype(np.float16) for k, v in weights.items()}})
            np.testing.assert_array_equal(again, got)
        else:  # bfloat16 comes back as its bit patterns
            assert got.dtype == np.uint16
            as_float = (got.astype(np.uint32) << 16).view(np.float32)
            close(want, as_float, tol=2e-2)


# ---- errors ---------------------------------------------------------------------

def test_bad_feeds_raise_input_errors_naming_the_tensor():
    sess = hfuse.InferenceSession(RANKING)
    x = np.zeros((64, 256), np.float32)
    with pytest.raises(hfuse.InputError, match="feed 'nope': the model has no input named so"):
        sess.run(None, {"features": x, "nope": x})
    with pytest.raises(hfuse.InputError, match="input 'features' is not fed"):
        sess.run(None, {})
    with pytest.raises(hfuse.InputError,
                       match=r"input 'features': shape \[64, 255\], the model wants \[64, 256\]"):
        sess.run(None, {"features": np.zeros((64, 255), np.float32)})
    with pytest.raises(hfuse.InputError, match="input 'features': dtype int64, the model wants float32"):
        sess.run(None, {"features": np.zeros((64, 256), np.int64)})
    with pytest.raises(hfuse.InputError, match="output 'nope'"):
        sess.run(["nope"], {"features": x})
    assert issubclass(hfuse.InputError, ValueError)


def test_bad_models_and_options(tmp_path):
    with pytest.raises(hfuse.InputError, match="cannot"):
        hfuse.InferenceSession(str(tmp_path / "missing.onnx"))
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(hfuse.InputError, match="bad.json"):
        hfuse.InferenceSession(str(bad))
    with pytest.raises(hfuse.InputError, match="rules 'both'"):
        hfuse.InferenceSession(RANKING, rules="both")
    with pytest.raises(hfuse.InputError, match="device 'tpu'"):
        hfuse.InferenceSession(RANKING, device="tpu")
    with pytest.raises(ValueError, match="provider 'TensorrtExecutionProvider'"):
        hfuse.InferenceSession(RANKING, providers=["TensorrtExecutionProvider"])
    with pytest.raises(hfuse.InputError, match="no dim named 'rows'"):
        hfuse.fuse(RANKING, dims={"rows": 3})


# ---- CUDA -----------------------------------------------------------------------

CUDA, WHY = hfuse.cuda_available()


@pytest.mark.skipif(CUDA, reason="a CUDA device is present; this checks its absence")
def test_cuda_without_a_device_is_one_clear_error():
    with pytest.raises(hfuse.InputError, match="--device cuda: no usable CUDA device"):
        hfuse.InferenceSession(RANKING, device="cuda")
    with pytest.raises(hfuse.InputError, match="no usable CUDA device"):
        hfuse.InferenceSession(RANKING, providers=["CUDAExecutionProvider"])
    # With a CPU fallback listed, as onnxruntime: the CPU.
    sess = hfuse.InferenceSession(RANKING,
                                  providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert hfuse.get_available_providers() == ["CPUExecutionProvider"]


# The CUDA session itself: test_gpu.py.


# ---- IOBinding on the CPU (numpy), and what needs a CUDA session ---------------

def test_cpu_io_binding_writes_a_bound_output_at_every_run():
    sess = hfuse.InferenceSession(RANKING)
    binding = sess.io_binding()
    x = np.empty((64, 256), np.float32)
    out = np.full((64, 1), np.nan, np.float32)
    binding.bind_input("features", x)
    binding.bind_output("score", out)
    with pytest.raises(hfuse.InputError, match="output 'nope'"):
        binding.bind_output("nope")
    for seed in (20, 21):
        x[...] = np.random.default_rng(seed).standard_normal((64, 256))
        out[...] = np.nan
        sess.run_with_iobinding(binding)
        (got,) = binding.get_outputs()
        assert got is out
        close(ort_session(RANKING).run(None, {"features": x})[0], out)
        np.testing.assert_array_equal(binding.copy_outputs_to_cpu()[0], out)
    binding.clear_binding_outputs()
    sess.run_with_iobinding(binding)
    (score,) = binding.get_outputs()  # none bound: every output, as run returns them
    np.testing.assert_array_equal(score, out)
    assert score is not out


def test_cuda_only_calls_on_a_cpu_session_are_input_errors():
    sess = hfuse.InferenceSession(RANKING)
    assert sess.stream == 0
    with pytest.raises(hfuse.InputError, match="stream: this session runs on the cpu"):
        sess.stream = 1234
    with pytest.raises(hfuse.InputError, match=r"stream 'fast'"):
        sess.stream = "fast"
    sess.stream = None  # 0: nothing to set
    with pytest.raises(hfuse.InputError, match="InputBuffers: this session runs on the cpu"):
        sess.input_buffers({"features": [64, 256]})
    with pytest.raises(hfuse.InputError, match="Binding: this session runs on the cpu"):
        hfuse._hfuse.Binding(sess._session)
    with pytest.raises(hfuse.InputError, match="the pointer form binds CUDA memory to a CUDA session"):
        sess.io_binding().bind_input("features", "cuda", 0, np.float32, [64, 256], 1 << 20)
    with pytest.raises(hfuse.InputError, match="element type"):
        hfuse._element_type(np.float64)
    assert hfuse._element_type(np.float16) == "float16" and hfuse._element_type("int64") == "int64"
    assert hfuse._stream_handle(None) == 0 and hfuse._stream_handle(7) == 7

    class TorchLike:
        cuda_stream = 99
    assert hfuse._stream_handle(TorchLike()) == 99
    assert hfuse._stream_of([("CUDAExecutionProvider", {"user_compute_stream": "42"})]) == 42


def test_params_given_at_creation_are_no_inputs(towers):
    weights = towers_weights()
    sess = hfuse.InferenceSession(towers, params=weights)
    assert [i.name for i in sess.get_inputs()] == ["x"]
    assert sorted(i.name for i in sess.get_overridable_initializers()) == sorted(weights)
    x = np.random.default_rng(7).standard_normal((6, K)).astype(np.float32)
    (want,) = ort.InferenceSession(towers_onnx(weights)).run(None, {"x": x})
    close(want, sess.run(None, {"x": x})[0])
    with pytest.raises(hfuse.InputError, match="param 'nope': the model has no param named so"):
        hfuse.InferenceSession(towers, params={"nope": weights["w0"]})
    with pytest.raises(hfuse.InputError, match=r"param 'w0': float32 \[12\], the model wants"):
        hfuse.InferenceSession(towers, params={"w0": weights["b0"]})


def _run_in_child(sess, x, want, queue):
    (got,) = sess.run(None, {"features": x})
    queue.put(bool(np.array_equal(got, want)))


def test_a_forked_child_runs_the_session():
    # The CPU kernels' worker threads are not in a child forked without exec
    # (multiprocessing's "fork"): its runs go on the calling thread, the same
    # bytes, and it exits (no join of threads that are not there).
    import multiprocessing
    sess = hfuse.InferenceSession(RANKING, threads=2)
    x = np.random.default_rng(3).standard_normal((64, 256)).astype(np.float32)
    (want,) = sess.run(None, {"features": x})  # the parent's workers exist now
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_run_in_child, args=(sess, x, want, queue))
    child.start()
    assert queue.get(timeout=60) is True
    child.join(60)
    assert child.exitcode == 0
    (again,) = sess.run(None, {"features": x})
    np.testing.assert_array_equal(again, want)
