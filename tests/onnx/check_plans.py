#!/usr/bin/env python3
"""The CUDA backend's plan of every test model, checked on the CPU (no GPU).

    check_plans.py PLAN_CHECK MODEL_DIR...

PLAN_CHECK is tests/cuda/plan_check.cc's binary: it fuses a model as a CUDA
session does, runs it on the CPU keeping every tensor, and checks the plan
against those values: every constant the plan computes once equals the
CPU's, every view reads the tensor's values through its layout, and the
memory plan, replayed on host buffers, never lets a launch read a buffer
that another one has overwritten. Run here on each kernel form's model of
check_gpu_models.py (the same models the GPU test verifies) and on every
model of each MODEL_DIR (weights refilled), each at several values of its
dynamic dims, so that a shape subgraph folds to the CPU's constants for
each of them.
"""
import os
import subprocess
import sys
import tempfile

import onnx

from check_gpu_models import dynamic_dim, op_models
from model_inputs import dim_args, feeds_for, write_npz
from onnx_checks import check, failures


def plan_check(tool, path, label, *args):
    r = subprocess.run([tool, path, *args], capture_output=True, text=True)
    out = (r.stdout.strip().splitlines() or [""])[-1]
    check(r.returncode == 0 and out.endswith(": ok"),
          f"{label} {' '.join(a for a in args if not a.endswith('.npz'))}: {out} {r.stderr.strip()}")


def main():
    tool, dirs = sys.argv[1], sys.argv[2:]
    skeleton = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "onnx_skeleton.py")
    with tempfile.TemporaryDirectory() as work:
        for name, m in op_models():
            path = os.path.join(work, f"{name}.onnx")
            onnx.save(m, path)
            if dynamic_dim(path):
                for n in (1, 37):
                    plan_check(tool, path, name, "--dim", f"N={n}")
            else:
                plan_check(tool, path, name)
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
                    plan_check(tool, path, "/".join(where + [f]), *dim_args(proto, feeds), "--inputs", npz)
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
