#!/usr/bin/env python3
"""Real ranking models from torch-rechub 0.9.0 through hfuse.

    check_rechub_models.py HFUSE_BINARY MODEL_DIR NAME [OPSET]

MODEL_DIR holds what scripts/make_rechub_models.py writes (NAME.static.onnx,
NAME.dynamic.onnx, NAME.json: the inputs and their id ranges). For each of
the two exports of model NAME:

  - `hfuse check` accepts it;
  - `hfuse fuse` with the seed rules forms exactly the groups listed in
    GROUPS below, by member op names: experts of one level, gates, per-task
    towers, cross layers (with a dynamic batch the seed rules group no GEMM:
    AITemplate's static-A rule; `--dim` fixing the batch gives GROUPS);
    with `--rules hfuse` exactly those of HFUSE_GROUPS, every embedding
    lookup in a group_gather (gather_groups_expected), and the
    dynamic-batch export forms exactly the groups of the fixed-batch one;
    every fused model passes onnx.checker;
  - all that follows, under both rule sets:
  - `hfuse verify` passes (fused vs unfused on the CPU, random inputs);
  - `hfuse run` on the fused model matches onnxruntime on the original, on
    inputs with ids inside every vocabulary (max|a - b| / max|ref| <= 1e-5),
    and under the hfuse rules gives the bytes of the seed rules' fusion
    (`hfuse run --rules seed` on the original: no lookup grouped);
  - onnxruntime on `hfuse fuse --export standard` matches it too.

A MODEL_DIR whose NAME.json says "exporter": "dynamo" holds PyTorch 2.11's
dynamo exports (tests/onnx/dynamo/, made on the GPU machine, the only one
with that PyTorch, and kept without their weights: scripts/onnx_skeleton.py).
Their weights are refilled from a seed first; their op names are the
exporter's own ("node_linear_4"), so the groups are checked by shape: the
same number of groups of each op type and size as GROUPS and HFUSE_GROUPS
name for the TorchScript export of the same model. The dynamic batch must
still form exactly the fixed batch's groups, their members named by the
module and FX node each was exported from (the exporter numbers the nodes
it makes differently in the two).

With OPSET, the two exports are first converted to that default-domain
opset by the installed onnx's version_converter (IR version 10, or 14 from
opset 23 on: what current exporters write), the closest stand-in here for
PyTorch 2.x's dynamo exports; the same checks run on the converted models,
and the fused and standard exports must keep the model's opset and IR
version.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx

from onnx_checks import check, compare, failures, full_check, hfuse, ort_run, set_tool



def layers(op, prefix_format, indices, suffix="Gemm"):
    return (op, [prefix_format.format(i) + suffix for i in indices])


# The groups the seed rules form at a fixed batch, per model: what a person
# would group. K = 26·16 + 13 = 429 is odd, so the seed's alignment rule
# leaves the first layers that read the embeddings alone (the hfuse rule
# set, once it lands, groups them too).
R, S = "group_gemm_rcr_bias_relu", "group_gemm_rcr_bias_sigmoid"
SPECIFIC = [f"experts_specific.{i}" for i in range(6)]
SHARED = ["experts_shared.0", "experts_shared.1"]
GROUPS = {
    "MMOE": [
        layers(R, "/model/experts.{}/mlp/mlp.4/", range(8)),          # experts, layer 2
        layers(R, "/model/towers.{}/mlp/mlp.0/", range(3)),           # task towers
        layers(S, "/model/towers.{}/mlp/mlp.4/", range(3)),
    ],
    "PLE": [
        layers("group_gemm_rcr_bias", "/model/cgc_layers.1/gates_specific.{}/mlp/mlp.0/", range(3)),
        (R, [f"/model/cgc_layers.0/{e}/mlp/mlp.4/Gemm" for e in SHARED + SPECIFIC]),
        (R, [f"/model/cgc_layers.1/{e}/mlp/mlp.0/Gemm" for e in SHARED + SPECIFIC]),
        (R, [f"/model/cgc_layers.1/{e}/mlp/mlp.4/Gemm" for e in SHARED + SPECIFIC]),
        layers(R, "/model/towers.{}/mlp/mlp.0/", range(3)),
        layers(S, "/model/towers.{}/mlp/mlp.4/", range(3)),
    ],
    "ESMM": [
        layers(R, "/model/tower_{}/mlp/mlp.0/", ["ctr", "cvr"]),
        layers(R, "/model/tower_{}/mlp/mlp.4/", ["ctr", "cvr"]),
        layers(S, "/model/tower_{}/mlp/mlp.8/", ["ctr", "cvr"]),
    ],
    "AITM": [
        ("group_gemm_rcr", [f"/model/aits.0/{p}_layer/MatMul" for p in "qkv"]),
        ("group_gemm_rcr", [f"/model/aits.1/{p}_layer/MatMul" for p in "qkv"]),
        layers(R, "/model/bottoms.{}/mlp/mlp.4/", range(3)),
        (R, ["/model/info_gates.0/mlp/mlp.0/Gemm", "/model/towers.0/mlp/mlp.0/Gemm"]),
        (R, ["/model/info_gates.1/mlp/mlp.0/Gemm", "/model/towers.1/mlp/mlp.0/Gemm"]),
        layers(S, "/model/towers.{}/mlp/mlp.4/", range(3)),
    ],
    "SharedBottom": [
        layers(R, "/model/towers.{}/mlp/mlp.0/", range(3)),
        layers(S, "/model/towers.{}/mlp/mlp.4/", range(3)),
    ],
    "DeepFM": [("group_gemm_rcr_bias", ["/model/linear/fc/Gemm", "/model/mlp/mlp/mlp.8/Gemm"])],
    "WideDeep": [],
    "DCN": [],
    # DCN-Mix cross layers (DCNv2 with 4 experts of rank 32): per layer the
    # experts' C (32x32) and U (429x32) projections; V and the gates read
    # K = 429 (odd), which only the hfuse rules group.
    "DCNv2": [("group_gemm_rcr", [f"/model/crossnet/MatMul_{13 * l + 3 * e + j}"
                                  for e in range(4)]) for l in range(3) for j in (1, 2)],
    "AutoInt": [
        ("group_gemm_rcr", [f"/model/interacting_layers.{i}/W_{p}/MatMul" for p in ("Q", "K", "V", "Res")])
        for i in range(3)
    ] + [("group_gemm_rcr_bias", ["/model/attn_linear/Gemm", "/model/linear/fc/Gemm",
                                  "/model/mlp/mlp/mlp.8/Gemm"])],
    # the bilinear interactions of all 325 field pairs, twice (the SENet
    # branch's and the embeddings'); SENet's last layer reads the pooled
    # embeddings, independent of them, and joins the first.
    "FiBiNet": [
        ("group_gemm_rcr", [f"/model/bilinear_interaction/bilinear_layer.{i}/MatMul"
                            for i in range(325)] + ["/model/senet_layer/mlp/mlp.2/MatMul"]),
        ("group_gemm_rcr", [f"/model/bilinear_interaction/bilinear_layer.{i}_1/MatMul"
                            for i in range(325)]),
    ],
    "DIN": [
        layers("group_gemm_rcr_bias", "/model/attention_layers.{}/attention/mlp/mlp." + str(l) + "/",
               range(2)) for l in (0, 4, 8)
    ],
    # scripts/make_canonical_models.py: the interacting layer's tensordot
    # Q, K, V and Res (Einsums made gemm_rcr); the kernel-1 Conv heads read
    # K = 429, for the hfuse rules only.
    "TensordotAutoInt": [
        ("group_gemm_rcr", [f"/interacting/Einsum{s}" for s in ("", "_1", "_2", "_3")])
    ],
    "ConvHeads": [],
    # The same layer written with torch.einsum, twice: per layer the Q, K, V
    # and Res projections ("bfe,ed->bfd": Einsum, _1, _2, _5); the attention's
    # two Einsums (_3, _4) are MatMuls (einsum-to-matmul) on the path.
    "EinsumAutoInt": [
        ("group_gemm_rcr", [f"/interacting/interacting.{layer}/Einsum{s}"
                            for s in ("", "_1", "_2", "_5")])
        for layer in range(2)
    ],
}


# The groups the hfuse rules form, at a fixed and at a dynamic batch alike:
# the seed's and every GEMM the seed's alignment rule left out (K = 429 or
# 13·16 + ... odd), and the 3-D GEMMs flattened with a named batch; GEMMs
# of different epilogues group (group_gemm_rcr_mixed: the DNN's first layer
# with the wide/LR part, DCNv2's DNN layers with its cross layer).
B, G, X = "group_gemm_rcr_bias", "group_gemm_rcr", "group_gemm_rcr_mixed"
HFUSE_GROUPS = {
    # every expert's first layer (bias + ReLU) with the gates (bias)
    "MMOE": [
        (X, [f"/model/experts.{i}/mlp/mlp.0/Gemm" for i in range(8)]
         + [f"/model/gates.{i}/mlp/mlp.0/Gemm" for i in range(3)]),
    ] + GROUPS["MMOE"],
    # per CGC layer, the experts' first layers with the gates
    "PLE": [
        (X, [f"/model/cgc_layers.0/{e}/mlp/mlp.0/Gemm" for e in SHARED + SPECIFIC]
         + ["/model/cgc_layers.0/gate_shared/mlp/mlp.0/Gemm"]
         + [f"/model/cgc_layers.0/gates_specific.{t}/mlp/mlp.0/Gemm" for t in range(3)]),
        (X, [f"/model/cgc_layers.1/{e}/mlp/mlp.0/Gemm" for e in SHARED + SPECIFIC]
         + [f"/model/cgc_layers.1/gates_specific.{t}/mlp/mlp.0/Gemm" for t in range(3)]),
        (R, [f"/model/cgc_layers.0/{e}/mlp/mlp.4/Gemm" for e in SHARED + SPECIFIC]),
        (R, [f"/model/cgc_layers.1/{e}/mlp/mlp.4/Gemm" for e in SHARED + SPECIFIC]),
    ] + GROUPS["PLE"][-2:],
    "ESMM": GROUPS["ESMM"],
    # the greedy scan now meets a task's tower output layer (sigmoid) with
    # the next task's info gate and tower input layer (bias + ReLU)
    "AITM": [layers(R, "/model/bottoms.{}/mlp/mlp.0/", range(3))] + GROUPS["AITM"][:3] + [
        GROUPS["AITM"][3],
        (X, ["/model/info_gates.1/mlp/mlp.0/Gemm", "/model/towers.0/mlp/mlp.4/Gemm",
             "/model/towers.1/mlp/mlp.0/Gemm"]),
        (X, ["/model/towers.1/mlp/mlp.4/Gemm", "/model/towers.2/mlp/mlp.0/Gemm"]),
    ],
    "SharedBottom": GROUPS["SharedBottom"],
    # The LR part with the DNN's first layer (bias + ReLU), which it is
    # independent of; the last layer then depends on the group.
    "DeepFM": [(X, ["/model/linear/fc/Gemm", "/model/mlp/mlp/mlp.0/Gemm"])],
    "WideDeep": [(X, ["/model/linear/fc/Gemm", "/model/mlp/mlp/mlp.0/Gemm"])],
    # each cross layer's w (no bias) with the parallel DNN's layer of its depth
    "DCN": [(X, ["/model/cn/w.0/MatMul", "/model/mlp/mlp/mlp.0/Gemm"]),
            (X, ["/model/cn/w.1/MatMul", "/model/mlp/mlp/mlp.4/Gemm"])],
    # per cross layer l: the 4 experts' V (MatMul_{13l + 3e}, W @ x made a
    # gemm_rcr by left-matmul-to-gemm) with the 4 gates, then C, then U;
    # the parallel DNN's two layers (bias + ReLU) join layer 0's V and C
    # groups (mixed epilogues).
    "DCNv2": [(X if l == 0 else G,
               [f"/model/crossnet/MatMul_{13 * l + 3 * e}".replace("MatMul_0", "MatMul")
                for e in range(4)]
               + [f"/model/crossnet/gating.{e}{'_' + str(l) if l else ''}/MatMul" for e in range(4)]
               + (["/model/parallel_dnn/mlp/mlp.0/Gemm"] if l == 0 else []))
              for l in range(3)]
             + [(X, GROUPS["DCNv2"][0][1] + ["/model/parallel_dnn/mlp/mlp.4/Gemm"])]
             + GROUPS["DCNv2"][1:],
    # the DNN's first layer, not its last, joins attn_linear and the LR part
    "AutoInt": [(G, [f"/model/I{i}/MatMul" for i in range(1, 14)])] + GROUPS["AutoInt"][:3]
               + [(X, ["/model/attn_linear/Gemm", "/model/linear/fc/Gemm", "/model/mlp/mlp/mlp.0/Gemm"])],
    "FiBiNet": [
        (G, [f"/model/bilinear_interaction/bilinear_layer.{i}/MatMul" for i in range(325)]
         + ["/model/senet_layer/mlp/mlp.0/MatMul"]),
        (G, [f"/model/bilinear_interaction/bilinear_layer.{i}_1/MatMul" for i in range(325)]),
    ],
    "DIN": GROUPS["DIN"],
    # each cross layer's tensordot (no bias) with the DNN layer of its depth
    "TensordotAutoInt": GROUPS["TensordotAutoInt"] + [
        (X, ["/cross/Einsum", "/dnn/dnn.0/Gemm"]), (X, ["/cross/Einsum_1", "/dnn/dnn.2/Gemm"])],
    # each head's ReLU after the Conv's reshape back to [B, 32, 1] joins its GEMM (fuse-mm-elementwise)
    "ConvHeads": [("group_gemm_rcr_bias_relu", [f"/heads.{i}/Conv" for i in range(3)])],
    "EinsumAutoInt": GROUPS["EinsumAutoInt"],
}


# The lookups fuse-group-gathers groups under the hfuse rules, as group
# sizes: every embedding lookup in one group_gather, none left out. The 26
# sparse features' (DIN: its 12 lookups, the history sequences' included);
# the TorchScript export of DeepFM also looks up the 26 FM-linear weights,
# and ESMM's dynamic-batch one repeats the 13 user lookups for its second
# tower (the fixed-batch export shares them), so its dynamic batch forms a
# larger group: the fixed- and dynamic-batch groups are compared for GEMMs
# and LayerNorms, gathers by these sizes.
def gather_groups_expected(name, mode):
    if name == "DIN":
        return [12]
    if DYNAMO:
        return [26]
    if name == "DeepFM":
        return [52]
    return [39] if name == "ESMM" and mode == "dynamic" else [26]


def gather_groups(groups):
    return sorted(len(m) for op, m in groups if op == "group_gather")


def expected(groups):
    """A group list as the checks compare it: by member names, or for a
    dynamo export (op names of the exporter's own) by op type and size."""
    if DYNAMO:
        return sorted((op, len(members)) for op, members in groups)
    return sorted((op, sorted(members)) for op, members in groups)


def report_groups(path):
    return [(g["op"], g["members"]) for g in json.load(open(path))["groups"]]


def by_scope(groups, model):
    """Each member named by the module path and FX node it was exported
    from (the dynamo exporter's `pkg.torch.onnx.name_scopes` metadata): the
    exporter numbers the nodes and constants its rewriter makes
    ("node_Gemm_185", "val_45") differently in the fixed- and the
    dynamic-batch export."""
    m = onnx.load(model, load_external_data=False)
    scope = {n.name: next((p.value for p in n.metadata_props
                           if p.key == "pkg.torch.onnx.name_scopes"), n.name)
             for n in m.graph.node}
    return sorted((op, sorted(scope.get(x, x) for x in members)) for op, members in groups)


def refill(work, name, mode):
    """A dynamo skeleton with seeded weights, in `work`."""
    path = os.path.join(work, f"{name}.{mode}.refilled.onnx")
    tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                        "onnx_skeleton.py")
    subprocess.run([sys.executable, tool, "refill", os.path.join(MODEL_DIR, f"{name}.{mode}.onnx"),
                    path, "--seed", "5"], check=True)
    return path


def feeds_for(info, seed):
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in info["inputs"]:
        if i["dtype"] == "int64":
            feeds[i["name"]] = rng.integers(0, i["high"], size=i["shape"], dtype=np.int64)
        else:
            feeds[i["name"]] = rng.random(size=i["shape"], dtype=np.float32)
    return feeds


def convert(work, name, mode, opset):
    """NAME.MODE.onnx at `opset` (see the module's doc), in `work`."""
    from onnx import version_converter
    model = version_converter.convert_version(
        onnx.load(os.path.join(MODEL_DIR, f"{name}.{mode}.onnx")), opset)
    model.ir_version = 14 if opset >= 23 else 10
    onnx.checker.check_model(model, full_check=True)
    path = os.path.join(work, f"{name}.{mode}.opset{opset}.onnx")
    onnx.save(model, path)
    return path


def keeps_versions(path, model, label):
    """The export at `path` has the opset and IR version of `model`."""
    def versions(m):
        return m.ir_version, [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")]
    want, got = versions(onnx.load(model, load_external_data=False)), \
        versions(onnx.load(path, load_external_data=False))
    check(got == want, f"{label}: IR version and opset {got}, as the model's {want}")


def one(work, name, mode, info, rules, hfuse_groups):
    label = f"{name}.{mode} --rules {rules}" + (f" (opset {OPSET})" if OPSET else "") \
        + (" (dynamo)" if DYNAMO else "")
    model = MODELS[mode]
    if rules == "seed":
        r = hfuse("check", model)
        check(r.returncode == 0, f"{label}: hfuse check (exit {r.returncode}) {r.stderr.strip()}")
        if r.returncode != 0:
            return
        print(r.stdout.strip())
    tag = f"{name}.{mode}.{rules}"
    fused = os.path.join(work, f"{tag}.fused.onnx")
    report = os.path.join(work, f"{tag}.report.json")
    r = hfuse("fuse", model, "-o", fused, "--report", report, "--rules", rules)
    check(r.returncode == 0, f"{label}: hfuse fuse (exit {r.returncode}) {r.stderr.strip()}")
    if r.returncode != 0:
        return
    print(r.stdout.splitlines()[0])
    named = by_scope(report_groups(report), model) if DYNAMO else \
        sorted((op, sorted(m)) for op, m in report_groups(report))
    groups = expected(report_groups(report))
    if rules == "seed":
        want = [] if mode == "dynamic" else expected(GROUPS[name])
        check(groups == want, f"{label}: {len(groups)} groups as expected ({len(want)})"
              + ("" if groups == want else f": got {groups}"))
        if mode == "dynamic":  # --dim fixes the batch: the fixed-batch groups
            fixed = os.path.join(work, f"{tag}.dim.json")
            shapes = {i["name"]: i["shape"] for i in info["inputs"]}
            bound = {}
            for vi in onnx.load(model, load_external_data=False).graph.input:
                for d, size in zip(vi.type.tensor_type.shape.dim, shapes[vi.name]):
                    if d.dim_param:
                        bound[d.dim_param] = size
            args = [a for k, v in sorted(bound.items()) for a in ("--dim", f"{k}={v}")]
            r = hfuse("fuse", model, "--report", fixed, *args)
            got = expected(report_groups(fixed)) if r.returncode == 0 else None
            want = expected(GROUPS[name])
            check(got == want, f"{label}: {' '.join(args)} gives the fixed-batch groups "
                  f"(exit {r.returncode}) {r.stderr.strip()}")
    else:
        # The hfuse rules group at least what the seed's do (they add the
        # odd-K layers; the greedy pass may pick other partners), and a
        # dynamic batch groups exactly as a fixed one.
        want_gathers = gather_groups_expected(name, mode)
        got = gather_groups(report_groups(report))
        check(got == want_gathers, f"{label}: gather groups of {got} lookups"
              + ("" if got == want_gathers else f", want {want_gathers}"))
        # Every candidate lookup grouped: the Gathers left out are no
        # candidates (the columns X[:, i] that feed the lookups' ids).
        left = [u["op"] for u in json.load(open(report))["ungrouped"]
                if u["type"] == "Gather" and u["reason"] != "not-a-candidate"]
        check(not left, f"{label}: every embedding lookup grouped" + (f": left {left}" if left else ""))
        if mode == "static":
            hfuse_groups.extend(g for g in named if g[0] != "group_gather")
            want = expected(HFUSE_GROUPS[name])
            gemms = expected([g for g in report_groups(report) if g[0] != "group_gather"])
            check(gemms == want, f"{label}: {len(gemms)} GEMM/LayerNorm groups as expected ({len(want)})"
                  + ("" if gemms == want else f": got {gemms}"))
        else:
            named = [g for g in named if g[0] != "group_gather"]
            check(named == hfuse_groups,
                  f"{label}: the same {len(named)} groups as the fixed batch, by "
                  + ("the modules their members come from" if DYNAMO else "name")
                  + ("" if named == hfuse_groups else f": got {named}, static {hfuse_groups}"))
    full_check(fused, f"{label}: fused (ai.hfuse)")
    keeps_versions(fused, model, f"{label}: fused")

    r = hfuse("verify", model, "--rules", rules)
    check(r.returncode == 0 and r.stdout.strip().endswith("PASS"),
          f"{label}: hfuse verify (exit {r.returncode}) {r.stderr.strip()}")

    feeds = feeds_for(info, 11)
    feeds_path = os.path.join(work, f"{tag}.inputs.npz")
    outs = os.path.join(work, f"{tag}.outputs.npz")
    np.savez(feeds_path, **feeds)
    want_out = ort_run(model, feeds)
    dims = {}  # every named dim of the inputs, bound to the feeds' sizes
    for vi in onnx.load(model, load_external_data=False).graph.input:
        for d, size in zip(vi.type.tensor_type.shape.dim, feeds[vi.name].shape):
            if d.dim_param:
                dims[d.dim_param] = size
    dims = [a for k, v in sorted(dims.items()) for a in ("--dim", f"{k}={v}")]
    r = hfuse("run", fused, "--inputs", feeds_path, "-o", outs, "--poison-buffers", *dims)
    check(r.returncode == 0, f"{label}: hfuse run fused (exit {r.returncode}) {r.stderr.strip()}")
    if r.returncode == 0:
        compare(f"{label}: hfuse CPU on fused vs onnxruntime on original", want_out,
                dict(np.load(outs)))
        if rules == "hfuse":
            # Group ops (GEMM, LayerNorm, gather) run their members' own
            # kernels: the hfuse rules' groups give the bytes of the seed
            # rules' (which group no lookup; both after the same import passes).
            seed_out = os.path.join(work, f"{tag}.seed.npz")
            r = hfuse("run", model, "--rules", "seed", "--inputs", feeds_path, "-o", seed_out, *dims)
            if r.returncode == 0:
                a, b = dict(np.load(outs)), dict(np.load(seed_out))
                same = a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
                check(same, f"{label}: hfuse CPU on fused gives the bytes of the seed rules' fusion")
            else:
                check(False, f"{label}: hfuse run --rules seed (exit {r.returncode}) {r.stderr.strip()}")

    standard = os.path.join(work, f"{tag}.standard.onnx")
    r = hfuse("fuse", model, "-o", standard, "--export", "standard", "--rules", rules)
    check(r.returncode == 0, f"{label}: fuse --export standard (exit {r.returncode}) {r.stderr.strip()}")
    if r.returncode != 0:
        return
    full_check(standard, f"{label}: standard")
    keeps_versions(standard, model, f"{label}: standard")
    compare(f"{label}: onnxruntime on standard vs original", want_out, ort_run(standard, feeds))


def main():
    global MODEL_DIR, OPSET, MODELS, DYNAMO
    set_tool(sys.argv[1])
    MODEL_DIR, name = sys.argv[2], sys.argv[3]
    OPSET = int(sys.argv[4]) if len(sys.argv) > 4 else None
    info = json.load(open(os.path.join(MODEL_DIR, f"{name}.json")))
    DYNAMO = info.get("exporter") == "dynamo"
    with tempfile.TemporaryDirectory() as work:
        def model(mode):
            if DYNAMO:
                return refill(work, name, mode)
            if OPSET:
                return convert(work, name, mode, OPSET)
            return os.path.join(MODEL_DIR, f"{name}.{mode}.onnx")
        MODELS = {mode: model(mode) for mode in ("static", "dynamic")}
        if DYNAMO:
            print(f"{name}: exported by PyTorch {info['torch']}'s dynamo exporter")
        for rules in ("seed", "hfuse"):
            hfuse_groups = []
            for mode in ("static", "dynamic"):
                one(work, name, mode, info, rules, hfuse_groups)
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
