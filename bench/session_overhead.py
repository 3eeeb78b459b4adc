#!/usr/bin/env python3
"""The Python module's overhead per run() against the C++ session directly.

    PYTHONPATH=build/python .venv/bin/python bench/session_overhead.py \
        [--cpp build/bench/session_bench] [--device cpu|cuda] [--repeats 2000]

Runs build/bench/session_bench (Google Benchmark: Session::Run on each model,
feeds prebuilt) for the C++ figure, then times hfuse.InferenceSession.run on
the same model and the same feeds (numpy in, numpy out) for the Python one:
median of `repeats` calls, after 200 warm-up calls. Prints one line per model
with both medians in microseconds and the overhead (Python / C++ - 1).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

import hfuse

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MODELS = {"tiny_towers": "bench/tiny_towers.json", "ranking_small": "examples/ranking_small.onnx"}


def feeds_for(sess):
    # Any values do (timing only); the C++ side draws its own of the same shapes.
    rng = np.random.default_rng(1)
    dtypes = {"tensor(float)": np.float32, "tensor(float16)": np.float16}
    return {i.name: rng.uniform(-1, 1, i.shape).astype(dtypes[i.type]) for i in sess.get_inputs()}


def python_median(path, device, repeats):
    sess = hfuse.InferenceSession(path, device=device)
    feeds = feeds_for(sess)
    for _ in range(200):
        sess.run(None, feeds)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        sess.run(None, feeds)
        times.append(time.perf_counter_ns() - t0)
    return float(np.median(times)) / 1e3


def cpp_medians(binary, repeats):
    out = subprocess.run([binary, "--benchmark_format=json", "--benchmark_repetitions=5",
                          "--benchmark_report_aggregates_only=true"],
                         check=True, capture_output=True, text=True).stdout
    medians = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") == "median":
            medians[b["run_name"].split("/")[1]] = b["real_time"]  # microseconds
    return medians


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpp", default=os.path.join(ROOT, "build", "bench", "session_bench"))
    ap.add_argument("--device", default="cpu", choices=["cpu"],
                    help="cpu (the C++ baseline binary times CPU sessions)")
    ap.add_argument("--repeats", type=int, default=2000)
    args = ap.parse_args()
    cpp = cpp_medians(args.cpp, args.repeats)
    print(f"{'model':<16} {'C++ us':>10} {'Python us':>10} {'overhead':>9}")
    for name, rel in MODELS.items():
        py = python_median(os.path.join(ROOT, rel), args.device, args.repeats)
        c = cpp[name]
        print(f"{name:<16} {c:>10.2f} {py:>10.2f} {py / c - 1:>+8.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
