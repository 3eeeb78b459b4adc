// Hostile ONNX models (issue 15), through the binary: exit status 2 and one
// line, never a signal or a hang. A constant whose data is shorter than its
// dims (ONNX 1.12's shape inference wrote past its buffer: a 127-byte file
// was exit 139), and external data that is a FIFO (hung), /dev/zero or a
// sparse 4 TB file (read until memory ran out), or lies outside the model's
// folder through a symlink.
#include <fcntl.h>
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "testing/tool_runner.h"

// GCC 12 sees protobuf's string setters, inlined into the model builders
// below, copy 2^63 bytes (-Wrestrict, a false positive: GCC bug 105329).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

namespace hfuse {
namespace {

using ::testing::HasSubstr;
using test::ExpectInputError;
using test::Quote;
using test::RunShell;
using test::RunTool;
using test::Tool;
using test::Spit;
using test::TempDir;
using test::ToolRun;
namespace fs = std::filesystem;


void SetType(onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

// y = Reshape(x [2, 3], s) with s an int64 initializer of dims [8] and one
// value: shorter than its dims.
std::string ShortShapeModel(bool as_constant_node) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("g");
  onnx::TensorProto s;
  s.set_name("s");
  s.set_data_type(onnx::TensorProto::INT64);
  s.add_dims(8);
  s.add_int64_data(2);
  if (as_constant_node) {
    auto* c = g->add_node();
    c->set_op_type("Constant");
    c->add_output("s");
    auto* a = c->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    *a->mutable_t() = s;
  } else {
    *g->add_initializer() = s;
  }
  auto* n = g->add_node();
  n->set_op_type("Reshape");
  n->add_input("x");
  n->add_input("s");
  n->add_output("y");
  SetType(g->add_input(), "x", {2, 3});
  SetType(g->add_output(), "y", {3, 2});
  return m.SerializeAsString();
}

TEST(OnnxHostile, ConstantShorterThanItsDimsIsRefusedBeforeShapeInference) {
  TempDir dir;
  for (bool constant : {false, true}) {
    const std::string model = ShortShapeModel(constant);
    EXPECT_LT(model.size(), 128u);
    Spit(dir / "m.onnx", model);
    ExpectInputError(RunTool("check " + Quote(dir.Str("m.onnx"))),
                     {"'s'", "wrong size for its dims [8]", "int64"});
  }
}

// y = x + w, w [n] float32 in external file `location` (`length` bytes
// unless -1).
std::string ExternalModel(const std::string& location, int64_t n, int64_t length) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(n);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = w->add_external_data();
  e->set_key("location");
  e->set_value(location);
  if (length >= 0) {
    e = w->add_external_data();
    e->set_key("length");
    e->set_value(std::to_string(length));
  }
  auto* node = g->add_node();
  node->set_op_type("Add");
  node->add_input("x");
  node->add_input("w");
  node->add_output("y");
  SetType(g->add_input(), "x", {n});
  SetType(g->add_output(), "y", {n});
  return m.SerializeAsString();
}

TEST(OnnxHostile, ExternalDataFromAFifoDoesNotHang) {
  TempDir dir;
  ASSERT_EQ(::mkfifo(dir.Str("w.bin").c_str(), 0600), 0);
  Spit(dir / "m.onnx", ExternalModel("w.bin", 4, 16));
  ExpectInputError(RunShell("timeout 60 " + Tool() + " check " + Quote(dir.Str("m.onnx"))),
                   {"initializer 'w'", "w.bin", "not a regular file"});
}

TEST(OnnxHostile, ExternalDataFromDevZeroIsRefused) {
  TempDir dir;
  fs::create_symlink("/dev/zero", dir / "zero");
  Spit(dir / "m.onnx", ExternalModel("zero", 4, -1));
  ExpectInputError(RunShell("timeout 60 " + Tool() + " check " + Quote(dir.Str("m.onnx"))),
                   {"initializer 'w'", "'zero'", "inside the model's directory"});
}

TEST(OnnxHostile, ExternalDataOutsideTheFolderThroughASymlinkIsRefused) {
  TempDir outside, dir;
  Spit(outside / "secret.bin", std::string(16, 'a'));
  fs::create_symlink(outside / "secret.bin", dir / "w.bin");
  Spit(dir / "m.onnx", ExternalModel("w.bin", 4, 16));
  ExpectInputError(RunTool("check " + Quote(dir.Str("m.onnx"))),
                   {"initializer 'w'", "inside the model's directory"});
}

TEST(OnnxHostile, ExternalDataOfA4TBSparseFileIsRefusedBeforeReading) {
  TempDir dir;
  const int fd = ::open(dir.Str("w.bin").c_str(), O_CREAT | O_WRONLY, 0600);
  ASSERT_GE(fd, 0);
  const int64_t tb4 = int64_t{4} << 40;
  if (::ftruncate(fd, tb4) != 0) {
    ::close(fd);
    GTEST_SKIP() << "this file system has no sparse files of 4 TB";
  }
  ::close(fd);
  // Dims that match the file: 2^40 floats, over the memory budget.
  Spit(dir / "m.onnx", ExternalModel("w.bin", tb4 / 4, -1));
  ExpectInputError(RunShell("timeout 60 " + Tool() + " check " + Quote(dir.Str("m.onnx"))),
                   {"initializer 'w'", "4398046511104 bytes", "memory budget"});
  // Dims that do not: only their bytes are read, and the length must match.
  Spit(dir / "m.onnx", ExternalModel("w.bin", 4, tb4));
  ExpectInputError(RunTool("check " + Quote(dir.Str("m.onnx"))),
                   {"initializer 'w'", "length 4398046511104", "need 16 bytes"});
}

TEST(OnnxHostile, ExternalDataThatFitsStillLoads) {
  TempDir dir;
  Spit(dir / "w.bin", std::string(16, '\0'));
  Spit(dir / "m.onnx", ExternalModel("w.bin", 4, 16));
  const ToolRun run = RunTool("run " + Quote(dir.Str("m.onnx")));
  EXPECT_TRUE(run.ok()) << run.err;
}

}  // namespace
}  // namespace hfuse
