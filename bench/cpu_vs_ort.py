#!/usr/bin/env python3
"""hfuse's CPU session against onnxruntime's, on the same models, in one process.

    PYTHONPATH=build/python .venv/bin/python bench/cpu_vs_ort.py OUT_DIR [--threads 2]
        [--models rechub:MMOE,...] [--batches 64,512] [--reps 20] [--exports static,dynamic]
        [--rules seed|hfuse]

For each model (examples/ranking_small.onnx; torch-rechub's twelve and
pytorch-widedeep's six models as PyTorch 2.11's dynamo exporter wrote them,
tests/onnx/dynamo/ and tests/onnx/widedeep/dynamo/, weights refilled by
scripts/onnx_skeleton.py; and, where this torch can export them,
scripts/make_canonical_models.py's ConvHeads (xDeepFM's kernel-1 Conv1d
CIN), TensordotAutoInt and EinsumAutoInt), each export (fixed batch: the
export's own, 512; dynamic: each of --batches) is run by
`hfuse.InferenceSession(path, providers=["CPUExecutionProvider"])` and by
`onnxruntime.InferenceSession` with the same thread count (intra-op
threads; onnxruntime's inter-op 1, sequential), on the same feeds (ids
inside every vocabulary, tests/onnx/model_inputs.py). Runs interleave, one
of each in turn, after warm-up runs; the table has the median of --reps,
in ms, each output's largest difference, and the groups hfuse formed with
the rule set that ran (the session's default unless --rules). Writes OUT_DIR/table.md and
OUT_DIR/results.json and prints the table.
"""
# hfuse before numpy: numpy loads the OpenBLAS that hfuse shares, and
# OpenBLAS picks its kernels once, when it loads; hfuse's package first
# names the kernel set this CPU runs where OpenBLAS would fall back to its
# SSE3 ones (the threads line printed below says which ran).
import hfuse  # noqa: I001
import argparse
import os
import sys
import json
import platform
import statistics
import subprocess
import time

import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..")
sys.path.insert(0, os.path.join(root, "tests", "onnx"))
from model_inputs import feeds_for  # noqa: E402

sys.path.insert(0, here)
from real_models import RECHUB, WIDEDEEP  # noqa: E402  (the GPU benchmark's list: one list of the real models)
CANONICAL = ["ConvHeads", "TensordotAutoInt", "EinsumAutoInt"]
ALL = (["example:ranking_small"] + [f"rechub:{m}" for m in RECHUB] + [f"widedeep:{m}" for m in WIDEDEEP]
       + [f"canonical:{m}" for m in CANONICAL])


def source_dir(library, out_dir):
    return {"rechub": os.path.join(root, "tests", "onnx", "dynamo"),
            "widedeep": os.path.join(root, "tests", "onnx", "widedeep", "dynamo"),
            "canonical": os.path.join(out_dir, "canonical")}[library]


def prepare(spec, export, out_dir):
    """(model path, inputs json or None) for one export, weights refilled."""
    library, name = spec.split(":")
    if library == "example":
        return os.path.join(root, "examples", f"{name}.onnx"), None
    src = os.path.join(source_dir(library, out_dir), f"{name}.{export}.onnx")
    if not os.path.exists(src):
        return None, None
    path = os.path.join(out_dir, "models", f"{library}_{name}.{export}.onnx")
    if library == "canonical":
        path = src  # exported here with their weights
    elif not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(root, "scripts", "onnx_skeleton.py"), "refill", src, path,
                        "--seed", "5"], check=True, capture_output=True)
    return path, os.path.join(source_dir(library, out_dir), f"{name}.json")


def example_feeds(sess, batch, seed):
    """Random feeds for a model without a NAME.json (the examples): floats in [0, 1)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else batch for d in i.shape]
        feeds[i.name] = rng.random(size=shape, dtype=np.float32)
    return feeds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--models", default=",".join(ALL))
    ap.add_argument("--batches", default="64,512", help="batches of the dynamic exports")
    ap.add_argument("--exports", default="static,dynamic")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rules", choices=["seed", "hfuse"], default=None,
                    help="hfuse's grouping rules (default: the session's, printed in each row)")
    ap.add_argument("--spin", action="store_true",
                    help="let onnxruntime's threads spin after a run (its default; hfuse's: OMP_WAIT_POLICY)")
    args = ap.parse_args()
    import onnxruntime as ort  # noqa: E402

    os.makedirs(os.path.join(args.out_dir, "models"), exist_ok=True)
    specs = args.models.split(",")
    if any(s.startswith("canonical:") for s in specs):
        r = subprocess.run([sys.executable, os.path.join(root, "scripts", "make_canonical_models.py"),
                            os.path.join(args.out_dir, "canonical")], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"canonical models not exported here (left out): {r.stderr.strip().splitlines()[-1:]}")
            specs = [s for s in specs if not s.startswith("canonical:")]
    ort_options = ort.SessionOptions()
    ort_options.intra_op_num_threads = args.threads
    ort_options.inter_op_num_threads = 1
    ort_options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if not args.spin:
        # Interleaved runs: a pool that spins after its run takes the core the
        # other one's next run needs.
        ort_options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    print(f"threads: hfuse {hfuse.__version__} {args.threads} (OpenBLAS kernels {hfuse._hfuse.blas_core()[0]}), "
          f"onnxruntime {ort.__version__} "
          f"intra_op_num_threads={args.threads} inter_op_num_threads=1; {os.cpu_count()} CPUs, "
          f"{platform.processor() or platform.machine()}")
    rows = []
    for spec in specs:
        for export in args.exports.split(","):
            path, info = prepare(spec, export, args.out_dir)
            if path is None or (spec.startswith("example:") and export != "static"):
                continue
            batches = [512] if export == "static" else [int(b) for b in args.batches.split(",")]
            h = hfuse.InferenceSession(path, providers=["CPUExecutionProvider"], threads=args.threads,
                                       rules=args.rules)
            report = h.fusion_report()
            fused = f"{len(report['groups'])} ({report['rules']})"  # groups, and the rule set that ran
            o = ort.InferenceSession(path, ort_options, providers=["CPUExecutionProvider"])
            names = {i.name for i in o.get_inputs()}
            for batch in batches:
                if info:
                    feeds = {k: v for k, v in feeds_for(info, batch, 11).items() if k in names}
                else:
                    feeds = example_feeds(o, batch, 11)
                    batch = next(iter(feeds.values())).shape[0]
                want = o.run(None, feeds)
                got = h.run(None, feeds)
                diff = max(float(np.max(np.abs(np.asarray(g, dtype=np.float64) - w))) if w.size else 0.0
                           for g, w in zip(got, want))
                for _ in range(args.warmup):
                    h.run(None, feeds)
                    o.run(None, feeds)
                th, to = [], []
                for rep in range(args.reps):
                    # Interleaved, each first in turn.
                    pair = [(h, th), (o, to)] if rep % 2 == 0 else [(o, to), (h, th)]
                    for sess, times in pair:
                        t = time.perf_counter()
                        sess.run(None, feeds)
                        times.append(time.perf_counter() - t)
                row = {"model": spec, "export": export, "batch": batch,
                       "ort_ms": 1e3 * statistics.median(to), "hfuse_ms": 1e3 * statistics.median(th),
                       "max_diff": diff, "rules": report["rules"], "groups": len(report["groups"])}
                row["ratio"] = row["hfuse_ms"] / row["ort_ms"]
                rows.append(row)
                print(f"{spec:28} {export:8} {batch:5}  onnxruntime {row['ort_ms']:9.3f} ms  hfuse "
                      f"{row['hfuse_ms']:9.3f} ms  {row['ratio']:5.2f}x  max diff {diff:.2g}  groups {fused}",
                      flush=True)
    lines = ["| model | export | batch | hfuse groups (rules) | onnxruntime ms | hfuse ms | hfuse / onnxruntime "
             "| max diff |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['model']} | {r['export']} | {r['batch']} | {r['groups']} ({r['rules']}) | "
                     f"{r['ort_ms']:.3f} | {r['hfuse_ms']:.3f} | {r['ratio']:.2f}x | {r['max_diff']:.2g} |")
    table = "\n".join(lines)
    print(table)
    with open(os.path.join(args.out_dir, "table.md"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(args.out_dir, "results.json"), "w") as f:
        json.dump({"threads": args.threads, "onnxruntime": ort.__version__, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
