#!/usr/bin/env python3
"""The Python module's overhead per run() against the C++ session directly.

    PYTHONPATH=build/python .venv/bin/python bench/session_overhead.py \
        [--cpp build/bench/session_bench]

Times the same loop on both sides, on the same model: the C++ session's
Session::Run (build/bench/session_bench --calls, feeds prebuilt) and
hfuse.InferenceSession.run (numpy in, numpy out, feeds of the same shapes):
200 warm-up calls, then 5 rounds of N calls; the median round's mean per
call. Prints one line per model with both figures in microseconds per call
and the overhead (Python / C++ - 1), in thread CPU time (it leaves out the
time the process waited for a core, which on a shared machine dwarfs the
work) and in wall time.
Both processes run with OMP_NUM_THREADS=1 (the figure is the binding's cost
per call; the CPU executor's threads waking on a busy machine only add noise)
and with glibc's heap kept, not trimmed or mmapped, between runs
(MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_, MALLOC_TOP_PAD_): the CPU
executor allocates its intermediates on every run, and a small C++ process
whose heap shrinks back after each run pays page faults that the Python
process, whose heap is full of other objects, does not (on ranking_small
about 35% of a run); equal heaps make the two comparable.
"""
import argparse
import os
import subprocess
import sys
import time

# One environment for both processes, fixed before this one starts (glibc
# reads its malloc tunables at start-up, so the script runs itself again).
ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
       "MALLOC_TRIM_THRESHOLD_": "1000000000", "MALLOC_MMAP_THRESHOLD_": "1000000000",
       "MALLOC_TOP_PAD_": "100000000"}
if any(os.environ.get(k) != v for k, v in ENV.items()):
    os.execve(sys.executable, [sys.executable] + sys.argv, {**os.environ, **ENV})

import numpy as np  # noqa: E402

import hfuse  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
# name: (file, params given at creation, calls per round). tiny_towers is
# graph JSON, whose 12 weights are fed on every run unless given at creation.
MODELS = {"tiny_towers (13 feeds)": ("bench/tiny_towers.json", False, 5000),
          "tiny_towers (1 feed)": ("bench/tiny_towers.json", True, 5000),
          "ranking_small": ("examples/ranking_small.onnx", False, 500)}


DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


def random(args):
    # Any values do (timing only); the C++ side draws its own of the same shapes.
    rng = np.random.default_rng(1)
    return {a.name: rng.uniform(-1, 1, a.shape).astype(DTYPES[a.type]) for a in args}


def python_means(path, device, params, calls):
    sess = hfuse.InferenceSession(path, device=device)
    if params:
        graph_inputs = [i for i in sess.get_inputs() if i.name == "x"]
        weights = random([i for i in sess.get_inputs() if i.name != "x"])
        sess = hfuse.InferenceSession(path, device=device, params=weights)
        assert [i.name for i in sess.get_inputs()] == [i.name for i in graph_inputs]
    feeds = random(sess.get_inputs())
    for _ in range(200):
        sess.run(None, feeds)
    cpu, wall = [], []
    for _ in range(5):
        c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
        for _ in range(calls):
            sess.run(None, feeds)
        wall.append((time.perf_counter_ns() - w0) / calls)
        cpu.append((time.thread_time_ns() - c0) / calls)
    return float(np.median(cpu)) / 1e3, float(np.median(wall)) / 1e3


def cpp_means(binary, path, params, calls):
    out = subprocess.run([binary, "--calls", path, str(calls)] + (["params"] if params else []),
                         check=True, capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpp", default=os.path.join(ROOT, "build", "bench", "session_bench"))
    ap.add_argument("--device", default="cpu", choices=["cpu"],
                    help="cpu (the C++ baseline binary times CPU sessions)")
    args = ap.parse_args()
    print(f"{'model':<24} {'C++ cpu us':>11} {'Python cpu us':>14} {'overhead':>9}   "
          f"{'C++ wall us':>12} {'Python wall us':>15} {'overhead':>9}")
    for name, (rel, params, calls) in MODELS.items():
        path = os.path.join(ROOT, rel)
        c_cpu, c_wall = cpp_means(args.cpp, path, params, calls)
        py_cpu, py_wall = python_means(path, args.device, params, calls)
        print(f"{name:<24} {c_cpu:>11.2f} {py_cpu:>14.2f} {py_cpu / c_cpu - 1:>+8.1%}   "
              f"{c_wall:>12.2f} {py_wall:>15.2f} {py_wall / c_wall - 1:>+8.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
