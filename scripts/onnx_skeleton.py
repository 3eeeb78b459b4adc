#!/usr/bin/env python3
"""Keeps an exported ONNX model's graph without its weights, and gives it weights again.

    onnx_skeleton.py strip IN.onnx OUT.onnx            the graph, weights left out
    onnx_skeleton.py refill IN.onnx OUT.onnx [--seed S] seeded weights put back

The PyTorch 2.x (dynamo) exports of the real-model tests are made on the GPU
machine, the only one with that PyTorch, and kept in the repo
(tests/onnx/dynamo/). Their weights are random numbers of no interest, tens
of MB a model; the graph is what the exporter wrote and what the tests are
about. `strip` drops the data of every floating-point initializer of 64 or
more elements (embeddings, GEMM weights, biases, norm parameters) and marks
it in its doc_string; every other tensor (shape constants, indices, small
scalars) stays as written, external data read back inline. `refill` gives
each marked initializer seeded values: a tensor of rank 2 or more uniform in
±sqrt(3 / its largest dim) (so a layer keeps activations O(1)), a vector in
[0.05, 0.15] (positive: BatchNorm's variance is one). The refilled model is
written whole, weights inline.
"""
import argparse
import sys

import numpy as np
import onnx
from onnx import numpy_helper

MARK = "hfuse-skeleton: weights left out, refill with scripts/onnx_skeleton.py"
FLOATS = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE}
MIN_ELEMENTS = 64


def numel(tensor):
    return int(np.prod(tensor.dims, dtype=np.int64)) if tensor.dims else 1


def strip(model):
    kept = 0
    for t in model.graph.initializer:
        if t.data_type in FLOATS and numel(t) >= MIN_ELEMENTS:
            stripped = onnx.TensorProto(name=t.name, data_type=t.data_type, dims=t.dims, doc_string=MARK)
            t.CopyFrom(stripped)
        else:
            kept += 1
    return kept


def refill(model, seed):
    rng = np.random.default_rng(seed)
    marked = [t for t in model.graph.initializer if t.doc_string == MARK]
    for t in marked:
        shape = tuple(t.dims)
        dtype = onnx.helper.tensor_dtype_to_np_dtype(t.data_type)
        if len(shape) >= 2:
            bound = np.sqrt(3.0 / max(shape))
            values = rng.uniform(-bound, bound, shape)
        else:
            values = rng.uniform(0.05, 0.15, shape)
        t.CopyFrom(numpy_helper.from_array(values.astype(dtype), t.name))
    return len(marked)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("action", choices=("strip", "refill"))
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    model = onnx.load(args.input)  # external data, if any, read in
    if args.action == "strip":
        kept = strip(model)
        print(f"{args.output}: {kept} initializers kept as written")
    else:
        if refill(model, args.seed) == 0:
            sys.exit(f"onnx_skeleton: {args.input}: no initializer marked for refilling")
    onnx.save(model, args.output)


if __name__ == "__main__":
    main()
