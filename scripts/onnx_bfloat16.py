#!/usr/bin/env python3
"""Rewrites a float32 ONNX model as the same model in bfloat16 (or float16).

    onnx_bfloat16.py IN.onnx OUT.onnx [--float16]

What the exporter writes for the module after `module.to(torch.bfloat16)`:
every float32 tensor of the graph (inputs, outputs, value_info,
initializers, Constant and ConstantOfShape values) becomes bfloat16, and a
Cast or CastLike to float32 casts to bfloat16, so no op computes in float32
again. Integer tensors (ids, shapes, indices) stay as they are. Values are
rounded to the nearest bfloat16, ties to even, as torch's `.to` rounds.
`--float16` (`to_bfloat16(model, TensorProto.FLOAT16)`) does the same in
float16 (tests/onnx/check_gpu_models.py's 16-bit op models).

A model with subgraphs (If, Loop, Scan) or with float64 tensors is refused
(one line, exit 1): neither occurs in the ranking models this is for, and a
partial rewrite would leave ops reading one type and writing another.
bench/real_models.py uses it for the bfloat16 rows; the input feeds stay
float32 arrays, which `hfuse --inputs` rounds to a bfloat16 tensor.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

FLOAT, BF16 = TensorProto.FLOAT, TensorProto.BFLOAT16


def bf16_bits(values):
    """float32 values -> their bfloat16 patterns (uint16), round to nearest even; NaN stays NaN."""
    u = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = np.isnan(values)
    return np.where(nan, (u >> 16) | 0x40, rounded).astype(np.uint16)


def retype_tensor(t, to):
    """A float32 TensorProto rewritten in place as type `to` (raw_data), name and dims kept."""
    values = numpy_helper.to_array(t).astype(np.float32)
    out = TensorProto(name=t.name, data_type=to, dims=t.dims, doc_string=t.doc_string)
    out.raw_data = (bf16_bits(values) if to == BF16 else values.astype("<f2")).tobytes()
    t.CopyFrom(out)


def to_bfloat16(model, to=BF16):
    """`model` rewritten in place in type `to` (bfloat16 or float16), and returned."""
    assert to in (BF16, TensorProto.FLOAT16)
    g = model.graph
    for t in list(g.initializer) + [t for n in g.node for a in n.attribute for t in ([a.t] if a.HasField("t") else [])]:
        if t.data_type == TensorProto.DOUBLE:
            raise ValueError(f"tensor '{t.name}' is float64")
        if t.data_type == FLOAT:
            retype_tensor(t, to)
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        tt = vi.type.tensor_type
        if tt.elem_type == TensorProto.DOUBLE:
            raise ValueError(f"tensor '{vi.name}' is float64")
        if tt.elem_type == FLOAT:
            tt.elem_type = to
    for n in g.node:
        for a in n.attribute:
            if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                raise ValueError(f"node '{n.name}' ({n.op_type}) has a subgraph")
            if n.op_type == "Cast" and a.name == "to" and a.i == FLOAT:
                a.i = to
            if n.op_type == "Cast" and a.name == "to" and a.i == TensorProto.DOUBLE:
                raise ValueError(f"node '{n.name}' casts to float64")
    return model


def main():
    args = [a for a in sys.argv[1:] if a != "--float16"]
    if len(args) != 2 or len(sys.argv) - len(args) > 2:
        sys.exit(__doc__.split("\n\n")[1])
    model = onnx.load(args[0])
    try:
        to_bfloat16(model, TensorProto.FLOAT16 if "--float16" in sys.argv else BF16)
    except ValueError as e:
        sys.exit(f"onnx_bfloat16: {args[0]}: {e}")
    onnx.save(model, args[1])


if __name__ == "__main__":
    main()
