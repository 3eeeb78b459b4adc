#!/usr/bin/env python3
"""Builds tabular models with pytorch-widedeep's own classes and exports them to ONNX.

    python3 scripts/make_widedeep_models.py OUT_DIR [--models TabMlp,...] [--batch 512]
                     [--exporter dynamo|torchscript] [--opset 18] [--modes static,dynamic]

The second real-model corpus (after torch-rechub's): pytorch-widedeep 1.7.0's
TabMlp, TabResnet, TabTransformer, FTTransformer, SAINT and a Wide + TabMlp
WideDeep, each the `deeptabular` part of a WideDeep (which adds the
prediction layer), on a Criteo-like table: 26 categorical columns of 100
ids with 16-wide embeddings and 13 continuous columns, all in ONE float
input `X` [batch, 39], the library's convention (each model reads its
categorical columns as `X[:, idx].long()`). The WideDeep model also has the
wide part's int64 input `X_wide` [batch, 26] (ids offset per column, as the
library's WidePreprocessor writes them). Every weight and BatchNorm's
running statistics are refilled from a seeded generator.

pytorch-widedeep needs torch >= 2, so this runs on the GPU machine (PyTorch
2.11), where both exporters exist: `--exporter dynamo` (opset 18, the
default of torch.onnx.export there) and `--exporter torchscript` (opset 17).
The package's top-level import pulls text and image libraries (gensim,
spacy, opencv) the tabular models never use; `load_widedeep` imports only
the model modules, with the package's type aliases (wdtypes) stood in for.
Installed with `pip install --no-deps --target` from the wheel brought along.
OUT_DIR/NAME.{static,dynamic}.onnx, and OUT_DIR/NAME.json with the inputs
(as make_rechub_models.py writes it).
"""
import argparse
import json
import os
import sys
import types
import typing
import warnings

import torch
from torch import nn

N_CAT, N_CONT, EMBED, VOCAB = 26, 13, 16, 100
CAT = [f"c{i + 1}" for i in range(N_CAT)]
CONT = [f"n{i + 1}" for i in range(N_CONT)]
COLUMN_IDX = {c: i for i, c in enumerate(CAT + CONT)}


def load_widedeep():
    """The WideDeep class and the tabular models, without the package's __init__."""
    root = next((os.path.join(p, "pytorch_widedeep") for p in sys.path
                 if os.path.isfile(os.path.join(p or ".", "pytorch_widedeep", "models", "wide_deep.py"))),
                None)
    if root is None:
        sys.exit("make_widedeep_models: pytorch_widedeep is not on sys.path")
    for name, path in (("pytorch_widedeep", root), ("pytorch_widedeep.utils", os.path.join(root, "utils")),
                       ("pytorch_widedeep.models", os.path.join(root, "models"))):
        pkg = types.ModuleType(name)
        pkg.__path__ = [path]
        sys.modules[name] = pkg
    wdtypes = types.ModuleType("pytorch_widedeep.wdtypes")
    for alias in ("Any", "Dict", "List", "Tuple", "Union", "Literal", "Optional", "Callable"):
        setattr(wdtypes, alias, getattr(typing, alias))
    wdtypes.Tensor = torch.Tensor
    wdtypes.Module = nn.Module
    sys.modules["pytorch_widedeep.wdtypes"] = wdtypes
    from pytorch_widedeep.models.tabular import SAINT, FTTransformer, TabMlp, TabResnet, TabTransformer, Wide
    from pytorch_widedeep.models.wide_deep import WideDeep
    return types.SimpleNamespace(SAINT=SAINT, FTTransformer=FTTransformer, TabMlp=TabMlp,
                                 TabResnet=TabResnet, TabTransformer=TabTransformer, Wide=Wide,
                                 WideDeep=WideDeep)


def build(name, wd):
    """(WideDeep model, whether it has the wide input)."""
    embed = [(c, VOCAB, EMBED) for c in CAT]
    tokens = [(c, VOCAB) for c in CAT]
    common = dict(column_idx=COLUMN_IDX, continuous_cols=CONT)
    if name == "TabMlp":
        deep = wd.TabMlp(cat_embed_input=embed, cont_norm_layer="batchnorm",
                         mlp_hidden_dims=[256, 128], **common)
    elif name == "TabResnet":
        deep = wd.TabResnet(cat_embed_input=embed, cont_norm_layer="layernorm",
                            blocks_dims=[256, 128, 128], mlp_hidden_dims=[64], **common)
    elif name == "TabTransformer":
        deep = wd.TabTransformer(cat_embed_input=tokens, input_dim=32, n_heads=4, n_blocks=2,
                                 mlp_hidden_dims=[128, 64], **common)
    elif name == "FTTransformer":
        deep = wd.FTTransformer(cat_embed_input=tokens, input_dim=32, n_heads=4, n_blocks=2,
                                mlp_hidden_dims=[128, 64], **common)
    elif name == "SAINT":
        deep = wd.SAINT(cat_embed_input=tokens, input_dim=32, n_heads=4, n_blocks=2,
                        mlp_hidden_dims=[128, 64], **common)
    elif name == "WideDeep":
        deep = wd.TabMlp(cat_embed_input=embed, mlp_hidden_dims=[256, 128], **common)
        return wd.WideDeep(wide=wd.Wide(input_dim=N_CAT * VOCAB + 1, pred_dim=1), deeptabular=deep), True
    else:
        sys.exit(f"make_widedeep_models: unknown model '{name}' (known: {', '.join(MODELS)})")
    return wd.WideDeep(deeptabular=deep), False


MODELS = ["TabMlp", "TabResnet", "TabTransformer", "FTTransformer", "SAINT", "WideDeep"]


class Exported(nn.Module):
    """WideDeep takes a dict; the export takes tensors."""

    def __init__(self, model, wide):
        super().__init__()
        self.model, self.wide = model, wide

    def forward(self, X, X_wide=None):
        feeds = {"deeptabular": X}
        if self.wide:
            feeds["wide"] = X_wide
        return self.model(feeds)


def refill(model, seed):
    """Seeded weights at scales that keep activations O(1) (as make_rechub_models.py)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.dim() >= 2:
                fan_in = p.shape[-1] if "emb" not in name else 1
                p.copy_(torch.randn(p.shape, generator=gen) / max(fan_in, 1) ** 0.5)
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
        for _, m in sorted(model.named_modules()):
            if isinstance(m, nn.BatchNorm1d):
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=gen) + 0.5)


def inputs_for(batch, wide, seed):
    """X: ids 1..VOCAB-1 in the categorical columns (0 is the library's padding), uniform continuous."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, VOCAB, (batch, N_CAT), generator=gen)
    X = torch.cat([ids.float(), torch.rand((batch, N_CONT), generator=gen)], dim=1)
    feeds = [X]
    info = [{"name": "X", "dtype": "float32", "shape": [batch, N_CAT + N_CONT],
             "int_columns": N_CAT, "high": VOCAB, "low": 1}]
    if wide:
        X_wide = ids + torch.arange(N_CAT) * VOCAB
        feeds.append(X_wide)
        info.append({"name": "X_wide", "dtype": "int64", "shape": [batch, N_CAT],
                     "high": N_CAT * VOCAB + 1})
    return tuple(feeds), info


def export(module, feeds, path, exporter, opset, dynamic):
    names = ["X", "X_wide"][:len(feeds)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            shapes = None
            if dynamic:
                batch = torch.export.Dim("batch", min=1, max=1 << 20)
                shapes = tuple({0: batch} for _ in feeds)
            program = torch.onnx.export(module, feeds, dynamo=True, input_names=names,
                                        output_names=["output"], opset_version=opset,
                                        dynamic_shapes=shapes, external_data=False)
            program.save(path)
        else:
            axes = {n: {0: "batch"} for n in names + ["output"]} if dynamic else None
            torch.onnx.export(module, feeds, path, dynamo=False, input_names=names,
                              output_names=["output"], opset_version=opset, dynamic_axes=axes)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--exporter", choices=("dynamo", "torchscript"), default="dynamo")
    ap.add_argument("--opset", type=int, default=None, help="default: 18 (dynamo), 17 (torchscript)")
    ap.add_argument("--modes", default="static,dynamic")
    args = ap.parse_args()
    opset = args.opset or (18 if args.exporter == "dynamo" else 17)
    os.makedirs(args.out_dir, exist_ok=True)
    wd = load_widedeep()
    failed = []
    for index, name in enumerate(args.models.split(",")):
        torch.manual_seed(index)
        model, wide = build(name, wd)
        refill(model, 2000 + index)
        module = Exported(model, wide).eval()
        feeds, info = inputs_for(args.batch, wide, 7)
        with torch.no_grad():
            expected = module(*feeds)
        for mode in args.modes.split(","):
            path = os.path.join(args.out_dir, f"{name}.{mode}.onnx")
            try:
                export(module, feeds, path, args.exporter, opset, mode == "dynamic")
            except Exception as e:  # one model's failure is reported, the rest still export
                failed.append(f"{name}.{mode}: {type(e).__name__}: {str(e).splitlines()[0][:300]}")
                print(f"FAILED {path}: {failed[-1]}", flush=True)
                continue
            print(f"wrote {path} ({os.path.getsize(path) // 1024} KB)", flush=True)
        with open(os.path.join(args.out_dir, f"{name}.json"), "w") as f:
            json.dump({"model": name, "library": "pytorch-widedeep 1.7.0", "batch": args.batch,
                       "torch": torch.__version__, "exporter": args.exporter, "opset": opset,
                       "inputs": info, "output": "output", "output_shape": list(expected.shape),
                       "groups": []}, f, indent=1)
    if failed:
        sys.exit("make_widedeep_models: " + "; ".join(failed))


if __name__ == "__main__":
    main()
