#!/usr/bin/env python3
"""PyTorch's times for the torch-rechub models of the real-model benchmark.

    python3 bench/rechub_torch.py OUT.json [--models MMOE,PLE,DCNv2,DeepFM]
                                 [--batches 512,2048] [--compile] [--reps 200] [--warmup 20]

Each model is built by scripts/make_rechub_models.py's own builder (the
module hfuse's ONNX exports come from), in eval mode on the GPU, fed the
same kind of inputs (ids inside every vocabulary), and timed as PyTorch
users run it: eager under torch.no_grad, eager replayed from a CUDA graph,
and with --compile torch.compile's default and "reduce-overhead" modes.
Method: warm-up runs, then the median of `reps` CUDA-event-timed runs (µs).
Run it in the same device call as `hfuse bench` on the exports (see
bench/RESULTS.md). torch-rechub comes along as a wheel (tests/onnx/dynamo/README.md).
"""
import argparse
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import make_rechub_models as rechub  # noqa: E402


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--models", default="MMOE,PLE,DCNv2,DeepFM")
    ap.add_argument("--batches", default="512,2048")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args()
    names = list(rechub.MODELS)
    results = {"torch": torch.__version__, "device": torch.cuda.get_device_name(), "models": {}}
    for name in args.models.split(","):
        torch.manual_seed(names.index(name))
        model, features, _ = rechub.MODELS[name]()
        rechub.refill(model, 1000 + names.index(name))
        model = model.cuda().eval()
        for batch in map(int, args.batches.split(",")):
            feeds, _ = rechub.inputs_for(features, batch, 7)
            feeds = {k: v.cuda() for k, v in feeds.items()}
            row = {}
            with torch.no_grad():
                eager = lambda: model(feeds)  # noqa: E731
                row["eager"] = median_us(eager, args.reps, args.warmup)
                row["eager_cuda_graph"] = median_us(graphed(eager), args.reps, args.warmup)
                if args.compile:
                    for mode in ("default", "reduce-overhead"):
                        compiled = torch.compile(model, mode=mode)
                        row[f"compile_{mode}"] = median_us(lambda: compiled(feeds), args.reps,
                                                           args.warmup)
            results["models"][f"{name}@{batch}"] = row
            print(f"{name} batch {batch}: " + ", ".join(f"{k} {v:.1f} us" for k, v in row.items()),
                  flush=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
