#!/usr/bin/env python3
"""pytorch-widedeep 1.7.0's tabular models through hfuse.

    check_widedeep_models.py HFUSE_BINARY MODEL_DIR NAME

MODEL_DIR is tests/onnx/widedeep/dynamo or tests/onnx/widedeep/torchscript:
NAME.{static,dynamic}.onnx as PyTorch 2.11 exported them on the GPU machine
(scripts/make_widedeep_models.py), kept without their weights
(scripts/onnx_skeleton.py strip), and NAME.json with the inputs: X float32
[batch, 39] whose first `int_columns` columns hold integer ids in [low,
high) as floats (the library reads them as X[:, idx].long()), the rest
continuous; WideDeep also X_wide int64 ids in [0, high). The dynamic export's
batch dim is named `batch`. The weights are refilled from a seed first.
For each of the two exports:

  - `hfuse check` accepts it;
  - `hfuse fuse` forms the groups of GROUPS below, by op type and size and
    by the module each member comes from (the exporter's op name for
    TorchScript, its `pkg.torch.onnx.name_scopes` for dynamo): under the
    seed rules at the fixed batch (with a dynamic batch the seed rules group
    no GEMM: AITemplate's static-A rule; `--dim batch=512` gives the groups),
    under `--rules hfuse` at both, the dynamic export exactly the fixed
    one's groups, and the embedding lookups one group_gather of the sizes
    of GATHER_GROUPS; every fused model passes onnx.checker;
  - under both rule sets: `hfuse verify` passes (fused vs unfused on the
    CPU, random inputs; the dynamic export at batch 1 and 37);
  - `hfuse run` on the fused model matches onnxruntime on the original
    (max|a - b| / max|ref| <= 1e-5), on inputs the JSON describes (the
    dynamic export at batch 1 and 37 too);
  - onnxruntime on `hfuse fuse --export standard` matches it too, and that
    model holds no Einsum (einsum-to-matmul) and no ai.hfuse node.
"""
import ast
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import onnx

from onnx_checks import check, compare, failures, full_check, hfuse, ort_run, set_tool

# The groups each model forms, the same for both exporters: a member is
# named by a pattern of the module it comes from. The feed-forward models
# (TabMlp, WideDeep: one MLP, the wide part an embedding sum) and
# FTTransformer (one fused qkv_proj per block; its LayerNorms are each on
# the path of the next) have nothing independent to group; the per-block
# LayerNorms of the transformers stay apart for the same reason (cycle-risk).
R, B = "group_gemm_rcr", "group_gemm_rcr_bias"
GROUPS = {
    "TabMlp": [],
    # The first residual block: its Linear (BatchNorm folded in: the dynamo
    # export names the GEMM after the BatchNorm) and the resize shortcut
    # (TorchScript: resize/resize.0), both on the block's input.
    "TabResnet": [(B, [r"block_0\.(lin1|bn1)\b", r"block_0\.resize\.(resize\.)?[01]\b"])],
    # Per block: the Q projection with the K/V one (both read the block's input).
    "TabTransformer": [(R, [rf"transformer_block{b}\..*attn\.q_proj\b",
                            rf"transformer_block{b}\..*attn\.kv_proj\b"]) for b in range(2)],
    "FTTransformer": [],
    # Per block: Q with K/V of the column attention, and of the row attention.
    "SAINT": [(R, [rf"saint_block{b}\..*{a}\.q_proj\b", rf"saint_block{b}\..*{a}\.kv_proj\b"])
              for b in range(2) for a in ("col_attn", "row_attn")],
    "WideDeep": [],
}
# Under the hfuse rules, the embedding lookups in one group_gather each
# (fuse-group-gathers), by size: one per categorical column (26), plus the
# wide part's lookup in WideDeep; the transformers look every column up in
# one shared table, a single Gather with nothing to group.
GATHER_GROUPS = {"TabMlp": [26], "TabResnet": [26], "WideDeep": [27]}
DYNAMIC_BATCHES = (1, 37)


def refill(work, mode):
    path = os.path.join(work, f"{NAME}.{mode}.refilled.onnx")
    tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                        "onnx_skeleton.py")
    subprocess.run([sys.executable, tool, "refill", os.path.join(MODEL_DIR, f"{NAME}.{mode}.onnx"),
                    path, "--seed", "5"], check=True)
    return path


def module_of(model_path):
    """op name -> the module it comes from (dots between the parts)."""
    m = onnx.load(model_path, load_external_data=False)
    modules = {}
    for n in m.graph.node:
        scopes = next((p.value for p in n.metadata_props if p.key == "pkg.torch.onnx.name_scopes"),
                      None)
        # dynamo: ['', 'model', ..., 'model...q_proj', 'linear'] (the last is the FX node);
        # TorchScript: the op name is the module path, '/'-separated.
        modules[n.name] = ast.literal_eval(scopes)[-2] if scopes else n.name.replace("/", ".")
    return modules


def groups_of(report, model_path):
    modules = module_of(model_path)
    return sorted((g["op"], sorted(modules.get(x, x) for x in g["members"]))
                  for g in json.load(open(report))["groups"])


def matches(got, want):
    """Whether the groups `got` (op, member modules) are exactly `want`
    (op, member patterns): each wanted group one of them, each pattern one member."""
    left = list(got)
    for op, patterns in want:
        found = None
        for i, (gop, members) in enumerate(left):
            if gop != op or len(members) != len(patterns):
                continue
            free = list(members)
            for p in patterns:
                hit = next((m for m in free if re.search(p, m)), None)
                if hit is None:
                    break
                free.remove(hit)
            else:
                found = i
                break
        if found is None:
            return False
        left.pop(found)
    return not left


def feeds_for(batch, seed):
    """Inputs as NAME.json describes them, at `batch`."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in INFO["inputs"]:
        shape = [batch] + i["shape"][1:]
        if i["dtype"] == "int64":
            feeds[i["name"]] = rng.integers(0, i["high"], size=shape, dtype=np.int64)
            continue
        x = rng.random(size=shape, dtype=np.float32)
        ids = i.get("int_columns", 0)
        x[:, :ids] = rng.integers(i.get("low", 0), i["high"], size=(batch, ids)).astype(np.float32)
        feeds[i["name"]] = x
    return feeds


def run_against_ort(work, label, model, fused, batch, dims):
    """hfuse's CPU on `fused` vs onnxruntime on `model`, at `batch`."""
    feeds = feeds_for(batch, 11 + batch)
    inputs = os.path.join(work, "inputs.npz")
    outs = os.path.join(work, "outputs.npz")
    np.savez(inputs, **feeds)
    want = ort_run(model, feeds)
    r = hfuse("run", fused, "--inputs", inputs, "-o", outs, "--poison-buffers", *dims)
    check(r.returncode == 0, f"{label}: hfuse run fused (exit {r.returncode}) {r.stderr.strip()}")
    if r.returncode == 0:
        compare(f"{label}: hfuse CPU on fused vs onnxruntime on original", want,
                dict(np.load(outs)))
    return feeds, want


def one(work, mode, rules, model, static_groups):
    label = f"{NAME}.{mode} ({EXPORTER}) --rules {rules}"
    dynamic = mode == "dynamic"
    if rules == "seed":
        r = hfuse("check", model)
        check(r.returncode == 0, f"{label}: hfuse check (exit {r.returncode}) {r.stderr.strip()}")
        if r.returncode:
            return
        print(r.stdout.strip())
    tag = f"{NAME}.{mode}.{rules}"
    fused, report = (os.path.join(work, f"{tag}.{e}") for e in ("fused.onnx", "report.json"))
    r = hfuse("fuse", model, "-o", fused, "--report", report, "--rules", rules)
    check(r.returncode == 0, f"{label}: hfuse fuse (exit {r.returncode}) {r.stderr.strip()}")
    if r.returncode:
        return
    print(r.stdout.splitlines()[0])
    got = groups_of(report, model)
    gathers = sorted(len(m) for op, m in got if op == "group_gather")
    want_gathers = GATHER_GROUPS.get(NAME, []) if rules == "hfuse" else []
    check(gathers == want_gathers, f"{label}: gather groups of {want_gathers} lookups"
          + ("" if gathers == want_gathers else f": got {gathers}"))
    got = [g for g in got if g[0] != "group_gather"]
    want = [] if dynamic and rules == "seed" else GROUPS[NAME]
    check(matches(got, want), f"{label}: the groups {[(op, len(m)) for op, m in want]}"
          + ("" if matches(got, want) else f": got {got}"))
    if dynamic and rules == "seed":  # --dim fixes the batch: the fixed-batch groups
        fixed = os.path.join(work, f"{tag}.dim.json")
        r = hfuse("fuse", model, "--report", fixed, "--dim", "batch=512")
        ok = r.returncode == 0 and matches(groups_of(fixed, model), GROUPS[NAME])
        check(ok, f"{label}: --dim batch=512 gives the fixed-batch groups (exit {r.returncode}) "
              f"{r.stderr.strip()}")
    if rules == "hfuse":
        if dynamic:
            check(got == static_groups, f"{label}: the fixed batch's {len(got)} groups, by module"
                  + ("" if got == static_groups else f": got {got}, static {static_groups}"))
        else:
            static_groups.extend(got)
    full_check(fused, f"{label}: fused (ai.hfuse)")

    for batch in DYNAMIC_BATCHES if dynamic else (None,):
        dims = ["--dim", f"batch={batch}"] if batch else []
        r = hfuse("verify", model, "--rules", rules, *dims)
        check(r.returncode == 0 and r.stdout.strip().endswith("PASS"),
              f"{label}: hfuse verify {' '.join(dims)} (exit {r.returncode}) {r.stderr.strip()}")
    batches = DYNAMIC_BATCHES if dynamic else (INFO["inputs"][0]["shape"][0],)
    results = [run_against_ort(work, f"{label} at batch {b}", model, fused, b,
                               ["--dim", f"batch={b}"] if dynamic else []) for b in batches]

    standard = os.path.join(work, f"{tag}.standard.onnx")
    r = hfuse("fuse", model, "-o", standard, "--export", "standard", "--rules", rules)
    check(r.returncode == 0,
          f"{label}: fuse --export standard (exit {r.returncode}) {r.stderr.strip()}")
    if r.returncode:
        return
    full_check(standard, f"{label}: standard")
    written = onnx.load(standard)
    odd = sorted({n.op_type for n in written.graph.node if n.op_type == "Einsum" or n.domain})
    # A model in which no group formed comes back as it was read (Einsums and all).
    if got:
        check(not odd, f"{label}: standard holds no Einsum and no custom op ({odd})")
    for (feeds, want), b in zip(results, batches):
        compare(f"{label}: onnxruntime on standard vs original at batch {b}", want,
                ort_run(standard, feeds))


def main():
    global MODEL_DIR, NAME, INFO, EXPORTER
    set_tool(sys.argv[1])
    MODEL_DIR, NAME = sys.argv[2], sys.argv[3]
    INFO = json.load(open(os.path.join(MODEL_DIR, f"{NAME}.json")))
    EXPORTER = INFO["exporter"]
    print(f"{NAME}: {INFO['library']}, exported by PyTorch {INFO['torch']}'s {EXPORTER} exporter "
          f"(opset {INFO['opset']})")
    with tempfile.TemporaryDirectory() as work:
        models = {mode: refill(work, mode) for mode in ("static", "dynamic")}
        for rules in ("seed", "hfuse"):
            static_groups = []
            for mode in ("static", "dynamic"):
                one(work, mode, rules, models[mode], static_groups)
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
