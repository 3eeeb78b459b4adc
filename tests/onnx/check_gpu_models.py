#!/usr/bin/env python3
"""ONNX models on the GPU against the CPU reference: `hfuse verify --device cuda`.

    check_gpu_models.py HFUSE_BINARY DYNAMO_DIR

`verify --device cuda` fuses the model with the GPU pipeline, runs it on
the CUDA backend and compares it with the CPU executor on the original, on
the same random inputs. Checked here:

  - every op kind the CUDA backend runs natively for ONNX (the Gather,
    Softmax, Reduce*, float-math and batched-MatMul kernels, the reshape
    copies, concatenates and splits of narrow rows), in
    the forms each one takes and on both sides of its limits (negative and
    int32 indices, an axis other than the last, opset-11 Softmax, several
    reduced axes, keepdims 0, a batch broadcast from one matrix), and an op
    that runs on the host (Cast, Where, Transpose of a computed tensor),
    each in a model of its own made with onnx.helper;
  - the twelve real models of DYNAMO_DIR (PyTorch 2.11 dynamo exports,
    weights refilled first: scripts/onnx_skeleton.py), at a dynamic batch
    bound to 1 and to 512, and at the fixed batch.

Skipped, saying so, when hfuse finds no usable CUDA device.
"""
import os
import subprocess
import sys
import tempfile

import onnx
from onnx import TensorProto, helper

from onnx_checks import check, failures, hfuse, set_tool

F, I64, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32


def model(name, nodes, inputs, outputs, inits=(), opset=18):
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs], list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def ints(name, values, dtype=I64, dims=None):
    return helper.make_tensor(name, dtype, [len(values)] if dims is None else dims, values)


def op_models():
    """(name, model) for each native form and a few host ops."""
    table = helper.make_tensor("table", F, [50, 8], [0.01 * i for i in range(400)])
    yield "gather_embedding", model("g", [helper.make_node("Gather", ["table", "ids"], ["y"])],
                                    [("ids", I64, ["N"])], [("y", F, ["N", 8])], [table])
    yield "gather_int32_axis1_negative", model(
        "g", [helper.make_node("Gather", ["x", "at"], ["y"], axis=1)],
        [("x", F, [4, 6, 3])], [("y", F, [4, 2, 3])], [ints("at", [-1, 2], I32)])
    for axis, opset in ((-1, 18), (0, 18), (1, 11)):
        yield f"softmax_axis{axis}_opset{opset}", model(
            "s", [helper.make_node("Softmax", ["x"], ["y"], axis=axis)],
            [("x", F, [3, 5, 7])], [("y", F, [3, 5, 7])], opset=opset)
    yield "logsoftmax", model("s", [helper.make_node("LogSoftmax", ["x"], ["y"], axis=1)],
                              [("x", F, ["N", 9])], [("y", F, ["N", 9])])
    for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"):
        if op == "ReduceSum":  # axes an input from opset 13
            node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)
            yield f"{op}_axes_0_2", model("r", [node], [("x", F, [4, 5, 6])], [("y", F, [1, 5, 1])],
                                          [ints("axes", [0, -1])])
        else:  # an attribute before opset 18
            node = helper.make_node(op, ["x"], ["y"], axes=[1], keepdims=0)
            yield f"{op}_axis1_nokeep", model("r", [node], [("x", F, ["N", 8, 16])],
                                              [("y", F, ["N", 16])], opset=17)
    yield "reducesum_all", model("r", [helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)],
                                 [("x", F, [7, 9])], [("y", F, [])])
    for (a, b, y) in ((["N", 5, 4], ["N", 4, 3], ["N", 5, 3]),  # both batched
                      (["N", 5, 4], [4, 3], ["N", 5, 3]),       # B one matrix (a computed one)
                      ([5, 4], ["N", 4, 3], ["N", 5, 3])):      # A one matrix
        yield f"matmul_{len(a)}d_{len(b)}d", model(
            "m", [helper.make_node("MatMul", ["a", "b"], ["y"])],
            [("a", F, a), ("b", F, b)], [("y", F, y)])
    two = helper.make_tensor("two", F, [], [2.0])
    w = helper.make_tensor("w", F, [6], [0.1 * i - 0.2 for i in range(6)])
    yield "onnx_math", model("e", [
        helper.make_node("Pow", ["x", "two"], ["sq"]),           # a scalar exponent, broadcast
        helper.make_node("Max", ["sq", "w"], ["hi"]),            # a row, broadcast
        helper.make_node("Abs", ["x"], ["ax"]),
        helper.make_node("Sqrt", ["ax"], ["rt"]),
        helper.make_node("Min", ["hi", "rt"], ["lo"]),
        helper.make_node("Exp", ["lo"], ["ex"]),
        helper.make_node("Reciprocal", ["ex"], ["re"]),
        helper.make_node("Neg", ["re"], ["ng"]),
        helper.make_node("Log", ["ex"], ["y"]),
    ], [("x", F, ["N", 6])], [("y", F, ["N", 6]), ("ng", F, ["N", 6])], [two, w])
    # Rows of 4 and 8 bytes: a stack along the last axis, a split along it.
    yield "narrow_concat_split", model("c", [
        helper.make_node("Unsqueeze", ["a", "ax2"], ["a3"]),
        helper.make_node("Unsqueeze", ["b", "ax2"], ["b3"]),
        helper.make_node("Concat", ["a3", "b3", "a3"], ["y"], axis=2),
        helper.make_node("Split", ["a", "parts"], ["p0", "p1", "p2"], axis=1),
    ], [("a", F, ["N", 6]), ("b", F, ["N", 6])],
        [("y", F, ["N", 6, 3]), ("p0", F, ["N", 2]), ("p1", F, ["N", 1]), ("p2", F, ["N", 3])],
        [ints("ax2", [2]), ints("parts", [2, 1, 3])])
    yield "host_cast_where_transpose", model("h", [
        helper.make_node("Cast", ["ids"], ["f"], to=F),
        helper.make_node("Greater", ["x", "f"], ["mask"]),
        helper.make_node("Where", ["mask", "x", "f"], ["w"]),
        helper.make_node("Transpose", ["w"], ["y"], perm=[1, 0]),
    ], [("x", F, ["N", 6]), ("ids", I64, ["N", 6])], [("y", F, [6, "N"])])


def verify(path, label, *dims):
    r = hfuse("verify", path, "--device", "cuda", *dims)
    check(r.returncode == 0 and r.stdout.strip().endswith("PASS"),
          f"{label}: verify --device cuda {' '.join(dims)} (exit {r.returncode}) "
          + (r.stdout.strip().splitlines()[-2] if r.returncode == 0 else r.stderr.strip()))


def main():
    set_tool(sys.argv[1])
    dynamo = sys.argv[2]
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
            dims = ["--dim", "N=37"] if any(d.dim_param for i in m.graph.input
                                          for d in i.type.tensor_type.shape.dim) else []
            verify(path, name, *dims)
        tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                            "onnx_skeleton.py")
        for f in sorted(os.listdir(dynamo)):
            if not f.endswith(".onnx"):
                continue
            path = os.path.join(work, f)
            subprocess.run([sys.executable, tool, "refill", os.path.join(dynamo, f), path,
                            "--seed", "5"], check=True)
            if f.endswith(".dynamic.onnx"):
                for batch in (1, 512):
                    verify(path, f, "--dim", f"batch_size={batch}")
            else:
                verify(path, f)
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
