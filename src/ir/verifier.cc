// Shape rules of every op type, and the graph-wide invariants.
#include "hfuse/ir/verifier.h"

#include <algorithm>
#include <optional>
#include <span>

#include "hfuse/ir/analysis.h"
#include "hfuse/ir/op_members.h"
#include "hfuse/support/checked.h"
#include "hfuse/support/error.h"

namespace hfuse {
namespace {

// A shape or dim for a message, formatted only if the message is: checks
// pass far more often than they fail, and a graph has millions of them.
struct ShapeText {
  const Graph* graph;
  const Shape* shape;  // lives as long as the check
};
struct DimText {
  const Graph* graph;
  Dim dim;
};

}  // namespace
}  // namespace hfuse

template <>
struct fmt::formatter<hfuse::ShapeText> : fmt::formatter<std::string_view> {
  auto format(const hfuse::ShapeText& s, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(hfuse::ShapeString(*s.graph, *s.shape), ctx);
  }
};
template <>
struct fmt::formatter<hfuse::DimText> : fmt::formatter<std::string_view> {
  auto format(const hfuse::DimText& d, format_context& ctx) const {
    const std::string text = d.dim.is_static()
                                 ? std::to_string(d.dim.value)
                                 : d.graph->dims()[static_cast<size_t>(d.dim.dynamic)].name;
    return fmt::formatter<std::string_view>::format(text, ctx);
  }
};

namespace hfuse {
namespace {

class OpChecker {
 public:
  OpChecker(const Graph& graph, OpId id) : g_(graph), op_(graph.op(id)) {}

  void Run() {
    switch (FamilyOf(op_.type)) {
      case OpFamily::kGemm: {
        const size_t n = GemmHasBias(op_.type) ? 3 : 2;
        Expect(op_.inputs.size() == n, "takes {} inputs, got {}", n, op_.inputs.size());
        ExpectOutputs(1);
        CheckGemm(GemmMemberOf(op_, 0));
        break;
      }
      case OpFamily::kGroupGemm: {
        const size_t members = op_.outputs.size();
        Expect(members >= 1, "has no outputs");
        if (IsMixedGemmGroup(op_)) {
          Expect(op_.attrs.member_ops.size() == members, "has {} member_ops for {} members",
                 op_.attrs.member_ops.size(), members);
          for (OpType kind : op_.attrs.member_ops) {
            Expect(IsGemm(kind), "member_ops lists '{}', not a GEMM kind", OpTypeName(kind));
          }
        } else {
          Expect(op_.attrs.member_ops.empty(), "has member_ops, which only {} takes",
                 OpTypeName(OpType::kGroupGemmRcrMixed));
        }
        const size_t n = GemmMemberOffset(op_, members);
        Expect(op_.inputs.size() == n, "takes {} inputs for {} members, got {}", n, members,
               op_.inputs.size());
        for (size_t m = 0; m < members; ++m) CheckGemm(GemmMemberOf(op_, m));
        break;
      }
      case OpFamily::kLayerNorm:
        ExpectOutputs(1);
        Expect(!op_.inputs.empty() && op_.inputs.size() <= 3, "takes 1 to 3 inputs, got {}",
               op_.inputs.size());
        Expect(op_.inputs.size() == size_t{1} + op_.attrs.has_gamma + op_.attrs.has_beta,
               "inputs do not match the gamma/beta given");
        CheckLayerNorm(LayerNormMemberOf(op_, 0));
        break;
      case OpFamily::kGroupLayerNorm: {
        const size_t members = op_.outputs.size();
        Expect(members >= 1, "has no outputs");
        Expect(op_.inputs.size() == members || op_.inputs.size() == 2 * members ||
                   op_.inputs.size() == 3 * members,
               "takes 1, 2 or 3 inputs per member ({} members), got {}", members,
               op_.inputs.size());
        Expect(op_.attrs.normalized_shapes.size() == members,
               "normalized_shapes has {} entries for {} members",
               op_.attrs.normalized_shapes.size(), members);
        for (size_t m = 0; m < members; ++m) CheckLayerNorm(LayerNormMemberOf(op_, m));
        break;
      }
      case OpFamily::kGroupGather: {
        const size_t members = op_.outputs.size();
        Expect(members >= 1, "has no outputs");
        Expect(op_.inputs.size() == 2 * members, "takes {} inputs for {} members, got {}",
               2 * members, members, op_.inputs.size());
        Expect(op_.attrs.onnx != nullptr && op_.attrs.onnx->member_names.size() == members,
               "names {} members for {} outputs",
               op_.attrs.onnx ? op_.attrs.onnx->member_names.size() : 0, members);
        for (size_t m = 0; m < members; ++m) CheckGather(GatherMemberOf(op_, m));
        break;
      }
      case OpFamily::kSplit: CheckSplit(); break;
      case OpFamily::kConcatenate: CheckConcatenate(); break;
      case OpFamily::kElementwise: CheckElementwise(); break;
      case OpFamily::kReshape: CheckReshape(); break;
      case OpFamily::kOpaque:
        // Its shapes are ONNX's (checked by ONNX's shape inference on import).
        Expect(op_.attrs.onnx != nullptr, "has no ONNX node");
        break;
    }
  }

 private:
  template <typename... Args>
  void Expect(bool ok, fmt::format_string<Args...> format, Args&&... args) {
    if (!ok) {
      ThrowInputError("op '{}' ({}): {}", op_.name, OpTypeName(op_.type),
                      fmt::format(format, std::forward<Args>(args)...));
    }
  }
  void ExpectOutputs(size_t n) {
    Expect(op_.outputs.size() == n, "has {} outputs, expected {}", op_.outputs.size(), n);
  }
  const Tensor& T(TensorId id) const { return g_.tensor(id); }
  ShapeText S(TensorId id) const { return {&g_, &T(id).shape}; }
  ShapeText S(const Shape& shape) const { return {&g_, &shape}; }
  // One dim, without the brackets of a shape: "64" or "batch".
  DimText D(const Dim& d) const { return {&g_, d}; }

  void CheckGemm(const GemmMember& member) {
    const TensorId in[3] = {member.a, member.w, member.bias};
    const TensorId y = member.y;
    const bool bias = member.bias != kNone;
    const Tensor& a = T(in[0]);
    const Tensor& b = T(in[1]);
    Expect(a.shape.size() >= 2, "A '{}' must have rank >= 2, has shape {}", a.name, S(in[0]));
    Expect(b.shape.size() == 2, "B '{}' must be [N, K], has shape {}", b.name, S(in[1]));
    Expect(a.dtype == b.dtype, "A '{}' is {} but B '{}' is {}", a.name, DTypeName(a.dtype), b.name,
           DTypeName(b.dtype));
    const Dim& ka = a.shape.back();
    const Dim& kb = b.shape[1];
    Expect(ka.is_static() && kb.is_static() && ka.value == kb.value,
           "K mismatch: A '{}' has K = {}, B '{}' has K = {} (K must be static and equal)", a.name,
           D(ka), b.name, D(kb));
    const Dim& n = b.shape[0];
    if (bias) {
      const Tensor& c = T(in[2]);
      Expect(c.shape.size() == 1 && c.shape[0] == n, "bias '{}' must have shape [{}], has {}",
             c.name, D(n), S(in[2]));
    }
    const Tensor& out = T(y);
    // A's shape with its last dim replaced by N, built only for the message.
    const bool as_expected = out.shape.size() == a.shape.size() && out.shape.back() == n &&
                             std::equal(a.shape.begin(), a.shape.end() - 1, out.shape.begin());
    if (!as_expected) {
      Shape want(a.shape.begin(), a.shape.end() - 1);
      want.push_back(n);
      Expect(false, "output '{}' has shape {}, expected {}", out.name, S(y), S(want));
    }
    Expect(out.dtype == a.dtype, "output '{}' is {} but A is {}", out.name,
           DTypeName(out.dtype), DTypeName(a.dtype));
  }

  void CheckLayerNorm(const LayerNormMember& member) {
    const TensorId x_id = member.x, y = member.y;
    const std::vector<int64_t>& normalized = *member.normalized_shape;
    std::vector<TensorId> affine;
    for (TensorId p : {member.gamma, member.beta}) {
      if (p != kNone) affine.push_back(p);
    }
    const Tensor& x = T(x_id);
    Expect(!normalized.empty() && normalized.size() < x.shape.size(),
           "normalized_shape must have 1 to {} entries (below the rank of X '{}'), has {}",
           x.shape.size() - 1, x.name, normalized.size());
    const size_t batch = x.shape.size() - normalized.size();
    for (size_t i = 0; i < normalized.size(); ++i) {
      const Dim& d = x.shape[batch + i];
      Expect(d.is_static() && d.value == normalized[i],
             "normalized_shape does not match the last dims of X '{}' {}", x.name, S(x_id));
    }
    for (TensorId p : affine) {
      Expect(T(p).dtype == x.dtype, "'{}' is {} but X '{}' is {}", T(p).name,
             DTypeName(T(p).dtype), x.name, DTypeName(x.dtype));
      // X's last dims, built only for the message.
      const Shape& shape = T(p).shape;
      if (shape.size() != normalized.size() ||
          !std::equal(shape.begin(), shape.end(),
                      x.shape.begin() + static_cast<ptrdiff_t>(batch))) {
        const Shape tail(x.shape.begin() + static_cast<ptrdiff_t>(batch), x.shape.end());
        Expect(false, "'{}' has shape {}, expected {}", T(p).name, S(p), S(tail));
      }
    }
    Expect(T(y).shape == x.shape && T(y).dtype == x.dtype,
           "output '{}' ({} {}) must match X '{}' ({} {})", T(y).name, DTypeName(T(y).dtype),
           S(y), x.name, DTypeName(x.dtype), S(x_id));
  }

  // y = table[ids] along axis 0: ids' shape, then the table's row.
  void CheckGather(const GatherMember& member) {
    const Tensor& table = T(member.table);
    const Tensor& ids = T(member.ids);
    const Tensor& y = T(member.y);
    Expect(!table.shape.empty() && IsFloat(table.dtype), "table '{}' must be a float tensor of rank >= 1, is {} {}",
           table.name, DTypeName(table.dtype), S(member.table));
    Expect(ids.dtype == DType::kInt64 || ids.dtype == DType::kInt32, "ids '{}' must be int32 or int64, are {}",
           ids.name, DTypeName(ids.dtype));
    Shape want = ids.shape;
    want.insert(want.end(), table.shape.begin() + 1, table.shape.end());
    Expect(y.shape == want && y.dtype == table.dtype, "output '{}' ({} {}) must be {} {}", y.name,
           DTypeName(y.dtype), S(member.y), DTypeName(table.dtype), S(want));
  }

  // Normalizes a possibly negative dim against a rank, or fails.
  size_t AxisOf(int64_t dim, size_t rank) {
    const auto r = static_cast<int64_t>(rank);
    Expect(dim >= -r && dim < r, "dim {} is out of range for rank {}", dim, rank);
    return static_cast<size_t>(dim < 0 ? dim + r : dim);
  }

  void CheckSplit() {
    Expect(op_.inputs.size() == 1, "takes 1 input, got {}", op_.inputs.size());
    const Tensor& x = T(op_.inputs[0]);
    const size_t axis = AxisOf(op_.attrs.dim, x.shape.size());
    Expect(x.shape[axis].is_static(), "split dim {} of '{}' {} is not static", op_.attrs.dim,
           x.name, S(op_.inputs[0]));
    const auto& sizes = op_.attrs.split_sizes;
    Expect(sizes.size() == op_.outputs.size(), "has {} split_sizes but {} outputs", sizes.size(),
           op_.outputs.size());
    int64_t sum = 0;
    for (int64_t s : sizes) {
      Expect(s >= 0, "split_sizes has a negative entry {}", s);
      // Checked: a wrapped sum could equal the dim and pass.
      Expect(!__builtin_add_overflow(sum, s, &sum), "split_sizes sum overflows");
    }
    Expect(sum == x.shape[axis].value, "split_sizes sum to {} but '{}' has {} on dim {}", sum,
           x.name, x.shape[axis].value, op_.attrs.dim);
    for (size_t i = 0; i < sizes.size(); ++i) {
      Shape want = x.shape;
      want[axis] = Dim::Static(sizes[i]);
      const Tensor& y = T(op_.outputs[i]);
      Expect(y.shape == want && y.dtype == x.dtype, "output '{}' ({} {}) should be {} {}", y.name,
             DTypeName(y.dtype), S(op_.outputs[i]), DTypeName(x.dtype), S(want));
    }
  }

  void CheckConcatenate() {
    Expect(!op_.inputs.empty(), "takes at least 1 input");
    ExpectOutputs(1);
    const Tensor& first = T(op_.inputs[0]);
    const size_t axis = AxisOf(op_.attrs.dim, first.shape.size());
    Shape want = first.shape;
    bool all_static = true;
    int64_t total = 0;
    for (TensorId in : op_.inputs) {
      const Tensor& x = T(in);
      Expect(x.dtype == first.dtype, "inputs mix {} and {}", DTypeName(first.dtype),
             DTypeName(x.dtype));
      Expect(x.shape.size() == first.shape.size(), "inputs have different ranks");
      for (size_t d = 0; d < x.shape.size(); ++d) {
        if (d != axis) {
          Expect(x.shape[d] == first.shape[d], "input '{}' {} does not match '{}' {} off dim {}",
                 x.name, S(in), first.name, S(op_.inputs[0]), op_.attrs.dim);
        }
      }
      all_static = all_static && x.shape[axis].is_static();
      Expect(!__builtin_add_overflow(total, x.shape[axis].value, &total),
             "sizes along dim {} overflow", op_.attrs.dim);
    }
    if (op_.inputs.size() == 1) {
      want[axis] = first.shape[axis];
    } else {
      Expect(all_static, "concatenates along dynamic dim {}", op_.attrs.dim);
      want[axis] = Dim::Static(total);
    }
    const Tensor& y = T(op_.outputs[0]);
    Expect(y.shape == want && y.dtype == first.dtype, "output '{}' ({} {}) should be {} {}", y.name,
           DTypeName(y.dtype), S(op_.outputs[0]), DTypeName(first.dtype), S(want));
  }

  void CheckElementwise() {
    ExpectOutputs(1);
    const EwFunc f = op_.attrs.func;
    if (IsUnary(f)) {
      Expect(op_.inputs.size() == 1, "{} takes 1 input, got {}", EwFuncName(f), op_.inputs.size());
    } else {
      Expect(op_.inputs.size() >= 2, "{} takes at least 2 inputs, got {}", EwFuncName(f),
             op_.inputs.size());
    }
    const Tensor& first = T(op_.inputs[0]);
    Shape out;  // numpy broadcasting, right-aligned
    for (TensorId in : op_.inputs) {
      const Tensor& x = T(in);
      Expect(x.dtype == first.dtype, "inputs mix {} and {}", DTypeName(first.dtype),
             DTypeName(x.dtype));
      Shape s = x.shape;
      if (s.size() > out.size()) out.insert(out.begin(), s.size() - out.size(), Dim::Static(1));
      s.insert(s.begin(), out.size() - s.size(), Dim::Static(1));
      for (size_t d = 0; d < s.size(); ++d) {
        if (s[d] == out[d] || (s[d].is_static() && s[d].value == 1)) continue;
        Expect(out[d].is_static() && out[d].value == 1, "input '{}' {} does not broadcast",
               x.name, S(in));
        out[d] = s[d];
      }
    }
    const Tensor& y = T(op_.outputs[0]);
    Expect(y.shape == out && y.dtype == first.dtype, "output '{}' ({} {}) should be {} {}", y.name,
           DTypeName(y.dtype), S(op_.outputs[0]), DTypeName(first.dtype), S(out));
  }

  void CheckReshape() {
    Expect(op_.inputs.size() == 1, "takes 1 input, got {}", op_.inputs.size());
    ExpectOutputs(1);
    const Tensor& x = T(op_.inputs[0]);
    const Tensor& y = T(op_.outputs[0]);
    const auto& shape = op_.attrs.shape;
    Expect(y.dtype == x.dtype, "output '{}' is {} but input is {}", y.name, DTypeName(y.dtype),
           DTypeName(x.dtype));
    Expect(shape.size() == y.shape.size(), "shape has {} entries but output '{}' has rank {}",
           shape.size(), y.name, y.shape.size());
    Expect(std::count(shape.begin(), shape.end(), -1) <= 1, "shape has more than one -1");
    for (size_t i = 0; i < shape.size(); ++i) {
      Expect(shape[i] >= -1, "shape has an invalid entry {}", shape[i]);
      if (shape[i] != -1) {
        Expect(y.shape[i].is_static() && y.shape[i].value == shape[i],
               "output '{}' {} does not match shape entry {}", y.name, S(op_.outputs[0]),
               shape[i]);
      }
    }
    // Same number of elements: equal products of static dims, same dynamic dims.
    // The products are checked (a wrapped one could match and pass); a zero
    // dim makes the product 0 whatever the others are.
    // A derived dim counts as its factors (graph.h), so that [batch, 39, 16]
    // -> [batch*39, 16] keeps the number of elements.
    auto split = [&](const Shape& s, std::vector<int32_t>& dyn) -> std::optional<int64_t> {
      int64_t p = 1;
      bool zero = false, overflow = false;
      std::vector<int32_t> todo;
      for (const Dim& d : s) {
        if (!d.is_static()) {
          todo.assign(1, d.dynamic);
          while (!todo.empty()) {
            const int32_t i = todo.back();
            todo.pop_back();
            const DynamicDim& dd = g_.dims()[static_cast<size_t>(i)];
            if (dd.product_of.empty()) {
              dyn.push_back(i);
              continue;
            }
            if (!overflow) overflow = __builtin_mul_overflow(p, dd.factor, &p);
            todo.insert(todo.end(), dd.product_of.begin(), dd.product_of.end());
          }
        } else if (d.value == 0) {
          zero = true;
        } else if (!overflow) {
          overflow = __builtin_mul_overflow(p, d.value, &p);
        }
      }
      std::sort(dyn.begin(), dyn.end());
      if (zero) return 0;
      if (overflow) return std::nullopt;
      return p;
    };
    std::vector<int32_t> dx, dy;
    const std::optional<int64_t> px = split(x.shape, dx);
    const std::optional<int64_t> py = split(y.shape, dy);
    Expect(px && py, "reshape from {} to {}: too many elements to count in 64 bits",
           S(op_.inputs[0]), S(op_.outputs[0]));
    Expect(*px == *py && dx == dy, "reshape from {} to {} changes the number of elements",
           S(op_.inputs[0]), S(op_.outputs[0]));
  }

  const Graph& g_;
  const Op& op_;
};

}  // namespace

void VerifyOp(const Graph& graph, OpId op) { OpChecker(graph, op).Run(); }

namespace {

// The use-def invariants, which no input can break (the IR keeps them): a
// failure aborts, or with `report`, throws InternalError.
void Broken(bool report, const char* file, int line, const char* what) {
  if (!report) CheckFailed(file, line, what);
  throw InternalError(fmt::format("IR invariant broken: {}", what));
}
#define HFUSE_INVARIANT(condition) \
  ((condition) ? (void)0 : Broken(report, __FILE__, __LINE__, #condition))

void CheckGraph(const Graph& graph, bool report) {
  // Each tensor's readers, from the ops' side: user lists must list exactly
  // these, each once. Built once, so that a tensor read by many ops (or an op
  // reading many tensors) costs no scan per pair.
  const auto n_tensors = static_cast<size_t>(graph.num_tensor_ids());
  std::vector<int32_t> reader_begin(n_tensors + 1, 0);
  std::vector<OpId> last_reader(n_tensors, kNone);
  for (OpId id = 0; id < graph.num_op_ids(); ++id) {
    if (!graph.op(id).alive) continue;
    for (TensorId in : graph.op(id).inputs) {
      if (last_reader[static_cast<size_t>(in)] == id) continue;
      last_reader[static_cast<size_t>(in)] = id;
      ++reader_begin[static_cast<size_t>(in) + 1];
    }
  }
  for (size_t t = 0; t < n_tensors; ++t) reader_begin[t + 1] += reader_begin[t];
  std::vector<OpId> readers(static_cast<size_t>(reader_begin[n_tensors]));
  {
    std::vector<int32_t> fill(reader_begin.begin(), reader_begin.end() - 1);
    std::fill(last_reader.begin(), last_reader.end(), kNone);
    for (OpId id = 0; id < graph.num_op_ids(); ++id) {
      if (!graph.op(id).alive) continue;
      for (TensorId in : graph.op(id).inputs) {
        if (last_reader[static_cast<size_t>(in)] == id) continue;
        last_reader[static_cast<size_t>(in)] = id;
        readers[static_cast<size_t>(fill[static_cast<size_t>(in)]++)] = id;
      }
    }
  }
  std::vector<TensorId> mark(static_cast<size_t>(graph.num_op_ids()), kNone);
  for (TensorId t = 0; t < graph.num_tensor_ids(); ++t) {
    const Tensor& tensor = graph.tensor(t);
    if (!tensor.alive) continue;
    if (tensor.role == Role::kIntermediate && tensor.producer == kNone) {
      ThrowInputError("tensor '{}' has no role and no op produces it", tensor.name);
    }
    if (tensor.role != Role::kIntermediate && tensor.producer != kNone) {
      ThrowInputError("tensor '{}' is an {} but op '{}' produces it", tensor.name,
                      tensor.role == Role::kInput ? "input" : "param",
                      graph.op(tensor.producer).name);
    }
    // Every user is alive and reads the tensor, once; every reader is a user.
    const auto t_index = static_cast<size_t>(t);
    for (int32_t i = reader_begin[t_index]; i < reader_begin[t_index + 1]; ++i) {
      mark[static_cast<size_t>(readers[static_cast<size_t>(i)])] = t;
    }
    for (OpId user : tensor.users) {
      HFUSE_INVARIANT(graph.op(user).alive);
      HFUSE_INVARIANT(mark[static_cast<size_t>(user)] == t);
      mark[static_cast<size_t>(user)] = kNone;  // a second listing fails the check above
    }
    HFUSE_INVARIANT(static_cast<int32_t>(tensor.users.size()) ==
                reader_begin[t_index + 1] - reader_begin[t_index]);
  }
  for (OpId id = 0; id < graph.num_op_ids(); ++id) {
    graph.PrefetchTensorsOf(id + 8);
    const Op& op = graph.op(id);
    if (!op.alive) continue;
    for (TensorId in : op.inputs) HFUSE_INVARIANT(graph.tensor(in).alive);
    for (TensorId out : op.outputs) HFUSE_INVARIANT(graph.tensor(out).producer == id);
    VerifyOp(graph, id);
  }
  for (TensorId out : graph.outputs()) HFUSE_INVARIANT(graph.tensor(out).alive);
  // Every size must count in 64 bits (support/checked.h), or the passes' and
  // executors' sizes would wrap. After the ops' rules, whose messages say
  // more about a shape that is wrong rather than merely large. Dynamic dims
  // count at their min here: a tensor of several named dims of range up to
  // 2^31 - 1 (batch x seq x heads) is a valid graph, and the sizes at the
  // values a run binds are counted, and held to the memory budget, before
  // anything is allocated (cpu_executor.cc, CheckTensorSizes); the passes
  // count dynamic sizes saturating (NumElements).
  std::vector<int64_t> dims;  // a tensor's shape, dynamic dims at their min
  for (TensorId t = 0; t < graph.num_tensor_ids(); ++t) {
    const Tensor& tensor = graph.tensor(t);
    if (!tensor.alive) continue;
    dims.clear();
    for (const Dim& d : tensor.shape) {
      dims.push_back(d.is_static() ? d.value : graph.dims()[static_cast<size_t>(d.dynamic)].min);
    }
    if (!ByteCount(dims, DTypeBytes(tensor.dtype))) {
      ThrowInputError("tensor '{}' {} ({}) has more bytes than 64 bits count", tensor.name,
                      ShapeString(graph, tensor.shape), DTypeName(tensor.dtype));
    }
  }
  const std::vector<OpId> order = StableTopologicalOrder(graph);
  if (static_cast<int64_t>(order.size()) != graph.NumLiveOps()) {
    // Ops left unplaced lie on a cycle or below one. Walk up through unplaced
    // producers from any of them until an op repeats: that op is on a cycle.
    std::vector<bool> placed(static_cast<size_t>(graph.num_op_ids()), false);
    for (OpId id : order) placed[static_cast<size_t>(id)] = true;
    OpId cur = kNone;
    for (OpId id : graph.LiveOps()) {
      if (!placed[static_cast<size_t>(id)]) { cur = id; break; }
    }
    std::vector<bool> seen(static_cast<size_t>(graph.num_op_ids()), false);
    while (!seen[static_cast<size_t>(cur)]) {
      seen[static_cast<size_t>(cur)] = true;
      for (TensorId in : graph.op(cur).inputs) {
        const OpId p = graph.tensor(in).producer;
        if (p != kNone && !placed[static_cast<size_t>(p)]) { cur = p; break; }
      }
    }
    ThrowInputError("the graph has a cycle through op '{}'", graph.op(cur).name);
  }
}

#undef HFUSE_INVARIANT

}  // namespace

void VerifyGraph(const Graph& graph) { CheckGraph(graph, false); }

void VerifyInvariants(const Graph& graph) {
  try {
    CheckGraph(graph, true);
  } catch (const InputError& e) {
    throw InternalError(e.what());
  }
}

}  // namespace hfuse
