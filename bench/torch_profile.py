#!/usr/bin/env python3
"""PyTorch's kernels for one real model, each with its time a run: the peer's side of `hfuse bench --profile`.

    python3 bench/torch_profile.py library:Name [--batch 2048] [--variant compile] [--runs 20] [--top 40]

Builds the model as bench/torch_peers.py does (the same module, weights and
inputs), warms it up, then runs it `runs` times under torch.profiler and
prints every CUDA kernel it launched: its total time over the runs divided
by `runs` (us a run), how many times a run it launched, and its name (cut to
100 characters). `variant`: eager or compile (torch.compile, default mode),
run plainly (a CUDA graph replays the same kernels). Float32, TF32 off.
Reading it next to hfuse's profile of the same model and batch shows where
the two spend their time differently.
"""
import argparse
import collections
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_peers  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", help="library:Name (library rechub or widedeep)")
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--variant", choices=["eager", "compile"], default="compile")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    library, name = args.model.split(":")
    module, inputs = torch_peers.build(library, name)
    call = inputs(args.batch)
    fn = module if args.variant == "eager" else torch.compile(module, mode="default")
    with torch.no_grad():
        for _ in range(5):
            call(fn)
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(args.runs):
                call(fn)
            torch.cuda.synchronize()
    total = collections.Counter()
    count = collections.Counter()
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            total[e.name] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
            count[e.name] += 1
    run_us = sum(total.values()) / args.runs
    print(f"torch_profile: {args.model} batch {args.batch} {args.variant}: {run_us:.1f} us of kernels a run, "
          f"{sum(count.values()) / args.runs:.0f} launches a run")
    for k, t in total.most_common(args.top):
        print(f"  {t / args.runs:9.1f} us  x{count[k] / args.runs:<4.0f} {k[:100]}")


if __name__ == "__main__":
    main()
