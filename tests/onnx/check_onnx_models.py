#!/usr/bin/env python3
"""hfuse's ONNX frontend against real software: PyTorch and onnxruntime.

    check_onnx_models.py HFUSE_BINARY CASE

CASE is one of:

  towers       a multi-tower ranking model: split input, per tower
               Linear+ReLU and Linear+Sigmoid, concatenated output
  layernorms   parallel LayerNorms and x*sigmoid(LayerNorm(x)) branches,
               with a dynamic batch dim N
  transformer  a transformer block whose Q/K/V projections run in parallel
               (attention with softmax, GELU feed-forward, residuals)
  round_trip   a model with nothing to fuse comes out with the same nodes
               and initializers
  bad_input    truncated protobuf, wrong opset, unsupported data type,
               missing external data: exit 2 and one clear line
  gathers      embedding lookups grouped by fuse-group-gathers (--rules
               hfuse): report, explain, dot, HTML, export, out-of-range ids

For the PyTorch cases the module is exported with torch.onnx (opset 17),
`hfuse fuse` must report the expected groups, and then
  (a) `hfuse run` (the CPU executor) on the fused model must match
      onnxruntime on the original model, and
  (b) onnxruntime on the `--export standard` model must match onnxruntime on
      the original,
both to max|a - b| / max|ref| <= 1e-5, and both exported models must pass
onnx.checker with full_check. Runs with the venv scripts/setup.sh makes
(Debian's python3-torch and python3-onnx, onnxruntime from PyPI).
"""
import json
import math
import os
import sys
import tempfile
import warnings

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

from onnx_checks import check, compare, error, failures, full_check, hfuse, ort_run, set_tool



def export(module, args, path, **kwargs):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, path, opset_version=17, **kwargs)


def pytorch_case(work, module, inputs, expected_groups, dynamic=None, dims=()):
    """Exports, fuses, runs and compares; `inputs` maps input names to arrays."""
    model = os.path.join(work, "model.onnx")
    names = list(inputs)
    export(module, tuple(torch.from_numpy(v) for v in inputs.values()), model,
           input_names=names, dynamic_axes=dynamic)
    want = ort_run(model, inputs)

    fused = os.path.join(work, "fused.onnx")
    report = os.path.join(work, "report.json")
    r = hfuse("fuse", model, "-o", fused, "--report", report)
    check(r.returncode == 0, f"hfuse fuse (exit {r.returncode}) {r.stderr.strip()}")
    if r.returncode != 0:
        return
    print(r.stdout, end="")
    # Members compared as sets: the group's order is AITemplate's (by weight
    # name), and PyTorch names a MatMul's weight by a counter.
    groups = [(g["op"], g["members"]) for g in json.load(open(report))["groups"]]
    check([(op, sorted(m)) for op, m in groups] == [(op, sorted(m)) for op, m in expected_groups],
          f"groups {groups}")
    full_check(fused, "fused (ai.hfuse)")

    feeds = os.path.join(work, "inputs.npz")
    outs = os.path.join(work, "outputs.npz")
    np.savez(feeds, **inputs)
    dim_args = [a for d in dims for a in ("--dim", d)]
    r = hfuse("run", fused, "--inputs", feeds, "-o", outs, "--poison-buffers", *dim_args)
    check(r.returncode == 0, f"hfuse run fused.onnx (exit {r.returncode}) {r.stderr.strip()}")
    if r.returncode == 0:
        got = dict(np.load(outs))
        compare("(a) hfuse CPU on fused vs onnxruntime on original", want, got)

    standard = os.path.join(work, "standard.onnx")
    r = hfuse("fuse", model, "-o", standard, "--export", "standard")
    check(r.returncode == 0, f"hfuse fuse --export standard (exit {r.returncode}) {r.stderr.strip()}")
    if r.returncode != 0:
        return
    print(r.stdout.splitlines()[0])
    full_check(standard, "standard")
    m = onnx.load(standard)
    check(all(n.domain in ("", "ai.onnx") for n in m.graph.node), "standard: no custom domain")
    compare("(b) onnxruntime on standard vs onnxruntime on original", want,
            ort_run(standard, inputs))


# ---- the PyTorch modules ---------------------------------------------------------


class Tower(torch.nn.Module):
    def __init__(self, width, hidden, out):
        super().__init__()
        self.fc1 = torch.nn.Linear(width, hidden)
        self.fc2 = torch.nn.Linear(hidden, out)

    def forward(self, x):
        return torch.sigmoid(self.fc2(torch.relu(self.fc1(x))))


class Towers(torch.nn.Module):
    """A ranking model: one small MLP per slice of the input."""

    def __init__(self, towers=4, width=16, hidden=32, out=8):
        super().__init__()
        self.width = width
        self.towers = torch.nn.ModuleList([Tower(width, hidden, out) for _ in range(towers)])

    def forward(self, x):
        parts = torch.split(x, self.width, dim=1)
        return torch.cat([t(p) for t, p in zip(self.towers, parts)], dim=1)


class LayerNorms(torch.nn.Module):
    """Three parallel LayerNorms, and two x * sigmoid(LayerNorm(x)) gates."""

    def __init__(self):
        super().__init__()
        self.norms = torch.nn.ModuleList([torch.nn.LayerNorm(64) for _ in range(3)])
        self.gates = torch.nn.ModuleList([torch.nn.LayerNorm(32) for _ in range(2)])
        for p in self.parameters():  # not the default 1 and 0
            torch.nn.init.uniform_(p, 0.5, 1.5)

    def forward(self, a, b, c, d, e):
        ys = [n(x) for n, x in zip(self.norms, (a, b, c))]
        ys += [x * torch.sigmoid(g(x)) for g, x in zip(self.gates, (d, e))]
        return tuple(ys)


class Block(torch.nn.Module):
    """A pre-norm transformer block; Q, K and V are three parallel Linears."""

    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.q = torch.nn.Linear(d, d)
        self.k = torch.nn.Linear(d, d)
        self.v = torch.nn.Linear(d, d)
        self.o = torch.nn.Linear(d, d)
        self.ff1 = torch.nn.Linear(d, 4 * d)
        self.ff2 = torch.nn.Linear(4 * d, d)
        self.act = torch.nn.GELU()
        self.scale = 1.0 / math.sqrt(d // heads)

    def forward(self, x):
        b, s, d = x.shape
        h = self.ln1(x)

        def heads(t):
            return t.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)

        q, k, v = heads(self.q(h)), heads(self.k(h)), heads(self.v(h))
        att = torch.softmax((q @ k.transpose(-1, -2)) * self.scale, dim=-1)
        x = x + self.o((att @ v).transpose(1, 2).reshape(b, s, d))
        return x + self.ff2(self.act(self.ff1(self.ln2(x))))


def rand(*shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def case_towers(work):
    groups = [
        ("group_gemm_rcr_bias_relu", [f"/towers.{i}/fc1/Gemm" for i in range(4)]),
        ("group_gemm_rcr_bias_sigmoid", [f"/towers.{i}/fc2/Gemm" for i in range(4)]),
    ]
    pytorch_case(work, Towers(), {"x": rand(32, 64, seed=1)}, groups)


def case_layernorms(work):
    inputs = {n: rand(8, 32 if n in "de" else 64, seed=i) for i, n in enumerate("abcde")}
    groups = [
        ("group_layernorm_sigmoid_mul", ["/gates.0/LayerNormalization", "/gates.1/LayerNormalization"]),
        ("group_layernorm", [f"/norms.{i}/LayerNormalization" for i in range(3)]),
    ]
    dynamic = {n: {0: "N"} for n in inputs}
    pytorch_case(work, LayerNorms(), inputs, groups, dynamic=dynamic, dims=["N=8"])


def case_transformer(work):
    groups = [("group_gemm_rcr_bias", ["/q/MatMul", "/k/MatMul", "/v/MatMul"])]
    pytorch_case(work, Block(), {"x": rand(2, 16, 64, seed=3)}, groups)


def same_model(label, model, back):
    check([n.SerializeToString() for n in back.graph.node] ==
          [n.SerializeToString() for n in model.graph.node], f"{label}: same nodes, in order")
    want = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    got = {t.name: numpy_helper.to_array(t) for t in back.graph.initializer}
    check(want.keys() == got.keys() and
          all(want[k].dtype == got[k].dtype and np.array_equal(want[k], got[k]) for k in want),
          f"{label}: same initializers {sorted(got)}")


def case_round_trip(work):
    """Models with nothing to group come out with their nodes and initializers:
    one built by hand (Softmax(x @ z + w) -> Relu -> Reshape -> Unsqueeze), and
    a PyTorch MLP, whose Linear + ReLU fuse-mm-elementwise would fold."""
    rng = np.random.default_rng(4)
    inits = [
        numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "w"),
        numpy_helper.from_array(np.array([4, 4], dtype=np.int64), "shape"),
        numpy_helper.from_array(np.array([0], dtype=np.int64), "axes"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "z"], ["a"], name="mm"),
        helper.make_node("Add", ["a", "w"], ["b"], name="add"),
        helper.make_node("Softmax", ["b"], ["c"], name="softmax", axis=-1),
        helper.make_node("Relu", ["c"], ["d"], name="relu"),
        helper.make_node("Reshape", ["d", "shape"], ["e"], name="reshape"),
        helper.make_node("Unsqueeze", ["e", "axes"], ["y"], name="unsqueeze"),
    ]
    graph = helper.make_graph(
        nodes, "round_trip",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    src = os.path.join(work, "model.onnx")
    out = os.path.join(work, "out.onnx")
    onnx.save(model, src)
    r = hfuse("fuse", src, "-o", out)
    check(r.returncode == 0, f"hfuse fuse (exit {r.returncode}) {r.stderr.strip()}")
    if r.returncode != 0:
        return
    full_check(out, "round trip")
    same_model("by hand", model, onnx.load(out))
    feeds = {"x": rand(2, 8, seed=5), "z": rand(8, 8, seed=6)}
    compare("round trip: onnxruntime", ort_run(src, feeds), ort_run(out, feeds))

    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    export(mlp, (torch.zeros(4, 16),), src, input_names=["x"])
    r = hfuse("fuse", src, "-o", out)
    check(r.returncode == 0, f"hfuse fuse mlp (exit {r.returncode}) {r.stderr.strip()}")
    if r.returncode == 0:
        same_model("mlp", onnx.load(src), onnx.load(out))


def case_bad_input(work):
    good = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
                          [numpy_helper.from_array(np.ones(2, np.float32), "unused")]),
        opset_imports=[helper.make_opsetid("", 17)])
    good.ir_version = 8

    def expect(label, model_bytes, needle):
        path = os.path.join(work, label + ".onnx")
        with open(path, "wb") as f:
            f.write(model_bytes)
        out = os.path.join(work, label + ".out.onnx")
        r = hfuse("fuse", path, "-o", out)
        lines = r.stderr.splitlines()
        check(r.returncode == 2 and len(lines) == 1 and lines[0].startswith("hfuse: error: ") and
              needle in lines[0] and not os.path.exists(out),
              f"{label}: exit {r.returncode}: {r.stderr.strip()}")

    data = good.SerializeToString()
    expect("truncated", data[: len(data) // 2], "truncated")
    old = onnx.ModelProto()
    old.CopyFrom(good)
    old.opset_import[0].version = 9
    expect("opset9", old.SerializeToString(), "opset 9 of the default ONNX domain")
    new = onnx.ModelProto()
    new.CopyFrom(good)
    new.opset_import[0].version = 29
    expect("opset29", new.SerializeToString(), "reads opsets 11 to 28")
    dbl = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2])]),
        opset_imports=[helper.make_opsetid("", 17)])
    dbl.ir_version = 8
    expect("double", dbl.SerializeToString(), "'x' is double")
    ext = onnx.ModelProto()
    ext.CopyFrom(good)
    w = helper.make_tensor("w", TensorProto.FLOAT, [2], [0.0, 0.0])
    ext.graph.initializer.append(w)
    ext.graph.node[0].input[0] = "xw"
    ext.graph.node.insert(0, helper.make_node("Add", ["x", "w"], ["xw"], name="add"))
    ext_w = ext.graph.initializer[-1]
    ext_w.ClearField("float_data")
    ext_w.data_location = TensorProto.EXTERNAL
    entry = ext_w.external_data.add()
    entry.key, entry.value = "location", "missing_weights.bin"
    expect("external", ext.SerializeToString(), "missing_weights.bin")


def case_gathers(work):
    """fuse-group-gathers on a model of embedding lookups (onnx.helper):
    four float32 tables of rows 3, 5, 13 and 8 wide (ids int64, int32 and
    [N, 2]) group into one group_gather under --rules hfuse, a float16
    table and a Gather of an input's columns (at constant indices) stay
    out with their reasons;
    the report, explain, dot, the HTML report and --dump-dir show them; the
    fused model (ai.hfuse GroupGather) reads back and runs to the unfused
    model's bytes, onnxruntime's values, and its --export standard form
    (the Gathers under their names) runs in onnxruntime; an id out of range
    is the unfused Gather's error; the seed rules group nothing."""
    F, H, I64, I32 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64, TensorProto.INT32
    widths = [3, 5, 13, 8]
    nodes, inits = [], []
    inputs = [helper.make_tensor_value_info("ids0", I64, ["N"]), helper.make_tensor_value_info("ids1", I32, ["N"]),
              helper.make_tensor_value_info("ids2", I64, ["N", 2]), helper.make_tensor_value_info("x", F, ["N", 6])]
    ids = ["ids0", "ids1", "ids2", "ids0"]
    for i, w in enumerate(widths):
        rows = 7 + 3 * i
        inits.append(numpy_helper.from_array(rand(rows, w, seed=i), f"t{i}"))
        nodes.append(helper.make_node("Gather", [f"t{i}", ids[i]], [f"e{i}"], name=f"emb{i}"))
    inits.append(numpy_helper.from_array(rand(9, 4, seed=9).astype(np.float16), "th"))
    nodes.append(helper.make_node("Gather", ["th", "ids0"], ["eh"], name="emb_h"))
    inits.append(numpy_helper.from_array(np.array([1, 4], dtype=np.int64), "col"))
    nodes.append(helper.make_node("Gather", ["x", "col"], ["xc"], name="cols", axis=1))
    nodes.append(helper.make_node("Concat", ["e0", "e1", "e3", "xc"], ["cat"], name="cat", axis=1))
    outputs = [helper.make_tensor_value_info("cat", F, ["N", 3 + 5 + 8 + 2]),
               helper.make_tensor_value_info("e2", F, ["N", 2, 13]),
               helper.make_tensor_value_info("eh", H, ["N", 4])]
    graph = helper.make_graph(nodes, "lookups", inputs, outputs, inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    model = os.path.join(work, "lookups.onnx")
    onnx.save(m, model)
    n = 11
    rng = np.random.default_rng(3)
    feeds = {"ids0": np.array([0, 6, -1, -7] + [int(v) for v in rng.integers(0, 7, n - 4)], dtype=np.int64),
             "ids1": rng.integers(-10, 10, n).astype(np.int32),
             "ids2": np.stack([np.arange(n) % 13, -(np.arange(n) % 13) - 1], 1).astype(np.int64),
             "x": rand(n, 6, seed=4)}
    npz = os.path.join(work, "feeds.npz")
    np.savez(npz, **feeds)

    fused, report = os.path.join(work, "fused.onnx"), os.path.join(work, "report.json")
    dumps = os.path.join(work, "dumps")
    r = hfuse("fuse", model, "-o", fused, "--report", report, "--rules", "hfuse", "--dump-dir", dumps)
    check(r.returncode == 0, f"gathers: fuse --rules hfuse (exit {r.returncode}) {r.stderr.strip()}")
    if r.returncode:
        return
    check("1 GEMM/LayerNorm/Gather op" not in r.stdout and "2 GEMM/LayerNorm/Gather ops ungrouped" in r.stdout,
          f"gathers: the summary counts the Gathers left out: {r.stdout.splitlines()[0]}")
    rep = json.load(open(report))
    groups = [(g["op"], g["members"]) for g in rep["groups"]]
    check(groups == [("group_gather", ["emb0", "emb1", "emb2", "emb3"])], f"gathers: one group of four: {groups}")
    reasons = {u["op"]: (u["type"], u["reason"], u["rule"]) for u in rep["ungrouped"]}
    check(reasons == {"emb_h": ("Gather", "no-compatible-peer", "dtype"),
                      "cols": ("Gather", "not-a-candidate", "gather-axis")}, f"gathers: reasons {reasons}")
    check({"fuse_group_gather_groups.txt", "fuse_group_gather_reasons.txt"} <= set(os.listdir(dumps))
          and "emb_h: no-compatible-peer [dtype]" in open(os.path.join(dumps, "fuse_group_gather_reasons.txt")).read(),
          f"gathers: --dump-dir: {sorted(os.listdir(dumps))}")
    full_check(fused, "gathers: fused (ai.hfuse)")
    written = onnx.load(fused)
    custom = [nd for nd in written.graph.node if nd.domain == "ai.hfuse"]
    check(len(custom) == 1 and custom[0].op_type == "GroupGather"
          and list(custom[0].attribute[0].strings) == [b"emb0", b"emb1", b"emb2", b"emb3"],
          f"gathers: one ai.hfuse GroupGather naming its members: {[(c.op_type, c.attribute) for c in custom]}")

    def run(path, *args):
        out = os.path.join(work, "out.npz")
        r = hfuse("run", path, "--inputs", npz, "-o", out, "--dim", f"N={n}", "--poison-buffers", *args)
        check(r.returncode == 0, f"gathers: run {os.path.basename(path)} {' '.join(args)} (exit {r.returncode}) "
              f"{r.stderr.strip()}")
        return dict(np.load(out)) if r.returncode == 0 else {}
    unfused = run(model, "--no-fuse")
    for got, label in ((run(fused), "fused model read back"), (run(model, "--rules", "hfuse"), "fused in the session")):
        check(got.keys() == unfused.keys() and all(np.array_equal(got[k], unfused[k]) for k in got),
              f"gathers: {label} gives the unfused model's bytes")
    compare("gathers: hfuse CPU on fused vs onnxruntime", ort_run(model, feeds), run(fused))
    standard = os.path.join(work, "standard.onnx")
    r = hfuse("fuse", model, "-o", standard, "--export", "standard", "--rules", "hfuse")
    check(r.returncode == 0, f"gathers: --export standard (exit {r.returncode}) {r.stderr.strip()}")
    if r.returncode == 0:
        full_check(standard, "gathers: standard")
        names = sorted(nd.name for nd in onnx.load(standard).graph.node if nd.op_type == "Gather")
        check(names == ["cols", "emb0", "emb1", "emb2", "emb3", "emb_h"], f"gathers: standard Gathers {names}")
        compare("gathers: onnxruntime on standard vs original", ort_run(model, feeds), ort_run(standard, feeds))

    r = hfuse("explain", model, "--rules", "hfuse")
    check(r.returncode == 0 and "  cols (Gather) [gather-axis]: axis 1 of table x" in r.stdout
          and "  emb_h (Gather) [dtype]: nearest peer emb" in r.stdout
          and "dtype of table float32 vs float16" in r.stdout, f"gathers: explain: {r.stdout}")
    r = hfuse("explain", model, "--rules", "hfuse", "--op", "emb2")
    check(r.stdout.startswith("emb2 (Gather): grouped in group_gather_"), f"gathers: explain --op: {r.stdout}")
    r = hfuse("explain", model, "--op", "emb2")
    check("under --rules hfuse only" in r.stdout, f"gathers: explain --op under the seed rules: {r.stdout}")
    r = hfuse("dot", model, "--rules", "hfuse")
    check(r.returncode == 0 and "will be group_gather_" in r.stdout and "#c92a2a" in r.stdout
          and "[no-compatible-peer]" in r.stdout, "gathers: dot draws the group as a cluster, emb_h in red")
    r = hfuse("dot", model, "--rules", "hfuse", "--fused")
    check(r.returncode == 0 and 'label="emb3\\nGather"' in r.stdout, "gathers: dot --fused labels the member slots Gather")
    html = os.path.join(work, "report.html")
    r = hfuse("report", model, "--rules", "hfuse", "-o", html)
    page = open(html).read() if r.returncode == 0 else ""
    check("<td>group_gather</td>" in page and "<code>no-compatible-peer</code></td><td>dtype</td>" in page,
          f"gathers: HTML report (exit {r.returncode}) {r.stderr.strip()}")

    # An id out of range: the unfused Gather's error, fused or not.
    bad = dict(feeds)
    bad["ids1"] = feeds["ids1"].copy()
    bad["ids1"][3] = 10
    np.savez(npz, **bad)
    errors = set()
    for p, a in ((model, ["--no-fuse"]), (model, ["--rules", "hfuse"]), (fused, [])):
        r = hfuse("run", p, "--inputs", npz, "--dim", f"N={n}", *a)
        errors.add((r.returncode, r.stderr.strip().replace(p, "MODEL")))
    check(errors == {(2, "hfuse: error: MODEL: op 'emb1' is the ONNX operator Gather, which hfuse keeps opaque "
                         "and the CPU executor cannot run: index 10 is out of range for a dim of 10")},
          f"gathers: an id out of range: {errors}")

    # The seed rules: no gather group, no Gather reason.
    r = hfuse("fuse", model, "--report", report)
    rep = json.load(open(report)) if r.returncode == 0 else {}
    check(rep.get("groups") == [] and rep.get("ungrouped") == [], f"gathers: the seed rules group nothing: {rep}")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    set_tool(sys.argv[1])
    case = sys.argv[2]
    cases = {"towers": case_towers, "layernorms": case_layernorms,
             "transformer": case_transformer, "round_trip": case_round_trip,
             "bad_input": case_bad_input, "gathers": case_gathers}
    if case not in cases:
        sys.exit(f"unknown case {case}; one of {', '.join(cases)}")
    with tempfile.TemporaryDirectory(prefix=f"hfuse_onnx_{case}_") as work:
        cases[case](work)
    print(f"{case}: {'FAILED: ' + str(len(failures)) if failures else 'passed'}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
