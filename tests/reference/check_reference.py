#!/usr/bin/env python3
"""Checks hfuse's CPU executor against the numpy reference (numpy_ref.py).

    check_reference.py HFUSE_BINARY

Builds small graphs covering every op type in float16, bfloat16 and float32
(rank-3 LayerNorm, splits and concatenates off dim 1, broadcasting
elementwise, dynamic dims, and the group ops, also as made by `hfuse fuse`),
runs each with `hfuse run` on seeded random inputs, runs numpy_ref.py on the
same inputs, and compares every output: max|hfuse - numpy| / max|numpy| must
be at most 1e-4 (float32), 1e-2 (float16) or 2e-2 (bfloat16). Prints one line
per graph and "N passed, M failed".
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TOL = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 2e-2}
DTYPES = ["float16", "bfloat16", "float32"]


class G:
    """A tiny graph builder."""

    def __init__(self, name, dims=()):
        self.g = {"graph_format": 1, "name": name, "dims": list(dims), "tensors": [], "ops": [],
                  "outputs": []}

    def t(self, name, shape, dtype, role=None):
        d = {"name": name, "shape": shape, "dtype": dtype}
        if role:
            d["role"] = role
        self.g["tensors"].append(d)
        return name

    def op(self, name, op, inputs, outputs, **attrs):
        self.g["ops"].append(dict(name=name, op=op, inputs=inputs, outputs=outputs, **attrs))

    def out(self, *names):
        self.g["outputs"] += names
        return self.g


def gemms(dt):
    b = G(f"gemms_{dt}")
    b.t("a", [16, 24], dt, "input")
    b.t("a3", [2, 8, 24], dt, "input")
    b.t("w", [12, 24], dt, "param")
    b.t("bias", [12], dt, "param")
    for i, t in enumerate(["gemm_rcr", "gemm_rcr_bias", "gemm_rcr_bias_relu", "gemm_rcr_bias_sigmoid"]):
        ins = ["a", "w"] + (["bias"] if t != "gemm_rcr" else [])
        b.t(f"y{i}", [16, 12], dt)
        b.op(f"g{i}", t, ins, [f"y{i}"], **({"alpha": 0.5} if i == 1 else {}))
    b.t("y3d", [2, 8, 12], dt)
    b.op("g3d", "gemm_rcr_bias_relu", ["a3", "w", "bias"], ["y3d"])
    return b.out("y0", "y1", "y2", "y3", "y3d")


def layernorms(dt):
    b = G(f"layernorms_{dt}")
    b.t("x", [3, 5, 40], dt, "input")
    b.t("g", [40], dt, "param")
    b.t("be", [40], dt, "param")
    b.t("g2", [5, 40], dt, "param")
    b.t("be2", [5, 40], dt, "param")
    for n in ["y0", "y1", "y2", "y3", "y4"]:
        b.t(n, [3, 5, 40], dt)
    b.op("ln", "layernorm", ["x", "g", "be"], ["y0"], normalized_shape=[40], eps=1e-5)
    b.op("ln2", "layernorm", ["x", "g2", "be2"], ["y1"], normalized_shape=[5, 40], eps=1e-3)
    b.op("lsm", "layernorm_sigmoid_mul", ["x", "g", "be"], ["y2"], normalized_shape=[40])
    b.op("ln_nogamma", "layernorm", ["x", None, "be"], ["y3"], normalized_shape=[40])
    b.op("ln_plain", "layernorm", ["x"], ["y4"], normalized_shape=[40])
    return b.out("y0", "y1", "y2", "y3", "y4")


def data_movement(dt):
    b = G(f"data_movement_{dt}")
    b.t("x", [4, 6, 10], dt, "input")
    for i, s in enumerate([1, 3]):
        b.t(f"s0_{i}", [s, 6, 10], dt)
    b.op("split0", "split", ["x"], ["s0_0", "s0_1"], split_sizes=[1, 3], dim=0)
    b.t("s2_0", [4, 6, 4], dt)
    b.t("s2_1", [4, 6, 6], dt)
    b.op("split2", "split", ["x"], ["s2_0", "s2_1"], split_sizes=[4, 6], dim=-1)
    b.t("c0", [4, 6, 10], dt)
    b.op("cat0", "concatenate", ["s0_1", "s0_0"], ["c0"], dim=0)
    b.t("c2", [4, 6, 10], dt)
    b.op("cat2", "concatenate", ["s2_1", "s2_0"], ["c2"], dim=2)
    b.t("r", [24, 10], dt)
    b.op("reshape", "reshape", ["c2"], ["r"], shape=[-1, 10])
    return b.out("c0", "c2", "r")


def elementwise(dt):
    b = G(f"elementwise_{dt}")
    b.t("x", [4, 1, 8], dt, "input")
    b.t("v", [8], dt, "param")
    b.t("p", [3, 1], dt, "input")
    b.t("q", [1, 5], dt, "input")
    outs = []
    for f in ["relu", "sigmoid", "tanh", "gelu", "silu"]:
        b.t(f, [4, 1, 8], dt)
        b.op(f"op_{f}", "elementwise", ["x"], [f], func=f)
        outs.append(f)
    for f in ["add", "sub", "mul"]:
        b.t(f, [4, 1, 8], dt)
        b.op(f"op_{f}", "elementwise", ["x", "v"], [f], func=f)
        outs.append(f)
    b.t("div", [3, 5], dt)
    b.op("op_div", "elementwise", ["p", "q"], ["div"], func="div")
    b.t("add3", [4, 1, 8], dt)
    b.op("op_add3", "elementwise", ["x", "v", "x"], ["add3"], func="add")
    return b.out(*(outs + ["div", "add3"]))


def dynamic(dt):
    b = G(f"dynamic_{dt}", dims=[{"name": "batch", "min": 1, "max": 64}])
    b.t("x", ["batch", 32], dt, "input")
    b.t("w", [16, 32], dt, "param")
    b.t("bias", [16], dt, "param")
    b.t("h", ["batch", 16], dt)
    b.op("fc", "gemm_rcr_bias_relu", ["x", "w", "bias"], ["h"])
    b.t("g", [16], dt, "param")
    b.t("be", [16], dt, "param")
    b.t("y", ["batch", 16], dt)
    b.op("ln", "layernorm", ["h", "g", "be"], ["y"], normalized_shape=[16])
    b.t("r", ["batch", 4, 4], dt)
    b.op("reshape", "reshape", ["y"], ["r"], shape=[-1, 4, 4])
    return b.out("r")


def towers(dt):
    """Split-fed towers, in the shape hfuse groups (the fused form is checked too)."""
    b = G(f"towers_{dt}")
    widths = [(16, 32, 8), (24, 32, 16), (16, 48, 8)]
    b.t("x", [8, sum(k for k, _, _ in widths)], dt, "input")
    b.op("split", "split", ["x"], [f"x{i}" for i in range(3)],
         split_sizes=[k for k, _, _ in widths], dim=1)
    for i, (k, n, n2) in enumerate(widths):
        b.t(f"x{i}", [8, k], dt)
        b.t(f"w1_{i}", [n, k], dt, "param"); b.t(f"b1_{i}", [n], dt, "param")
        b.t(f"h{i}", [8, n], dt)
        b.op(f"fc1_{i}", "gemm_rcr_bias_relu", [f"x{i}", f"w1_{i}", f"b1_{i}"], [f"h{i}"])
        b.t(f"g{i}", [n], dt, "param"); b.t(f"be{i}", [n], dt, "param")
        b.t(f"l{i}", [8, n], dt)
        b.op(f"ln_{i}", "layernorm_sigmoid_mul" if i == 1 else "layernorm",
             [f"h{i}", f"g{i}", f"be{i}"], [f"l{i}"], normalized_shape=[n])
        b.t(f"w2_{i}", [n2, n], dt, "param"); b.t(f"b2_{i}", [n2], dt, "param")
        b.t(f"y{i}", [8, n2], dt)
        b.op(f"fc2_{i}", "gemm_rcr_bias_sigmoid", [f"l{i}", f"w2_{i}", f"b2_{i}"], [f"y{i}"])
    b.t("out", [8, sum(n2 for _, _, n2 in widths)], dt)
    b.op("cat", "concatenate", [f"y{i}" for i in range(3)], ["out"], dim=1)
    return b.out("out")


def check(hfuse, tmp, graph_path, dims=()):
    dim_args = [f"--dim={d}" for d in dims]
    ins, out, ref = (os.path.join(tmp, n) for n in ("in.npz", "out.npz", "ref.npz"))
    subprocess.run([hfuse, "run", graph_path, "--seed", "7", "--save-inputs", ins, "-o", out]
                   + dim_args, check=True, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, os.path.join(HERE, "numpy_ref.py"), graph_path, ins, ref]
                   + dim_args, check=True)
    g = json.load(open(graph_path))
    dtypes = {t["name"]: t["dtype"] for t in g["tensors"]}
    got, want = np.load(out), np.load(ref)
    worst = []
    for name in g["outputs"]:
        dt = dtypes[name]
        conv = (lambda v: (v.astype(np.uint32) << 16).view(np.float32)) if dt == "bfloat16" else \
            (lambda v: v.astype(np.float32))
        a, r = conv(got[name]).astype(np.float64), conv(want[name]).astype(np.float64)
        if a.shape != r.shape:
            return False, f"{name}: shape {a.shape} vs {r.shape}"
        err = np.abs(a - r).max(initial=0.0) / max(np.abs(r).max(initial=0.0), 1e-30)
        worst.append((err, name, dt))
        if not err <= TOL[dt]:
            return False, f"{name} ({dt}): normalised error {err:.3g} > {TOL[dt]}"
    e = max(worst)
    return True, f"worst {e[1]} ({e[2]}) {e[0]:.2g}"


def main():
    hfuse = os.path.abspath(sys.argv[1])
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        for dt in DTYPES:
            for make in (gemms, layernorms, data_movement, elementwise, dynamic, towers):
                g = make(dt)
                path = os.path.join(tmp, g["name"] + ".json")
                json.dump(g, open(path, "w"))
                cases.append((path, ()))
                if make is dynamic:
                    cases.append((path, ("batch=37",)))
                if make is towers:  # the fused graph: group GEMMs and group LayerNorms
                    fused = os.path.join(tmp, g["name"] + ".fused.json")
                    subprocess.run([hfuse, "fuse", path, "-o", fused], check=True,
                                   stdout=subprocess.DEVNULL)
                    assert "group_gemm_rcr_bias_relu" in open(fused).read()
                    cases.append((fused, ()))
        for path, dims in cases:
            ok, msg = check(hfuse, tmp, path, dims)
            label = os.path.basename(path) + (" " + " ".join(dims) if dims else "")
            print(f"{'PASS' if ok else 'FAIL'} {label}: {msg}")
            passed += ok
            failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
