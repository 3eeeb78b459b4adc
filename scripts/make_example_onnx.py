#!/usr/bin/env python3
"""Writes examples/ranking_small.onnx, the bundled ONNX example.

    /usr/bin/python3 scripts/make_example_onnx.py [OUT.onnx]

A small multi-tower ranking model, exported from PyTorch (Debian's
python3-torch) at opset 17 with a static batch of 64: 256 dense features are
split into 8 slices of 32; each tower runs Linear(32, 64) + ReLU, then
Linear(64, 32), then a gate h * sigmoid(LayerNorm(h)); the towers are
concatenated and a Linear(256, 1) + Sigmoid head scores them. About 140 KB
of float32 weights, seeded, so the file is the same on every run.

hfuse fuses the 8 first-layer GEMMs (split-fed), the 8 second-layer GEMMs and
the 8 gates into one group op each; the head stays as it is.
"""
import os
import sys
import warnings

import torch

TOWERS, WIDTH, HIDDEN, BATCH = 8, 32, 64, 64


class Tower(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(WIDTH, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, WIDTH)
        self.norm = torch.nn.LayerNorm(WIDTH)

    def forward(self, x):
        h = self.fc2(torch.relu(self.fc1(x)))
        return h * torch.sigmoid(self.norm(h))


class Ranking(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.towers = torch.nn.ModuleList([Tower() for _ in range(TOWERS)])
        self.head = torch.nn.Linear(TOWERS * WIDTH, 1)

    def forward(self, features):
        parts = torch.split(features, WIDTH, dim=1)
        joined = torch.cat([t(p) for t, p in zip(self.towers, parts)], dim=1)
        return torch.sigmoid(self.head(joined))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "examples",
                                                             "ranking_small.onnx")
    torch.manual_seed(0)
    model = Ranking().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.randn(BATCH, TOWERS * WIDTH),), out, opset_version=17,
                          input_names=["features"], output_names=["score"])
    print(f"wrote {os.path.normpath(out)} ({os.path.getsize(out) // 1024} KB)")


if __name__ == "__main__":
    main()
