"""What the ONNX check scripts share: the tally of checks, running the hfuse
tool, running onnxruntime, and comparing outputs at fp32 tolerance.

check_onnx_models.py, check_rechub_models.py and check_opset_forms.py import
it (each runs as a script, so this folder is on sys.path) and calls
set_tool() with the hfuse binary before its checks."""
import subprocess

import numpy as np
import onnx
import onnxruntime as ort

TOL = 1e-5
failures = []
_tool = None


def set_tool(path):
    global _tool
    _tool = path


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what.replace("\n", " | "))
    if not ok:
        failures.append(what)


def hfuse(*args):
    return subprocess.run([_tool, *args], capture_output=True, text=True)


def ort_run(path, feeds):
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds)))


def error(want, got):
    """The largest absolute difference, relative to the largest |want|."""
    scale = max(float(np.max(np.abs(want))), 1e-30)
    return float(np.max(np.abs(want.astype(np.float64) - got.astype(np.float64)))) / scale


def compare(label, want, got):
    for name, ref in want.items():
        if name not in got:
            check(False, f"{label}: output {name} missing")
            continue
        if ref.shape != got[name].shape:
            check(False, f"{label}: output {name} has shape {got[name].shape}, want {ref.shape}")
            continue
        e = error(ref, got[name])
        check(e <= TOL, f"{label}: output {name} {list(ref.shape)} error {e:.2e}")


def full_check(path, label):
    try:
        onnx.checker.check_model(onnx.load(path), full_check=True)
        check(True, f"{label}: onnx.checker full_check")
    except Exception as e:  # noqa: BLE001 - report any checker failure
        check(False, f"{label}: onnx.checker full_check: {e}")
