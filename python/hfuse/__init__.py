"""hfuse from Python: load a model (ONNX or graph JSON), fuse it, run it.

    import numpy as np, hfuse
    sess = hfuse.InferenceSession("examples/ranking_small.onnx")   # CPU
    x = np.random.rand(64, 256).astype(np.float32)
    (score,) = sess.run(None, {"features": x})
    fused_bytes, report = hfuse.fuse("examples/ranking_small.onnx")

`InferenceSession` is shaped like onnxruntime's: `get_inputs()` and
`get_outputs()` return objects with `.name`, `.shape` (ints, and a dynamic
dim's name) and `.type` ("tensor(float)"), and `run(output_names, feeds)`
takes and returns numpy arrays. On CUDA (``providers=["CUDAExecutionProvider"]``
or ``device="cuda"``) it also takes any DLPack producer on the GPU (a torch
CUDA tensor, a CuPy array) and then returns DLPack arrays on the GPU
(``torch.from_dlpack(out)``), with no copy through the host; those outputs
view the session's buffers and are overwritten by its next run of the same
shapes.

dtypes: float32 and float16 are themselves; bfloat16, which NumPy lacks, is
its 16-bit patterns in a uint16 array (float32 input is also accepted and
rounded). Bad feeds (a wrong name, dtype or shape, a missing input) raise
`hfuse.InputError` (a ValueError) naming the tensor.

A session is thread-compatible: one thread at a time may call `run`; make a
session per thread (or CUDA stream) that runs concurrently.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union


def _ask_for_blas_core() -> None:
    """OpenBLAS picks its kernels by CPU model when it loads, and falls back to its
    slowest (SSE3) ones on a model it does not know, as virtual machines often
    report; so, unless OPENBLAS_CORETYPE says otherwise, name the kernel set the
    CPU's features run (hfuse's CpuBlasCoreType; the hfuse tool does the same)."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return
    if {"avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl"} <= set(flags):
        os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
    elif {"avx2", "fma"} <= set(flags):
        os.environ["OPENBLAS_CORETYPE"] = "Haswell"


_ask_for_blas_core()
_blas_warned = False


def _warn_slow_blas() -> None:
    """Once: OpenBLAS was loaded (by numpy, imported before hfuse) on its
    SSE3 kernels although this CPU runs faster ones, so products run at a
    third of their speed or less."""
    global _blas_warned
    running, best = _hfuse.blas_core()
    if _blas_warned or running != "Prescott" or not best:
        return
    _blas_warned = True
    import warnings
    warnings.warn(f"OpenBLAS runs its {running} (SSE3) kernels on this CPU, which runs {best}'s: "
                  f"set OPENBLAS_CORETYPE={best} in the environment, or import hfuse before numpy",
                  RuntimeWarning, stacklevel=3)

from . import _hfuse  # noqa: E402  (after the kernel set is named)
from ._hfuse import InputError  # noqa: E402

__all__ = ["InferenceSession", "NodeArg", "InputError", "fuse", "cuda_available",
           "get_available_providers"]
__version__ = "0.1.0"

_PROVIDERS = {"CPUExecutionProvider": "cpu", "CUDAExecutionProvider": "cuda"}

PathOrBytes = Union[str, "os.PathLike[str]", bytes]


class NodeArg:
    """An input or output: `.name`, `.shape` (ints; a dynamic dim is its
    name), `.type` (onnxruntime's type string, e.g. "tensor(float)")."""

    __slots__ = ("name", "shape", "type")

    def __init__(self, name: str, shape: List[Union[int, str]], type: str) -> None:
        self.name = name
        self.shape = shape
        self.type = type

    def __repr__(self) -> str:
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"


def cuda_available() -> Tuple[bool, str]:
    """(True, "") when hfuse was built with CUDA and a device is usable,
    else (False, the reason)."""
    return _hfuse.cuda_available()


def get_available_providers() -> List[str]:
    """The providers a session can use here, best first (as onnxruntime's)."""
    return (["CUDAExecutionProvider"] if cuda_available()[0] else []) + ["CPUExecutionProvider"]


def _device_of(providers: Optional[Sequence[Any]], device: Optional[str]) -> str:
    """The device a session runs on, from onnxruntime-style providers or device."""
    if device is not None:
        if providers is not None:
            raise ValueError("give providers or device, not both")
        return device
    if not providers:
        return "cpu"
    names = [p[0] if isinstance(p, (tuple, list)) else p for p in providers]
    for name in names:
        if name not in _PROVIDERS:
            raise ValueError(f"provider {name!r}: expected one of {sorted(_PROVIDERS)}")
    # As onnxruntime: the first provider that is available here.
    for name in names:
        if _PROVIDERS[name] == "cpu" or cuda_available()[0]:
            return _PROVIDERS[name]
    return _PROVIDERS[names[0]]  # CUDA alone and absent: the session says why


def _format_of(model: PathOrBytes, format: Optional[str]) -> str:
    """The model's format as the extension takes it: given, guessed from the
    bytes, or "" (the extension goes by the file's extension)."""
    if format is not None:
        return format
    if isinstance(model, bytes):
        return "json" if model.lstrip()[:1] == b"{" else "onnx"
    return ""  # by extension


class InferenceSession:
    """A model loaded, fused for its device, ready to run.

    model: a path to an .onnx model or a graph JSON file, or its bytes.
    providers: onnxruntime-style ["CUDAExecutionProvider", "CPUExecutionProvider"]
        (the first available one is used), or device: "cpu" | "cuda".
    rules: the grouping rules, "seed" or "hfuse" (default: seed on the CPU,
        hfuse on CUDA).
    dims: {name: value} binds dynamic dims; bound dims are static before
        fusion (so GEMMs on a dynamic batch can group); others take their size
        from each run's feeds.
    params: {name: array} values for params, which graph JSON carries none
        of: they become the params' own values (as ONNX initializers), so
        runs need not feed them.
    fuse: False runs the model as imported.
    cuda_graph: on CUDA, replay each shape's plan from a CUDA graph.
    format: "onnx" or "json" (default: by extension, or by the bytes).
    threads: on the CPU, the threads the kernels run on (default: onnxruntime's
        sess_options.intra_op_num_threads when given and positive, else
        OMP_NUM_THREADS, else the cores).
    """

    def __init__(self, model: PathOrBytes, sess_options: Any = None,
                 providers: Optional[Sequence[Any]] = None, *, device: Optional[str] = None,
                 rules: Optional[str] = None, dims: Optional[Mapping[str, int]] = None,
                 params: Optional[Mapping[str, Any]] = None, fuse: bool = True,
                 cuda_graph: bool = True, format: Optional[str] = None,
                 threads: Optional[int] = None) -> None:
        # onnxruntime's SessionOptions: only the thread count means something here.
        if threads is None:
            threads = getattr(sess_options, "intra_op_num_threads", 0) or 0
        if not isinstance(threads, int) or threads < 0:
            raise ValueError(f"threads {threads!r}: expected a count >= 0")
        self._device = _device_of(providers, device)
        if not isinstance(model, bytes):
            model = os.fspath(model)
        self._session = _hfuse.Session(model, device=self._device, rules=rules,
                                       dims=dict(dims or {}), fuse=fuse,
                                       cuda_graph=cuda_graph, format=_format_of(model, format),
                                       params=dict(params or {}), threads=threads)
        if self._device == "cpu":
            _warn_slow_blas()
        self._inputs = [NodeArg(*i) for i in self._session.inputs()]
        self._outputs = [NodeArg(*o) for o in self._session.outputs()]

    def get_inputs(self) -> List[NodeArg]:
        """The tensors `run` needs fed: the model's inputs, then (graph JSON,
        which carries no weights) the params."""
        return list(self._inputs)

    def get_overridable_initializers(self) -> List[NodeArg]:
        """Params that came with values (ONNX initializers); a feed may
        override them."""
        return [NodeArg(*i) for i in self._session.overridable_inputs()]

    def get_outputs(self) -> List[NodeArg]:
        """The model's outputs."""
        return list(self._outputs)

    def get_providers(self) -> List[str]:
        """The provider this session runs on."""
        return ["CUDAExecutionProvider" if self._device == "cuda" else "CPUExecutionProvider"]

    @property
    def device(self) -> str:
        """"cpu" or "cuda"."""
        return self._device

    def run(self, output_names: Optional[Sequence[str]], input_feed: Mapping[str, Any],
            run_options: Any = None) -> List[Any]:
        """Runs the model on `input_feed` ({name: array}) and returns the
        outputs named in `output_names` (None or []: all, in the model's
        order). Host arrays (numpy, or anything numpy.asarray takes) give numpy
        arrays; on a CUDA session, CUDA DLPack arrays give CUDA DLPack arrays."""
        del run_options
        # The extension takes numpy and DLPack arrays as they are, and makes
        # anything else (lists, strided views) a C-contiguous numpy array.
        feeds = input_feed if type(input_feed) is dict else dict(input_feed)
        return self._session.run(list(output_names or []), feeds)

    def fusion_report(self) -> Dict[str, Any]:
        """What fusion did: {"rules", "groups": [{"op", "members"}],
        "ops_before", "ops_after"}, as `hfuse fuse --report` writes it."""
        return self._session.report()

    def fused_model(self) -> bytes:
        """The model as fused (ONNX with ai.hfuse group ops, or graph JSON)."""
        return self._session.fused_model()


def fuse(model: PathOrBytes, rules: str = "seed", dims: Optional[Mapping[str, int]] = None,
         group_gemm: bool = True, format: Optional[str] = None) -> Tuple[bytes, Dict[str, Any]]:
    """Fuses `model` (a path or bytes, ONNX or graph JSON) as `hfuse fuse`
    does, with `rules` ("seed" or "hfuse") and `dims` bound (static) first;
    returns (the fused model's bytes, the report as a dict: {"rules",
    "groups": [{"op", "members"}], "ops_before", "ops_after"})."""
    if not isinstance(model, bytes):
        model = os.fspath(model)
    s = _hfuse.Session(model, device="cpu", rules=rules, dims=dict(dims or {}), fuse=True,
                       group_gemm=group_gemm, cuda_graph=False, format=_format_of(model, format))
    return s.fused_model(), s.report()
