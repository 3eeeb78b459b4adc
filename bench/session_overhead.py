#!/usr/bin/env python3
"""The Python module's overhead per run() against the C++ session directly.

    PYTHONPATH=build/python .venv/bin/python bench/session_overhead.py \
        [--cpp build/bench/session_bench]
    python3 bench/session_overhead.py --device cuda     # on the GPU (torch with CUDA)

On CUDA (--device cuda) the baseline is the C++ session in the same
process and on the same session object: Session.time_run_device loops
Session::RunDevice in C++ on the feeds imported once, with no Python in
the loop. Against it: run() on torch CUDA tensors (each feed imported by
DLPack, each output made a DLPack array, per call) and run_with_iobinding()
(inputs and outputs bound once), all three on the same torch tensors, which
the binding's plan reads in place (Session::BindInputs, made by its first
run in the warm-up: from then on no side copies a feed), the outputs the
session's own buffers. Models: tiny_towers made dynamic in its
batch, weights given at creation (1 feed), and torch-rechub's MMOE (39
feeds; refilled with seeded weights, which needs onnx); each at batch 1 and
512, with the CUDA graph and without; 200 warm-up calls, then 5 rounds of N
calls interleaved across the three, the median round's mean per call; the
overhead is Python minus C++ in microseconds per run (the issue's target:
under 10).

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


def dynamic_tiny_towers(out_path):
    """bench/tiny_towers.json with its batch (8) a dynamic dim of 1..512."""
    import json
    with open(os.path.join(ROOT, "bench", "tiny_towers.json")) as f:
        g = json.load(f)
    g["dims"] = [{"name": "batch", "min": 1, "max": 512}]
    for t in g["tensors"]:
        if t.get("role") != "param" and t["shape"][0] == 8:
            t["shape"][0] = "batch"
    with open(out_path, "w") as f:
        json.dump(g, f)


def cuda_models(work):
    """name: (path, params given at creation, feeds at a batch: {name: numpy})."""
    towers = os.path.join(work, "tiny_towers_dynamic.json")
    dynamic_tiny_towers(towers)
    models = {"tiny_towers (1 feed)": (towers, True, None)}
    mmoe = os.path.join(work, "MMOE.onnx")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "onnx_skeleton.py"), "refill",
                        os.path.join(ROOT, "tests", "onnx", "dynamo", "MMOE.dynamic.onnx"), mmoe,
                        "--seed", "5"], capture_output=True, text=True)
    if r.returncode == 0:
        sys.path.insert(0, os.path.join(ROOT, "tests", "onnx"))
        from model_inputs import feeds_for
        info = os.path.join(ROOT, "tests", "onnx", "dynamo", "MMOE.json")
        models["MMOE (39 feeds)"] = (mmoe, False, lambda batch: feeds_for(info, batch, seed=1))
    else:
        print(f"MMOE left out: onnx_skeleton.py refill failed: {r.stderr.strip()[-300:]}")
    return models


def cuda_rows(calls):
    """(model, batch, graph, C++ (cpu, wall), run() (cpu, wall), iobinding (cpu, wall))."""
    import tempfile
    import torch
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for name, (path, params, feeds_at) in cuda_models(work).items():
            for batch in (1, 512):
                for graph in (True, False):
                    kw = dict(providers=["CUDAExecutionProvider"], cuda_graph=graph)
                    sess = hfuse.InferenceSession(path, **kw)
                    if params:
                        weights = random([i for i in sess.get_inputs() if i.name != "x"])
                        sess = hfuse.InferenceSession(path, params=weights, **kw)
                        rng = np.random.default_rng(1)
                        host = {"x": rng.uniform(-1, 1, (batch, 16)).astype(np.float32)}
                    else:
                        host = feeds_at(batch)
                    feeds = {k: torch.from_numpy(v).cuda() for k, v in host.items()}
                    binding = sess.io_binding()
                    for k, v in feeds.items():
                        binding.bind_input(k, v)
                    for o in sess.get_outputs():
                        binding.bind_output(o.name)
                    for _ in range(200):
                        sess.run(None, feeds)
                        sess.run_with_iobinding(binding)
                    cpp, py, bound = [], [], []
                    for _ in range(5):
                        cpp.append(sess._session.time_run_device(feeds, 0, calls))
                        py.append(timed(lambda: sess.run(None, feeds), calls))
                        bound.append(timed(lambda: sess.run_with_iobinding(binding), calls))
                    med = lambda xs: (float(np.median([x[0] for x in xs])),
                                      float(np.median([x[1] for x in xs])))
                    rows.append((name, batch, graph, med(cpp), med(py), med(bound)))
    return rows


def timed(fn, calls):
    c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.thread_time_ns() - c0) / calls / 1e3, (time.perf_counter_ns() - w0) / calls / 1e3


def cuda_main(calls):
    import torch
    ok, why = hfuse.cuda_available()
    if not ok or not torch.cuda.is_available():
        print(f"--device cuda: no CUDA device here ({why or 'torch ' + torch.__version__ + ' has none'})")
        return 1
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; microseconds per run, "
          f"median of 5 rounds of {calls}; overhead = Python - C++")
    print(f"{'model':<22} {'batch':>5} {'graph':>5}   {'C++ wall':>9} {'run() wall':>10} "
          f"{'overhead':>8} {'bound wall':>10} {'overhead':>8}   {'C++ cpu':>8} {'run() cpu':>9} "
          f"{'bound cpu':>9}")
    worst = 0.0
    for name, batch, graph, cpp, py, bound in cuda_rows(calls):
        worst = max(worst, py[1] - cpp[1], bound[1] - cpp[1])
        print(f"{name:<22} {batch:>5} {'on' if graph else 'off':>5}   {cpp[1]:>9.2f} {py[1]:>10.2f} "
              f"{py[1] - cpp[1]:>+8.2f} {bound[1]:>10.2f} {bound[1] - cpp[1]:>+8.2f}   "
              f"{cpp[0]:>8.2f} {py[0]:>9.2f} {bound[0]:>9.2f}")
    print(f"largest overhead: {worst:.2f} us per run (target: under 10)")
    return 0


def cpp_means(binary, path, params, calls):
    out = subprocess.run([binary, "--calls", path, str(calls)] + (["params"] if params else []),
                         check=True, capture_output=True, text=True).stdout.split()
    return float(out[0]), float(out[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpp", default=os.path.join(ROOT, "build", "bench", "session_bench"))
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="cpu (the C++ baseline is --cpp's binary) or cuda (the C++ baseline "
                         "runs in this process, on the same session)")
    ap.add_argument("--calls", type=int, default=2000, help="CUDA: calls per round")
    args = ap.parse_args()
    if args.device == "cuda":
        return cuda_main(args.calls)
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
