#!/usr/bin/env python3
"""Builds small ranking models in the forms that hfuse's canonical-GEMM passes rewrite.

    .venv/bin/python scripts/make_canonical_models.py OUT_DIR [--batch 512]
                     [--exporter dynamo|torchscript]

torch-rechub (scripts/make_rechub_models.py) writes none of these forms
except the constant-left MatMul (its DCNv2); other libraries do. The layers
here follow DeepCTR-Torch's (written here, not imported: that package needs
TensorFlow):

  TensordotAutoInt  AutoInt's InteractingLayer, whose Q/K/V/Res projections
                    are torch.tensordot(x, W, dims=([-1], [0])) (exported as
                    Reshape -> Einsum "ij,jk->ik" -> Reshape), with a vector
                    CrossNet (tensordot of x_l [B, D] with a [D, 1] kernel)
                    and a DNN beside it (one interacting layer: libonnx 1.12
                    infers no Einsum, and with a dynamic batch a second
                    layer's shape arithmetic is left to made-up dims);
  ConvHeads         three kernel-1 Conv1d heads on a length-1 input (a Linear
                    in Conv clothing, as 1x1-conv towers export) and xDeepFM's
                    CIN (a kernel-1 Conv1d over the embedding dim, which needs
                    a transpose to be a GEMM and stays a Conv; its outer
                    product torch.einsum("bhd,bmd->bhmd") a MatMul of K = 1);
  EinsumAutoInt     AutoInt written with torch.einsum throughout, as DeepCTR's
                    PyTorch ports write it: two interacting layers whose
                    Q/K/V/Res projections are "bfe,ed->bfd" (einsum-to-gemm:
                    GEMMs that group) and whose attention is "bnik,bnjk->bnij",
                    softmax, "bnij,bnjk->bnik" (einsum-to-matmul: MatMuls).

Each is exported at a fixed batch (OUT_DIR/NAME.static.onnx) and with a
dynamic one (NAME.dynamic.onnx), with OUT_DIR/NAME.json describing its
inputs as make_rechub_models.py does, so that
tests/onnx/check_rechub_models.py checks them the same way. Without
--exporter, by torch.onnx.export as it stands (opset 17: the TorchScript
exporter of Debian's torch 1.13, the only one it has); --exporter
torchscript (opset 17) or dynamo (opset 18, torch >= 2.5, which defaults to
it) asks for one, and NAME.json then names it, with the torch version, as
make_rechub_models.py --exporter writes it.
"""
import argparse
import json
import os
import warnings

import torch
from torch import nn

N_FIELDS, EMBED, VOCAB, N_DENSE = 26, 16, 100, 13


class Embeddings(nn.Module):
    """ids [B, F] -> [B, F, E], one table per field."""

    def __init__(self):
        super().__init__()
        self.tables = nn.ModuleList(nn.Embedding(VOCAB, EMBED) for _ in range(N_FIELDS))

    def forward(self, ids):
        return torch.stack([t(ids[:, i]) for i, t in enumerate(self.tables)], dim=1)


class InteractingLayer(nn.Module):
    def __init__(self, dim, heads=2):
        super().__init__()
        self.heads = heads
        self.W_Query, self.W_key, self.W_Value, self.W_Res = (
            nn.Parameter(torch.randn(dim, dim) / dim ** 0.5) for _ in range(4))

    def forward(self, x):  # [B, F, E]
        q = torch.tensordot(x, self.W_Query, dims=([-1], [0]))
        k = torch.tensordot(x, self.W_key, dims=([-1], [0]))
        v = torch.tensordot(x, self.W_Value, dims=([-1], [0]))
        b, f, e = x.shape
        q, k, v = (t.reshape(b, f, self.heads, e // self.heads).transpose(1, 2) for t in (q, k, v))
        att = torch.softmax(torch.matmul(q, k.transpose(-1, -2)), dim=-1)
        out = torch.matmul(att, v).transpose(1, 2).reshape(b, f, e)
        return torch.relu(out + torch.tensordot(x, self.W_Res, dims=([-1], [0])))


class CrossNetVector(nn.Module):
    """x_{l+1} = x_0 · (x_l · w_l) + b_l + x_l, with x_l · w_l a tensordot."""

    def __init__(self, dim, layers=2):
        super().__init__()
        self.kernels = nn.Parameter(torch.randn(layers, dim, 1) / dim ** 0.5)
        self.bias = nn.Parameter(torch.randn(layers, dim) * 0.1)

    def forward(self, x):  # [B, D]
        xl = x
        for i in range(self.kernels.shape[0]):
            xl_w = torch.tensordot(xl, self.kernels[i], dims=([1], [0]))  # [B, 1]
            xl = x * xl_w + self.bias[i] + xl
        return xl


class TensordotAutoInt(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = Embeddings()
        self.interacting = InteractingLayer(EMBED)
        d = N_FIELDS * EMBED + N_DENSE
        self.cross = CrossNetVector(d)
        self.dnn = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
        self.out = nn.Linear(N_FIELDS * EMBED + d + 32, 1)

    def forward(self, ids, dense):
        e = self.embedding(ids)
        flat = torch.cat([e.flatten(1), dense], dim=1)
        att = self.interacting(e).flatten(1)
        return torch.sigmoid(self.out(torch.cat([att, self.cross(flat), self.dnn(flat)], dim=1)))


class ConvHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = Embeddings()
        d = N_FIELDS * EMBED + N_DENSE
        self.heads = nn.ModuleList(nn.Conv1d(d, 32, 1) for _ in range(3))
        self.cin = nn.Conv1d(N_FIELDS * N_FIELDS, 8, 1)  # xDeepFM's CIN, one layer
        self.out = nn.Linear(3 * 32 + 8, 1)

    def forward(self, ids, dense):
        e = self.embedding(ids)
        x = torch.cat([e.flatten(1), dense], dim=1).unsqueeze(-1)  # [B, D, 1]
        heads = [torch.relu(h(x)).squeeze(-1) for h in self.heads]
        z = torch.einsum("bhd,bmd->bhmd", e, e).reshape(e.shape[0], N_FIELDS * N_FIELDS, EMBED)
        cin = torch.relu(self.cin(z)).sum(dim=2)  # [B, 8]
        return torch.sigmoid(self.out(torch.cat(heads + [cin], dim=1)))


class EinsumInteractingLayer(nn.Module):
    """AutoInt's interacting layer, every product a torch.einsum."""

    def __init__(self, dim, heads=2):
        super().__init__()
        self.heads = heads
        self.W_Query, self.W_key, self.W_Value, self.W_Res = (
            nn.Parameter(torch.randn(dim, dim) / dim ** 0.5) for _ in range(4))

    def forward(self, x):  # [B, F, E]
        q, k, v = (torch.einsum("bfe,ed->bfd", x, w)
                   for w in (self.W_Query, self.W_key, self.W_Value))
        b, f, e = x.shape
        q, k, v = (t.reshape(b, f, self.heads, e // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = torch.einsum("bnik,bnjk->bnij", q, k)
        att = torch.einsum("bnij,bnjk->bnik", torch.softmax(scores, dim=-1), v)
        out = att.transpose(1, 2).reshape(b, f, e)
        return torch.relu(out + torch.einsum("bfe,ed->bfd", x, self.W_Res))


class EinsumAutoInt(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = Embeddings()
        self.interacting = nn.Sequential(EinsumInteractingLayer(EMBED),
                                         EinsumInteractingLayer(EMBED))
        d = N_FIELDS * EMBED + N_DENSE
        self.dnn = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
        self.out = nn.Linear(N_FIELDS * EMBED + 32, 1)

    def forward(self, ids, dense):
        e = self.embedding(ids)
        flat = torch.cat([e.flatten(1), dense], dim=1)
        att = self.interacting(e).flatten(1)
        return torch.sigmoid(self.out(torch.cat([att, self.dnn(flat)], dim=1)))


MODELS = {"TensordotAutoInt": TensordotAutoInt, "ConvHeads": ConvHeads,
          "EinsumAutoInt": EinsumAutoInt}


def export(model, feeds, path, exporter, dynamic):
    """torch.onnx.export as it stands (exporter None), or by the exporter asked for."""
    names = ["ids", "dense"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter is None:
            axes = {n: {0: "batch"} for n in names + ["output"]}
            torch.onnx.export(model, feeds, path, opset_version=17, input_names=names,
                              output_names=["output"], dynamic_axes=axes if dynamic else None)
        elif exporter == "torchscript":
            axes = {n: {0: "batch"} for n in names + ["output"]}
            torch.onnx.export(model, feeds, path, dynamo=False, opset_version=17, input_names=names,
                              output_names=["output"], dynamic_axes=axes if dynamic else None)
        else:
            shapes = None
            if dynamic:
                batch = torch.export.Dim("batch", min=1, max=1 << 20)
                shapes = tuple({0: batch} for _ in feeds)
            program = torch.onnx.export(model, feeds, dynamo=True, input_names=names,
                                        output_names=["output"], opset_version=18,
                                        dynamic_shapes=shapes, external_data=False)
            program.save(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--exporter", choices=("dynamo", "torchscript"), default=None,
                    help="default: torch.onnx.export's own (TorchScript on torch 1.13)")
    args = ap.parse_args()
    if args.exporter and tuple(int(p) for p in torch.__version__.split(".")[:2]) < (2, 5):
        ap.error(f"--exporter needs torch >= 2.5 (this is {torch.__version__}); leave it out")
    os.makedirs(args.out_dir, exist_ok=True)
    torch.set_num_threads(1)
    for index, (name, make) in enumerate(MODELS.items()):
        torch.manual_seed(100 + index)
        model = make().eval()
        gen = torch.Generator().manual_seed(7)
        ids = torch.randint(0, VOCAB, (args.batch, N_FIELDS), generator=gen)
        dense = torch.rand((args.batch, N_DENSE), generator=gen)
        for mode in ("static", "dynamic"):
            path = os.path.join(args.out_dir, f"{name}.{mode}.onnx")
            export(model, (ids, dense), path, args.exporter, mode == "dynamic")
            print(f"wrote {path} ({os.path.getsize(path) // 1024} KB)")
        info = [{"name": "ids", "dtype": "int64", "shape": [args.batch, N_FIELDS], "high": VOCAB},
                {"name": "dense", "dtype": "float32", "shape": [args.batch, N_DENSE]}]
        described = {"model": name, "batch": args.batch, "inputs": info, "output": "output"}
        if args.exporter:
            described.update(exporter=args.exporter, torch=torch.__version__,
                             opset=18 if args.exporter == "dynamo" else 17)
        with open(os.path.join(args.out_dir, f"{name}.json"), "w") as f:
            json.dump(described, f, indent=1)

if __name__ == "__main__":
    main()
