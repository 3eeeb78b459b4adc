#!/usr/bin/env python3
"""An independent reference for hfuse's CPU executor: interprets graph JSON
v1 with numpy's own operations.

    numpy_ref.py GRAPH.json INPUTS.npz OUT.npz [--dim NAME=VALUE ...]

Values are stored in each tensor's dtype and computed in float32, as the
spec says: float16 is numpy's float16; bfloat16 (which numpy lacks) is kept
as uint16 bit patterns and rounded to nearest even by hand.
"""
import argparse
import json
import math

import numpy as np


def to_f32(value, dtype):
    if dtype == "bfloat16":
        return (value.astype(np.uint32) << 16).view(np.float32)
    return value.astype(np.float32)


def from_f32(x, dtype):
    x = np.asarray(x, dtype=np.float32)
    if dtype == "float16":
        return x.astype(np.float16)
    if dtype == "float32":
        return x
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    out = rounded.astype(np.uint16)
    nan = np.isnan(x)
    out[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return out


def sigmoid(x):
    return (1.0 / (1.0 + np.exp(-x.astype(np.float64)))).astype(np.float32)


def gelu(x):
    erf = np.vectorize(math.erf)(x.astype(np.float64) / math.sqrt(2.0))
    return (0.5 * x.astype(np.float64) * (1.0 + erf)).astype(np.float32)


UNARY = {
    "relu": lambda x: np.maximum(x, np.float32(0)),
    "sigmoid": sigmoid,
    "tanh": np.tanh,
    "gelu": gelu,
    "silu": lambda x: x * sigmoid(x),
}
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}


def gemm(a, b, bias, alpha, act):
    k = a.shape[-1]
    y = (a.reshape(-1, k) @ b.T).reshape(a.shape[:-1] + (b.shape[0],)) * np.float32(alpha)
    if bias is not None:
        y = y + bias
    if act == "relu":
        y = np.maximum(y, np.float32(0))
    elif act == "sigmoid":
        y = sigmoid(y)
    return y


def layernorm(x, gamma, beta, normalized, eps, sigmoid_mul):
    axes = tuple(range(x.ndim - len(normalized), x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(var + np.float32(eps))
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return x * sigmoid(y) if sigmoid_mul else y


def main():
    p = argparse.ArgumentParser()
    p.add_argument("graph")
    p.add_argument("inputs")
    p.add_argument("output")
    p.add_argument("--dim", action="append", default=[])
    a = p.parse_args()
    g = json.load(open(a.graph))
    dtypes = {t["name"]: t["dtype"] for t in g["tensors"]}
    feeds = np.load(a.inputs)
    vals = {name: to_f32(feeds[name], dtypes[name]) for name in feeds.files}

    def store(name, x):  # round to the tensor's dtype, keep the float32 view
        vals[name] = to_f32(from_f32(x, dtypes[name]), dtypes[name])

    pending = list(g["ops"])
    while pending:  # run ops whose inputs exist, in file order
        ready = [o for o in pending if all(i is None or i in vals for i in o["inputs"])]
        assert ready, "graph has a cycle or a missing input"
        for o in ready:
            pending.remove(o)
            t, ins, outs = o["op"], o["inputs"], o["outputs"]
            x = [vals[i] if i is not None else None for i in ins]
            if t.startswith("gemm_rcr") or t.startswith("group_gemm_rcr"):
                per = 2 if t.endswith("gemm_rcr") else 3
                act = "relu" if t.endswith("relu") else "sigmoid" if t.endswith("sigmoid") else None
                for m, out in enumerate(outs):
                    aa, bb = x[m * per], x[m * per + 1]
                    cc = x[m * per + 2] if per == 3 else None
                    store(out, gemm(aa, bb, cc, o.get("alpha", 1.0), act))
            elif t in ("layernorm", "layernorm_sigmoid_mul"):
                x += [None] * (3 - len(x))
                store(outs[0], layernorm(x[0], x[1], x[2], o["normalized_shape"],
                                         o.get("eps", 1e-5), t.endswith("mul")))
            elif t.startswith("group_layernorm"):
                n = len(outs)
                per = len(x) // n
                for m, out in enumerate(outs):
                    gamma = x[n + m] if per >= 2 else None
                    beta = x[2 * n + m] if per >= 3 else None
                    store(out, layernorm(x[m], gamma, beta, o["normalized_shapes"][m],
                                         o.get("eps", 1e-5), t.endswith("mul")))
            elif t == "split":
                cuts = np.cumsum(o["split_sizes"])[:-1]
                for out, part in zip(outs, np.split(x[0], cuts, axis=o["dim"])):
                    store(out, part)
            elif t == "concatenate":
                store(outs[0], np.concatenate(x, axis=o["dim"]))
            elif t == "elementwise":
                f = o["func"]
                if f in UNARY:
                    store(outs[0], UNARY[f](x[0]))
                else:
                    acc = x[0]
                    for v in x[1:]:
                        acc = BINARY[f](acc, v)
                    store(outs[0], acc)
            elif t == "reshape":
                store(outs[0], x[0].reshape(o["shape"]))
            else:
                raise SystemExit(f"unknown op {t}")
    np.savez(a.output, **{n: from_f32(vals[n], dtypes[n]) for n in g["outputs"]})


if __name__ == "__main__":
    main()
