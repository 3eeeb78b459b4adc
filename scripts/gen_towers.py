#!/usr/bin/env python3
"""Writes a "towers" graph in graph JSON v1.

Input x [M, sum(K)] is split on dim 1 into T slices; tower i runs
gemm_rcr_bias_relu (K -> N), layernorm over N, gemm_rcr_bias_relu (N -> N2);
the T outputs are concatenated on dim 1 (3T + 2 ops). With --mixed, K, N and
N2 are drawn (seeded) from a list of widths; otherwise every tower is
K=64, N=128, N2=64.

    python3 scripts/gen_towers.py --towers 8 --rows 256 --mixed -o examples/towers_small.json
"""
import argparse
import json
import random
import sys

WIDTHS = [64, 96, 128, 160, 256, 320, 512, 1024]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--towers", type=int, default=8)
    p.add_argument("--rows", type=int, default=256)
    p.add_argument("--mixed", action="store_true")
    p.add_argument("--dtype", default="float16")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", default="-")
    a = p.parse_args()
    rng = random.Random(a.seed)
    shapes = []
    for _ in range(a.towers):
        if a.mixed:
            shapes.append((rng.choice(WIDTHS), rng.choice(WIDTHS), rng.choice(WIDTHS)))
        else:
            shapes.append((64, 128, 64))
    dt, m = a.dtype, a.rows
    tensors = [{"name": "x", "shape": [m, sum(s[0] for s in shapes)], "dtype": dt, "role": "input"}]
    ops = [{"name": "split", "op": "split", "inputs": ["x"],
            "outputs": [f"x{i}" for i in range(a.towers)],
            "split_sizes": [s[0] for s in shapes], "dim": 1}]
    tensors += [{"name": f"x{i}", "shape": [m, s[0]], "dtype": dt} for i, s in enumerate(shapes)]
    for i, (k, n, n2) in enumerate(shapes):
        def param(name, shape):
            tensors.append({"name": name, "shape": shape, "dtype": dt, "role": "param"})
        def inter(name, shape):
            tensors.append({"name": name, "shape": shape, "dtype": dt})
        param(f"w1_{i}", [n, k]); param(f"b1_{i}", [n]); inter(f"h1_{i}", [m, n])
        param(f"g_{i}", [n]); param(f"be_{i}", [n]); inter(f"h2_{i}", [m, n])
        param(f"w2_{i}", [n2, n]); param(f"b2_{i}", [n2]); inter(f"y{i}", [m, n2])
        ops.append({"name": f"t{i}.fc1", "op": "gemm_rcr_bias_relu",
                    "inputs": [f"x{i}", f"w1_{i}", f"b1_{i}"], "outputs": [f"h1_{i}"]})
        ops.append({"name": f"t{i}.ln", "op": "layernorm", "inputs": [f"h1_{i}", f"g_{i}", f"be_{i}"],
                    "outputs": [f"h2_{i}"], "normalized_shape": [n], "eps": 1e-5})
        ops.append({"name": f"t{i}.fc2", "op": "gemm_rcr_bias_relu",
                    "inputs": [f"h2_{i}", f"w2_{i}", f"b2_{i}"], "outputs": [f"y{i}"]})
    tensors.append({"name": "out", "shape": [m, sum(s[2] for s in shapes)], "dtype": dt})
    ops.append({"name": "concat", "op": "concatenate", "inputs": [f"y{i}" for i in range(a.towers)],
                "outputs": ["out"], "dim": 1})
    graph = {"graph_format": 1, "name": f"towers_{a.towers}", "dims": [], "tensors": tensors,
             "ops": ops, "outputs": ["out"]}
    text = json.dumps(graph, indent=1) + "\n"
    if a.output == "-":
        sys.stdout.write(text)
    else:
        with open(a.output, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
