#!/usr/bin/env python3
"""The CUDA backend's plan of every test model, checked on the CPU (no GPU).

    check_plans.py PLAN_CHECK HFUSE MODEL_DIR...

PLAN_CHECK is tests/cuda/plan_check.cc's binary: it fuses a model as a CUDA
session does, runs it on the CPU keeping every tensor, and checks the plan
against those values: every constant the plan computes once equals the
CPU's, every view reads the tensor's values through its layout, and the
memory plan, replayed on host buffers, never lets a launch read a buffer
that another one has overwritten. Run here on each kernel form's model of
check_gpu_models.py (the same models the GPU test verifies) and on every
model of each MODEL_DIR (weights refilled), each at several values of its
dynamic dims, so that a shape subgraph folds to the CPU's constants for
each of them. Also `hfuse check` on each kernel form's model names no
operator that would run on the host, and on a model with an operator
onnx_ops.def runs on the host (a three-operand Einsum) names exactly it,
and `hfuse --list-ops` lists every operator.
"""
import os
import re
import subprocess
import sys
import tempfile

import onnx

from check_gpu_models import dynamic_dim, float32_name, op_models
from onnx_bfloat16 import to_bfloat16
from model_inputs import dim_args, feeds_for, write_npz
from onnx import TensorProto, helper

from onnx_checks import check, failures, hfuse, set_tool


# What the plan of an op model must do, by plan_check --verbose's words
# for its ops: stack_picked's history stack read only through Gathers that
# pick its parts ("unread": it runs nothing) and the MLP's input written in
# place by the lookups and the region; stack_picked_unordered's stack
# written (its picks are no views of a part), stack_pick_output's too (its
# pick is copied); stack_placed_pick_output's MLP input copied (a copied
# pick reads the stack as a plain array, so the stack has a buffer of its
# own); gemv_group's GEMVs one op; attention_heads*: the Split and the
# Reshape of its heads put back views (no copy), the attention one region;
# gathernd_columns' Transposes, GatherNDs and Cast views; add_computed_zeros'
# and add_computed_zeros_wide's
# Add a view of the GEMM's output; attention_chains_overlap: one attention
# of its two chains that share a MatMul; attention_v_is_p: none;
# elementwise_into_concat's concatenate written in place by its parts;
# folded_part_concat's copied (a part computed at plan time);
# residual_layernorm: each residual Add and its LayerNorm one region;
# layernorm_two_dims_beside_input: the concatenate copies both parts (a
# LayerNorm over two dims writes no rows of a slot);
# region_rows_2048: its Div and Softmax over rows of 2048 one region, its
# residual Add and LayerNorm over rows of 1248 another;
# region_quad_rows: its chain one region, which writes its slot of the
# concatenate (the graph inputs' parts copied);
# layernorm_beside_input and lookup_beside_region: one region, and the
# concatenate copies one part only, the other written in its slot by the
# region (words of the line, "1 of 2 parts in place"); lookups_read_by_region:
# the MLP's input in place, the lookups' rows in its slot though the FM's
# region reads them too; stack_in_stack: the GEMMs' stack in place, lying
# in its slot of the outer stack, which copies only the lookup's part;
# nested_stack_pick_output: the stack in place in its own buffer again
# once the MLP's input is copied (the nesting put back).
PLAN_WORDS = {"stack_picked": {"unread": 1, "in place": 1}, "stack_picked_unordered": {"unread": 0},
              "stack_pick_output": {"unread": 0}, "stack_placed_pick_output": {"in place": 0},
              "gemv_group": {"launch": 1},
              **{f"attention_heads{s}": {"view": 13, "attention": 1} for s in ("", "_div", "_mul")},
              "gathernd_columns": {"launch": 2, "view": 6}, "add_computed_zeros": {"view": 1, "launch": 1},
              "add_computed_zeros_wide": {"view": 1, "launch": 1},
              "attention_chains_overlap": {"attention": 1}, "attention_v_is_p": {"attention": 0},
              "elementwise_into_concat": {"in place": 1}, "folded_part_concat": {"in place": 0},
              "residual_layernorm": {"region": 2}, "region_rows_2048": {"region": 2},
              "region_quad_rows": {"region": 1, "1 of 3 parts in place": 1},
              "layernorm_two_dims_beside_input": {"1 of 2 parts in place": 0, "launch": 3},
              **{m: {"region": 1, "1 of 2 parts in place": 1} for m in ("layernorm_beside_input", "lookup_beside_region")},
              "lookups_read_by_region": {"region": 1, "in place": 1},
              "stack_in_stack": {"in place": 1, "1 of 2 parts in place": 1},
              "nested_stack_pick_output": {"in place": 1}}


def plan_check(tool, path, label, *args, words=None):
    """plan_check's summary line (`M: N ops, L launches, ...: ok`), checked to end in ok."""
    r = subprocess.run([tool, path, *args, *(["--verbose"] if words else [])], capture_output=True, text=True)
    out = (r.stdout.strip().splitlines() or [""])[-1]
    check(r.returncode == 0 and out.endswith(": ok"),
          f"{label} {' '.join(a for a in args if not a.endswith('.npz'))}: {out} {r.stderr.strip()}")
    for word, want in (words or {}).items():
        # A line's first word (the plan's: launch, view, region, ...), or words within it.
        got = sum(1 for line in r.stdout.splitlines()
                  if line.startswith(f"  {word} ") or (" " in word and f"({word}," in line))
        check(got == want, f"{label}: {got} ops planned '{word}', want {want}")
    return out


# The FFN regions (fusion_regions.h, FfnChain) of pytorch-widedeep's
# transformers, by both exporters: TabTransformer's and SAINT's two erf-GELU
# blocks, FTTransformer's two gated (GEGLU) ones, each checked by plan_check
# against the CPU with the FFN kernel's row function.
FFN_REGIONS = {"TabTransformer": 2, "SAINT": 2, "FTTransformer": 2}


def ffn_regions(line):
    m = re.search(r"\(\d+ attention, (\d+) ffn\)", line)
    return int(m.group(1)) if m else None


def plan_counts(line):
    """(launches, ops in regions, attention regions) of plan_check's summary line."""
    m = re.search(r" (\d+) launches, .* regions of (\d+) ops \((\d+) attention, \d+ ffn\)", line)
    return tuple(map(int, m.groups())) if m else None


def check_host_lines(path, label, want):
    r = hfuse("check", path)
    host = [line.strip() for line in r.stdout.splitlines() if "on the host" in line]
    check(r.returncode == 0 and host == want, f"{label}: hfuse check names {host}, want {want}")


def main():
    tool, dirs = sys.argv[1], sys.argv[3:]
    set_tool(sys.argv[2])
    r = hfuse("--list-ops")
    listed = [line.split()[0] for line in r.stdout.splitlines()[1:] if line and not line.startswith("Any ")]
    for op in ("Slice", "Cast", "Transpose", "Einsum", "GatherND", "CumSum", "Conv", "BatchNormalization"):
        check(r.returncode == 0 and op in listed, f"--list-ops lists {op}")
    skeleton = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "onnx_skeleton.py")
    with tempfile.TemporaryDirectory() as work:
        einsum3 = helper.make_model(helper.make_graph(
            [helper.make_node("Einsum", ["a", "b", "c"], ["y"], equation="i,j,k->ijk", name="outer3")], "e",
            [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in "abc"],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 3, 3])]),
            opset_imports=[helper.make_opsetid("", 18)])
        einsum3.ir_version = 8
        path = os.path.join(work, "einsum3.onnx")
        onnx.save(einsum3, path)
        check_host_lines(path, "einsum3", ["on the host under --device cuda: Einsum (1: outer3)"])
        plan_check(tool, path, "einsum3")
        for name, m in op_models():
            path = os.path.join(work, f"{name}.onnx")
            onnx.save(m, path)
            check_host_lines(path, name, [])
            if dynamic_dim(path):
                for n in (1, 37):
                    # (at N = 1 a slot's strides are a plain array's: the words hold at 37)
                    plan_check(tool, path, name, "--dim", f"N={n}", words=PLAN_WORDS.get(float32_name(name)) if n > 1 else None)
            else:
                plan_check(tool, path, name, words=PLAN_WORDS.get(float32_name(name)))
        for d in dirs:
            where = os.path.normpath(d).split(os.sep)[-2:]
            for f in sorted(os.listdir(d)):
                if not f.endswith(".dynamic.onnx"):
                    continue
                name = f.split(".")[0]
                path = os.path.join(work, "_".join(where + [f]))
                subprocess.run([sys.executable, skeleton, "refill", os.path.join(d, f), path, "--seed", "5"],
                               check=True, capture_output=True)
                proto = onnx.load(path, load_external_data=False)
                for batch in (3, 64):
                    npz = os.path.join(work, "inputs.npz")
                    feeds = feeds_for(os.path.join(d, f"{name}.json"), batch, 11)
                    write_npz(npz, feeds)
                    out = plan_check(tool, path, "/".join(where + [f]), *dim_args(proto, feeds), "--inputs", npz)
                    if where[0] == "widedeep":
                        got = ffn_regions(out)
                        check(got == FFN_REGIONS.get(name, 0),
                              f"{'/'.join(where + [f])} at {batch}: {got} FFN regions, want {FFN_REGIONS.get(name, 0)}")
                # torch-rechub's models in bfloat16 (bench/real_models.py --dtype bfloat16): the
                # same plan as in float32, every region (AutoInt's attention too) read and
                # written in bfloat16.
                if where[-1] == "dynamo" and where[0] != "widedeep":
                    half = os.path.join(work, "bf16_" + f)
                    onnx.save(to_bfloat16(onnx.load(path)), half)
                    out16 = plan_check(tool, half, "bfloat16 " + "/".join(where + [f]), *dim_args(proto, feeds),
                                       "--inputs", npz)
                    f32, bf16 = plan_counts(out), plan_counts(out16)
                    check(f32 and bf16 and f32 == bf16,
                          f"bfloat16 {f}: (launches, region ops, attention regions) {bf16}, float32 {f32}")
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
