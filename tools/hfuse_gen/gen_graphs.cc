// The scale-graph generators of gen_graphs.h. Text is appended to one string
// with no JSON library in between: names are plain ASCII, so nothing needs
// escaping, and a 10^6-op graph is a few hundred MB that should not be built
// twice.
#include "gen_graphs.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <vector>

namespace hfuse::gen {
namespace {

// Appends "graph JSON v1" pieces: one tensor or op per line.
class JsonOut {
 public:
  explicit JsonOut(std::string name, size_t reserve) {
    text_.reserve(reserve);
    fmt::format_to(std::back_inserter(text_),
                   "{{\n \"graph_format\": 1,\n \"name\": \"{}\",\n \"dims\": [],\n \"tensors\": [",
                   name);
  }

  void Tensor(std::string_view name, int64_t d0, int64_t d1, std::string_view role = {}) {
    Sep();
    fmt::format_to(std::back_inserter(text_), "{{\"name\": \"{}\", \"shape\": [{}", name, d0);
    if (d1 >= 0) fmt::format_to(std::back_inserter(text_), ", {}", d1);
    text_ += "], \"dtype\": \"float16\"";
    if (!role.empty()) fmt::format_to(std::back_inserter(text_), ", \"role\": \"{}\"", role);
    text_ += "}";
  }

  void BeginOps() {
    text_ += "\n ],\n \"ops\": [";
    first_ = true;
  }

  // `attrs` is written verbatim after the outputs (", \"eps\": 1e-05").
  void Op(std::string_view name, std::string_view type, const std::vector<std::string>& inputs,
          const std::vector<std::string>& outputs, std::string_view attrs = {}) {
    Sep();
    fmt::format_to(std::back_inserter(text_), "{{\"name\": \"{}\", \"op\": \"{}\", \"inputs\": [",
                   name, type);
    Names(inputs);
    text_ += "], \"outputs\": [";
    Names(outputs);
    text_ += "]";
    text_ += attrs;
    text_ += "}";
  }

  std::string Finish(const std::vector<std::string>& outputs) {
    text_ += "\n ],\n \"outputs\": [";
    Names(outputs);
    text_ += "]\n}\n";
    return std::move(text_);
  }

  std::string& raw() { return text_; }

 private:
  void Sep() {
    text_ += first_ ? "\n  " : ",\n  ";
    first_ = false;
  }
  void Names(const std::vector<std::string>& names) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (i) text_ += ", ";
      text_ += '"';
      text_ += names[i];
      text_ += '"';
    }
  }

  std::string text_;
  bool first_ = true;
};

// SplitMix64: tiny, and the same numbers on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  int64_t Below(int64_t n) { return static_cast<int64_t>(Next() % static_cast<uint64_t>(n)); }
  bool Chance(double p) { return static_cast<double>(Next() >> 11) * 0x1.0p-53 < p; }

 private:
  uint64_t state_;
};

}  // namespace

int64_t TowersForOps(int64_t ops) { return std::max<int64_t>(1, (ops - 2) / 3); }

std::string TowersGraphJson(const TowersOptions& options) {
  const int64_t t_count = options.towers;
  const int64_t m = options.rows;
  JsonOut out(fmt::format("towers_{}", t_count), static_cast<size_t>(t_count) * 1200 + 4096);
  // Tensors in the order of towers_1001.json: x, the split outputs, then per
  // tower its params and activations, then the concatenated output.
  out.Tensor("x", m, 64 * t_count, "input");
  for (int64_t i = 0; i < t_count; ++i) out.Tensor(fmt::format("x{}", i), m, 64);
  for (int64_t i = 0; i < t_count; ++i) {
    out.Tensor(fmt::format("w1_{}", i), 128, 64, "param");
    out.Tensor(fmt::format("b1_{}", i), 128, -1, "param");
    out.Tensor(fmt::format("g_{}", i), 128, -1, "param");
    out.Tensor(fmt::format("be_{}", i), 128, -1, "param");
    out.Tensor(fmt::format("w2_{}", i), 64, 128, "param");
    out.Tensor(fmt::format("b2_{}", i), 64, -1, "param");
    out.Tensor(fmt::format("h1_{}", i), m, 128);
    out.Tensor(fmt::format("h2_{}", i), m, 128);
    out.Tensor(fmt::format("y{}", i), m, 64);
  }
  out.Tensor("out", m, 64 * t_count);
  out.BeginOps();

  std::vector<std::string> split_outputs, ys;
  std::string sizes;
  for (int64_t i = 0; i < t_count; ++i) {
    split_outputs.push_back(fmt::format("x{}", i));
    ys.push_back(fmt::format("y{}", i));
    sizes += i ? ", 64" : "64";
  }
  out.Op("split", "split", {"x"}, split_outputs,
         fmt::format(", \"split_sizes\": [{}], \"dim\": 1", sizes));
  for (int64_t i = 0; i < t_count; ++i) {
    out.Op(fmt::format("t{}.fc1", i), "gemm_rcr_bias_relu",
           {fmt::format("x{}", i), fmt::format("w1_{}", i), fmt::format("b1_{}", i)},
           {fmt::format("h1_{}", i)});
    out.Op(fmt::format("t{}.ln", i), "layernorm",
           {fmt::format("h1_{}", i), fmt::format("g_{}", i), fmt::format("be_{}", i)},
           {fmt::format("h2_{}", i)}, ", \"normalized_shape\": [128], \"eps\": 1e-05");
    out.Op(fmt::format("t{}.fc2", i), "gemm_rcr_bias_relu",
           {fmt::format("h2_{}", i), fmt::format("w2_{}", i), fmt::format("b2_{}", i)},
           {ys[static_cast<size_t>(i)]});
  }
  out.Op("concat", "concatenate", ys, {"out"}, ", \"dim\": 1");
  return out.Finish({"out"});
}

std::string LanesGraphJson(const LanesOptions& options) {
  const int64_t width = std::max<int64_t>(1, options.width);
  const int64_t body = std::max<int64_t>(0, options.ops - 2);
  const int64_t m = options.rows;
  Rng rng(options.seed * 0x9e3779b97f4a7c15ULL + 17);

  // Tensors are declared as ops make them, but the tensor list must come
  // before the ops, so both are collected first and written at the end.
  struct T {
    std::string name;
    int64_t d0, d1;
    const char* role;
    int uses = 0;
  };
  std::vector<T> tensors;
  struct O {
    std::string name, type, attrs;
    std::vector<int> inputs, outputs;
  };
  std::vector<O> ops;
  ops.reserve(static_cast<size_t>(options.ops));
  tensors.reserve(static_cast<size_t>(options.ops) * 3 + 16);
  auto tensor = [&](std::string name, int64_t d0, int64_t d1, const char* role = "") {
    tensors.push_back({std::move(name), d0, d1, role});
    return static_cast<int>(tensors.size() - 1);
  };
  auto op = [&](std::string name, std::string type, std::vector<int> inputs,
                std::vector<int> outputs, std::string attrs = {}) {
    for (int in : inputs) ++tensors[static_cast<size_t>(in)].uses;
    ops.push_back({std::move(name), std::move(type), std::move(attrs), std::move(inputs),
                   std::move(outputs)});
  };

  const int x = tensor("x", m, 64 * width, "input");
  std::vector<std::vector<int>> recent(static_cast<size_t>(width));  // last few tensors per lane
  std::vector<int> split_outs;
  std::string sizes;
  for (int64_t l = 0; l < width; ++l) {
    split_outs.push_back(tensor(fmt::format("x{}", l), m, 64));
    recent[static_cast<size_t>(l)].push_back(split_outs.back());
    sizes += l ? ", 64" : "64";
  }
  op("split", "split", {x}, split_outs, fmt::format(", \"split_sizes\": [{}], \"dim\": 1", sizes));

  constexpr std::array<const char*, 4> kGemms = {"gemm_rcr_bias_relu", "gemm_rcr_bias", "gemm_rcr",
                                                 "gemm_rcr_bias_sigmoid"};
  constexpr std::array<const char*, 3> kUnary = {"relu", "sigmoid", "tanh"};
  constexpr size_t kRecent = 4;
  for (int64_t k = 0; k < body; ++k) {
    const int64_t lane = k % width;
    const int64_t step = k / width;
    std::vector<int>& mine = recent[static_cast<size_t>(lane)];
    const int cur = mine.back();
    // Another lane's recent tensor, for the edges across lanes.
    int other = -1;
    if (width > 1 && rng.Chance(options.cross)) {
      int64_t l2 = rng.Below(width - 1);
      if (l2 >= lane) ++l2;
      const std::vector<int>& theirs = recent[static_cast<size_t>(l2)];
      other = theirs[static_cast<size_t>(rng.Below(static_cast<int64_t>(theirs.size())))];
    }
    const std::string base = fmt::format("l{}.s{}", lane, step);
    const int64_t h = tensors[static_cast<size_t>(cur)].d1;
    const int64_t kind = rng.Below(100);
    int y;
    if (kind < 45) {
      const char* type = kGemms[static_cast<size_t>(std::min<int64_t>(3, rng.Below(100) / 25))];
      const int a = other >= 0 ? other : cur;
      const int64_t kdim = tensors[static_cast<size_t>(a)].d1;
      const int64_t n = rng.Chance(0.5) ? 64 : 128;
      std::vector<int> ins = {a, tensor("w" + base, n, kdim, "param")};
      if (std::string_view(type) != "gemm_rcr") ins.push_back(tensor("b" + base, n, -1, "param"));
      y = tensor("t" + base, m, n);
      op(base + ".fc", type, ins, {y});
    } else if (kind < 75) {
      const bool lsm = rng.Chance(0.2);
      const int xin = other >= 0 ? other : cur;
      const int64_t hx = tensors[static_cast<size_t>(xin)].d1;
      y = tensor("t" + base, m, hx);
      op(base + ".ln", lsm ? "layernorm_sigmoid_mul" : "layernorm",
         {xin, tensor("g" + base, hx, -1, "param"), tensor("be" + base, hx, -1, "param")}, {y},
         fmt::format(", \"normalized_shape\": [{}], \"eps\": 1e-05", hx));
    } else if (other >= 0 && tensors[static_cast<size_t>(other)].d1 == h) {
      y = tensor("t" + base, m, h);
      op(base + ".add", "elementwise", {cur, other}, {y}, ", \"func\": \"add\"");
    } else {
      y = tensor("t" + base, m, h);
      op(base + ".ew", "elementwise", {cur}, {y},
         fmt::format(", \"func\": \"{}\"", kUnary[static_cast<size_t>(rng.Below(3))]));
    }
    mine.push_back(y);
    if (mine.size() > kRecent) mine.erase(mine.begin());
  }

  std::vector<int> finals;
  int64_t total = 0;
  for (const std::vector<int>& lane : recent) {
    finals.push_back(lane.back());
    total += tensors[static_cast<size_t>(lane.back())].d1;
  }
  const int out = tensor("out", m, total);
  op("concat", "concatenate", finals, {out}, ", \"dim\": 1");

  // A tensor nobody reads (a lane moved on through another lane's tensor)
  // becomes a graph output, so that no op is dead and the count is exact.
  std::vector<std::string> outputs = {"out"};
  for (const T& t : tensors) {
    if (t.uses == 0 && t.role[0] == '\0' && t.name != "out") outputs.push_back(t.name);
  }

  JsonOut json(fmt::format("lanes_{}x{}", width, options.ops),
               static_cast<size_t>(options.ops) * 400 + 4096);
  for (const T& t : tensors) json.Tensor(t.name, t.d0, t.d1, t.role);
  json.BeginOps();
  std::vector<std::string> ins, outs;
  for (const O& o : ops) {
    ins.clear();
    outs.clear();
    for (int i : o.inputs) ins.push_back(tensors[static_cast<size_t>(i)].name);
    for (int i : o.outputs) outs.push_back(tensors[static_cast<size_t>(i)].name);
    json.Op(o.name, o.type, ins, outs, o.attrs);
  }
  return json.Finish(outputs);
}

}  // namespace hfuse::gen
