#!/usr/bin/env python3
"""Each opset-dependent ONNX form, from opset 17 to 28, through hfuse.

    check_opset_forms.py HFUSE_BINARY [OUT_DIR]

Makes small models with onnx.helper (written to OUT_DIR when given, so they
can be looked at; a temporary folder otherwise): two parallel Gemms on one
input, added (what the pass groups), then the form under test: Split with
num_outputs (18), reductions with their axes as an input (18, 20),
noop_with_empty_axes, Gelu (20, both approximations), Mish (18), Swish (24),
Cast's saturate (19), Pad with its axes as an input (18) and at opset 25,
Squeeze/Unsqueeze/Reshape/Transpose/Flatten at the newest opsets,
LayerNormalization, Einsums that einsum-to-matmul makes MatMuls (none left
in the fused model), and If with a constant condition or one that the
shapes decide (`x.dim() == 2`, nested; folded).
For each: `hfuse check`; `hfuse fuse` under both rule sets groups the two
Gemms and keeps the model's opset and IR version; `hfuse verify`; `hfuse
run` on the fused model matches onnxruntime on the original; onnxruntime
runs `--export standard` and matches too.

Then the models hfuse must refuse, each with one error that names what it
cannot read: DFT-20, Pad-18's axes computed at run time, Pad-19's wrap mode,
RMSNormalization-23 (two such nodes: both named in one error), an If on a
computed condition, an If on a named batch's size, opset 29, IR version 15.

Last, the messages of `run`, `verify`, `check` and `--format` on ONNX
input (issue 11, item 6) and named dims up to 2^31 - 1: each error one line
with the model's path first and nothing on stdout; `run` without --dim binds
a named dim to 64; --dim 2^31 - 1 is refused by the memory budget before
allocating; `check` counts only real dynamic dims; `--save-inputs` writes
the model's inputs by name, which onnxruntime takes as they are; `fuse
m.onnx --format json` converts; two nodes that cannot be imported are both
named in one error.
"""
import json
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_checks import check, compare, failures, hfuse, ort_run, set_tool

rng = np.random.default_rng(5)


def const(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def model(name, opset, nodes, outputs, inits=(), ir=None):
    """x [8, 16] -> two Gemms, added -> h [8, 32] -> `nodes` -> `outputs`."""
    w = [const(f"W{i}", rng.standard_normal((32, 16)).astype(np.float32) * 0.3) for i in (1, 2)]
    b = [const(f"b{i}", rng.standard_normal(32).astype(np.float32) * 0.1) for i in (1, 2)]
    head = [helper.make_node("Gemm", ["x", f"W{i}", f"b{i}"], [f"g{i}"], name=f"gemm{i}", transB=1)
            for i in (1, 2)] + [helper.make_node("Add", ["g1", "g2"], ["h"], name="add")]
    graph = helper.make_graph(
        head + nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])],
        [helper.make_tensor_value_info(o, t, None) for o, t in outputs],
        initializer=w + b + list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir if ir is not None else (10 if opset < 23 else 14)
    return m


F = TensorProto.FLOAT
N = helper.make_node


def cases():
    yield model("split18_uneven", 18, [N("Split", ["h"], ["s0", "s1", "s2"], name="split",
                                         axis=1, num_outputs=3)],
                [("s0", F), ("s1", F), ("s2", F)])
    yield model("split18_even", 18, [N("Split", ["h"], ["s0", "s1"], name="split", axis=1,
                                       num_outputs=2)], [("s0", F), ("s1", F)])
    yield model("reduce18_axes_input", 18, [
        N("ReduceMean", ["h", "ax1"], ["m"], name="mean"),
        N("ReduceMax", ["h", "ax0"], ["mx"], name="max", keepdims=0),
        N("ReduceMin", ["h", "ax1"], ["mn"], name="min"),
        N("ReduceProd", ["h", "ax1"], ["p"], name="prod"),
        N("ReduceSum", ["h", "ax1"], ["s"], name="sum"),
        N("ReduceMax", ["h"], ["all"], name="max_all", keepdims=0),
        N("ReduceMean", ["h"], ["same"], name="noop", noop_with_empty_axes=1),
    ], [("m", F), ("mx", F), ("mn", F), ("p", F), ("s", F), ("all", F), ("same", F)],
        [const("ax1", np.array([1], np.int64)), const("ax0", np.array([0], np.int64))])
    yield model("reduce20_max", 20, [N("ReduceMax", ["h", "ax"], ["mx"], name="max")],
                [("mx", F)], [const("ax", np.array([-1], np.int64))])
    yield model("gelu20", 20, [N("Gelu", ["h"], ["y"], name="gelu")], [("y", F)])
    yield model("gelu20_tanh", 22, [N("Gelu", ["h"], ["y"], name="gelu", approximate="tanh")],
                [("y", F)])
    yield model("mish18", 18, [N("Mish", ["h"], ["y"], name="mish")], [("y", F)])
    yield model("swish24", 24, [N("Swish", ["h"], ["y"], name="swish", alpha=0.5)], [("y", F)])
    yield model("cast19_saturate", 19, [
        N("Cast", ["h"], ["c"], name="to_half", to=TensorProto.FLOAT16, saturate=1),
        N("Cast", ["c"], ["y"], name="to_float", to=TensorProto.FLOAT)], [("y", F)])
    yield model("shapes28", 28, [
        N("Unsqueeze", ["h", "ax1"], ["u"], name="unsqueeze"),
        N("Transpose", ["u"], ["t"], name="transpose", perm=[1, 0, 2]),
        N("Squeeze", ["t", "ax0"], ["q"], name="squeeze"),
        N("Reshape", ["q", "shape"], ["r"], name="reshape"),
        N("Flatten", ["r"], ["y"], name="flatten", axis=1),
        N("LayerNormalization", ["y", "gamma", "beta"], ["ln"], name="layernorm", axis=-1),
    ], [("ln", F)], [const("ax1", np.array([1], np.int64)), const("ax0", np.array([0], np.int64)),
                     const("shape", np.array([8, 4, 8], np.int64)),
                     const("gamma", rng.random(32).astype(np.float32)),
                     const("beta", rng.random(32).astype(np.float32))])
    yield model("pad18_axes", 18, [N("Pad", ["h", "p", "", "ax"], ["y"], name="pad", mode="reflect")],
                [("y", F)], [const("p", np.array([2, 3], np.int64)),
                             const("ax", np.array([-1], np.int64))])
    yield model("pad25_constant", 25, [N("Pad", ["h", "p", "v"], ["y"], name="pad")], [("y", F)],
                [const("p", np.array([1, 0, 0, 2], np.int64)), const("v", np.array(0.5, np.float32))])
    yield model("pad13_edge", 13, [N("Pad", ["h", "p"], ["y"], name="pad", mode="edge")], [("y", F)],
                [const("p", np.array([0, 2, 1, -1], np.int64))])
    then_g = helper.make_graph([N("Relu", ["h"], ["t_out"], name="then_relu")], "then", [],
                               [helper.make_tensor_value_info("t_out", F, [8, 32])])
    else_g = helper.make_graph([N("Sigmoid", ["h"], ["e_out"], name="else_sigmoid")], "else", [],
                               [helper.make_tensor_value_info("e_out", F, [8, 32])])
    for opset, flag in ((18, True), (17, False)):
        yield model(f"if{opset}_constant_{str(flag).lower()}", opset, [
            N("Constant", [], ["cond"], name="flag",
              value=helper.make_tensor("v", TensorProto.BOOL, [], [flag])),
            N("If", ["cond"], ["y"], name="branch", then_branch=then_g, else_branch=else_g),
            N("Tanh", ["y"], ["z"], name="after")], [("z", F)])

    # einsum-to-matmul's forms: widedeep's constant projection, xDeepFM's
    # outer product, attention scores; the standard export holds no Einsum.
    yield model("einsum17_matmul", 17, [
        N("Reshape", ["h", "s3"], ["h3"], name="to3d"),
        N("Reshape", ["h", "s4"], ["h4"], name="to4d"),
        N("Einsum", ["h3", "E"], ["proj"], name="proj", equation="b s i, s k -> b k i"),
        N("Einsum", ["h3", "h3"], ["outer"], name="outer", equation="bhd,bmd->bhmd"),
        N("Einsum", ["h4", "h4"], ["scores"], name="scores", equation="bhsd,bhld->bhsl")],
        [("proj", F), ("outer", F), ("scores", F)],
        [const("s3", np.array([8, 4, 8], np.int64)), const("s4", np.array([8, 2, 2, 8], np.int64)),
         const("E", rng.standard_normal((4, 3)).astype(np.float32))])
    # `if x.dim() == 2:` and `if x.shape[1] == 32:` as torch.onnx scripting
    # writes them (Equal(Size(Shape(x)), 2), Equal(Gather(Shape(x), 1), 32)):
    # the shapes decide, so the If goes as a constant one does; the second,
    # inside the branch taken, decides only once the first is gone.
    inner = helper.make_graph([
        N("Shape", ["h"], ["in_s"], name="in_shape"),
        N("Gather", ["in_s", "one"], ["in_d"], name="in_dim", axis=0),
        N("Equal", ["in_d", "thirty_two"], ["in_c"], name="in_is_32"),
        N("Not", ["in_c"], ["in_nc"], name="in_not"),
        N("If", ["in_nc"], ["t_out"], name="inner", then_branch=else_g, else_branch=then_g)],
        "then_nested", [], [helper.make_tensor_value_info("t_out", F, [8, 32])])
    for opset in (17, 18):
        yield model(f"if{opset}_shape_rank", opset, [
            N("Shape", ["h"], ["s"], name="shape"), N("Size", ["s"], ["rank"], name="rank"),
            N("Equal", ["rank", "two"], ["cond"], name="is_2d"),
            N("If", ["cond"], ["y"], name="branch", then_branch=inner, else_branch=else_g),
            N("Tanh", ["y"], ["z"], name="after")], [("z", F)],
            [const("two", np.array(2, np.int64)), const("one", np.array(1, np.int64)),
             const("thirty_two", np.array(32, np.int64))])


def refused():
    then_g = helper.make_graph([N("Relu", ["h"], ["t_out"])], "then", [],
                               [helper.make_tensor_value_info("t_out", F, [8, 32])])
    else_g = helper.make_graph([N("Sigmoid", ["h"], ["e_out"])], "else", [],
                               [helper.make_tensor_value_info("e_out", F, [8, 32])])
    pads = const("pads", np.array([0, 1, 0, 1], np.int64))
    yield (model("dft20", 20, [N("Unsqueeze", ["h", "ax"], ["u"], name="u"),
                               N("DFT", ["u", "", "one"], ["y"], name="dft")], [("y", F)],
                 [const("ax", np.array([2], np.int64)), const("one", np.array(1, np.int64))]),
           ["node 'dft' (DFT-20 at opset 20): its axis became an input"])
    yield (model("pad18_computed_axes", 18, [
        N("Shape", ["h"], ["sh"], name="shape"), N("Size", ["sh"], ["rank"], name="rank"),
        N("Sub", ["rank", "one"], ["last"], name="last"),
        N("Unsqueeze", ["last", "zero"], ["ax"], name="axes"),
        N("Pad", ["h", "pads2", "", "ax"], ["y"], name="pad")],
        [("y", F)], [const("pads2", np.array([1, 1], np.int64)), const("one", np.array(1, np.int64)),
                     const("zero", np.array([0], np.int64))]),
        ["node 'pad' (Pad-18 at opset 18): an axes input (Pad-18) with pads, axes or a rank not known"])
    yield (model("pad19_wrap", 19, [N("Pad", ["h", "pads"], ["y"], name="pad", mode="wrap")],
                 [("y", F)], [pads]), ["node 'pad' (Pad-19 at opset 19): mode 'wrap'"])
    yield (model("rmsnorm23", 23, [N("RMSNormalization", ["h", "g"], ["r1"], name="rms1"),
                                   N("RMSNormalization", ["r1", "g"], ["y"], name="rms2")],
                 [("y", F)], [const("g", np.ones(32, np.float32))]),
           ["2 nodes use operator versions hfuse does not read",
            "node 'rms1' (RMSNormalization-23 at opset 23): a new operator",
            "node 'rms2' (RMSNormalization-23"])
    # A named batch compared with 8 could go either way at run time.
    m = model("if_shape_dynamic", 18, [
        N("Shape", ["h"], ["s"], name="shape"),
        N("Gather", ["s", "zero_i"], ["b"], name="batch", axis=0),
        N("Equal", ["b", "eight"], ["cond"], name="is_8"),
        N("If", ["cond"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)],
        [("y", F)], [const("zero_i", np.array(0, np.int64)), const("eight", np.array(8, np.int64))])
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    yield m, ["If node 'branch': its condition 'cond' is computed at run time",
              "or follows from the shapes, static or at the dims bound before import"]
    yield (model("if_computed", 18, [
        N("ReduceSum", ["h"], ["total"], name="total", keepdims=0),
        N("Greater", ["total", "zero"], ["cond"], name="positive"),
        N("If", ["cond"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)],
        [("y", F)], [const("zero", np.array(0, np.float32))]),
        ["If node 'branch': its condition 'cond' is computed at run time"])
    m = model("opset29", 28, [N("Relu", ["h"], ["y"])], [("y", F)])
    m.opset_import[0].version = 29
    yield m, ["opset 29 of the default ONNX domain; hfuse reads opsets 11 to 28"]
    yield (model("ir15", 28, [N("Relu", ["h"], ["y"])], [("y", F)], ir=15),
           ["IR version 15; hfuse reads IR versions up to 14"])


def versions(path):
    m = onnx.load(path)
    return m.ir_version, [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")]


def positive(work, m):
    name = m.graph.name
    path = os.path.join(work, f"{name}.onnx")
    m = onnx.shape_inference.infer_shapes(m, strict_mode=True)  # the outputs' shapes
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)
    r = hfuse("check", path)
    check(r.returncode == 0, f"{name}: hfuse check (exit {r.returncode}) {r.stderr.strip()}")
    if r.returncode:
        return
    feeds = {"x": rng.standard_normal((8, 16)).astype(np.float32)}
    want = ort_run(path, feeds)
    inputs = os.path.join(work, f"{name}.inputs.npz")
    np.savez(inputs, **feeds)
    for rules in ("seed", "hfuse"):
        label = f"{name} --rules {rules}"
        fused, report = (os.path.join(work, f"{name}.{rules}.{e}") for e in ("onnx", "json"))
        r = hfuse("fuse", path, "-o", fused, "--report", report, "--rules", rules)
        check(r.returncode == 0, f"{label}: hfuse fuse (exit {r.returncode}) {r.stderr.strip()}")
        if r.returncode:
            continue
        groups = [sorted(g["members"]) for g in json.load(open(report))["groups"]]
        if name.startswith("if"):
            left = [n.name for n in onnx.load(fused).graph.node if n.op_type == "If"]
            check(not left, f"{label}: no If left in the fused model ({left})")
        if name.startswith("einsum"):
            left = [n.name for n in onnx.load(fused).graph.node if n.op_type == "Einsum"]
            check(not left, f"{label}: no Einsum left in the fused model ({left})")
        check(["gemm1", "gemm2"] in groups, f"{label}: groups the two Gemms ({groups})")
        check(versions(fused) == versions(path),
              f"{label}: fused keeps IR version and opset {versions(path)}: {versions(fused)}")
        r = hfuse("verify", path, "--rules", rules)
        check(r.returncode == 0 and r.stdout.strip().endswith("PASS"),
              f"{label}: hfuse verify (exit {r.returncode}) {r.stderr.strip()}")
        outs = os.path.join(work, f"{name}.{rules}.out.npz")
        r = hfuse("run", fused, "--inputs", inputs, "-o", outs, "--poison-buffers")
        check(r.returncode == 0, f"{label}: hfuse run fused (exit {r.returncode}) {r.stderr.strip()}")
        if r.returncode == 0:
            compare(f"{label}: hfuse CPU on fused vs onnxruntime on original", want,
                    dict(np.load(outs)))
        standard = os.path.join(work, f"{name}.{rules}.standard.onnx")
        r = hfuse("fuse", path, "-o", standard, "--export", "standard", "--rules", rules)
        check(r.returncode == 0, f"{label}: --export standard (exit {r.returncode}) {r.stderr.strip()}")
        if r.returncode == 0:
            check(versions(standard) == versions(path), f"{label}: standard keeps {versions(path)}")
            onnx.checker.check_model(onnx.load(standard), full_check=True)
            compare(f"{label}: onnxruntime on standard vs original", want, ort_run(standard, feeds))


def negative(work, m, wants):
    name = m.graph.name
    path = os.path.join(work, f"{name}.onnx")
    onnx.save(onnx.shape_inference.infer_shapes(m), path)
    r = hfuse("check", path)
    err = r.stderr.strip()
    ok = (r.returncode == 2 and err.startswith(f"hfuse: error: {path}: ") and len(err.splitlines()) == 1
          and all(w in err for w in wants))
    check(ok, f"{name}: refused in one line naming {wants} (exit {r.returncode}) {err}")


def messages(work):
    static = model("msg_static", 17, [N("Relu", ["h"], ["y"], name="relu")], [("y", F)])
    dyn = model("msg_dynamic", 17, [N("Relu", ["h"], ["y"], name="relu")], [("y", F)])
    dyn.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    paths = {}
    for m in (static, dyn):
        paths[m.graph.name] = os.path.join(work, f"{m.graph.name}.onnx")
        onnx.save(onnx.shape_inference.infer_shapes(m), paths[m.graph.name])
    s, d = paths["msg_static"], paths["msg_dynamic"]

    def one_line(label, r, path, *wants):
        err = r.stderr.strip()
        check(r.returncode == 2 and r.stdout == "" and len(err.splitlines()) == 1 and
              err.startswith(f"hfuse: error: {path}: ") and all(w in err for w in wants),
              f"{label}: one line naming {path} and {wants}, nothing on stdout "
              f"(exit {r.returncode}) {err} {r.stdout.strip()}")

    one_line("run --dim batch=0", hfuse("run", d, "--dim", "batch=0"), d, "outside [1, 2147483647]")
    one_line("verify --dim batch=0", hfuse("verify", d, "--dim", "batch=0"), d, "outside")
    one_line("run --dim batch=2^31-1", hfuse("run", d, "--dim", "batch=2147483647"), d,
             "over the memory budget")
    one_line("run --dim batch=2^31", hfuse("run", d, "--dim", "batch=2147483648"), d, "outside")
    r = hfuse("run", d)
    check(r.returncode == 0 and "y: float32 [64, 32]" in r.stdout,
          f"run binds a named dim to 64 without --dim: {r.stdout.strip()} {r.stderr.strip()}")
    r = hfuse("run", d, "--dim", "batch=4096")
    check(r.returncode == 0 and "y: float32 [4096, 32]" in r.stdout, "run --dim batch=4096")
    for path, n in ((s, 0), (d, 1)):
        r = hfuse("check", path)
        check(r.returncode == 0 and r.stdout.splitlines()[0].endswith(f"{n} dynamic dims"),
              f"check counts {n} dynamic dims: {r.stdout.strip()}")
    saved, outs = os.path.join(work, "saved.npz"), os.path.join(work, "saved_out.npz")
    r = hfuse("run", d, "--dim", "batch=8", "--save-inputs", saved, "-o", outs)
    feeds = dict(np.load(saved)) if r.returncode == 0 else {}
    check(sorted(feeds) == ["x"], f"--save-inputs writes the model's inputs only: {sorted(feeds)}")
    if feeds:
        compare("--save-inputs feeds onnxruntime as is", ort_run(d, feeds), dict(np.load(outs)))
    g = os.path.join(work, "converted.json")
    r = hfuse("fuse", s, "--format", "json", "-o", g)
    r2 = hfuse("check", g) if r.returncode == 0 else r
    check(r.returncode == 0 and r2.returncode == 0,
          f"fuse m.onnx --format json writes graph JSON: {r.stderr.strip()} {r2.stderr.strip()}")
    one_line("print m.onnx --format json", hfuse("print", s, "--format", "json"), s,
             "--format json reads graph JSON")
    # An op the CPU executor cannot run: verify fails before printing anything.
    rnd = model("msg_round", 17, [N("Round", ["h"], ["y"], name="round")], [("y", F)])
    p = os.path.join(work, "msg_round.onnx")
    onnx.save(onnx.shape_inference.infer_shapes(rnd), p)
    one_line("verify on an op the CPU cannot run", hfuse("verify", p), p, "op 'round'")
    one_line("run on an op the CPU cannot run", hfuse("run", p), p, "op 'round'")
    out = os.path.join(work, "opaque.json")
    r = hfuse("fuse", p, "--format", "json", "-o", out)
    check(r.returncode == 2 and r.stderr.startswith(f"hfuse: error: {out}: ") and
          "cannot hold" in r.stderr and not os.path.exists(out),
          f"fuse of an opaque op to graph JSON: one line naming {out}, no file: {r.stderr.strip()}")
    two = model("msg_two", 17, [N("Cast", ["h"], ["c1"], name="to_double1", to=TensorProto.DOUBLE),
                                N("Cast", ["h"], ["c2"], name="to_double2", to=TensorProto.DOUBLE),
                                N("Add", ["c1", "c2"], ["y"], name="add_doubles")],
                [("y", TensorProto.DOUBLE)])
    p = os.path.join(work, "msg_two.onnx")
    onnx.save(onnx.shape_inference.infer_shapes(two), p)
    one_line("two nodes that cannot be imported", hfuse("check", p), p,
             "2 nodes cannot be imported", "to_double1", "to_double2")


def bound_dim_if(work):
    """`if x.shape[0] == 8:` on a named batch: folded once --dim binds it, to
    the branch the value takes (both checked against onnxruntime)."""
    x = helper.make_tensor_value_info("x", F, ["batch", 16])
    branch = lambda op, out: helper.make_graph(  # noqa: E731
        [helper.make_node(op, ["x"], [out], name=f"b_{op}")], op, [],
        [helper.make_tensor_value_info(out, F, ["batch", 16])])
    g = helper.make_graph([
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "zero"], ["b"], name="batch", axis=0),
        helper.make_node("Equal", ["b", "eight"], ["cond"], name="is_8"),
        helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=branch("Relu", "t"),
                         else_branch=branch("Sigmoid", "e"))],
        "if_bound", [x], [helper.make_tensor_value_info("y", F, ["batch", 16])],
        [helper.make_tensor("zero", TensorProto.INT64, [], [0]),
         helper.make_tensor("eight", TensorProto.INT64, [], [8])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    path = os.path.join(work, "if_bound.onnx")
    onnx.save(m, path)
    for batch in (8, 3):
        feeds = {"x": rng.standard_normal((batch, 16)).astype(np.float32)}
        inputs, outs = (os.path.join(work, f"if_bound_{batch}.{e}.npz") for e in ("in", "out"))
        np.savez(inputs, **feeds)
        r = hfuse("run", path, "--dim", f"batch={batch}", "--inputs", inputs, "-o", outs, "--poison-buffers")
        check(r.returncode == 0, f"if_bound --dim batch={batch}: hfuse run (exit {r.returncode}) {r.stderr.strip()}")
        if r.returncode == 0:
            compare(f"if_bound --dim batch={batch}: hfuse vs onnxruntime", ort_run(path, feeds), dict(np.load(outs)))
        # Folded for batch + 1, the graph takes no feeds of another batch.
        r = hfuse("run", path, "--dim", f"batch={batch + 1}", "--inputs", inputs, "-o", outs)
        check(r.returncode == 2 and f"the model wants [{batch + 1}, 16]" in r.stderr,
              f"if_bound: feeds of batch {batch} refused by the graph folded for {batch + 1} "
              f"(exit {r.returncode}) {r.stderr.strip()}")
    r = hfuse("run", path)
    check(r.returncode == 2 and "at the dims bound before import (--dim NAME=V" in r.stderr,
          f"if_bound without --dim: the If named, --dim suggested (exit {r.returncode}) {r.stderr.strip()}")


def main():
    set_tool(sys.argv[1])
    with tempfile.TemporaryDirectory() as tmp:
        work = sys.argv[2] if len(sys.argv) > 2 else tmp
        os.makedirs(work, exist_ok=True)
        for m in cases():
            positive(work, m)
        for m, wants in refused():
            negative(work, m, wants)
        messages(work)
        bound_dim_if(work)
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
