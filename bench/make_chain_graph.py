#!/usr/bin/env python3
"""A chain of elementwise ops on one large float32 tensor, for the CPU memory target.

    python3 bench/make_chain_graph.py OUT.json [--ops 61] [--rows 4096] [--cols 2048]

t0 = relu(x), t_i = t_(i-1) + x: at any step x, t_(i-1) and t_i are live,
three tensors of rows x cols floats (96 MiB at the defaults), while the
graph has ops + 1 of them (issue 21's case: `hfuse run` of such a graph
held every intermediate, 6.7 GB). `hfuse run OUT.json --profile --reps 1`
prints the largest live set and the process's peak resident set.
"""
import argparse
import json

p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--ops", type=int, default=61)
p.add_argument("--rows", type=int, default=4096)
p.add_argument("--cols", type=int, default=2048)
a = p.parse_args()
shape = [a.rows, a.cols]
tensors = [{"name": "x", "shape": shape, "dtype": "float32", "role": "input"}]
ops = []
for i in range(a.ops):
    tensors.append({"name": f"t{i}", "shape": shape, "dtype": "float32"})
    if i == 0:
        ops.append({"name": "op0", "op": "elementwise", "func": "relu", "inputs": ["x"], "outputs": ["t0"]})
    else:
        ops.append({"name": f"op{i}", "op": "elementwise", "func": "add", "inputs": [f"t{i - 1}", "x"],
                    "outputs": [f"t{i}"]})
with open(a.out, "w") as f:
    json.dump({"graph_format": 1, "name": f"chain_{a.ops}", "dims": [], "tensors": tensors, "ops": ops,
               "outputs": [f"t{a.ops - 1}"]}, f, indent=1)
