// Hostile input (issue 15): one regression test per class of problem that
// a sanitizer build under a mutation fuzzer, and a set of hostile files,
// found in hfuse. Each input is the smallest that showed the problem. Run
// through the binary: exit status 2 and one line naming the problem, never
// a signal, a hang or a wrong result; the ASan/UBSan job (scripts/
// sanitize.sh) runs them too, which is where the undefined behaviour of the
// old code (signed overflow, memcpy on null) shows. The ONNX classes are in
// tests/onnx/onnx_hostile_test.cc.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "hfuse/exec/cpu_executor.h"
#include "hfuse/exec/npz.h"
#include "hfuse/io/graph_json.h"
#include "hfuse/support/checked.h"
#include "hfuse/support/error.h"
#include "testing/tool_runner.h"

namespace hfuse {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using test::ExpectInputError;
using test::Quote;
using test::RunShell;
using test::RunTool;
using test::Tool;
using test::Spit;
using test::TempDir;
using test::ToolRun;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif


// One relu on x: the smallest graph a shape can be tried on.
std::string Relu(const std::string& shape, const std::string& dtype = "float32") {
  return fmt::format(R"({{"graph_format": 1, "tensors": [
 {{"name": "x", "shape": {0}, "dtype": "{1}", "role": "input"}},
 {{"name": "y", "shape": {0}, "dtype": "{1}"}}],
 "ops": [{{"name": "r", "op": "elementwise", "func": "relu", "inputs": ["x"], "outputs": ["y"]}}],
 "outputs": ["y"]}})",
                     shape, dtype);
}

// ---- element and byte counts ------------------------------------------------

TEST(HostileInput, TensorOf2To62RowsIsRefusedNotRun) {
  // 2^62 x 4 float32: 2^66 bytes. `run` used to print a result for memory
  // it never allocated.
  TempDir dir;
  Spit(dir / "g.json", Relu("[4611686018427387904, 4]"));
  ExpectInputError(RunTool("check " + Quote(dir.Str("g.json"))), {"tensor 'x'", "64 bits"});
  ExpectInputError(RunTool("run " + Quote(dir.Str("g.json"))), {"tensor 'x'", "64 bits"});
}

TEST(HostileInput, TensorOverTheMemoryBudgetIsRefusedBeforeAllocating) {
  // 2^30 x 64 float32 = 256 GiB: a valid graph (check passes), too large to run.
  TempDir dir;
  Spit(dir / "g.json", Relu("[1073741824, 64]"));
  EXPECT_TRUE(RunTool("check " + Quote(dir.Str("g.json"))).ok());
  ExpectInputError(RunTool("run " + Quote(dir.Str("g.json"))),
                   {"tensor 'x'", "274877906944 bytes", "memory budget of 17179869184 bytes"});
}

TEST(HostileInput, MemoryBudgetIsConfigurable) {
  TempDir dir;
  Spit(dir / "g.json", Relu("[64, 64]"));
  const std::string g = Quote(dir.Str("g.json"));
  EXPECT_TRUE(RunTool("run " + g).ok());
  ExpectInputError(RunTool("--memory-budget 1K run " + g),
                   {"tensor 'x'", "16384 bytes", "memory budget of 1024 bytes"});
  ExpectInputError(RunShell("HFUSE_MEMORY_BUDGET=4K " + Tool() + " run " + g),
                   {"memory budget of 4096 bytes"});
  ExpectInputError(RunTool("--memory-budget 12Q run " + g), {"--memory-budget 12Q"});
}

TEST(HostileInput, AllocationFailureIsAnInputErrorNamingTheTensor) {
  if (kAsan) GTEST_SKIP() << "ASan reserves terabytes of shadow memory: ulimit -v cannot apply";
  // 8 GiB, under the budget, over a 4 GiB address-space limit (which leaves
  // room for the CUDA libraries a CUDA build maps).
  TempDir dir;
  Spit(dir / "g.json", Relu("[2147483648, 1]"));
  const ToolRun run = RunShell("ulimit -v 4194304; " + Tool() + " run " + Quote(dir.Str("g.json")));
  ExpectInputError(run, {"'x'", "cannot allocate 8589934592 bytes", "out of memory"});
  EXPECT_THAT(run.err, Not(HasSubstr("hfuse: error: out of memory\n")));
}

TEST(HostileInput, SplitSizesThatWrapAreRefused) {
  TempDir dir;
  Spit(dir / "g.json", R"({"graph_format": 1, "tensors": [
 {"name": "x", "shape": [4, 1], "dtype": "float32", "role": "input"},
 {"name": "a", "shape": [4, 9223372036854775807], "dtype": "float32"},
 {"name": "b", "shape": [4, 2], "dtype": "float32"}],
 "ops": [{"name": "s", "op": "split", "inputs": ["x"], "outputs": ["a", "b"],
          "split_sizes": [9223372036854775807, 2], "dim": 1}],
 "outputs": ["a", "b"]})");
  ExpectInputError(RunTool("run " + Quote(dir.Str("g.json"))), {"op 's'", "overflow"});
}

TEST(HostileInput, NineteenDigitIntegersInTheWritersFormAreRefused) {
  // The fast path summed the digits before counting them: signed overflow.
  TempDir dir;
  std::string text = WriteGraphJson(ParseGraphJson(Relu("[4, 8]"), "g.json"));
  const size_t at = text.find("[4, 8]");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 6, "[9999999999999999999, 8]");
  Spit(dir / "g.json", text);
  ExpectInputError(RunTool("check " + Quote(dir.Str("g.json"))), {"tensor 'x'"});
  text.replace(text.find("[9999999999999999999, 8]"), 24, "[-9223372036854775808, 8]");
  Spit(dir / "g.json", text);
  ExpectInputError(RunTool("check " + Quote(dir.Str("g.json"))), {"tensor 'x'"});
}

TEST(HostileInput, ZeroSizeTensorsRun) {
  // A split with an empty output, a concatenate of it, a GEMM with K = 0:
  // memcpy was handed null pointers (undefined behaviour, seen by UBSan).
  TempDir dir;
  Spit(dir / "g.json", R"({"graph_format": 1, "tensors": [
 {"name": "x", "shape": [4, 8], "dtype": "float32", "role": "input"},
 {"name": "a", "shape": [4, 8], "dtype": "float32"},
 {"name": "b", "shape": [4, 0], "dtype": "float32"},
 {"name": "c", "shape": [4, 8], "dtype": "float32"},
 {"name": "w", "shape": [3, 0], "dtype": "float32", "role": "param"},
 {"name": "y", "shape": [4, 3], "dtype": "float32"}],
 "ops": [
 {"name": "s", "op": "split", "inputs": ["x"], "outputs": ["a", "b"], "split_sizes": [8, 0], "dim": 1},
 {"name": "cat", "op": "concatenate", "inputs": ["b", "a"], "outputs": ["c"], "dim": 1},
 {"name": "g", "op": "gemm_rcr", "inputs": ["b", "w"], "outputs": ["y"]}],
 "outputs": ["c", "y"]})");
  const ToolRun run = RunTool("run " + Quote(dir.Str("g.json")) + " -o " + Quote(dir.Str("o.npz")));
  ASSERT_TRUE(run.ok()) << run.err;
  EXPECT_THAT(run.out, HasSubstr("y: float32 [4, 3] sum=0 "));
  const TensorMap out = ReadNpz(dir.Str("o.npz"));
  EXPECT_EQ(out.at("y").bytes, std::vector<uint8_t>(48, 0));
  EXPECT_EQ(out.at("c").shape, (std::vector<int64_t>{4, 8}));
}

// An opaque ONNX Transpose (kept whole by the importer, run by the CPU
// executor) of a [2, 3] input with the given perm and output shape.
Graph TransposeGraph(std::vector<int64_t> perm, std::vector<int64_t> out) {
  Graph g;
  Tensor x;
  x.name = "x";
  x.role = Role::kInput;
  x.dtype = DType::kFloat32;
  x.shape = {Dim::Static(2), Dim::Static(3)};
  Tensor y;
  y.name = "y";
  y.dtype = DType::kFloat32;
  for (int64_t d : out) y.shape.push_back(Dim::Static(d));
  const TensorId xi = g.AddTensor(x), yi = g.AddTensor(y);
  auto node = std::make_shared<OnnxNode>();
  node->op_type = "Transpose";
  node->opset = 13;
  node->ints["perm"] = std::move(perm);
  Op op;
  op.name = "t";
  op.type = OpType::kOpaque;
  op.inputs = {xi};
  op.outputs = {yi};
  op.attrs.onnx = node;
  g.AddOp(std::move(op));
  g.set_outputs({yi});
  return g;
}

TEST(HostileInput, TransposePermIsRangeChecked) {
  // perm entries were never checked: an index past the rank read the
  // strides past their end, and then heap bytes.
  for (const auto& [perm, out] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{0, 7}, {2, 3}}, {{1, 1}, {3, 3}}, {{-1, 0}, {3, 2}}, {{1, 0}, {2, 3}}}) {
    const Graph g = TransposeGraph(perm, out);
    const DimValues dims = BindDims(g);
    try {
      RunOnCpu(g, RandomFeeds(g, dims, 1), dims);
      ADD_FAILURE() << "perm [" << fmt::format("{}", fmt::join(perm, ", ")) << "] ran";
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr("op 't'"));
    }
  }
  const Graph ok = TransposeGraph({1, 0}, {3, 2});
  const DimValues dims = BindDims(ok);
  EXPECT_EQ(RunOnCpu(ok, RandomFeeds(ok, dims, 1), dims).at("y").shape, (std::vector<int64_t>{3, 2}));
}

TEST(HostileInput, TopLevelNumberAtTheEndOfTheTextIsNotReadPast) {
  // Found by the graph_json fuzz target: "2", a valid JSON text, made the
  // general reader scan for the number's end past the buffer (ASan:
  // heap-buffer-overflow). The buffer here is exactly the text, as the
  // fuzzer's is; a file is mapped whole pages, which hid it.
  for (const std::string& text : {std::string("2"), std::string("-12"), std::string(" 1.5e3")}) {
    const std::vector<char> exact(text.begin(), text.end());
    try {
      ParseGraphJson(std::string_view(exact.data(), exact.size()), "n.json");
      ADD_FAILURE() << text << " was read as a graph";
    } catch (const InputError& e) {
      EXPECT_THAT(e.what(), HasSubstr("top level must be an object"));
    }
  }
}

// ---- graph JSON over 4 GiB --------------------------------------------------

// `text` with `pad` spaces inserted at `at`, built from three memfd pages:
// the head, one 2 MiB page of spaces mapped over and over, and the tail, so
// that a text of more than 4 GiB takes a few MB of memory.
class PaddedText {
 public:
  PaddedText(const std::string& text, size_t at, size_t pad) {
    const size_t chunk = size_t{2} << 20;
    HFUSE_CHECK(at < chunk && text.size() - at < chunk);
    pad = (pad + at + chunk - 1) / chunk * chunk - at;  // head + pad: whole chunks
    const size_t tail = text.size() - at;
    size_ = at + pad + tail;
    const size_t chunks = (at + pad) / chunk + 1;
    base_ = static_cast<char*>(::mmap(nullptr, chunks * chunk, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    HFUSE_CHECK(base_ != MAP_FAILED);
    mapped_ = chunks * chunk;
    std::string head(chunk, ' '), spaces(chunk, ' '), last(chunk, ' ');
    head.replace(0, at, text.substr(0, at));
    last.replace(0, tail, text.substr(at));
    const int fd_head = Memfd(head), fd_spaces = Memfd(spaces), fd_last = Memfd(last);
    for (size_t c = 0; c < chunks; ++c) {
      const int fd = c == 0 ? fd_head : c + 1 == chunks ? fd_last : fd_spaces;
      HFUSE_CHECK(::mmap(base_ + c * chunk, chunk, PROT_READ, MAP_SHARED | MAP_FIXED | MAP_POPULATE,
                         fd, 0) != MAP_FAILED);
    }
    ::close(fd_head);
    ::close(fd_spaces);
    ::close(fd_last);
  }
  ~PaddedText() { ::munmap(base_, mapped_); }
  std::string_view view() const { return {base_, size_}; }

 private:
  static int Memfd(const std::string& bytes) {
    const int fd = ::memfd_create("hfuse_pad", 0);
    HFUSE_CHECK(fd >= 0 && ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    return fd;
  }
  char* base_ = nullptr;
  size_t mapped_ = 0, size_ = 0;
};

TEST(HostileInput, GraphJsonOver4GiBInAnotherKeyOrderIsReadRight) {
  // Keys in another order than the writer's send the text to the general
  // reader, whose token positions were 32 bits: past 4 GiB it read the
  // wrong bytes and fused with exit 0 and a wrong attribute.
  const std::string text = R"({"outputs": ["y"], "graph_format": 1,
 "tensors": [{"role": "input", "name": "a", "dtype": "float16", "shape": [4, 8]},
             {"role": "param", "name": "w", "dtype": "float16", "shape": [2, 8]},
             {"name": "y", "dtype": "float16", "shape": [4, 2]}],
 "ops": [{"alpha": 0.25, "name": "fc", "op": "gemm_rcr", "inputs": ["a", "w"], "outputs": ["y"]}]})";
  const std::string want = WriteGraphJson(ParseGraphJson(text, "small.json"));
  ASSERT_THAT(want, HasSubstr("0.25"));
  const PaddedText big(text, text.find("\n \"tensors\""), (size_t{1} << 32) + (size_t{300} << 20));
  ASSERT_GT(big.view().size(), size_t{1} << 32);
  EXPECT_EQ(WriteGraphJson(ParseGraphJson(big.view(), "big.json")), want);
}

// ---- .npz -----------------------------------------------------------------

void Put16(std::string& s, uint32_t v) {
  s.push_back(static_cast<char>(v & 0xff));
  s.push_back(static_cast<char>((v >> 8) & 0xff));
}
void Put32(std::string& s, uint32_t v) {
  Put16(s, v & 0xffff);
  Put16(s, v >> 16);
}

// A zip of one entry whose header says `method`, `csize` and `usize`, with
// `data` as its bytes (what the reader checks: no CRC).
std::string Zip(const std::string& name, const std::string& data, uint32_t method, uint32_t csize,
                uint32_t usize) {
  std::string zip;
  Put32(zip, 0x04034b50);
  Put16(zip, 20); Put16(zip, 0); Put16(zip, static_cast<uint32_t>(method)); Put16(zip, 0); Put16(zip, 0x21);
  Put32(zip, 0); Put32(zip, csize); Put32(zip, usize);
  Put16(zip, static_cast<uint32_t>(name.size())); Put16(zip, 0);
  zip += name + data;
  const auto cd = static_cast<uint32_t>(zip.size());
  std::string central;
  Put32(central, 0x02014b50);
  Put16(central, 20); Put16(central, 20); Put16(central, 0); Put16(central, method);
  Put16(central, 0); Put16(central, 0x21);
  Put32(central, 0); Put32(central, csize); Put32(central, usize);
  Put16(central, static_cast<uint32_t>(name.size()));
  Put16(central, 0); Put16(central, 0); Put16(central, 0); Put16(central, 0);
  Put32(central, 0); Put32(central, 0);
  central += name;
  zip += central;
  Put32(zip, 0x06054b50);
  Put16(zip, 0); Put16(zip, 0); Put16(zip, 1); Put16(zip, 1);
  Put32(zip, static_cast<uint32_t>(central.size())); Put32(zip, cd); Put16(zip, 0);
  return zip;
}
std::string Npy(const std::string& header, const std::string& data) {
  std::string npy = "\x93NUMPY";
  npy.push_back('\x01');
  npy.push_back('\x00');
  Put16(npy, static_cast<uint32_t>(header.size()));
  return npy + header + data;
}
std::string StoredNpz(const std::string& name, const std::string& npy) {
  return Zip(name + ".npy", npy, 0, static_cast<uint32_t>(npy.size()), static_cast<uint32_t>(npy.size()));
}

TEST(HostileInput, LongNpyHeaderDoesNotOverflowTheStack) {
  // std::regex recursed once per character: 60 KB of header was exit 139.
  TempDir dir;
  Spit(dir / "g.json", Relu("[2, 3]"));
  const std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2," + std::string(60000, ' ') + "3), }\n";
  Spit(dir / "in.npz", StoredNpz("x", Npy(header, std::string(24, '\0'))));
  const ToolRun run = RunTool("run " + Quote(dir.Str("g.json")) + " --inputs " + Quote(dir.Str("in.npz")));
  ASSERT_TRUE(run.ok()) << run.err;
  EXPECT_THAT(run.out, HasSubstr("y: float32 [2, 3] sum=0 "));
}

TEST(HostileInput, NpyDimOf25DigitsIsNamed) {
  // Was "hfuse: error: stoll".
  TempDir dir;
  Spit(dir / "g.json", Relu("[2, 3]"));
  Spit(dir / "in.npz",
       StoredNpz("x", Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1234567890123456789012345,), }\n", "")));
  ExpectInputError(RunTool("run " + Quote(dir.Str("g.json")) + " --inputs " + Quote(dir.Str("in.npz"))),
                   {"in.npz", "'x'", "1234567890123456789012345", "too large"});
}

TEST(HostileInput, NpzEntryDeclaring4GBIsRefusedBeforeAllocating) {
  // A file of under 200 bytes made hfuse allocate 4.4 GB. Under an address
  // space limit of 1 GiB the refusal must come before any allocation.
  TempDir dir;
  Spit(dir / "g.json", Relu("[2, 3]"));
  const std::string limit = kAsan ? "" : "ulimit -v 1048576; ";
  Spit(dir / "deflate.npz", Zip("x.npy", std::string(16, '\x03'), 8, 16, 4000000000u));
  ASSERT_LT(test::Slurp(dir / "deflate.npz").size(), 200u);
  ExpectInputError(RunShell(limit + Tool() + " run " +
                           Quote(dir.Str("g.json")) + " --inputs " + Quote(dir.Str("deflate.npz"))),
                   {"entry 'x.npy'", "4000000000 bytes", "more than deflate can give"});
  Spit(dir / "stored.npz",
       StoredNpz("x", Npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000,), }\n", "abcd")));
  ExpectInputError(RunShell(limit + Tool() + " run " +
                           Quote(dir.Str("g.json")) + " --inputs " + Quote(dir.Str("stored.npz"))),
                   {"'x'", "truncated"});
}

// ---- files that are not files ---------------------------------------------

TEST(HostileInput, FifoOrDeviceAsInputIsRefusedWithoutWaiting) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.Str("g.json").c_str(), 0600), 0);
  // `timeout` turns a hang into exit 124.
  const ToolRun fifo = RunShell("timeout 60 " + Tool() + " check " + Quote(dir.Str("g.json")));
  ExpectInputError(fifo, {"g.json", "not a regular file"});
  const ToolRun zero = RunShell("timeout 60 " + Tool() + " check /dev/zero");
  ExpectInputError(zero, {"/dev/zero", "not a regular file"});
}

}  // namespace
}  // namespace hfuse
