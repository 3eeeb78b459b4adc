#!/usr/bin/env python3
"""Writes a graph of T independent gemm_rcr ops (one input each), or with
--op gemm_rcr_bias_relu of T GEMMs with bias and ReLU, for the grouped-GEMM
micro-benchmark: `hfuse bench` times it unfused (T cuBLAS launches, plain and
in a CUDA graph) and fused (one group op: CUTLASS grouped or cuBLAS grouped,
or strided-batched when every member has one shape).

    python3 scripts/gen_gemm_group.py --members 64 --rows 2048 --mixed -o g.json
    python3 scripts/gen_gemm_group.py --members 64 --rows 2048 --mixed --op gemm_rcr_bias_relu -o r.json
    python3 scripts/gen_gemm_group.py --members 128 --rows 256 --k 128 --n 128 -o u.json
"""
import argparse
import json
import random

WIDTHS = [64, 96, 128, 160, 256, 320, 512, 1024]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--members", type=int, default=64)
    p.add_argument("--rows", type=int, default=2048)
    p.add_argument("--mixed", action="store_true", help="K and N drawn from %s" % WIDTHS)
    p.add_argument("--k", type=int, default=128)
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--dtype", default="float16")
    p.add_argument("--op", default="gemm_rcr", choices=["gemm_rcr", "gemm_rcr_bias_relu"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-o", "--output", required=True)
    a = p.parse_args()
    rng = random.Random(a.seed)
    tensors, ops, outs = [], [], []
    for i in range(a.members):
        k, n = (rng.choice(WIDTHS), rng.choice(WIDTHS)) if a.mixed else (a.k, a.n)
        tensors += [{"name": f"x{i}", "shape": [a.rows, k], "dtype": a.dtype, "role": "input"},
                    {"name": f"w{i}", "shape": [n, k], "dtype": a.dtype, "role": "param"},
                    {"name": f"y{i}", "shape": [a.rows, n], "dtype": a.dtype}]
        inputs = [f"x{i}", f"w{i}"]
        if a.op != "gemm_rcr":
            tensors.append({"name": f"b{i}", "shape": [n], "dtype": a.dtype, "role": "param"})
            inputs.append(f"b{i}")
        ops.append({"name": f"fc{i}", "op": a.op, "inputs": inputs, "outputs": [f"y{i}"]})
        outs.append(f"y{i}")
    prefix = "gemm_group" if a.op == "gemm_rcr" else f"{a.op}_group"
    name = f"{prefix}_{'mixed' if a.mixed else 'uniform'}_T{a.members}_M{a.rows}"
    json.dump({"graph_format": 1, "name": name, "tensors": tensors, "ops": ops, "outputs": outs},
              open(a.output, "w"), indent=1)


if __name__ == "__main__":
    main()
