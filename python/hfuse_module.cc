// hfuse._hfuse: the nanobind extension under the Python package `hfuse`
// (python/hfuse/__init__.py wraps it in onnxruntime's shape). It binds the
// C++ session (include/hfuse/session/session.h) and does the array work:
//
//   numpy in and out: a C-contiguous host array becomes a HostTensor with one
//   copy; an output's bytes move into the returned array (no copy). float32
//   and float16 are themselves; bfloat16, which NumPy lacks, travels as its
//   16-bit patterns in a uint16 array (as in hfuse's .npz files); a float32
//   or float64 array is also taken for a 16-bit input and rounded.
//   DLPack on CUDA: device arrays in (any DLPack producer: torch, CuPy, JAX)
//   never go through the host: an array that is the session's own input
//   buffer (input_buffers) is read in place, any other is copied device to
//   device into it (the plan's launches were made with the session's
//   buffers' addresses); outputs are DLPack arrays viewing the session's
//   output buffers, valid until the next run of that shape, or the caller's
//   own buffers when bound (Binding, onnxruntime's IOBinding underneath). A
//   binding's inputs are read where they lie: its first run plans for their
//   addresses (Session::BindInputs), so no input is copied at all.
//   The run goes on the stream set (set_stream), else on the session's own
//   stream after the legacy default stream; it has ended when run returns.
//
// hfuse::InputError becomes hfuse.InputError (a ValueError).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <time.h>

#include <algorithm>
#include <chrono>

#include "hfuse/exec/cpu_executor.h"
#include "hfuse/session/session.h"
#include "hfuse/support/error.h"

namespace nb = nanobind;

namespace hfuse {
namespace {

constexpr int kDlCpu = 1, kDlCuda = 2;

// Arguments taken as any object and checked here, typed for the stub: a
// model is a path or its bytes; feeds and params map names to arrays (numpy,
// DLPack, or anything numpy.asarray takes).
using ModelArg = nb::typed<nb::object, std::variant<nb::str, nb::bytes>>;
using ArrayDict = nb::typed<nb::dict, nb::str, nb::object>;

// onnxruntime's type strings.
std::string OrtType(DType d) {
  switch (d) {
    case DType::kFloat32: return "tensor(float)";
    case DType::kFloat16: return "tensor(float16)";
    case DType::kBFloat16: return "tensor(bfloat16)";
    case DType::kInt64: return "tensor(int64)";
    case DType::kInt32: return "tensor(int32)";
    case DType::kBool: return "tensor(bool)";
  }
  return "tensor(" + std::string(DTypeName(d)) + ")";
}

nb::dlpack::dtype DlType(DType d) {
  switch (d) {
    case DType::kFloat32: return nb::dtype<float>();
    case DType::kFloat16: return {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
    case DType::kBFloat16: return nb::dtype<uint16_t>();  // bit patterns (numpy)
    case DType::kInt64: return nb::dtype<int64_t>();
    case DType::kInt32: return nb::dtype<int32_t>();
    case DType::kBool: return nb::dtype<bool>();
  }
  return nb::dtype<float>();
}

std::string DlTypeName(nb::dlpack::dtype t) {
  const char* kind = "?";
  switch (static_cast<nb::dlpack::dtype_code>(t.code)) {
    case nb::dlpack::dtype_code::Int: kind = "int"; break;
    case nb::dlpack::dtype_code::UInt: kind = "uint"; break;
    case nb::dlpack::dtype_code::Float: kind = "float"; break;
    case nb::dlpack::dtype_code::Bfloat: kind = "bfloat"; break;
    case nb::dlpack::dtype_code::Bool: kind = "bool"; break;
    default: break;
  }
  return kind + std::to_string(t.bits);
}

bool IsFloat(nb::dlpack::dtype t, int bits) {
  return t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Float) && t.bits == bits &&
         t.lanes == 1;
}

std::vector<int64_t> ShapeOf(const nb::ndarray<>& a) {
  std::vector<int64_t> shape(a.ndim());
  for (size_t i = 0; i < a.ndim(); ++i) shape[i] = static_cast<int64_t>(a.shape(i));
  return shape;
}

bool Contiguous(const nb::ndarray<>& a) {
  int64_t expect = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expect) return false;
    expect *= static_cast<int64_t>(a.shape(i));
  }
  return true;
}

void RequireContiguous(const std::string& name, const nb::ndarray<>& a) {
  if (!Contiguous(a)) ThrowInputError("input '{}': the array is not C-contiguous", name);
}

// A host array as the tensor `want` expects (its dtype), or the array's own
// dtype when it is none of the accepted ones (the session then names it).
HostTensor ToHost(const std::string& name, const nb::ndarray<>& a, DType want) {
  RequireContiguous(name, a);
  const std::vector<int64_t> shape = ShapeOf(a);
  const nb::dlpack::dtype t = a.dtype();
  const bool sixteen = want == DType::kFloat16 || want == DType::kBFloat16;
  if ((want == DType::kFloat32 && IsFloat(t, 32)) || (want == DType::kFloat16 && IsFloat(t, 16)) ||
      (want != DType::kFloat32 && want != DType::kFloat16 && t == DlType(want))) {
    HostTensor h;
    h.dtype = want;
    h.shape = shape;
    const auto* p = static_cast<const uint8_t*>(a.data());
    h.bytes.assign(p, p + a.nbytes());
    return h;
  }
  if (sixteen && (IsFloat(t, 32) || IsFloat(t, 64))) {  // rounded, as .npz input is
    HostTensor h(want, shape);
    std::vector<float> values(static_cast<size_t>(h.numel()));
    for (size_t i = 0; i < values.size(); ++i) {
      values[i] = IsFloat(t, 32) ? static_cast<const float*>(a.data())[i]
                                 : static_cast<float>(static_cast<const double*>(a.data())[i]);
    }
    h.FromFloat(values.data());
    return h;
  }
  ThrowInputError("input '{}': dtype {}, the model wants {}", name, DlTypeName(t), DTypeName(want));
}

// An array's own dtype as hfuse's (uint16: bfloat16 bit patterns).
DType OwnDType(const std::string& name, nb::dlpack::dtype t) {
  if (IsFloat(t, 32)) return DType::kFloat32;
  if (IsFloat(t, 16)) return DType::kFloat16;
  if (t == nb::dtype<uint16_t>()) return DType::kBFloat16;
  for (DType d : {DType::kInt64, DType::kInt32, DType::kBool}) {
    if (t == DlType(d)) return d;
  }
  ThrowInputError("param '{}': dtype {}: expected float32, float16 or uint16 (bfloat16 bits)", name,
                  DlTypeName(t));
}

// A CUDA array's dtype as the tensor `want` expects: the same dtype
// (bfloat16 also as DLPack's Bfloat 16, torch's), or an input error.
DType DeviceDType(const std::string& what, nb::dlpack::dtype t, DType want) {
  const bool ok = [&] {
    switch (want) {
      case DType::kFloat32: return IsFloat(t, 32);
      case DType::kFloat16: return IsFloat(t, 16);
      case DType::kBFloat16:
        return t == nb::dtype<uint16_t>() ||
               (t.code == static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat) && t.bits == 16 &&
                t.lanes == 1);
      default: return t == DlType(want);
    }
  }();
  if (!ok) ThrowInputError("{}: dtype {}, the model wants {}", what, DlTypeName(t), DTypeName(want));
  return want;
}

// A DLPack array on CUDA viewing `t` (memory that `owner` keeps alive).
nb::object CudaArray(const DeviceTensor& t, int device_id, nb::handle owner) {
  std::vector<size_t> shape(t.shape.begin(), t.shape.end());
  nb::dlpack::dtype dt = DlType(t.dtype);
  if (t.dtype == DType::kBFloat16) dt = {static_cast<uint8_t>(nb::dlpack::dtype_code::Bfloat), 16, 1};
  // An object with __dlpack__ and __dlpack_device__ (what torch.from_dlpack,
  // cupy.from_dlpack and the array API consume), not a bare capsule.
#if NB_VERSION_MAJOR > 2 || (NB_VERSION_MAJOR == 2 && NB_VERSION_MINOR >= 2)
  nb::ndarray<nb::array_api> array(t.data, shape.size(), shape.data(), owner, nullptr, dt, kDlCuda,
                                   device_id);
#else
  nb::ndarray<> array(t.data, shape.size(), shape.data(), owner, nullptr, dt, kDlCuda, device_id);
#endif
  return nb::cast(std::move(array));
}

// The output's bytes, moved into a numpy array that owns them.
nb::object ToNumpy(HostTensor&& t) {
  auto* bytes = new std::vector<uint8_t>(std::move(t.bytes));
  nb::capsule owner(bytes, [](void* p) noexcept { delete static_cast<std::vector<uint8_t>*>(p); });
  std::vector<size_t> shape(t.shape.begin(), t.shape.end());
  nb::ndarray<nb::numpy> array(bytes->data(), shape.size(), shape.data(), owner, nullptr,
                               DlType(t.dtype), kDlCpu);
  return nb::cast(std::move(array));
}

// Python-side wrapper of a Session: the C++ session plus the name -> dtype
// table the conversions need.
class PySession {
 public:
  PySession(ModelArg model, const std::string& device, std::optional<std::string> rules,
            std::map<std::string, int64_t> dims, bool fuse, bool group_gemm, bool cuda_graph,
            std::string format, ArrayDict params, int threads)
      : session_(Make(model, device, rules, std::move(dims), fuse, group_gemm, cuda_graph,
                      std::move(format), params, threads)) {
    for (const auto* list : {&session_.inputs(), &session_.overridable_inputs()}) {
      for (const TensorInfo& i : *list) dtype_[i.name] = i.dtype;
    }
  }

  const Session& session() const { return session_; }

  // The outputs named (all, in the model's order, when `names` is empty).
  std::vector<nb::object> Run(const std::vector<std::string>& names, ArrayDict feeds) {
    // Each value as an array: as it is when it is one (numpy, DLPack) and
    // C-contiguous, else through numpy.ascontiguousarray (lists, strided views).
    std::vector<std::pair<std::string, nb::ndarray<>>> arrays;
    bool on_device = false;
    for (auto [key, value] : feeds) {
      nb::ndarray<> a;
      const bool is_array = nb::try_cast(value, a, false);
      if (is_array && a.device_type() != kDlCpu && !Contiguous(a)) {
        // numpy cannot make a device array contiguous (and a copy is the caller's to make).
        ThrowInputError("input '{}': the array is not C-contiguous",
                        nb::cast<std::string>(nb::str(key)));
      }
      if (!is_array || !Contiguous(a)) {
        nb::object contiguous = nb::module_::import_("numpy").attr("ascontiguousarray")(value);
        if (!nb::try_cast(contiguous, a, false)) {
          ThrowInputError("input '{}': not an array", nb::cast<std::string>(nb::str(key)));
        }
      }
      on_device = on_device || a.device_type() == kDlCuda;
      arrays.emplace_back(nb::cast<std::string>(key), std::move(a));
    }
    std::vector<std::string> order = names;
    if (order.empty()) {
      for (const TensorInfo& o : session_.outputs()) order.push_back(o.name);
    }
    return on_device ? RunDevice(order, arrays) : RunHost(order, names, arrays);
  }

 private:
  static Session Make(nb::object model, const std::string& device,
                      const std::optional<std::string>& rules, std::map<std::string, int64_t> dims,
                      bool fuse, bool group_gemm, bool cuda_graph, std::string format,
                      nb::dict params, int threads) {
    SessionOptions options;
    if (threads < 0) ThrowInputError("threads {}: expected 0 (the default) or more", threads);
    options.threads = threads;
    for (auto [key, value] : params) {
      const std::string name = nb::cast<std::string>(key);
      nb::ndarray<> a = nb::cast<nb::ndarray<>>(
          nb::module_::import_("numpy").attr("ascontiguousarray")(value));
      options.params[name] = ToHost(name, a, OwnDType(name, a.dtype()));
    }
    if (!ParseDevice(device, options.device)) {
      ThrowInputError("device '{}': expected cpu or cuda", device);
    }
    if (rules) {
      RuleSet r = RuleSet::kSeed;
      if (!ParseRuleSet(*rules, r)) ThrowInputError("rules '{}': expected seed or hfuse", *rules);
      options.rules = r;
    }
    options.dims = std::move(dims);
    options.fuse = fuse;
    options.group_gemm = group_gemm;
    options.cuda_graph = cuda_graph;
    options.format = std::move(format);
    if (nb::isinstance<nb::bytes>(model)) {
      nb::bytes b = nb::cast<nb::bytes>(model);
      std::string_view bytes(static_cast<const char*>(b.data()), b.size());
      nb::gil_scoped_release release;
      return Session::FromBytes(bytes, options);
    }
    const std::string path = nb::cast<std::string>(nb::str(model));
    nb::gil_scoped_release release;
    return Session::FromFile(path, options);
  }

  DType DTypeFor(const std::string& name) const {
    auto it = dtype_.find(name);
    // An unknown name: any dtype, for the session to reject by name.
    return it == dtype_.end() ? DType::kFloat32 : it->second;
  }

  std::vector<nb::object> RunHost(const std::vector<std::string>& order,
                                  const std::vector<std::string>& names,
                                  const std::vector<std::pair<std::string, nb::ndarray<>>>& feeds) {
    TensorMap host;
    for (const auto& [name, a] : feeds) {
      if (a.device_type() != kDlCpu) {
        ThrowInputError("input '{}': an array on device type {}; feeds are host arrays or CUDA "
                        "arrays, all of one kind",
                        name, a.device_type());
      }
      host[name] = ToHost(name, a, DTypeFor(name));
    }
    TensorMap out;
    {
      nb::gil_scoped_release release;
      out = session_.Run(host, names);
    }
    std::vector<nb::object> result;
    for (const std::string& n : order) result.push_back(ToNumpy(std::move(out.at(n))));
    return result;
  }

  std::vector<nb::object> RunDevice(
      const std::vector<std::string>& order,
      const std::vector<std::pair<std::string, nb::ndarray<>>>& feeds) {
    DeviceTensorMap device;
    for (const auto& [name, a] : feeds) {
      if (a.device_type() != kDlCuda) {
        ThrowInputError("input '{}': a host array among CUDA arrays; feeds are all of one kind",
                        name);
      }
      device[name] = DeviceFeed("input '" + name + "'", name, a);
    }
    DeviceTensorMap out;
    {
      nb::gil_scoped_release release;
      out = session_.RunDevice(device, reinterpret_cast<void*>(stream_));
    }
    std::vector<nb::object> result;
    nb::object self = nb::find(this);  // outputs keep the session (their memory) alive
    for (const std::string& n : order) {
      auto it = out.find(n);
      if (it == out.end()) ThrowInputError("output '{}': the model has no output named so", n);
      result.push_back(CudaArray(it->second, session_.DeviceId(), self));
    }
    return result;
  }

 public:
  // A CUDA array as a device feed of input `name` (`what` names it in
  // errors): C-contiguous, on the session's device, of the input's dtype.
  // A name that is no input passes, for the session to reject by name.
  DeviceTensor DeviceFeed(const std::string& what, const std::string& name,
                          const nb::ndarray<>& a) const {
    if (session_.options().device != Device::kCuda) {
      ThrowInputError("{}: a CUDA array; this session runs on the cpu (feed host arrays, or make "
                      "the session with providers=['CUDAExecutionProvider'])",
                      what);
    }
    if (a.device_type() != kDlCuda) {
      ThrowInputError("{}: an array on DLPack device type {}, not CUDA ({}); this session binds "
                      "CUDA arrays",
                      what, a.device_type(), kDlCuda);
    }
    if (a.device_id() != session_.DeviceId()) {
      ThrowInputError("{}: on CUDA device {}, the session runs on device {}", what, a.device_id(),
                      session_.DeviceId());
    }
    if (!Contiguous(a)) ThrowInputError("{}: the array is not C-contiguous", what);
    auto it = dtype_.find(name);
    const DType dtype = it == dtype_.end() ? DType::kFloat32 : DeviceDType(what, a.dtype(), it->second);
    return DeviceTensor{a.data(), dtype, ShapeOf(a)};
  }

  Session& mutable_session() { return session_; }
  uintptr_t stream() const { return stream_; }
  void set_stream(uintptr_t stream) { stream_ = stream; }

 private:
  Session session_;
  std::map<std::string, DType> dtype_;
  uintptr_t stream_ = 0;  // a cudaStream_t; 0: the session's own
};

// onnxruntime's IOBinding over a CUDA session: inputs and output buffers
// bound once, then runs that convert nothing and allocate nothing on the
// device (the outputs' Python arrays too are made once per shape). Bound
// arrays are kept alive by the binding.
class PyBinding {
 public:
  explicit PyBinding(nb::object session) : owner_(std::move(session)), s_(nb::cast<PySession&>(owner_)) {
    if (s_.session().options().device != Device::kCuda) {
      ThrowInputError("Binding: this session runs on the cpu; a binding binds CUDA arrays");
    }
  }

  void BindInput(const std::string& name, nb::object value) {
    nb::ndarray<> a;
    if (!nb::try_cast(value, a, false)) ThrowInputError("input '{}': not an array", name);
    if (a.device_type() == kDlCpu) {
      ThrowInputError("input '{}': a host array; this session binds CUDA arrays (torch.Tensor.cuda(), "
                      "cupy.asarray)",
                      name);
    }
    inputs_[name] = s_.DeviceFeed("input '" + name + "'", name, a);
    keep_[name] = std::move(value);
    rebind_ = true;
  }

  // onnxruntime's long form: a raw device pointer with its dtype and shape.
  void BindInputPtr(const std::string& name, uintptr_t ptr, const std::string& dtype,
                    std::vector<int64_t> shape, int device_id) {
    inputs_[name] = RawTensor("input '" + name + "'", ptr, dtype, std::move(shape), device_id);
    keep_.erase(name);
    rebind_ = true;
  }

  // None: the session's own buffer (a view, overwritten by the next run).
  void BindOutput(const std::string& name, nb::object value) {
    CheckOutputName(name);
    if (value.is_none()) {
      into_.erase(name);
      keep_out_.erase(name);
    } else {
      nb::ndarray<> a;
      if (!nb::try_cast(value, a, false)) ThrowInputError("output '{}': not an array", name);
      const std::string what = "output '" + name + "'";
      if (a.device_type() != kDlCuda) {
        ThrowInputError("{}: an array on DLPack device type {}, not CUDA; this session binds CUDA "
                        "arrays (copy_outputs_to_cpu() gives numpy)",
                        what, a.device_type());
      }
      if (a.device_id() != s_.session().DeviceId()) {
        ThrowInputError("{}: on CUDA device {}, the session runs on device {}", what, a.device_id(),
                        s_.session().DeviceId());
      }
      if (!Contiguous(a)) ThrowInputError("{}: the array is not C-contiguous", what);
      into_[name] = DeviceTensor{a.data(), DeviceDType(what, a.dtype(), OutputDType(name)), ShapeOf(a)};
      keep_out_[name] = std::move(value);
    }
    if (std::find(bound_.begin(), bound_.end(), name) == bound_.end()) bound_.push_back(name);
  }

  void BindOutputPtr(const std::string& name, uintptr_t ptr, const std::string& dtype,
                     std::vector<int64_t> shape, int device_id) {
    CheckOutputName(name);
    into_[name] = RawTensor("output '" + name + "'", ptr, dtype, std::move(shape), device_id);
    keep_out_.erase(name);
    if (std::find(bound_.begin(), bound_.end(), name) == bound_.end()) bound_.push_back(name);
  }

  void ClearInputs() {
    inputs_.clear();
    keep_.clear();
    rebind_ = true;
  }
  void ClearOutputs() {
    into_.clear();
    keep_out_.clear();
    bound_.clear();
  }

  void Run() {
    DeviceTensorMap out;
    {
      nb::gil_scoped_release release;
      Session& session = s_.mutable_session();
      // The inputs bound are read in place: the first run after (re)binding
      // plans for their addresses (Session::BindInputs); an unaligned one
      // leaves the ordinary plan, which copies it into its own buffer.
      if (rebind_) {
        session.BindInputs(inputs_);
        rebind_ = false;
      }
      out = session.RunDevice(inputs_, reinterpret_cast<void*>(s_.stream()), into_);
    }
    last_ = std::move(out);
    ran_ = true;
  }

  // The same, copied to the host as numpy arrays.
  std::vector<nb::object> OutputsToHost() {
    if (!ran_) ThrowInputError("copy_outputs_to_cpu: no run yet (run_with_iobinding first)");
    std::vector<nb::object> result;
    std::vector<std::string> names = bound_;
    if (names.empty()) {
      for (const TensorInfo& o : s_.session().outputs()) names.push_back(o.name);
    }
    for (const std::string& n : names) result.push_back(ToNumpy(s_.session().CopyToHost(last_.at(n))));
    return result;
  }

  // The outputs of the last run: those bound, in the order bound (all, in
  // the model's order, when none is), as CUDA arrays. The same objects while
  // the buffers and shapes stay the same.
  std::vector<nb::object> Outputs() {
    if (!ran_) ThrowInputError("get_outputs: no run yet (run_with_iobinding first)");
    std::vector<std::string> names = bound_;
    if (names.empty()) {
      for (const TensorInfo& o : s_.session().outputs()) names.push_back(o.name);
    }
    std::vector<nb::object> result;
    for (const std::string& n : names) {
      const DeviceTensor& t = last_.at(n);
      auto it = arrays_.find(n);
      if (it == arrays_.end() || it->second.first.data != t.data ||
          it->second.first.shape != t.shape) {
        // The caller's own object for a buffer it bound; else a view that
        // keeps the session alive.
        auto kept = keep_out_.find(n);
        nb::object array = kept != keep_out_.end() ? kept->second
                                                   : CudaArray(t, s_.session().DeviceId(), owner_);
        it = arrays_.insert_or_assign(n, std::make_pair(t, std::move(array))).first;
      }
      result.push_back(it->second.second);
    }
    return result;
  }

 private:
  void CheckOutputName(const std::string& name) const {
    for (const TensorInfo& o : s_.session().outputs()) {
      if (o.name == name) return;
    }
    ThrowInputError("output '{}': the model has no output named so", name);
  }
  DType OutputDType(const std::string& name) const {
    for (const TensorInfo& o : s_.session().outputs()) {
      if (o.name == name) return o.dtype;
    }
    return DType::kFloat32;
  }
  DeviceTensor RawTensor(const std::string& what, uintptr_t ptr, const std::string& dtype,
                         std::vector<int64_t> shape, int device_id) const {
    const std::optional<DType> d = ParseDType(dtype);
    if (!d) ThrowInputError("{}: element type '{}' is not one hfuse runs", what, dtype);
    if (device_id != s_.session().DeviceId()) {
      ThrowInputError("{}: on CUDA device {}, the session runs on device {}", what, device_id,
                      s_.session().DeviceId());
    }
    if (!ptr) ThrowInputError("{}: a null device pointer", what);
    return DeviceTensor{reinterpret_cast<void*>(ptr), *d, std::move(shape)};
  }

  nb::object owner_;  // the PySession (keeps it alive)
  PySession& s_;
  DeviceTensorMap inputs_, into_, last_;
  std::map<std::string, nb::object> keep_, keep_out_;
  std::vector<std::string> bound_;
  std::map<std::string, std::pair<DeviceTensor, nb::object>> arrays_;
  bool ran_ = false;
  bool rebind_ = true;  // inputs changed since the session last planned for them
};

// `calls` runs of the C++ session on these CUDA feeds, timed in C++ with
// no Python in the loop (the baseline of bench/session_overhead.py): after
// `warmup` runs, the mean (thread CPU, wall) microseconds per run.
std::pair<double, double> TimeRunDevice(PySession& s, ArrayDict feeds, int warmup, int calls) {
  DeviceTensorMap device;
  for (auto [key, value] : feeds) {
    const std::string name = nb::cast<std::string>(key);
    device[name] = s.DeviceFeed("input '" + name + "'", name, nb::cast<nb::ndarray<>>(value));
  }
  if (calls < 1) ThrowInputError("calls {}: expected 1 or more", calls);
  auto* stream = reinterpret_cast<void*>(s.stream());
  nb::gil_scoped_release release;
  for (int i = 0; i < warmup; ++i) s.mutable_session().RunDevice(device, stream);
  timespec c0{}, c1{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
  const auto w0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) s.mutable_session().RunDevice(device, stream);
  const auto w1 = std::chrono::steady_clock::now();
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
  const double cpu_ns = (c1.tv_sec - c0.tv_sec) * 1e9 + static_cast<double>(c1.tv_nsec - c0.tv_nsec);
  const double wall_ns = std::chrono::duration<double, std::nano>(w1 - w0).count();
  return {cpu_ns / calls / 1e3, wall_ns / calls / 1e3};
}

nb::list Infos(const std::vector<TensorInfo>& infos) {
  nb::list out;
  for (const TensorInfo& i : infos) {
    nb::list shape;
    for (size_t k = 0; k < i.shape.size(); ++k) {
      if (i.shape[k] >= 0) {
        shape.append(i.shape[k]);
      } else {
        shape.append(i.dim_names[k]);
      }
    }
    out.append(nb::make_tuple(i.name, shape, OrtType(i.dtype)));
  }
  return out;
}

// fuse-group-ops's report, as `hfuse fuse --report` writes it.
nb::dict Report(const FuseGroupOpsResult& r) {
  nb::dict report;
  report["rules"] = RuleSetName(r.rules);
  nb::list groups;
  for (const FusedGroup& g : r.groups) {
    nb::dict group;
    group["op"] = std::string(OpTypeName(g.type));
    group["members"] = g.members;
    if (!g.member_ops.empty()) {  // a mixed GEMM group: each member's kind (its epilogue)
      nb::list kinds;
      for (OpType kind : g.member_ops) kinds.append(std::string(OpTypeName(kind)));
      group["member_ops"] = kinds;
    }
    groups.append(group);
  }
  report["groups"] = groups;
  report["ops_before"] = r.ops_before;
  report["ops_after"] = r.ops_after;
  return report;
}

}  // namespace
}  // namespace hfuse

NB_MODULE(_hfuse, m) {
  using namespace hfuse;
  m.doc() = "hfuse's C++ runtime (the Python API is the hfuse package)";
  // The stub (_hfuse.pyi, made from this module by nanobind's stubgen at
  // build time) shows the types written here: nb::sig where a return is a
  // plain list, tuple or dict, Typed<> where an argument takes any object.
  nb::exception<InputError> input_error(m, "InputError", PyExc_ValueError);
  input_error.attr("__doc__") =
      "A bad model or feed (a wrong name, dtype or shape, a missing input): the message names it.";

  nb::class_<PySession>(m, "Session", "A model loaded, fused for its device and ready to run.")
      .def(nb::init<ModelArg, const std::string&, std::optional<std::string>,
                    std::map<std::string, int64_t>, bool, bool, bool, std::string, ArrayDict, int>(),
           nb::arg("model"), nb::arg("device") = "cpu", nb::arg("rules") = nb::none(),
           nb::arg("dims") = std::map<std::string, int64_t>{}, nb::arg("fuse") = true,
           nb::arg("group_gemm") = true, nb::arg("cuda_graph") = true, nb::arg("format") = "",
           nb::arg("params") = ArrayDict(), nb::arg("threads") = 0,
           "Loads `model` (a path, or the bytes of a graph JSON or ONNX model with `format`), "
           "runs the import and fusion pipelines for `device` ('cpu' or 'cuda'); on the CPU, "
           "`threads` (0: OMP_NUM_THREADS, or the cores) run the kernels.")
      .def("inputs", [](const PySession& s) { return Infos(s.session().inputs()); },
           nb::sig("def inputs(self) -> list[tuple[str, list[int | str], str]]"),
           "(name, shape, type) of each input; a dynamic dim is its name.")
      .def("overridable_inputs",
           [](const PySession& s) { return Infos(s.session().overridable_inputs()); },
           nb::sig("def overridable_inputs(self) -> list[tuple[str, list[int | str], str]]"),
           "(name, shape, type) of each param with values that a feed may override.")
      .def("outputs", [](const PySession& s) { return Infos(s.session().outputs()); },
           nb::sig("def outputs(self) -> list[tuple[str, list[int | str], str]]"),
           "(name, shape, type) of each output.")
      .def("run", &PySession::Run, nb::arg("output_names"), nb::arg("feeds"),
           "Runs on host arrays (numpy) or CUDA arrays (DLPack); returns the named outputs "
           "(all when `output_names` is empty) in that order.")
      .def("report", [](const PySession& s) { return Report(s.session().fusion()); },
           nb::sig("def report(self) -> dict[str, typing.Any]"),
           "What fusion did: {'rules', 'groups': [{'op', 'members'}], 'ops_before', 'ops_after'}.")
      .def("fused_model",
           [](const PySession& s) {
             const std::string bytes = s.session().FusedModelBytes();
             return nb::bytes(bytes.data(), bytes.size());
           },
           "The fused model's file contents (ONNX with ai.hfuse group ops, or graph JSON).")
      .def_prop_ro("device",
                   [](const PySession& s) {
                     return std::string(DeviceName(s.session().options().device));
                   },
                   "The device the session runs on: 'cpu' or 'cuda'.")
      .def_prop_ro("stream", &PySession::stream,
                   "The cudaStream_t (as an int) CUDA runs go on, after the work already there; "
                   "0: the session's own stream, after the legacy default stream.")
      .def("set_stream", &PySession::set_stream, nb::arg("stream"),
           "Sets `stream` (a cudaStream_t as an int; 0: the session's own).")
      .def("input_buffers",
           [](PySession& s, const std::map<std::string, std::vector<int64_t>>& shapes) {
             const DeviceTensorMap buffers = s.mutable_session().InputBuffers(shapes);
             nb::dict out;
             nb::object self = nb::find(&s);
             for (const auto& [name, t] : buffers) {
               out[nb::str(name.c_str())] = CudaArray(t, s.session().DeviceId(), self);
             }
             return out;
           },
           nb::arg("shapes"), nb::sig("def input_buffers(self, shapes: collections.abc.Mapping[str, collections.abc.Sequence[int]]) -> dict[str, typing.Any]"),
           "CUDA: the session's own input buffers for feeds of these shapes ({name: shape}), as "
           "CUDA arrays; filled in place and fed (or bound), they are read with no copy.")
      .def_prop_ro("last_device_copy_bytes",
                   [](const PySession& s) { return s.session().LastDeviceCopyBytes(); },
                   "The bytes the last CUDA-array run copied device to device (feeds that are not "
                   "the session's own buffers, outputs into bound buffers).")
      .def_prop_ro("device_id", [](const PySession& s) { return s.session().DeviceId(); },
                   "The CUDA device the session runs on; -1 on the CPU.")
      .def("time_run_device", &TimeRunDevice, nb::arg("feeds"), nb::arg("warmup"),
           nb::arg("calls"),
           "CUDA: (thread CPU, wall) microseconds per run of the C++ session on these CUDA "
           "feeds, timed in C++ after `warmup` runs (bench/session_overhead.py's baseline).");

  nb::class_<PyBinding>(m, "Binding",
                        "Inputs and output buffers bound to a CUDA session (onnxruntime's IOBinding).")
      .def(nb::init<nb::object>(), nb::arg("session"),
           nb::sig("def __init__(self, session: Session) -> None"),
           "A binding of `session` (a CUDA session), with nothing bound.")
      .def("bind_input", &PyBinding::BindInput, nb::arg("name"), nb::arg("value"),
           nb::sig("def bind_input(self, name: str, value: typing.Any) -> None"),
           "Binds input `name` to a CUDA array (any DLPack producer), read at each run.")
      .def("bind_input_ptr", &PyBinding::BindInputPtr, nb::arg("name"), nb::arg("ptr"),
           nb::arg("dtype"), nb::arg("shape"), nb::arg("device_id"),
           "Binds input `name` to device memory at `ptr` of `dtype` ('float32', ...) and `shape`.")
      .def("bind_output", &PyBinding::BindOutput, nb::arg("name"), nb::arg("value").none(),
           nb::sig("def bind_output(self, name: str, value: typing.Any | None) -> None"),
           "Binds output `name` to a CUDA array each run writes into, or (None) to the "
           "session's own buffer.")
      .def("bind_output_ptr", &PyBinding::BindOutputPtr, nb::arg("name"), nb::arg("ptr"),
           nb::arg("dtype"), nb::arg("shape"), nb::arg("device_id"),
           "Binds output `name` to device memory at `ptr` of `dtype` and `shape`.")
      .def("clear_inputs", &PyBinding::ClearInputs, "Unbinds every input.")
      .def("clear_outputs", &PyBinding::ClearOutputs, "Unbinds every output.")
      .def("run", &PyBinding::Run, "Runs the session on the bound inputs and outputs.")
      .def("outputs_to_host", &PyBinding::OutputsToHost,
           nb::sig("def outputs_to_host(self) -> list[typing.Any]"),
           "The last run's outputs (as `outputs`) copied to the host as numpy arrays.")
      .def("outputs", &PyBinding::Outputs,
           nb::sig("def outputs(self) -> list[typing.Any]"),
           "The last run's outputs as CUDA arrays: those bound, in the order bound (all, "
           "in the model's order, when none is); the same objects from run to run.");

  m.def("blas_core",
        [] {
          const char* running = CpuBlasCoreName();
          const char* best = CpuBlasCoreType();
          return nb::make_tuple(std::string(running ? running : ""), std::string(best ? best : ""));
        },
        nb::sig("def blas_core() -> tuple[str, str]"),
        "(the kernel set OpenBLAS runs, the one this CPU's features run; '' when unknown)");
  m.def("cuda_available",
        [] {
          std::string why;
          const bool ok = CudaAvailable(&why);
          return nb::make_tuple(ok, why);
        },
        nb::sig("def cuda_available() -> tuple[bool, str]"),
        "(True, '') when a CUDA device is usable, else (False, why).");
}
