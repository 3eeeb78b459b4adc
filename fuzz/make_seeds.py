#!/usr/bin/env python3
"""Writes the binary seed corpora of the fuzz targets into fuzz/seeds/:
small ONNX models (one per operator family the importer and the CPU
executor handle: Gemm, MatMul, LayerNormalization, Split, Concat, Reshape,
Transpose, Softmax, elementwise, Constant, an opaque op, external data) for
onnx_import, and .npz files (every dtype the reader takes, stored and
deflated, empty and 0-d arrays) for npz. The graph JSON targets are seeded
from ../shared/conformance and examples/ by scripts/fuzz.sh instead.

    python3 fuzz/make_seeds.py       (Debian's python3-onnx and python3-numpy)
"""
import io
import os
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

here = os.path.dirname(os.path.abspath(__file__))


def model(name, nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="seed")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m.SerializeToString()


def vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def w(name, *shape):
    rng = np.random.default_rng(len(name) + sum(shape))
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


def i64(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def onnx_seeds():
    s = {}
    s["gemm_relu"] = model("g", [helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1),
                                 helper.make_node("Relu", ["h"], ["y"])],
                           [vi("x", [4, 8])], [vi("y", [4, 16])], [w("w", 16, 8), w("b", 16)])
    s["two_towers"] = model("t", [helper.make_node("MatMul", ["x", "w0"], ["a"]),
                                  helper.make_node("MatMul", ["x", "w1"], ["b"]),
                                  helper.make_node("Add", ["a", "b"], ["y"])],
                            [vi("x", [2, 8])], [vi("y", [2, 4])], [w("w0", 8, 4), w("w1", 8, 4)])
    s["layernorm"] = model("ln", [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)],
                           [vi("x", [3, 8])], [vi("y", [3, 8])], [w("g", 8), w("b", 8)], opset=17)
    s["split_concat"] = model("sc", [helper.make_node("Split", ["x", "s"], ["a", "b"], axis=1),
                                     helper.make_node("Sigmoid", ["a"], ["c"]),
                                     helper.make_node("Concat", ["c", "b"], ["y"], axis=1)],
                              [vi("x", [2, 6])], [vi("y", [2, 6])], [i64("s", [2, 4])])
    s["reshape"] = model("r", [helper.make_node("Reshape", ["x", "s"], ["y"])],
                         [vi("x", [2, 6])], [vi("y", [3, 4])], [i64("s", [3, -1])])
    s["transpose"] = model("tr", [helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0, 2])],
                           [vi("x", [2, 3, 4])], [vi("y", [3, 2, 4])])
    s["softmax_matmul"] = model("sm", [helper.make_node("MatMul", ["x", "x2"], ["a"]),
                                       helper.make_node("Softmax", ["a"], ["y"], axis=-1)],
                                [vi("x", [2, 3, 4]), vi("x2", [2, 4, 5])], [vi("y", [2, 3, 5])])
    s["constant"] = model("c", [helper.make_node("Constant", [], ["k"], value=w("kv", 4)),
                                helper.make_node("Mul", ["x", "k"], ["y"])],
                          [vi("x", [2, 4])], [vi("y", [2, 4])])
    s["dynamic"] = model("d", [helper.make_node("Tanh", ["x"], ["y"])],
                         [vi("x", ["batch", 4])], [vi("y", ["batch", 4])])
    s["fp16"] = model("h", [helper.make_node("Relu", ["x"], ["y"])],
                      [vi("x", [2, 4], TensorProto.FLOAT16)], [vi("y", [2, 4], TensorProto.FLOAT16)])
    s["opaque"] = model("o", [helper.make_node("Exp", ["x"], ["y"])], [vi("x", [2])], [vi("y", [2])])
    ext = w("e", 4)
    ext.ClearField("raw_data")
    ext.ClearField("float_data")
    ext.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "weights.bin"), ("offset", "0"), ("length", "16")):
        e = ext.external_data.add()
        e.key, e.value = k, v
    g = helper.make_graph([helper.make_node("Add", ["x", "e"], ["y"])], "ext", [vi("x", [4])], [vi("y", [4])],
                          initializer=[ext])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    s["external"] = m.SerializeToString()
    return s


def npz_bytes(arrays, compressed):
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


def npz_seeds():
    a = {
        "f4": np.arange(6, dtype=np.float32).reshape(2, 3),
        "f2": np.arange(4, dtype=np.float16),
        "u2": np.arange(3, dtype=np.uint16),
        "f8": np.ones((2, 2), dtype=np.float64),
        "empty": np.zeros((0, 4), dtype=np.float32),
        "scalar": np.float32(1.5),
    }
    return {"stored": npz_bytes(a, False), "deflated": npz_bytes(a, True),
            "one": npz_bytes({"x": np.ones((3,), np.float32)}, False)}


def write(target, seeds):
    d = os.path.join(here, "seeds", target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    write("onnx_import", onnx_seeds())
    write("npz", npz_seeds())
