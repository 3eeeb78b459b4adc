// The random graph generator of random_graph.h. A graph is a sequence of
// motifs (a tower, a fan of GEMMs, a split feeding GEMMs, a bunch of
// layernorms, the cycle pattern, ...), each adding ops until the drawn op
// count is reached; motifs read tensors that earlier motifs made, which gives
// the edges across towers. Every op is built by a helper that computes its
// output shape by the verifier's rules, so every graph parses. At the end the
// unread tensors become graph outputs (except those of dead ops), and the
// tensor and op arrays may be shuffled, since only the order of ops and
// outputs means something to the pass.
#include "testing/random_graph.h"

#include <algorithm>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <random>
#include <string_view>
#include <utility>
#include <vector>

namespace hfuse {
namespace {

using Json = nlohmann::ordered_json;

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// mt19937_64 is specified bit for bit; the std distributions are not, so
// every draw goes through these helpers.
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(SplitMix64(seed)) {}

  // Uniform in [lo, hi] (modulo bias does not matter here, portability does).
  int64_t Uniform(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int64_t>(engine_() % span);
  }
  int Int(int lo, int hi) { return static_cast<int>(Uniform(lo, hi)); }
  size_t Index(size_t n) { return static_cast<size_t>(Uniform(0, static_cast<int64_t>(n) - 1)); }
  bool Chance(double p) { return static_cast<double>(engine_() >> 11) * 0x1.0p-53 < p; }

  template <typename T>
  T Pick(std::initializer_list<T> values) {
    return *(values.begin() + Index(values.size()));
  }
  template <typename T>
  const T& Pick(const std::vector<T>& values) {
    return values[Index(values.size())];
  }
  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[Index(i)]);
  }
  // An index drawn with probability proportional to its weight.
  size_t Weighted(const std::vector<int>& weights) {
    int total = 0;
    for (int w : weights) total += w;
    int r = Int(0, total - 1);
    for (size_t i = 0; i < weights.size(); ++i) {
      if (r < weights[i]) return i;
      r -= weights[i];
    }
    return weights.size() - 1;
  }

 private:
  std::mt19937_64 engine_;
};

// The dynamic dims a graph may declare; their max stays small. "seq" may be
// 0 at run time, which does not make its tensors empty.
struct DynDimInfo {
  const char* name;
  int64_t min;
  int64_t max;
};
constexpr DynDimInfo kDynDims[] = {{"batch", 1, 256}, {"seq", 0, 128}, {"fixed", 64, 64}};
constexpr int kBatch = 0, kSeq = 1, kFixed = 2;

struct Dim {
  int64_t size = 0;  // when static
  int dyn = -1;      // index into kDynDims when dynamic
  bool is_static() const { return dyn < 0; }
  friend bool operator==(const Dim& a, const Dim& b) {
    return a.dyn == b.dyn && (a.dyn >= 0 || a.size == b.size);
  }
};
using Shape = std::vector<Dim>;
Dim S(int64_t size) { return Dim{size, -1}; }

struct GenTensor {
  std::string name;
  Shape shape;
  std::string dtype;
  std::string role;     // "input", "param" or empty
  int uses = 0;         // input slots that read it
  bool dead = false;    // must stay unread and not become a graph output
  bool output = false;  // a graph output even when read
};

constexpr std::string_view kGemmTypes[] = {"gemm_rcr", "gemm_rcr_bias", "gemm_rcr_bias_relu",
                                           "gemm_rcr_bias_sigmoid"};

class Generator {
 public:
  Generator(uint64_t seed, const RandomGraphOptions& options)
      : seed_(seed), opt_(options), rng_(seed) {}

  std::string Run() {
    ChooseGraphStyle();
    const int lo = std::max(1, opt_.min_ops);
    const int hi = std::max(lo, opt_.max_ops);
    const int target = rng_.Int(lo, hi);
    limit_ = target;
    while (NumOps() < target) {
      const int room = target - NumOps();
      const int before = NumOps();
      RunMotif(room);
      if (NumOps() == before) Step(StartTensor());  // a motif that found no room
    }
    return Assemble();
  }

 private:
  // ---- graph-wide choices -------------------------------------------------

  void ChooseGraphStyle() {
    tensor_style_ = rng_.Int(0, 2);
    op_style_ = rng_.Int(0, 3);
    main_dtype_ = rng_.Pick({"float16", "float16", "float16", "float32", "bfloat16"});
    mixed_dtypes_ = rng_.Chance(0.3);
    main_m_ = opt_.small_shapes ? rng_.Pick<int64_t>({1, 2, 8, 16})
                                : rng_.Pick<int64_t>({1, 2, 8, 16, 32, 64, 100, 128, 256});
    main_rows_ = {S(main_m_)};
    if (rng_.Chance(0.15)) main_rows_ = RandomRows();
    main_eps_ = rng_.Pick<int>({0, 0, 1, 2, 3});
    alpha_rate_ = rng_.Pick({0.0, 0.05, 0.15});
    main_gemm_ = kGemmTypes[rng_.Index(4)];
    main_align_ = rng_.Pick<int64_t>({8, 8, 4, 2});
    main_lsm_ = rng_.Chance(0.4);
    cross_rate_ = opt_.wide ? rng_.Pick({0.3, 0.45, 0.6}) : rng_.Pick({0.0, 0.05, 0.12});
  }

  std::string Dtype() {
    if (mixed_dtypes_ && rng_.Chance(0.3)) return rng_.Pick({"float16", "float32", "bfloat16"});
    return main_dtype_;
  }

  // A feature size; its divisibility decides the GEMM alignment (8, 4, 2, 1).
  int64_t FeatureSize() {
    // Wide graphs keep to one alignment class, so that more GEMMs can meet.
    if (opt_.wide && rng_.Chance(0.8)) return AlignedSize(main_align_);
    if (opt_.small_shapes) {  // the same four classes, the largest sizes left out
      switch (rng_.Weighted({55, 20, 13, 12})) {
        case 0: return rng_.Pick<int64_t>({8, 16, 32, 48, 64});
        case 1: return rng_.Pick<int64_t>({4, 12, 20, 36, 44});
        case 2: return rng_.Pick<int64_t>({2, 6, 10, 34});
        default: return rng_.Pick<int64_t>({1, 3, 5, 7});
      }
    }
    switch (rng_.Weighted({55, 20, 13, 12})) {
      case 0: return rng_.Pick<int64_t>({8, 16, 32, 48, 64, 96, 128, 192, 256, 320, 384, 512});
      case 1: return rng_.Pick<int64_t>({4, 12, 20, 36, 44, 100, 132, 260, 500});
      case 2: return rng_.Pick<int64_t>({2, 6, 10, 34, 66, 130, 258});
      default: return rng_.Pick<int64_t>({1, 3, 5, 7, 63, 127, 255});
    }
  }
  // Sizes with one alignment class, as the members of a fusable group have.
  int64_t AlignedSize(int64_t align) {
    if (opt_.small_shapes) {
      switch (align) {
        case 8: return rng_.Pick<int64_t>({8, 16, 32});
        case 4: return rng_.Pick<int64_t>({4, 12, 20});
        case 2: return rng_.Pick<int64_t>({2, 6, 10});
        default: return rng_.Pick<int64_t>({1, 3, 5, 7});
      }
    }
    switch (align) {
      case 8: return rng_.Pick<int64_t>({8, 16, 32, 64, 128, 256});
      case 4: return rng_.Pick<int64_t>({4, 12, 20, 36, 44, 100, 132});
      case 2: return rng_.Pick<int64_t>({2, 6, 10, 34, 66, 130});
      default: return rng_.Pick<int64_t>({1, 3, 5, 7, 63, 127});
    }
  }

  int64_t M() {
    if (rng_.Chance(opt_.wide ? 0.92 : 0.7)) return main_m_;
    return opt_.small_shapes ? rng_.Pick<int64_t>({1, 2, 8, 16})
                             : rng_.Pick<int64_t>({1, 2, 8, 16, 32, 64, 100, 128, 256});
  }

  Dim DynDim(int which) {
    used_dyn_[static_cast<size_t>(which)] = true;
    return Dim{kDynDims[which].max, which};
  }

  // Leading dims of an activation: [M], a dynamic [batch], or rank-3 [B, S].
  Shape RandomRows() {
    const size_t kind = rng_.Weighted({72, opt_.dynamic_dims ? 10 : 0, 18});
    if (kind == 0) return {S(M())};
    if (kind == 1) return {DynDim(rng_.Chance(0.7) ? kBatch : kSeq)};
    Dim b = S(rng_.Pick<int64_t>({2, 4}));
    if (opt_.dynamic_dims && rng_.Chance(0.5)) b = DynDim(rng_.Chance(0.6) ? kBatch : kFixed);
    return {b, S(rng_.Pick<int64_t>({4, 8, 16, 30}))};
  }
  Shape Rows() { return rng_.Chance(0.65) ? main_rows_ : RandomRows(); }

  static Shape With(Shape rows, int64_t last) {
    rows.push_back(S(last));
    return rows;
  }
  static Shape Leading(const Shape& s) { return Shape(s.begin(), s.end() - 1); }
  static bool AllStatic(const Shape& s) {
    return std::all_of(s.begin(), s.end(), [](const Dim& d) { return d.is_static(); });
  }

  // ---- tensors and ops ----------------------------------------------------

  int NumOps() const { return static_cast<int>(ops_.size()); }
  int Room() const { return limit_ - NumOps(); }

  std::string TensorName(std::string_view prefix) {
    const int n = static_cast<int>(tensors_.size());
    switch (tensor_style_) {
      case 0: return std::string(prefix) + std::to_string(n);
      case 1:
        return std::string(prefix) + std::to_string(rng_.Int(0, 9999)) + "." + std::to_string(n);
      default:
        return "blk" + std::to_string(motif_) + "/" + std::string(prefix) + std::to_string(n);
    }
  }

  int NewTensor(Shape shape, std::string dtype, std::string role, std::string_view prefix) {
    GenTensor t;
    t.name = TensorName(prefix);
    t.shape = std::move(shape);
    t.dtype = std::move(dtype);
    t.role = std::move(role);
    // Tensors with a zero-size dim stay out of the pool: a concatenate of
    // several such tensors is a "no-op" whose removal would change a shape.
    // So do those with a dynamic last dim, which no GEMM or layernorm reads.
    const bool unreadable =
        std::any_of(t.shape.begin(), t.shape.end(),
                    [](const Dim& d) { return d.is_static() && d.size == 0; }) ||
        (!t.shape.empty() && !t.shape.back().is_static());
    const bool param = t.role == "param";
    tensors_.push_back(std::move(t));
    const int id = static_cast<int>(tensors_.size()) - 1;
    if (!param && !unreadable) pool_.push_back(id);
    return id;
  }
  int Input(Shape shape, std::string dtype) {
    return NewTensor(std::move(shape), std::move(dtype), "input", "x");
  }
  int Param(Shape shape, std::string dtype, std::string_view prefix) {
    // Now and then a param is shared with an earlier op (shared weights, gammas).
    if (rng_.Chance(0.06)) {
      for (size_t i = 0; i < params_.size(); ++i) {
        const GenTensor& p = tensors_[static_cast<size_t>(params_[i])];
        if (p.shape == shape && p.dtype == dtype) return params_[i];
      }
    }
    const int id = NewTensor(std::move(shape), std::move(dtype), "param", prefix);
    params_.push_back(id);
    return id;
  }
  const GenTensor& T(int id) const { return tensors_[static_cast<size_t>(id)]; }
  GenTensor& MutableT(int id) { return tensors_[static_cast<size_t>(id)]; }

  std::string OpName(std::string_view kind, std::string_view type) {
    const int n = op_counter_++;
    switch (op_style_) {
      case 0:
        return std::string(kind) + "_" + std::to_string(rng_.Int(0, 999)) + "x" + std::to_string(n);
      case 1: {  // AITemplate-like names whose numbers mean nothing
        const std::string number = std::to_string((n * 7919 + 4231) % 100000);
        if (rng_.Chance(0.05)) return "group_" + std::string(type) + "_" + number;
        return std::string(type) + "_" + number;
      }
      case 2:
        return "blk" + std::to_string(motif_) + "/" + std::string(kind) + "." + std::to_string(n);
      default: return std::string(kind) + "_" + std::to_string(100000 - n);
    }
  }

  // Adds an op; inputs of -1 are written as null. Returns its outputs.
  std::vector<int> AddOp(std::string_view kind, std::string_view type,
                         const std::vector<int>& inputs, std::vector<Shape> out_shapes,
                         std::string dtype, Json attrs = Json::object(), bool dead = false) {
    Json op;
    op["name"] = OpName(kind, type);
    op["op"] = std::string(type);
    Json ins = Json::array();
    for (int in : inputs) {
      if (in < 0) {
        ins.push_back(nullptr);
      } else {
        ins.push_back(T(in).name);
        ++MutableT(in).uses;
      }
    }
    op["inputs"] = std::move(ins);
    std::vector<int> outs;
    Json out_names = Json::array();
    for (Shape& s : out_shapes) {
      const int id = NewTensor(std::move(s), dtype, "", "t");
      if (dead) {
        MutableT(id).dead = true;
        if (!pool_.empty() && pool_.back() == id) pool_.pop_back();
      }
      outs.push_back(id);
      out_names.push_back(T(id).name);
    }
    op["outputs"] = std::move(out_names);
    for (auto& [key, value] : attrs.items()) op[key] = value;
    ops_.push_back(std::move(op));
    return outs;
  }

  // ---- op builders (each adds one op) --------------------------------------

  Json AlphaAttr() {
    Json attrs = Json::object();
    if (rng_.Chance(alpha_rate_)) {
      attrs["alpha"] = rng_.Pick({0.5, 2.0, 0.25, -1.0, 1.5});
    } else if (rng_.Chance(0.15)) {
      attrs["alpha"] = 1.0;
    }
    return attrs;
  }

  // Now and then a bias, gamma or beta is computed from a param by an op
  // (when there is room for that op and the one that reads it).
  int MaybeComputed(int param) {
    if (extra_ops_ && Room() >= 2 && rng_.Chance(0.04)) return Unary(param);
    return param;
  }

  // A GEMM of `type` reading `a` [..., K] with weight b [N, K] (and a bias).
  int GemmWith(std::string_view type, int a, int b, bool dead = false) {
    const Dim n = T(b).shape[0];
    std::vector<int> ins = {a, b};
    if (type != "gemm_rcr") ins.push_back(MaybeComputed(Param({n}, T(a).dtype, "b")));
    Shape out = Leading(T(a).shape);
    out.push_back(n);
    return AddOp("fc", type, ins, {out}, T(a).dtype, AlphaAttr(), dead)[0];
  }
  int Gemm(std::string_view type, int a, int64_t n, bool dead = false) {
    const int b = Param({S(n), T(a).shape.back()}, T(a).dtype, "w");
    return GemmWith(type, a, b, dead);
  }
  std::string_view GemmType() {
    if (opt_.wide && rng_.Chance(0.75)) return main_gemm_;
    return kGemmTypes[rng_.Index(4)];
  }

  Json EpsAttr(int eps_kind) {
    Json attrs = Json::object();
    switch (eps_kind) {
      case 0: break;  // the default, left out
      case 1: attrs["eps"] = 1e-5; break;
      case 2: attrs["eps"] = 1e-6; break;
      default: attrs["eps"] = 1e-3; break;
    }
    return attrs;
  }

  // A layernorm (or layernorm_sigmoid_mul) over the last `nd` dims of x.
  int LayerNorm(int x, bool sigmoid_mul, size_t nd, int eps_kind, bool plain_affine,
                bool dead = false) {
    const Shape xs = T(x).shape;
    const Shape tail(xs.end() - static_cast<ptrdiff_t>(nd), xs.end());
    const std::string dtype = T(x).dtype;
    std::vector<int> ins = {x};
    const size_t affine = plain_affine ? 0 : rng_.Weighted({70, 7, 7, 6, 5, 2, 3});
    switch (affine) {
      case 0:
        ins.push_back(MaybeComputed(Param(tail, dtype, "g")));
        ins.push_back(MaybeComputed(Param(tail, dtype, "be")));
        break;
      case 1: {  // gamma = beta
        const int p = Param(tail, dtype, "g");
        ins.push_back(p);
        ins.push_back(p);
        break;
      }
      case 2:  // null gamma, a beta
        ins.push_back(-1);
        ins.push_back(Param(tail, dtype, "be"));
        break;
      case 3:  // gamma only, beta left off
        ins.push_back(Param(tail, dtype, "g"));
        break;
      case 4:  // X only
        break;
      case 5:  // both null
        ins.push_back(-1);
        ins.push_back(-1);
        break;
      default:  // null beta
        ins.push_back(Param(tail, dtype, "g"));
        ins.push_back(-1);
        break;
    }
    Json attrs = Json::object();
    Json normalized = Json::array();
    for (const Dim& d : tail) normalized.push_back(d.size);
    attrs["normalized_shape"] = std::move(normalized);
    const Json eps = EpsAttr(eps_kind);
    for (const auto& [key, value] : eps.items()) attrs[key] = value;
    return AddOp(sigmoid_mul ? "lsm" : "ln", sigmoid_mul ? "layernorm_sigmoid_mul" : "layernorm",
                 ins, {xs}, dtype, std::move(attrs), dead)[0];
  }
  int EpsKind() { return rng_.Chance(0.85) ? main_eps_ : rng_.Int(0, 3); }
  // How many trailing dims a layernorm of x normalizes.
  size_t LnDims(int x) {
    const Shape& s = T(x).shape;
    if (s.size() >= 3 && s[s.size() - 2].is_static() && rng_.Chance(0.3)) return 2;
    return 1;
  }

  int Unary(int x, bool dead = false) {
    const std::string func = rng_.Pick({"relu", "sigmoid", "tanh", "gelu", "silu"});
    Json attrs;
    attrs["func"] = func;
    return AddOp(func, "elementwise", {x}, {T(x).shape}, T(x).dtype, std::move(attrs), dead)[0];
  }
  int Binary(const std::vector<int>& xs, const Shape& out) {
    const std::string func = rng_.Pick({"add", "sub", "mul", "div"});
    Json attrs;
    attrs["func"] = func;
    return AddOp(func, "elementwise", xs, {out}, T(xs[0]).dtype, std::move(attrs))[0];
  }

  int Concat(const std::vector<int>& xs, size_t axis) {
    Shape out = T(xs[0]).shape;
    if (xs.size() > 1) {
      int64_t total = 0;
      for (int x : xs) total += T(x).shape[axis].size;
      out[axis] = S(total);
    }
    Json attrs;
    const auto rank = static_cast<int64_t>(out.size());
    attrs["dim"] =
        rng_.Chance(0.5) ? static_cast<int64_t>(axis) - rank : static_cast<int64_t>(axis);
    return AddOp("cat", "concatenate", xs, {out}, T(xs[0]).dtype, std::move(attrs))[0];
  }

  std::vector<int> Split(int x, size_t axis, const std::vector<int64_t>& sizes, bool negative_dim) {
    std::vector<Shape> outs;
    for (int64_t s : sizes) {
      Shape o = T(x).shape;
      o[axis] = S(s);
      outs.push_back(std::move(o));
    }
    Json attrs;
    attrs["split_sizes"] = sizes;
    const auto rank = static_cast<int64_t>(T(x).shape.size());
    attrs["dim"] = negative_dim ? static_cast<int64_t>(axis) - rank : static_cast<int64_t>(axis);
    return AddOp("split", "split", {x}, std::move(outs), T(x).dtype, std::move(attrs));
  }

  // Reshapes that keep the trailing dim static; -1 where a dim is dynamic.
  int Reshape(int x) {
    const Shape xs = T(x).shape;
    Shape out;
    if (xs.size() == 3 && xs[1].is_static() && xs[1].size * xs[2].size <= 512 && rng_.Chance(0.6)) {
      out = {xs[0], S(xs[1].size * xs[2].size)};  // merge the trailing dims
    } else if (xs.size() == 3 && xs[0].is_static() && xs[1].is_static() &&
               xs[0].size * xs[1].size <= 256) {
      out = {S(xs[0].size * xs[1].size), xs[2]};  // merge the leading dims
    } else if (xs.size() == 2 && xs[0].is_static() && xs[0].size <= 128 && xs[1].size % 2 == 0 &&
               xs[1].size >= 4) {
      // [M, N] -> [M, a, N / a], keeping the rows (M * a) few.
      const int64_t a = xs[1].size % 4 == 0 ? rng_.Pick<int64_t>({2, 4}) : 2;
      out = {xs[0], S(a), S(xs[1].size / a)};
    } else {
      return Unary(x);
    }
    Json shape = Json::array();
    const size_t wild = rng_.Index(out.size());
    for (size_t i = 0; i < out.size(); ++i) {
      const bool minus_one = !out[i].is_static() || (i == wild && rng_.Chance(0.3));
      shape.push_back(minus_one ? int64_t{-1} : out[i].size);
    }
    // At most one -1: a dynamic dim is only ever the first one, so use it.
    int minus_ones = 0;
    for (auto& v : shape) {
      if (v.get<int64_t>() == -1 && ++minus_ones > 1) return Unary(x);
    }
    Json attrs;
    attrs["shape"] = std::move(shape);
    return AddOp("reshape", "reshape", {x}, {out}, T(x).dtype, std::move(attrs))[0];
  }

  // ---- tensor picks ---------------------------------------------------------

  // A random live tensor (an input or an op output) matching `pred`, or -1.
  template <typename Pred>
  int PickFromPool(Pred pred) {
    std::vector<int> hits;
    for (int id : pool_) {
      if (!T(id).dead && pred(T(id))) hits.push_back(id);
    }
    return hits.empty() ? -1 : rng_.Pick(hits);
  }
  bool Activation(const GenTensor& t) const {
    return t.shape.size() >= 2 && t.shape.back().is_static() && t.shape.back().size > 0 &&
           t.shape.back().size <= 512;
  }

  // A tower's first tensor: an earlier tensor (an edge across towers) or a new input.
  int StartTensor(double from_pool = -1) {
    if (from_pool < 0) from_pool = opt_.wide ? 0.8 : 0.35;
    if (rng_.Chance(from_pool)) {
      const int t = PickFromPool([&](const GenTensor& g) { return Activation(g); });
      if (t >= 0) return t;
    }
    return Input(With(Rows(), FeatureSize()), Dtype());
  }

  // Joins x with a tensor of another branch: elementwise, concatenate, or as a
  // GEMM weight. Returns -1 when nothing fits.
  int Join(int x) {
    const GenTensor& xt = T(x);
    const Shape xs = xt.shape;
    const std::string dtype = xt.dtype;
    switch (rng_.Int(0, 2)) {
      case 0: {
        const int y = PickFromPool(
            [&](const GenTensor& g) { return &g != &T(x) && g.dtype == dtype && g.shape == xs; });
        if (y < 0) return -1;
        return Binary(rng_.Chance(0.5) ? std::vector<int>{x, y} : std::vector<int>{y, x}, xs);
      }
      case 1: {
        const Shape lead = Leading(xs);
        const int y = PickFromPool([&](const GenTensor& g) {
          return &g != &T(x) && g.dtype == dtype && Activation(g) && Leading(g.shape) == lead &&
                 g.shape.back().size + xs.back().size <= 512;
        });
        if (y < 0) return -1;
        return Concat(rng_.Chance(0.5) ? std::vector<int>{x, y} : std::vector<int>{y, x},
                      xs.size() - 1);
      }
      default: {  // another branch's tensor as the weight
        const int64_t k = xs.back().size;
        const int w = PickFromPool([&](const GenTensor& g) {
          return g.dtype == dtype && g.shape.size() == 2 && AllStatic(g.shape) &&
                 g.shape[1].size == k && g.shape[0].size > 0;
        });
        if (w < 0) return -1;
        return GemmWith(GemmType(), x, w);
      }
    }
  }

  // One step of a tower from `cur`; returns the new end of the tower.
  int Step(int cur, std::string_view preferred_gemm = {}) {
    if (rng_.Chance(cross_rate_)) {
      const int j = Join(cur);
      if (j >= 0) return j;
    }
    switch (rng_.Weighted({45, 18, 12, 10, 5, 5})) {
      case 0: {
        const std::string_view type =
            !preferred_gemm.empty() && rng_.Chance(0.6) ? preferred_gemm : GemmType();
        return Gemm(type, cur, FeatureSize());
      }
      case 1: return LayerNorm(cur, false, LnDims(cur), EpsKind(), false);
      case 2: return LayerNorm(cur, true, LnDims(cur), EpsKind(), false);
      case 3: return Unary(cur);
      case 4: return Reshape(cur);
      default: {  // broadcast a param [N] over the rows
        const std::string dtype = T(cur).dtype;
        const int p = Param({T(cur).shape.back()}, dtype, "p");
        return Binary(rng_.Chance(0.5) ? std::vector<int>{cur, p} : std::vector<int>{p, cur},
                      T(cur).shape);
      }
    }
  }

  // ---- motifs -------------------------------------------------------------

  void RunMotif(int room) {
    ++motif_;
    std::vector<int> w;
    if (opt_.wide) {
      w = {12, 12, 5, 3, 5, 15, 5, 3, 2, 1, 1, 40};
    } else {
      w = {28, 14, 12, 5, 10, 5, 7, 8, 4, 2, 5, 5};
    }
    if (room < 6) w[5] = 0;  // the cycle pattern needs 6 ops
    switch (rng_.Weighted(w)) {
      case 0: Tower(); break;
      case 1: Fan(); break;
      case 2: SplitGemms(); break;
      case 3: WeightSplit(); break;
      case 4: LayerNormBunch(); break;
      case 5: CyclePattern(); break;
      case 6: ConcatMotif(); break;
      case 7: NoOps(); break;
      case 8: DeadOps(); break;
      case 9: SelfGemm(); break;
      case 10: LongChain(); break;
      default: Mesh(); break;
    }
  }

  void Tower() {
    int cur = StartTensor();
    const std::string_view type = GemmType();
    const int len = opt_.wide ? rng_.Int(1, 4) : rng_.Int(1, 8);
    for (int i = 0; i < len && Room() > 0; ++i) cur = Step(cur, type);
  }

  // A tangle: each op reads one of the latest tensors, so branches keep
  // crossing; with one GEMM type and alignment per graph many of its GEMMs
  // and layernorms are candidates of one group that paths through earlier
  // groups relate (the cycle check's work).
  void Mesh() {
    const int n = rng_.Int(6, 40);
    for (int i = 0; i < n && Room() > 0; ++i) {
      int x = -1;
      if (!rng_.Chance(0.15)) {
        std::vector<int> recent;
        for (auto it = pool_.rbegin(); it != pool_.rend() && recent.size() < 24; ++it) {
          const GenTensor& t = T(*it);
          if (!t.dead && Activation(t) && Leading(t.shape) == main_rows_) recent.push_back(*it);
        }
        if (!recent.empty()) x = rng_.Pick(recent);
      }
      if (x < 0) x = Input(With(main_rows_, FeatureSize()), main_dtype_);
      switch (rng_.Weighted({45, 20, 20, 15})) {
        case 0: Gemm(GemmType(), x, FeatureSize()); break;
        case 1:
          LayerNorm(x, rng_.Chance(main_lsm_ ? 0.8 : 0.2), 1,
                    rng_.Chance(0.9) ? main_eps_ : EpsKind(), rng_.Chance(0.8));
          break;
        case 2: {
          const int j = Join(x);
          if (j < 0) Unary(x);
          break;
        }
        default: Unary(x); break;
      }
    }
  }

  void LongChain() {
    int cur = StartTensor(0.2);
    const std::string_view type = GemmType();
    // Now and then as long as the graph allows (hundreds of ops deep with a
    // large max_ops: AITemplate's recursive walk fails near 1000).
    const int len = rng_.Chance(0.2) ? Room() : rng_.Int(12, 60);
    for (int i = 0; i < len && Room() > 0; ++i) {
      // Mostly GEMMs, layernorms and unary ops, so the chain stays one path.
      switch (rng_.Weighted({40, 20, 10, 30})) {
        case 0: cur = Gemm(rng_.Chance(0.7) ? type : GemmType(), cur, FeatureSize()); break;
        case 1: cur = LayerNorm(cur, false, LnDims(cur), EpsKind(), false); break;
        case 2: cur = LayerNorm(cur, true, LnDims(cur), EpsKind(), false); break;
        default: cur = Unary(cur); break;
      }
    }
  }

  // GEMMs side by side: on one input, on new inputs, or on earlier tensors.
  void Fan() {
    const std::string_view type = GemmType();
    const int n = std::min(Room(), rng_.Int(2, 12));
    const size_t source = rng_.Weighted({40, 40, opt_.wide ? 70 : 20});
    const int64_t align = rng_.Pick<int64_t>({8, 8, 4, 2, 1});
    const std::string dtype = Dtype();
    const Shape rows = rng_.Chance(0.85) ? Shape{S(main_m_)} : Rows();
    const int shared = Input(With(rows, AlignedSize(align)), dtype);
    for (int i = 0; i < n && Room() > 0; ++i) {
      const std::string_view t = rng_.Chance(0.85) ? type : GemmType();
      int a = shared;
      if (source == 1 || (source == 2 && i == 0)) {
        const Shape r = rng_.Chance(0.85) ? rows : Shape{S(M())};
        const int64_t k = rng_.Chance(0.8) ? AlignedSize(align) : FeatureSize();
        a = Input(With(r, k), rng_.Chance(0.9) ? dtype : Dtype());
      } else if (source == 2) {
        a = PickFromPool([&](const GenTensor& g) { return Activation(g); });
        if (a < 0) a = shared;
      }
      if (t == "gemm_rcr" && opt_.dynamic_dims && rng_.Chance(0.05)) {
        // A weight with a dynamic N is no candidate (fix (d)); Y's last dim is
        // dynamic, so Y stays out of the pool.
        const int w = Param({DynDim(kBatch), T(a).shape.back()}, T(a).dtype, "w");
        GemmWith(t, a, w);
        continue;
      }
      Gemm(t, a, rng_.Chance(0.7) ? AlignedSize(align) : FeatureSize());
    }
  }

  // A split whose outputs feed GEMMs (AITemplate groups these first).
  void SplitGemms() {
    const std::string dtype = Dtype();
    const bool rank3 = rng_.Chance(0.12);
    const Shape rows = rank3 ? Shape{S(rng_.Pick<int64_t>({2, 4})), S(rng_.Pick<int64_t>({8, 16}))}
                             : Shape{S(rng_.Chance(0.8) ? main_m_ : M())};
    int n = std::max(1, std::min(Room() - 1, rng_.Int(2, 8)));
    if (Room() < 2) n = 1;
    const int64_t align = rng_.Pick<int64_t>({8, 8, 4, 2, 1});
    const bool equal_sizes = rng_.Chance(0.15);
    std::vector<int64_t> sizes;
    int64_t total = 0;
    const int64_t first = AlignedSize(align);
    for (int i = 0; i < n; ++i) {
      int64_t s = equal_sizes ? first : (rng_.Chance(0.85) ? AlignedSize(align) : FeatureSize());
      if (total + s > 512) s = std::min<int64_t>(first, 512 - total);
      if (s <= 0) break;
      sizes.push_back(s);
      total += s;
    }
    // Which axis: the features (dim 1 for rank 2), rows (dim 0), or for
    // rank 3 dim 1, the middle one.
    size_t axis = rows.size();
    const size_t axis_kind = rng_.Weighted({75, rank3 ? 0 : 15, rank3 ? 10 : 0});
    int x = -1;
    if (axis_kind == 0) {
      x = rng_.Chance(0.2) ? PickFromPool([&](const GenTensor& g) {
        return Activation(g) && g.dtype == dtype && g.shape.size() == rows.size() + 1 &&
               g.shape.back().size >= 2;
      })
                           : -1;
      if (x >= 0) {  // cut an earlier tensor's features into pieces
        sizes = Partition(T(x).shape.back().size, static_cast<int>(sizes.size()));
        axis = T(x).shape.size() - 1;
      } else {
        x = Input(With(rows, total), dtype);
      }
    } else if (axis_kind == 1) {
      std::vector<int64_t> ms;
      int64_t sum = 0;
      for (size_t i = 0; i < sizes.size(); ++i) {
        const int64_t m =
            rng_.Chance(0.7) ? rng_.Pick<int64_t>({16, 32}) : rng_.Pick<int64_t>({1, 8, 17, 64});
        if (sum + m > 256) break;
        ms.push_back(m);
        sum += m;
      }
      sizes = ms;
      Shape shape = rows;
      shape[0] = S(sum);
      x = Input(With(shape, AlignedSize(align)), dtype);
      axis = 0;
    } else {
      sizes = Partition(rows[1].size, static_cast<int>(std::min<size_t>(sizes.size(), 4)));
      x = Input(With(rows, AlignedSize(align)), dtype);
      axis = 1;
    }
    const bool negative = rng_.Chance(0.3);
    std::vector<int> parts = Split(x, axis, sizes, negative);
    const std::string_view type = GemmType();
    std::vector<int> results;
    // Chained: each GEMM's output is the next one's weight, so the split's
    // GEMMs depend on each other and the split rule must give up.
    const bool chained = rng_.Chance(0.08) && parts.size() >= 2 && T(parts[0]).shape.size() == 2 &&
                         AllStatic(T(parts[0]).shape);
    for (size_t i = 0; i < parts.size() && Room() > 0; ++i) {
      const int p = parts[i];
      const Shape ps = T(p).shape;
      const bool plain = ps.size() == 2 && AllStatic(ps);  // may serve as a weight
      if (chained) {
        const int64_t next_k =
            i + 1 < parts.size() ? T(parts[i + 1]).shape.back().size : FeatureSize();
        if (i == 0 || T(results.back()).shape.back().size != ps.back().size) {
          results.push_back(Gemm(type, p, next_k));
        } else {
          const int w = results.back();
          results.push_back(GemmWith(type, p, w));
          if (Room() > 0 && i + 1 < parts.size()) {  // the next weight: [N, K of the next]
            results.push_back(Gemm(GemmType(), results.back(), next_k));
          }
        }
        continue;
      }
      switch (rng_.Weighted({70, 6, 5, 4, 5, 4, 4, 3})) {
        case 0: results.push_back(Gemm(type, p, FeatureSize())); break;
        case 1: results.push_back(Gemm(GemmType(), p, FeatureSize())); break;
        case 2:  // two GEMMs read this output
          results.push_back(Gemm(type, p, FeatureSize()));
          if (Room() > 0) results.push_back(Gemm(type, p, FeatureSize()));
          break;
        case 3: MutableT(p).dead = true; break;  // an output nobody reads
        case 4: results.push_back(LayerNorm(p, rng_.Chance(0.5), 1, EpsKind(), false)); break;
        case 5: {  // one GEMM reads two outputs: A and, as the weight, B
          int b = -1;
          for (size_t j = 0; j < parts.size(); ++j) {
            const Shape& s = T(parts[j]).shape;
            if (plain && s.size() == 2 && AllStatic(s) && s[1] == ps[1] && s[0].size > 0 &&
                (j != i || rng_.Chance(0.3))) {
              b = parts[j];
            }
          }
          results.push_back(b >= 0 ? GemmWith(rng_.Chance(0.5) ? "gemm_rcr" : type, p, b)
                                   : Gemm(type, p, FeatureSize()));
          break;
        }
        case 6:  // the output is the weight of a GEMM on another input
          if (plain && ps[0].size > 0) {
            const int a = Input({S(M()), ps[1]}, dtype);
            results.push_back(GemmWith(type, a, p));
          } else {
            results.push_back(Gemm(type, p, FeatureSize()));
          }
          break;
        default:
          results.push_back(Room() >= 2 ? Gemm(type, Unary(p), FeatureSize()) : Unary(p));
          break;
      }
    }
    // Often the results are joined again, as in a multi-head block.
    if (results.size() >= 2 && Room() > 0 && rng_.Chance(0.35) && Activation(T(results[0]))) {
      std::vector<int> joinable = {results[0]};
      int64_t width = T(results[0]).shape.back().size;
      for (size_t i = 1; i < results.size(); ++i) {
        const GenTensor& r = T(results[i]);
        if (r.dtype == T(results[0]).dtype && Leading(r.shape) == Leading(T(results[0]).shape) &&
            r.shape.back().is_static() && width + r.shape.back().size <= 512) {
          joinable.push_back(results[i]);
          width += r.shape.back().size;
        }
      }
      if (joinable.size() >= 2) {
        const int y = Concat(joinable, T(joinable[0]).shape.size() - 1);
        if (Room() > 0 && rng_.Chance(0.5)) LayerNorm(y, rng_.Chance(0.3), 1, EpsKind(), false);
      }
    }
  }

  // `total` cut into n positive sizes (fewer when total < n).
  std::vector<int64_t> Partition(int64_t total, int n) {
    n = static_cast<int>(std::min<int64_t>(std::max(n, 1), total));
    std::vector<int64_t> cuts;
    while (static_cast<int>(cuts.size()) < n - 1) {
      const int64_t c = rng_.Uniform(1, total - 1);
      if (std::find(cuts.begin(), cuts.end(), c) == cuts.end()) cuts.push_back(c);
    }
    std::sort(cuts.begin(), cuts.end());
    std::vector<int64_t> sizes;
    int64_t prev = 0;
    for (int64_t c : cuts) {
      sizes.push_back(c - prev);
      prev = c;
    }
    sizes.push_back(total - prev);
    return sizes;
  }

  // A weight cut by a split, the pieces read as GEMM weights.
  void WeightSplit() {
    const std::string dtype = Dtype();
    const int n = std::max(1, std::min(Room() - 1, rng_.Int(2, 6)));
    const std::string_view type = GemmType();
    const int64_t align = rng_.Pick<int64_t>({8, 4, 2});
    const std::string role = rng_.Chance(0.8) ? "param" : "input";
    const int64_t m = main_m_;
    if (rng_.Chance(0.5)) {  // W [N, sum K] on dim 1: each piece is [N, K_i]
      const int64_t nn = FeatureSize();
      std::vector<int64_t> ks;
      int64_t total = 0;
      for (int i = 0; i < n; ++i) {
        const int64_t k = AlignedSize(align);
        if (total + k > 512) break;
        ks.push_back(k);
        total += k;
      }
      const int w = NewTensor({S(nn), S(total)}, dtype, role, "wall");
      if (role == "param")
        params_.push_back(w);
      else
        std::erase(pool_, w);
      const std::vector<int> pieces = Split(w, 1, ks, rng_.Chance(0.3));
      for (int p : pieces) std::erase(pool_, p);  // weights, not activations
      for (int p : pieces) {
        if (Room() <= 0) break;
        GemmWith(type, Input({S(m), T(p).shape[1]}, dtype), p);
      }
    } else {  // W [sum N, K] on dim 0: each piece is [N_i, K]
      const int64_t k = AlignedSize(align);
      std::vector<int64_t> ns;
      int64_t total = 0;
      for (int i = 0; i < n; ++i) {
        const int64_t nn = FeatureSize();
        if (total + nn > 512) break;
        ns.push_back(nn);
        total += nn;
      }
      const int w = NewTensor({S(total), S(k)}, dtype, role, "wall");
      if (role == "param")
        params_.push_back(w);
      else
        std::erase(pool_, w);
      const std::vector<int> pieces = Split(w, 0, ns, rng_.Chance(0.3));
      for (int p : pieces) std::erase(pool_, p);
      const int shared = Input({S(m), S(k)}, dtype);
      for (int p : pieces) {
        if (Room() <= 0) break;
        GemmWith(type, rng_.Chance(0.5) ? shared : Input({S(m), S(k)}, dtype), p);
      }
    }
  }

  // Up to 62 layernorms with the same leading dims (the 39-chunking).
  void LayerNormBunch() {
    int n = 0;
    switch (rng_.Weighted({50, 30, 20})) {
      case 0: n = rng_.Int(2, 10); break;
      case 1: n = rng_.Int(11, 39); break;
      default: n = rng_.Int(40, 62); break;
    }
    n = std::min(n, Room());
    const std::string dtype = Dtype();
    const bool sigmoid_mul = rng_.Chance(0.4);
    const bool mixed_types = rng_.Chance(0.25);
    const int eps_kind = EpsKind();
    const bool big = rng_.Chance(0.2);  // rank 3, two normalized dims, sizes past 4096
    Shape rows =
        big ? Shape{S(rng_.Pick<int64_t>({1, 2})), S(rng_.Pick<int64_t>({8, 16}))} : Rows();
    // Many rows add nothing to the size rules, which look at the normalized dims.
    const int64_t max_rows = opt_.small_shapes ? 2 : 64;
    if (!big && rows.size() == 1 && rows[0].is_static() && rows[0].size > max_rows) {
      rows[0] = S(max_rows);
    }
    std::vector<int64_t> sizes;
    for (int i = rng_.Int(1, 4); i > 0; --i) {
      sizes.push_back(
          rng_.Pick<int64_t>({1, 3, 8, 16, 32, 64, 100, 127, 128, 256, 260, 384, 500, 512}));
    }
    const int shared = rng_.Chance(0.1) ? Input(With(rows, sizes[0]), dtype) : -1;
    const double from_pool = opt_.wide ? 0.6 : 0.1;
    for (int i = 0; i < n && Room() > 0; ++i) {
      int x = -1;
      if (shared >= 0 && rng_.Chance(0.3)) {
        x = shared;
      } else if (rng_.Chance(from_pool)) {
        x = PickFromPool([&](const GenTensor& g) { return Activation(g); });
      }
      if (x < 0) {
        const std::string dt = rng_.Chance(0.9) ? dtype : Dtype();
        x = big ? Input(With(rows, rng_.Pick<int64_t>({256, 384, 512})), dt)
                : Input(With(rows, rng_.Pick(sizes)), dt);
      }
      const bool lsm = mixed_types ? rng_.Chance(0.5) : sigmoid_mul;
      const size_t nd = big && T(x).shape.size() == 3 ? 2 : 1;
      LayerNorm(x, lsm, nd, rng_.Chance(0.9) ? eps_kind : EpsKind(), rng_.Chance(0.8));
    }
  }

  // The cycle pattern of the pass's comments: A, B of one kind and X, Y of
  // another, not groupable together, with
  //   A --> C --> Y        X --> M --> B
  // Grouping (A, B) makes X an ancestor of Y, so the check after forming
  // (X, Y) must drop one (or, X leading, the other way round). The kinds
  // differ by GEMM alignment (K of A) or layernorm eps; in a third variant
  // all four are alike and the greedy step alone must avoid the cycle.
  void CyclePattern() {
    extra_ops_ = false;  // exactly six ops
    const std::string dtype = Dtype();
    const int64_t m = main_m_;
    const size_t variant = rng_.Weighted({45, 25, 30});
    const bool split_kinds = variant != 2;
    // Alignment classes of the two kinds (K of A decides a GEMM's).
    const int64_t align1 = rng_.Pick<int64_t>({8, 4});
    const int64_t align2 = split_kinds ? 2 : align1;
    auto middle = [&](int t, int64_t align) {
      switch (rng_.Weighted({60, 20, 20})) {
        case 0: return Unary(t);
        case 1: return Gemm(GemmType(), t, AlignedSize(align));
        default: return LayerNorm(t, rng_.Chance(0.5), 1, EpsKind(), true);
      }
    };
    if (variant != 1) {
      const std::string_view type = GemmType();
      const int x1 = Input({S(m), S(AlignedSize(align1))}, dtype);
      const int x2 = Input({S(m), S(AlignedSize(align2))}, dtype);
      const int a = Gemm(type, x1, AlignedSize(align2));  // out width: K of Y
      const int x = Gemm(type, x2, AlignedSize(align1));  // out width: K of B
      if (rng_.Chance(0.5)) {
        Gemm(type, middle(a, align2), AlignedSize(align1));  // Y
        Gemm(type, middle(x, align1), AlignedSize(align2));  // B
      } else {
        const int mm = middle(x, align1);
        const int c = middle(a, align2);
        Gemm(type, mm, AlignedSize(align2));
        Gemm(type, c, AlignedSize(align1));
      }
    } else {
      const bool lsm = rng_.Chance(0.4);
      const int eps1 = rng_.Int(0, 3);
      const int eps2 = eps1 == 0 || eps1 == 1 ? rng_.Int(2, 3) : rng_.Int(0, 1);
      const int64_t width = rng_.Pick<int64_t>({64, 128, 256});
      const int x1 = Input({S(m), S(width)}, dtype);
      const int x2 = Input({S(m), S(width)}, dtype);
      const int a = LayerNorm(x1, lsm, 1, eps1, true);
      const int x = LayerNorm(x2, lsm, 1, eps2, true);
      const int c = Unary(a);
      const int mm = Unary(x);
      if (rng_.Chance(0.5)) {
        LayerNorm(c, lsm, 1, eps2, true);   // Y
        LayerNorm(mm, lsm, 1, eps1, true);  // B
      } else {
        LayerNorm(mm, lsm, 1, eps1, true);
        LayerNorm(c, lsm, 1, eps2, true);
      }
    }
    extra_ops_ = true;
  }

  void ConcatMotif() {
    const int base = StartTensor(0.7);
    const Shape bs = T(base).shape;
    const std::string dtype = T(base).dtype;
    size_t axis = bs.size() - 1;
    if (rng_.Chance(0.3)) {
      const size_t a = rng_.Index(bs.size());
      if (bs[a].is_static()) axis = a;
    }
    std::vector<int> ins = {base};
    int64_t width = bs[axis].size;
    const int n = rng_.Int(1, 3);
    for (int i = 0; i < n; ++i) {
      int y = -1;
      if (rng_.Chance(0.1)) {
        y = ins[rng_.Index(ins.size())];  // an input may repeat
      } else if (rng_.Chance(opt_.wide ? 0.8 : 0.5)) {
        y = PickFromPool([&](const GenTensor& g) {
          if (g.dtype != dtype || g.shape.size() != bs.size() || !g.shape[axis].is_static())
            return false;
          for (size_t d = 0; d < bs.size(); ++d) {
            if (d != axis && !(g.shape[d] == bs[d])) return false;
          }
          return true;
        });
      }
      if (y < 0) {
        Shape s = bs;
        s[axis] = S(axis + 1 == bs.size() ? FeatureSize() : rng_.Pick<int64_t>({1, 2, 8, 16}));
        y = Input(s, dtype);
      }
      // At most 512 features, 256 rows, 32 in a middle dim.
      const int64_t cap = axis + 1 == bs.size() ? 512 : axis == 0 ? 256 : 32;
      if (width + T(y).shape[axis].size > cap) break;
      width += T(y).shape[axis].size;
      ins.push_back(y);
    }
    rng_.Shuffle(ins);
    const int out = Concat(ins, axis);
    if (Room() > 0 && rng_.Chance(0.5) && Activation(T(out))) Step(out);
  }

  // Splits and concatenates that the clean-up removes (or keeps, as outputs).
  void NoOps() {
    int x = StartTensor(0.5);
    Shape xs = T(x).shape;
    const std::string dtype = T(x).dtype;
    int y = -1;
    switch (rng_.Weighted({35, 30, 25, 5, 5})) {
      case 0: {  // a split with one output
        size_t axis = xs.size() - 1;
        const size_t a = rng_.Index(xs.size());
        if (xs[a].is_static()) axis = a;
        y = Split(x, axis, {xs[axis].size}, rng_.Chance(0.4))[0];
        break;
      }
      case 1:  // a concatenate with one input, along any dim
        y = Concat({x}, rng_.Index(xs.size()));
        break;
      case 2: {  // empties around one real input
        size_t axis = xs.size() - 1;
        if (xs[0].is_static() && rng_.Chance(0.3)) axis = 0;
        Shape empty = xs;
        empty[axis] = S(0);
        std::vector<int> ins = {x};
        for (int i = rng_.Int(1, 2); i > 0; --i) {
          ins.push_back(NewTensor(empty, dtype, rng_.Chance(0.7) ? "input" : "param", "z"));
        }
        rng_.Shuffle(ins);
        y = Concat(ins, axis);
        break;
      }
      case 3: {  // every input empty: rows of zero, the first as wide as the output
        const int z = Input({S(0), xs.back()}, dtype);
        const int z2 = Input({S(0), S(0)}, dtype);
        y = Concat({z, z2}, 1);
        break;
      }
      default: {  // a no-op split feeding a no-op concatenate
        const size_t axis = xs.size() - 1;
        y = Split(x, axis, {xs[axis].size}, rng_.Chance(0.4))[0];
        if (Room() > 0) y = Concat({y}, axis);
        break;
      }
    }
    // Read by a GEMM or layernorm (the clean-up rewires it), or a graph
    // output (then the clean-up keeps it), or both.
    const size_t use = rng_.Weighted({65, 20, 15});
    if (use != 0) MutableT(y).output = true;
    if (use != 1 && Room() > 0) {
      if (T(y).shape[0].is_static() && T(y).shape[0].size == 0) {
        Gemm(GemmType(), y, FeatureSize());  // Step could read it as a weight
      } else {
        Step(y);
      }
    }
  }

  // Ops that reach no graph output; the clean-up drops them.
  void DeadOps() {
    int x = StartTensor(0.7);
    const int n = rng_.Int(1, 3);
    for (int i = 0; i < n && Room() > 0; ++i) {
      switch (rng_.Int(0, 2)) {
        case 0: x = Gemm(GemmType(), x, FeatureSize(), true); break;
        case 1: x = LayerNorm(x, rng_.Chance(0.5), 1, EpsKind(), false, true); break;
        default: x = Unary(x, true); break;
      }
    }
  }

  // gemm(X, X): one tensor read twice by one op (fix (f)).
  void SelfGemm() {
    const std::string dtype = Dtype();
    const int x = Input({S(rng_.Pick<int64_t>({8, 16, 32, 64})), S(0)}, dtype);
    MutableT(x).shape[1] = T(x).shape[0];
    const std::string_view type = GemmType();
    GemmWith(type, x, x);
  }

  // ---- output ---------------------------------------------------------------

  std::string Assemble() {
    std::vector<int> outputs;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const GenTensor& t = tensors_[i];
      if (!t.role.empty() || t.dead) continue;
      if (t.uses == 0 || t.output || rng_.Chance(0.02)) outputs.push_back(static_cast<int>(i));
    }
    if (outputs.empty()) {  // everything was dead: the last op's output is kept
      const std::string name = ops_.back()["outputs"][0].get<std::string>();
      for (size_t i = 0; i < tensors_.size(); ++i) {
        if (tensors_[i].name == name) outputs.push_back(static_cast<int>(i));
      }
    }
    if (rng_.Chance(0.7)) rng_.Shuffle(outputs);

    Json doc;
    doc["graph_format"] = 1;
    if (rng_.Chance(0.9)) doc["name"] = "random_" + std::to_string(seed_);
    Json dims = Json::array();
    for (int i = 0; i < 3; ++i) {
      if (!used_dyn_[static_cast<size_t>(i)]) continue;
      Json d;
      d["name"] = kDynDims[i].name;
      d["min"] = kDynDims[i].min;
      d["max"] = kDynDims[i].max;
      dims.push_back(std::move(d));
    }
    if (!dims.empty() || rng_.Chance(0.5)) doc["dims"] = std::move(dims);

    std::vector<size_t> tensor_order(tensors_.size());
    for (size_t i = 0; i < tensor_order.size(); ++i) tensor_order[i] = i;
    if (rng_.Chance(0.2)) rng_.Shuffle(tensor_order);
    Json tensors = Json::array();
    for (size_t i : tensor_order) {
      const GenTensor& t = tensors_[i];
      Json j;
      j["name"] = t.name;
      Json shape = Json::array();
      for (const Dim& d : t.shape) {
        if (d.is_static())
          shape.push_back(d.size);
        else
          shape.push_back(kDynDims[d.dyn].name);
      }
      j["shape"] = std::move(shape);
      j["dtype"] = t.dtype;
      if (!t.role.empty()) j["role"] = t.role;
      tensors.push_back(std::move(j));
    }
    doc["tensors"] = std::move(tensors);

    // The ops array is the construction order; any order is valid, and a
    // shuffled one changes the canonical order the pass works in.
    switch (rng_.Weighted({70, 15, 10, 5})) {
      case 0: break;
      case 1: rng_.Shuffle(ops_); break;
      case 2:  // nearby swaps
        for (size_t i = 1; i < ops_.size(); ++i) {
          if (rng_.Chance(0.3)) std::swap(ops_[i - 1], ops_[i]);
        }
        break;
      default: std::reverse(ops_.begin(), ops_.end()); break;
    }
    doc["ops"] = std::move(ops_);
    Json outs = Json::array();
    for (int id : outputs) outs.push_back(T(id).name);
    doc["outputs"] = std::move(outs);
    return doc.dump();
  }

  uint64_t seed_;
  RandomGraphOptions opt_;
  Rng rng_;
  std::vector<GenTensor> tensors_;
  std::vector<int> pool_;    // inputs and op outputs, readable by later ops
  std::vector<int> params_;  // params that may be shared
  std::vector<Json> ops_;
  bool used_dyn_[3] = {false, false, false};
  int limit_ = 0;
  bool extra_ops_ = true;  // whether MaybeComputed may add an op
  int motif_ = 0;
  int op_counter_ = 0;
  int tensor_style_ = 0;
  int op_style_ = 0;
  std::string main_dtype_;
  bool mixed_dtypes_ = false;
  int64_t main_m_ = 1;
  Shape main_rows_;
  int main_eps_ = 0;
  double alpha_rate_ = 0;
  double cross_rate_ = 0;
  std::string_view main_gemm_;
  int64_t main_align_ = 8;
  bool main_lsm_ = false;
};

}  // namespace

std::string RandomGraphJson(uint64_t seed, const RandomGraphOptions& options) {
  return Generator(seed, options).Run();
}

}  // namespace hfuse
