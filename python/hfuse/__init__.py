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

CUDA feeds: `io_binding()` binds inputs and output buffers once
(onnxruntime's IOBinding): its first run plans for the inputs' addresses,
so that every run reads them where they lie (no copy at all; each must be
256-byte aligned, as CUDA allocators give, else it is copied), converts and
allocates nothing, and writes each bound output buffer. `run` reads a feed
in place when it is one of the session's own input buffers
(`input_buffers`) or the binding's; any other is copied device to device
into the session's buffer (the plan's launches were made with its
addresses), never through the host.

The stream: CUDA runs go on `stream` (an int cudaStream_t, or an object
with `.cuda_stream`, such as torch.cuda.Stream, or `.ptr`, such as
cupy.cuda.Stream; also onnxruntime's ``("CUDAExecutionProvider",
{"user_compute_stream": "<int>"})``), after the work already queued there;
unset (None), on the session's own stream after the legacy default stream
(torch's default stream). Either way `run` returns once the run has ended,
so the outputs may be read on any stream.

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

__all__ = ["InferenceSession", "IOBinding", "NodeArg", "InputError", "fuse", "cuda_available",
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


def _stream_of(providers: Optional[Sequence[Any]]) -> Optional[int]:
    """onnxruntime's ("CUDAExecutionProvider", {"user_compute_stream": "<int>"})."""
    for p in providers or []:
        if isinstance(p, (tuple, list)) and len(p) == 2 and p[0] == "CUDAExecutionProvider":
            value = dict(p[1]).get("user_compute_stream")
            if value is not None:
                return int(value)
    return None


def _stream_handle(stream: Any) -> int:
    """A cudaStream_t as an int: an int, or an object with .cuda_stream
    (torch.cuda.Stream) or .ptr (cupy.cuda.Stream); None is 0."""
    if stream is None:
        return 0
    for attr in ("cuda_stream", "ptr"):
        if hasattr(stream, attr):
            stream = getattr(stream, attr)
            break
    if isinstance(stream, bool) or not isinstance(stream, int) or stream < 0:
        raise InputError(f"stream {stream!r}: expected a cudaStream_t as an int, or an object "
                         f"with .cuda_stream (torch.cuda.Stream) or .ptr (cupy.cuda.Stream)")
    return stream


_ELEMENT_TYPES = {"float32": "float32", "float": "float32", "float16": "float16",
                  "half": "float16", "bfloat16": "bfloat16", "uint16": "bfloat16",
                  "int64": "int64", "int32": "int32", "bool": "bool"}


def _element_type(element_type: Any) -> str:
    """onnxruntime's element_type (a numpy dtype or type, or its name) as hfuse's dtype name."""
    name = getattr(element_type, "__name__", None) or str(element_type)
    try:
        import numpy as np
        name = np.dtype(element_type).name
    except TypeError:
        pass
    if name not in _ELEMENT_TYPES:
        raise InputError(f"element type {element_type!r}: expected float32, float16, bfloat16 "
                         f"(uint16 bits), int64, int32 or bool")
    return _ELEMENT_TYPES[name]


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
    rules: the grouping rules, "seed" or "hfuse" (default: hfuse on either
        device, which groups the GEMMs of a dynamic batch too; seed groups
        GEMMs at static shapes only).
    dims: {name: value} binds dynamic dims; bound dims are static before
        fusion (so GEMMs on a dynamic batch can group); others take their size
        from each run's feeds.
    params: {name: array} values for params, which graph JSON carries none
        of: they become the params' own values (as ONNX initializers), so
        runs need not feed them.
    fuse: False runs the model as imported.
    cuda_graph: on CUDA, replay each shape's plan from a CUDA graph.
    stream: on CUDA, the stream runs go on (see `stream`); None: the
        session's own, or onnxruntime's provider option user_compute_stream.
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
                 threads: Optional[int] = None, stream: Any = None) -> None:
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
        if stream is None:
            stream = _stream_of(providers)
        if stream is not None:
            self.stream = stream
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

    @property
    def stream(self) -> int:
        """The cudaStream_t (an int) CUDA runs go on, after the work already
        there; 0: the session's own stream, after the legacy default stream.
        Set it to an int, an object with .cuda_stream (torch.cuda.Stream) or
        .ptr (cupy.cuda.Stream), or None. Runs on numpy arrays use the
        session's own stream whatever it is (they copy through the host)."""
        return self._session.stream

    @stream.setter
    def stream(self, stream: Any) -> None:
        handle = _stream_handle(stream)
        if handle and self._device != "cuda":
            raise InputError("stream: this session runs on the cpu; a stream needs a cuda session")
        self._session.set_stream(handle)

    def input_buffers(self, shapes: Mapping[str, Sequence[int]]) -> Dict[str, Any]:
        """CUDA: the session's own input buffers for feeds of these shapes
        ({name: shape}; the plan of those shapes is made if need be), as CUDA
        DLPack arrays (``torch.from_dlpack``). Write the inputs into them in
        place and feed (or bind) them: the run then copies nothing."""
        return self._session.input_buffers({k: [int(d) for d in v] for k, v in shapes.items()})

    @property
    def last_device_copy_bytes(self) -> int:
        """The bytes the last run on CUDA arrays copied device to device:
        feeds that are not the session's own buffers, outputs into bound
        buffers (0: nothing was copied)."""
        return self._session.last_device_copy_bytes

    def io_binding(self) -> "IOBinding":
        """A binding of inputs and output buffers for `run_with_iobinding`."""
        return IOBinding(self)

    def run_with_iobinding(self, iobinding: "IOBinding", run_options: Any = None) -> None:
        """Runs on the binding's inputs; its outputs are then in
        `iobinding.get_outputs()` (and in the buffers bound)."""
        del run_options
        iobinding._run()

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


class IOBinding:
    """onnxruntime's IOBinding: inputs and output buffers bound once, run
    with `InferenceSession.run_with_iobinding` as often as needed.

    On a CUDA session inputs are CUDA arrays (any DLPack producer, read
    where they lie at each run: fill them in place between runs; the first
    run after binding plans for their addresses, and one such plan is kept
    per session) and outputs are the session's own buffers or CUDA arrays of
    the caller's, written at each run; a run copies no input, converts and
    allocates nothing, and `get_outputs()` returns the same
    objects while the shapes stay the same (``torch.from_dlpack`` of one
    keeps seeing each run's values). On a CPU session they are numpy
    arrays, and a bound output array is written at each run.
    """

    def __init__(self, session: InferenceSession) -> None:
        self._session = session
        self._cuda = session.device == "cuda"
        self._binding = _hfuse.Binding(session._session) if self._cuda else None
        self._inputs: Dict[str, Any] = {}
        self._outputs: Dict[str, Any] = {}  # CPU: name -> bound array, or None
        self._last: Optional[Dict[str, Any]] = None

    def bind_input(self, name: str, device_type: Any, device_id: int = 0,
                   element_type: Any = None, shape: Optional[Sequence[int]] = None,
                   buffer_ptr: Optional[int] = None) -> None:
        """Binds input `name`: to an array (``bind_input(name, tensor)``: a
        CUDA DLPack array on a CUDA session, numpy on a CPU one), or, as in
        onnxruntime, to device memory: ``bind_input(name, "cuda", device_id,
        element_type, shape, buffer_ptr)`` (element_type a numpy dtype)."""
        if isinstance(device_type, str):
            if device_type != "cuda" or not self._cuda:
                raise InputError(f"input {name!r}: device {device_type!r}: the pointer form binds "
                                 f"CUDA memory to a CUDA session")
            if shape is None or buffer_ptr is None or element_type is None:
                raise InputError(f"input {name!r}: give element_type, shape and buffer_ptr")
            assert self._binding is not None
            self._binding.bind_input_ptr(name, int(buffer_ptr), _element_type(element_type),
                                         [int(d) for d in shape], int(device_id))
        elif self._binding is not None:
            self._binding.bind_input(name, device_type)
        else:
            self._inputs[name] = device_type

    def bind_output(self, name: str, device_type: Any = None, device_id: int = 0,
                    element_type: Any = None, shape: Optional[Sequence[int]] = None,
                    buffer_ptr: Optional[int] = None) -> None:
        """Binds output `name`: to the session's own buffer (``bind_output(name)``
        or ``bind_output(name, "cuda")``), to an array each run writes into
        (``bind_output(name, tensor)``), or, as in onnxruntime, to device
        memory (``bind_output(name, "cuda", device_id, element_type, shape,
        buffer_ptr)``). get_outputs() lists the bound outputs in this order."""
        if isinstance(device_type, str) and buffer_ptr is not None:
            if device_type != "cuda" or not self._cuda:
                raise InputError(f"output {name!r}: device {device_type!r}: the pointer form binds "
                                 f"CUDA memory to a CUDA session")
            if shape is None or element_type is None:
                raise InputError(f"output {name!r}: give element_type and shape with buffer_ptr")
            assert self._binding is not None
            self._binding.bind_output_ptr(name, int(buffer_ptr), _element_type(element_type),
                                          [int(d) for d in shape], int(device_id))
            return
        value = None if isinstance(device_type, str) else device_type
        if self._binding is not None:
            self._binding.bind_output(name, value)
            return
        if name not in [o.name for o in self._session.get_outputs()]:
            raise InputError(f"output '{name}': the model has no output named so")
        self._outputs[name] = value

    def clear_binding_inputs(self) -> None:
        """Unbinds every input."""
        if self._binding is not None:
            self._binding.clear_inputs()
        self._inputs.clear()

    def clear_binding_outputs(self) -> None:
        """Unbinds every output."""
        if self._binding is not None:
            self._binding.clear_outputs()
        self._outputs.clear()

    def synchronize_inputs(self) -> None:
        """As onnxruntime's; nothing to do: a run waits for the work queued
        on its stream before it reads the inputs."""

    def synchronize_outputs(self) -> None:
        """As onnxruntime's; nothing to do: a run has ended when it returns."""

    def _run(self) -> None:
        if self._binding is not None:
            self._binding.run()
            return
        import numpy as np
        names = [o.name for o in self._session.get_outputs()]
        values = self._session.run(names, self._inputs)
        self._last = dict(zip(names, values))
        for name, buffer in self._outputs.items():
            if buffer is not None:
                np.copyto(buffer, self._last[name])
                self._last[name] = buffer

    def get_outputs(self) -> List[Any]:
        """The last run's outputs: those bound, in the order bound (all, in
        the model's order, when none is). CUDA: DLPack arrays on the GPU
        (the caller's own objects where bound to them), the same objects
        from run to run while the shapes stay the same."""
        if self._binding is not None:
            return self._binding.outputs()
        if self._last is None:
            raise InputError("get_outputs: no run yet (run_with_iobinding first)")
        names = list(self._outputs) or [o.name for o in self._session.get_outputs()]
        return [self._last[n] for n in names]

    def copy_outputs_to_cpu(self) -> List[Any]:
        """The last run's outputs (as get_outputs) as numpy arrays."""
        if self._binding is not None:
            return self._binding.outputs_to_host()
        import numpy as np
        return [np.array(o) for o in self.get_outputs()]


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
