#!/usr/bin/env python3
"""Builds real ranking models with torch-rechub's own classes and exports them to ONNX.

    .venv/bin/python scripts/make_rechub_models.py OUT_DIR [--models MMOE,PLE,...]
                     [--batch 512] [--opset 17] [--modes static,dynamic]

The real-model corpus of the ONNX tests (tests/onnx/test_rechub_models.py):
torch-rechub 0.9.0's MMOE, PLE, ESMM, AITM, SharedBottom, DeepFM, WideDeep,
DCN, DCNv2, AutoInt, FiBiNet and DIN, each built at a realistic size for a
Criteo-like input (26 sparse features with 16-wide embeddings, 13 dense
features, DNNs of (256, 128), 8 experts and 3 tasks for MMoE), and exported
by the library's own exporter (torch_rechub.utils.onnx_export.ONNXExporter,
which wraps the dict-input model and calls torch.onnx.export) twice: at a
fixed batch (OUT_DIR/NAME.static.onnx) and with a dynamic batch
(OUT_DIR/NAME.dynamic.onnx). Vocabularies are modest (100 ids a feature) so
that the files stay small; every weight, and BatchNorm's running statistics,
is refilled from a seeded generator so the models compute something that a
comparison can tell apart (torch-rechub initialises embeddings at std 1e-4
and BatchNorm at identity). OUT_DIR/NAME.json records each model's inputs
(name, dtype, shape, id range) and its expected groups for the tests.

With Debian's PyTorch 1.13 the exporter is TorchScript-based (opset 17).
Run with PyTorch >= 2.5 and `--opset 20` the library's exporter takes the
dynamo path, which is what PyTorch 2.11 writes by default; it falls back to
TorchScript without a word where dynamo fails, so `--exporter dynamo` asks
for dynamo or an error (NAME.json records the PyTorch version and exporter).
"""
import argparse
import inspect
import json
import os
import sys
import warnings

import torch

from torch_rechub.basic.features import DenseFeature, SequenceFeature, SparseFeature
from torch_rechub.models import multi_task, ranking
from torch_rechub.utils.onnx_export import ONNXExporter

N_SPARSE, N_DENSE, EMBED, VOCAB = 26, 13, 16, 100
DNN = [256, 128]
SEQ_LEN = 20


def sparse(n=N_SPARSE, prefix="C", embed=EMBED):
    return [SparseFeature(f"{prefix}{i + 1}", VOCAB, embed_dim=embed) for i in range(n)]


def dense(n=N_DENSE):
    return [DenseFeature(f"I{i + 1}") for i in range(n)]


def tower(dims=(64,)):
    return {"dims": list(dims), "activation": "relu", "dropout": 0.1}


# Each builder returns (model, feature list in input order, expected groups).
# Expected groups name, by their member op names' prefixes, what a person
# would group: one entry per group, a list of module-path prefixes, one per
# member, e.g. ["/model/experts.0/mlp/mlp.0/", ...] for MMoE's first expert layer.
def mmoe():
    feats = sparse() + dense()
    model = multi_task.MMOE(feats, ["classification"] * 3, n_expert=8,
                            expert_params={"dims": DNN, "dropout": 0.1},
                            tower_params_list=[tower()] * 3)
    groups = [
        # the first layer of every expert and every gate read the embeddings
        [f"/model/experts.{e}/mlp/mlp.0/" for e in range(8)]
        + [f"/model/gates.{t}/mlp/mlp.0/" for t in range(3)],
        [f"/model/experts.{e}/mlp/mlp.4/" for e in range(8)],
        [f"/model/towers.{t}/mlp/mlp.0/" for t in range(3)],
        [f"/model/towers.{t}/mlp/mlp.4/" for t in range(3)],
    ]
    return model, feats, groups


def ple():
    feats = sparse() + dense()
    model = multi_task.PLE(feats, ["classification"] * 3, n_level=2, n_expert_specific=2,
                           n_expert_shared=2, expert_params={"dims": DNN, "dropout": 0.1},
                           tower_params_list=[tower()] * 3)
    return model, feats, []


def esmm():
    user, item = sparse(13, "U"), sparse(13, "T")
    model = multi_task.ESMM(user, item, cvr_params=tower(DNN), ctr_params=tower(DNN))
    groups = [["/model/tower_cvr/mlp/mlp.0/", "/model/tower_ctr/mlp/mlp.0/"],
              ["/model/tower_cvr/mlp/mlp.4/", "/model/tower_ctr/mlp/mlp.4/"],
              ["/model/tower_cvr/mlp/mlp.8/", "/model/tower_ctr/mlp/mlp.8/"]]
    return model, user + item, groups


def aitm():
    feats = sparse() + dense()
    model = multi_task.AITM(feats, n_task=3, bottom_params={"dims": DNN, "dropout": 0.1},
                            tower_params_list=[tower()] * 3)
    groups = [[f"/model/bottoms.{t}/mlp/mlp.0/" for t in range(3)]]
    return model, feats, groups


def shared_bottom():
    feats = sparse() + dense()
    model = multi_task.SharedBottom(feats, ["classification"] * 3,
                                    bottom_params={"dims": DNN, "dropout": 0.1},
                                    tower_params_list=[tower()] * 3)
    groups = [[f"/model/towers.{t}/mlp/mlp.0/" for t in range(3)],
              [f"/model/towers.{t}/mlp/mlp.4/" for t in range(3)]]
    return model, feats, groups


def deepfm():
    s, d = sparse(), dense()
    model = ranking.DeepFM(deep_features=s + d, fm_features=s,
                           mlp_params={"dims": DNN, "dropout": 0.1, "activation": "relu"})
    return model, s + d, []


def widedeep():
    s, d = sparse(), dense()
    model = ranking.WideDeep(wide_features=d, deep_features=s,
                             mlp_params={"dims": DNN, "dropout": 0.1, "activation": "relu"})
    return model, d + s, []


def dcn():
    feats = sparse() + dense()
    model = ranking.DCN(feats, n_cross_layers=3,
                        mlp_params={"dims": DNN, "dropout": 0.1, "activation": "relu"})
    return model, feats, []


def dcnv2():
    feats = sparse() + dense()
    model = ranking.DCNv2(feats, n_cross_layers=3, low_rank=32, num_experts=4,
                          mlp_params={"dims": DNN, "dropout": 0.1, "activation": "relu"})
    return model, feats, []


def autoint():
    s, d = sparse(), dense()
    model = ranking.AutoInt(s, d, num_layers=3, num_heads=2,
                            mlp_params={"dims": DNN, "dropout": 0.1, "activation": "relu"})
    return model, s + d, []


def fibinet():
    feats = sparse()
    model = ranking.FiBiNet(feats, mlp_params={"dims": DNN, "dropout": 0.1, "activation": "relu"},
                            reduction_ratio=3, bilinear_type="field_interaction")
    return model, feats, []


def din():
    feats = sparse(8, "C")
    target = [SparseFeature("target_item", VOCAB, embed_dim=EMBED),
              SparseFeature("target_cate", VOCAB, embed_dim=EMBED)]
    history = [SequenceFeature("hist_item", VOCAB, embed_dim=EMBED, pooling="concat",
                               shared_with="target_item"),
               SequenceFeature("hist_cate", VOCAB, embed_dim=EMBED, pooling="concat",
                               shared_with="target_cate")]
    model = ranking.DIN(feats, history, target, mlp_params={"dims": DNN, "dropout": 0.1},
                        attention_mlp_params={"dims": [64, 32], "activation": "dice"})
    return model, feats + history + target, []


MODELS = {
    "MMOE": mmoe, "PLE": ple, "ESMM": esmm, "AITM": aitm, "SharedBottom": shared_bottom,
    "DeepFM": deepfm, "WideDeep": widedeep, "DCN": dcn, "DCNv2": dcnv2, "AutoInt": autoint,
    "FiBiNet": fibinet, "DIN": din,
}


def refill(model, seed):
    """Seeded weights at scales that keep activations O(1)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if p.dim() >= 2:
                fan_in = p.shape[-1] if "embed" not in name else 1
                p.copy_(torch.randn(p.shape, generator=gen) / max(fan_in, 1) ** 0.5)
            else:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
        for name, m in sorted(model.named_modules()):
            if isinstance(m, torch.nn.BatchNorm1d):
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=gen) + 0.5)


def inputs_for(features, batch, seed):
    gen = torch.Generator().manual_seed(seed)
    out, info = {}, []
    for f in features:
        if isinstance(f, SequenceFeature):
            out[f.name] = torch.randint(0, f.vocab_size, (batch, SEQ_LEN), generator=gen)
            info.append({"name": f.name, "dtype": "int64", "shape": [batch, SEQ_LEN],
                         "high": f.vocab_size})
        elif isinstance(f, SparseFeature):
            out[f.name] = torch.randint(0, f.vocab_size, (batch,), generator=gen)
            info.append({"name": f.name, "dtype": "int64", "shape": [batch], "high": f.vocab_size})
        else:
            out[f.name] = torch.rand((batch,), generator=gen)
            info.append({"name": f.name, "dtype": "float32", "shape": [batch]})
    return out, info


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--modes", default="static,dynamic")
    ap.add_argument("--exporter", choices=("auto", "dynamo", "torchscript"), default="auto",
                    help="auto: the library's choice, which falls back to TorchScript silently; "
                         "dynamo/torchscript: that exporter or an error")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    torch.set_num_threads(1)
    kwargs = {}
    if args.exporter == "dynamo" and "dynamo" not in inspect.signature(torch.onnx.export).parameters:
        sys.exit(f"make_rechub_models: --exporter dynamo: PyTorch {torch.__version__} has no dynamo exporter")
    if args.exporter != "auto":
        kwargs["onnx_export_kwargs"] = {"dynamo": args.exporter == "dynamo"}
    for index, name in enumerate(args.models.split(",")):
        if name not in MODELS:
            sys.exit(f"make_rechub_models: unknown model '{name}' (known: {', '.join(MODELS)})")
        torch.manual_seed(index)
        model, features, groups = MODELS[name]()
        refill(model, 1000 + index)
        model.eval()
        dummy, info = inputs_for(features, args.batch, 7)
        for mode in args.modes.split(","):
            path = os.path.join(args.out_dir, f"{name}.{mode}.onnx")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exporter = ONNXExporter(model)
                # Its reflection misses some models' feature lists (AutoInt's
                # sparse_features): the inputs are the builder's, in its order.
                exporter.feature_info["features"] = features
                exporter.export(path, dummy_input=dummy, batch_size=args.batch,
                                           seq_length=SEQ_LEN, opset_version=args.opset,
                                           dynamic_batch=(mode == "dynamic"), **kwargs)
            print(f"wrote {path} ({os.path.getsize(path) // 1024} KB)")
        with open(os.path.join(args.out_dir, f"{name}.json"), "w") as f:
            json.dump({"model": name, "batch": args.batch, "torch": torch.__version__,
                       "exporter": args.exporter, "inputs": info,
                       "output": "output", "groups": groups}, f, indent=1)


if __name__ == "__main__":
    main()
