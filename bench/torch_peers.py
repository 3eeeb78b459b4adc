#!/usr/bin/env python3
"""PyTorch's times for the real models of the benchmark: the peers hfuse is measured against.

    python3 bench/torch_peers.py OUT.json [--models rechub:MMOE,widedeep:TabMlp,...]
                                 [--batches 512,2048] [--variants eager,eager_graph,...]
                                 [--budget SECONDS] [--reps 200] [--warmup 20]
                                 [--dtype float32|bfloat16]

Each model is built by the script that exported it (scripts/make_rechub_models.py,
scripts/make_widedeep_models.py: the same module, the same layer sizes), in
eval mode on the GPU in float32, fed the same kind of inputs (ids inside
every vocabulary), and timed as PyTorch users run it, under torch.no_grad
(`--dtype bfloat16`: under `torch.autocast("cuda", torch.bfloat16)`, the
module and its inputs float32, torch-rechub's models only: their modules
cast the dense features with `.float()`, so a module cast with
`.to(torch.bfloat16)` fails, "mat1 and mat2 must have the same dtype",
measured 2026-12-05):

  eager              the module called
  eager_graph        eager, captured once and replayed from a CUDA graph
  compile            torch.compile(mode="default")
  compile_graph      that, replayed from a CUDA graph
  autotune           torch.compile(mode="max-autotune-no-cudagraphs")
  autotune_graph     that, replayed from a CUDA graph

Method (bench/RESULTS.md): warm-up runs, then the median of `reps`
CUDA-event-timed runs, in µs; TF32 off (PyTorch's default for float32
matmuls, and what hfuse's cuBLAS calls compute). Compiling takes tens of
seconds a model (max-autotune minutes): `--budget` bounds the whole run, and
variants not reached in it are recorded as "not run (budget)" rather than
left out. `--warm-jobs N` compiles first in up to N processes side by side
(a process a model, batch and compile mode, each compiled and called once,
untimed), filling Inductor's on-disk caches (the FX graph
cache and the autotuning results, under TORCHINDUCTOR_CACHE_DIR, by default
/tmp/torchinductor_$USER), so that the timing pass, which compiles again in
one process, finds each compiled graph there. Warm and time in one device
call: a cache folder in the checkout did not outlive the call (2026-12-07,
bench/RESULTS.md), and FiBiNet's and SAINT's max-autotune compiles take 5 to
8 minutes a batch, so each of them needs a call of its own. Autotuning
in N processes at once shares the GPU while it benchmarks its candidates,
so a choice may differ from a lone run's; the timed runs themselves are
taken alone. Run it in the
same device call as `hfuse bench` (bench/real_models.py does both). The
libraries come along as wheels or folders on PYTHONPATH (tests/onnx/dynamo/README.md).
"""
import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))

VARIANTS = ["eager", "eager_graph", "compile", "compile_graph", "autotune", "autotune_graph"]


def median_us(fn, reps, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1000.0)
    return statistics.median(times)


def graphed(fn):
    """fn replayed from a CUDA graph (static inputs, as fn holds them)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def build(library, name, dtype=torch.float32):
    """(module, make_inputs(batch) -> callable running the module on them), in `dtype`."""
    if library == "rechub":
        import make_rechub_models as rechub
        names = list(rechub.MODELS)
        torch.manual_seed(names.index(name))
        model, features, _ = rechub.MODELS[name]()
        rechub.refill(model, 1000 + names.index(name))
        model = model.cuda().eval()

        def inputs(batch):
            feeds, _ = rechub.inputs_for(features, batch, 7)
            feeds = {k: v.cuda() for k, v in feeds.items()}
            if dtype == torch.float32:
                return lambda m: m(feeds)

            def autocast_call(m):
                with torch.autocast("cuda", dtype=dtype):
                    return m(feeds)
            return autocast_call
        return model, inputs
    if dtype != torch.float32:
        raise ValueError("pytorch-widedeep's models run in float32 only (ids in a float input)")
    import make_widedeep_models as widedeep
    wd = widedeep.load_widedeep()
    index = widedeep.MODELS.index(name)
    torch.manual_seed(index)
    model, wide = widedeep.build(name, wd)
    widedeep.refill(model, 2000 + index)
    module = widedeep.Exported(model, wide).cuda().eval()
    # pytorch-widedeep indexes columns with Python lists (X[:, self.cont_idx]),
    # which PyTorch turns into a host tensor copied to the GPU on every call:
    # no CUDA graph can capture that. The same indices as a device tensor
    # select the same columns, and the module then captures.
    for m in module.modules():
        for attr in ("cont_idx", "cat_idx"):
            idx = getattr(m, attr, None)
            if isinstance(idx, (list, tuple)) and idx and all(isinstance(i, int) for i in idx):
                setattr(m, attr, torch.tensor(idx, dtype=torch.long, device="cuda"))

    def inputs(batch):
        feeds, _ = widedeep.inputs_for(batch, wide, 7)
        feeds = [f.cuda() for f in feeds]
        return lambda m: m(*feeds)
    return module, inputs


def warm_caches(args, variants):
    """Compiles every compiled variant in args.warm_jobs processes side by side, untimed."""
    modes = sorted({v.split("_")[0] for v in variants if v.startswith(("compile", "autotune"))})
    if not modes or args.warm_jobs <= 1:
        return
    # One process a model, batch and mode, at most warm_jobs at a time: a large
    # model's max-autotune compile of one batch waits behind nothing of its own.
    jobs = [(m, b, mode) for m in args.models.split(",") for b in args.batches.split(",") for mode in modes]
    budget = min(args.budget, args.warm_budget)
    t0 = time.monotonic()

    def warm(job):
        model, batch, mode = job
        name = f"{model} batch {batch} {mode}"
        left = budget - (time.monotonic() - t0)
        if left < 1:
            return f"torch_peers: warm-up of {name}: not started (budget)"
        cmd = [sys.executable, os.path.abspath(__file__), os.devnull, "--models", model, "--batches", batch,
               "--variants", mode, "--warm-only", "--dtype", args.dtype]
        try:
            run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=left)
            status, out = f"exit {run.returncode}", run.stdout
        except subprocess.TimeoutExpired as e:  # run() killed it; its output so far may come as bytes
            status = "killed at the budget"
            out = e.output.decode(errors="replace") if isinstance(e.output, bytes) else (e.output or "")
        return f"torch_peers: warm-up of {name}: {status} after {time.monotonic() - t0:.0f} s\n" + out[-600:]

    with concurrent.futures.ThreadPoolExecutor(min(args.warm_jobs, len(jobs))) as pool:
        for line in pool.map(warm, jobs):
            print(line, flush=True)
    print(f"torch_peers: compile caches warmed in {time.monotonic() - t0:.0f} s, at most {args.warm_jobs} processes "
          "at a time", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--models", required=True, help="library:Name,... (library rechub or widedeep)")
    ap.add_argument("--batches", default="512,2048")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--budget", type=float, default=1e9, help="seconds for the whole run")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--warm-jobs", type=int, default=0, help="compile first in this many processes (see above)")
    ap.add_argument("--warm-budget", type=float, default=1e9,
                    help="seconds for the warm-up processes (the rest of --budget is the timed runs')")
    ap.add_argument("--warm-only", action="store_true", help="compile and call each variant once, time nothing")
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    variants = args.variants.split(",")
    start = time.monotonic()
    if not args.warm_only:
        warm_caches(args, variants)
    deadline = start + args.budget
    results = {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "dtype": args.dtype, "models": {}}
    for spec in args.models.split(","):
        library, name = spec.split(":")
        module, inputs = build(library, name, dtype)
        compiled = {}
        for batch in map(int, args.batches.split(",")):
            call = inputs(batch)
            row = {}
            with torch.no_grad():
                for v in variants:
                    if v.startswith(("compile", "autotune")) and time.monotonic() > deadline:
                        row[v] = "not run (budget)"
                        continue
                    try:
                        mode = "max-autotune-no-cudagraphs" if v.startswith("autotune") else "default"
                        if v.startswith(("compile", "autotune")) and mode not in compiled:
                            compiled[mode] = torch.compile(module, mode=mode, dynamic=False)
                        target = compiled[mode] if v.startswith(("compile", "autotune")) else module
                        fn = lambda: call(target)  # noqa: E731
                        if args.warm_only:
                            fn()
                            torch.cuda.synchronize()
                            continue
                        if v.endswith("_graph"):
                            fn = graphed(fn)
                        row[v] = median_us(fn, args.reps, args.warmup)
                    except Exception as e:  # a variant that fails is recorded, the rest still run
                        row[v] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
            results["models"][f"{library}:{name}@{batch}"] = row
            print(f"{library}:{name} batch {batch}: "
                  + ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()),
                  flush=True)
            with open(args.out, "w") as f:
                json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
