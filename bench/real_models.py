#!/usr/bin/env python3
"""The real-model benchmark on the GPU: hfuse and PyTorch, in one call.

    python3 bench/real_models.py OUT_DIR --hfuse BIN [--models rechub:MMOE,...]
                                [--batches 512,2048] [--profile rechub:MMOE,...] [--gemm-paths rechub:MMOE,...]
                                [--torch-variants eager,eager_graph,...] [--torch-budget S]
                                [--torch-warm-jobs N] [--dtype float32|bfloat16]

For each model (the dynamic-batch exports PyTorch 2.11's dynamo exporter
wrote: tests/onnx/dynamo/ for torch-rechub, tests/onnx/widedeep/dynamo/ for
pytorch-widedeep, weights refilled by scripts/onnx_skeleton.py) and batch:
`hfuse bench M --dim D=B --rules hfuse --inputs IN.npz` (ids inside every
vocabulary, tests/onnx/model_inputs.py; each variant checked against the
CPU reference first), then bench/torch_peers.py on the same modules in the
same call. Writes OUT_DIR/hfuse_NAME_B.json, OUT_DIR/torch_peers.json and
OUT_DIR/table.md, and prints the table: every time in µs; the
floor is hfuse bench's (FLOPs / 790 TFLOP/s or bytes / 4.3 TB/s, the larger).

`--dtype bfloat16` runs each model as it is after `module.to(torch.bfloat16)`:
the refilled export rewritten in bfloat16 by scripts/onnx_bfloat16.py; PyTorch
runs the module under `torch.autocast` in bfloat16 (torch-rechub's modules
cast their dense features with `.float()`, so `.to(torch.bfloat16)` does not
run in PyTorch). torch-rechub's models only: pytorch-widedeep's take
their ids as floats in one input (bfloat16 holds integers exactly only up to
256) and cast their continuous columns back to float32 (`.float()`), so they
run in float32 alone.
"""
import argparse
import json
import os
import subprocess
import sys

import onnx

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..")
sys.path.insert(0, os.path.join(root, "tests", "onnx"))
from model_inputs import dim_args, feeds_for, write_npz  # noqa: E402

sys.path.insert(0, os.path.join(root, "scripts"))
from onnx_bfloat16 import to_bfloat16  # noqa: E402

RECHUB = ["MMOE", "PLE", "ESMM", "AITM", "SharedBottom", "DeepFM", "WideDeep", "DCN", "DCNv2",
          "AutoInt", "FiBiNet", "DIN"]
WIDEDEEP = ["TabMlp", "TabResnet", "TabTransformer", "FTTransformer", "SAINT", "WideDeep"]
ALL = [f"rechub:{m}" for m in RECHUB] + [f"widedeep:{m}" for m in WIDEDEEP]


def model_dir(library):
    return os.path.join(root, "tests", "onnx", "dynamo" if library == "rechub" else "widedeep/dynamo")


def fmt(v):
    return f"{v:.1f}" if isinstance(v, (int, float)) else "—"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--hfuse", required=True)
    ap.add_argument("--models", default=",".join(ALL))
    ap.add_argument("--batches", default="512,2048")
    ap.add_argument("--profile", default="")
    ap.add_argument("--gemm-paths", default="",
                    help="models whose group GEMMs are also timed on each path (hfuse bench --gemm-paths)")
    ap.add_argument("--torch-variants", default="eager,eager_graph,compile,compile_graph")
    ap.add_argument("--torch-budget", type=float, default=1e9)
    ap.add_argument("--torch-warm-jobs", type=int, default=0,
                    help="torch_peers.py --warm-jobs: compile in this many processes before timing")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--check-up-to", type=int, default=1 << 30,
                    help="compare with the CPU reference only at batches up to this (the CPU's time)")
    ap.add_argument("--no-torch", action="store_true", help="hfuse only (the peers come from another run)")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    args = ap.parse_args()
    if args.dtype == "bfloat16" and any(not s.startswith("rechub:") for s in args.models.split(",")):
        ap.error("--dtype bfloat16 takes torch-rechub's models only (rechub:NAME): see the docstring")
    os.makedirs(os.path.join(args.out_dir, "models"), exist_ok=True)
    specs = args.models.split(",")
    profile = set(args.profile.split(",")) if args.profile else set()
    gemm_paths = set(args.gemm_paths.split(",")) if args.gemm_paths else set()
    batches = [int(b) for b in args.batches.split(",")]
    rows = {}
    for spec in specs:
        library, name = spec.split(":")
        src = os.path.join(model_dir(library), f"{name}.dynamic.onnx")
        path = os.path.join(args.out_dir, "models", f"{library}_{name}.onnx")
        subprocess.run([sys.executable, os.path.join(root, "scripts", "onnx_skeleton.py"), "refill", src, path,
                        "--seed", "5"], check=True, capture_output=True)
        if args.dtype == "bfloat16":
            onnx.save(to_bfloat16(onnx.load(path)), path)
        proto = onnx.load(path, load_external_data=False)
        for batch in batches:
            npz = os.path.join(args.out_dir, "models", f"{library}_{name}_{batch}.npz")
            feeds = feeds_for(os.path.join(model_dir(library), f"{name}.json"), batch, 11)
            write_npz(npz, feeds)
            out = os.path.join(args.out_dir, f"hfuse_{library}_{name}_{batch}.json")
            cmd = [args.hfuse, "bench", path, *dim_args(proto, feeds), "--rules", "hfuse", "--inputs", npz,
                   "--json", out, "--reps", str(args.reps)]
            if spec in profile:
                cmd.append("--profile")
            if spec in gemm_paths:
                cmd.append("--gemm-paths")
            if batch > args.check_up_to:
                cmd.append("--no-check")
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            except subprocess.TimeoutExpired:
                print(f"{spec} @ {batch}: hfuse bench did not finish in 300 s", flush=True)
                continue
            with open(os.path.join(args.out_dir, f"hfuse_{library}_{name}_{batch}.log"), "w") as f:
                f.write(" ".join(cmd) + "\n" + r.stdout + r.stderr)
            print(r.stdout if spec in profile else "\n".join(r.stdout.splitlines()[:4]), flush=True)
            if r.returncode != 0:
                print(f"{spec} @ {batch}: hfuse bench failed: {r.stderr.strip()}", flush=True)
                continue
            with open(out) as f:
                rows[(spec, batch)] = {v["name"]: v for v in json.load(f)["variants"]}
    peers_json = os.path.join(args.out_dir, "torch_peers.json")
    if not args.no_torch:
        subprocess.run([sys.executable, os.path.join(here, "torch_peers.py"), peers_json, "--models",
                        ",".join(specs), "--batches", args.batches, "--variants", args.torch_variants,
                        "--budget", str(args.torch_budget), "--reps", str(args.reps),
                        "--warm-jobs", str(args.torch_warm_jobs), "--dtype", args.dtype], check=False)
    peers = {}
    if os.path.exists(peers_json):
        with open(peers_json) as f:
            peers = json.load(f)["models"]
    variants = args.torch_variants.split(",")
    head = ["model", "batch", "floor", "hfuse unfused (graph)", "hfuse fused, a launch an op (graph)",
            "hfuse fused", "hfuse fused (graph)",
            "launches", "host"] + [f"torch {v}" for v in variants] + ["fused graph vs eager graph",
                                                                      "fused graph vs fastest torch"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for spec in specs:
        for batch in batches:
            if (spec, batch) not in rows:
                continue
            r = rows[(spec, batch)]
            unfused = r.get("unfused", {})
            fused = r.get("fused, hfuse rules", {})
            one_each = r.get("fused, hfuse rules, a launch an op", {})
            p = peers.get(f"{spec}@{batch}", {})
            times = [p.get(v) for v in variants]
            numeric = [t for t in times if isinstance(t, (int, float))]
            ours = fused.get("cudagraph_us")
            eager_graph = p.get("eager_graph")
            vs_eager = f"{eager_graph / ours:.2f}x" if isinstance(eager_graph, float) and ours else "—"
            vs_best = f"{min(numeric) / ours:.2f}x" if numeric and ours else "—"
            lines.append("| " + " | ".join([spec, str(batch), fmt(fused.get("floor_us")), fmt(unfused.get("cudagraph_us")),
                                            fmt(one_each.get("cudagraph_us")), fmt(fused.get("plain_us")), fmt(ours), str(fused.get("launches", "—")),
                                            str(fused.get("host_launches", "—"))]
                                           + [fmt(t) for t in times] + [vs_eager, vs_best]) + " |")
    table = f"{args.dtype}, times in µs\n\n" + "\n".join(lines) + "\n"
    with open(os.path.join(args.out_dir, "table.md"), "w") as f:
        f.write(table)
    print(table)


if __name__ == "__main__":
    main()
