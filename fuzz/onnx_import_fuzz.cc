// libFuzzer target: the ONNX importer (src/onnx), ONNX 1.12's checker and
// shape inference included, then the CPU executor on what it imported.
// Any model gives a graph or an InputError; an imported graph verifies and
// runs (on seeded inputs, within the fuzz memory budget) or names why not.
// External data is looked up in an empty folder of its own.
#include <unistd.h>

#include <string>
#include <string_view>

#include "fuzz_util.h"
#include "hfuse/exec/cpu_executor.h"
#include "hfuse/ir/verifier.h"
#include "hfuse/onnx/onnx_import.h"
#include "hfuse/support/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hfuse::fuzz::Init();
  static const std::string dir = [] {
    char tmpl[] = "/tmp/hfuse_onnx_fuzz.XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    if (d == nullptr) std::abort();
    return std::string(d);
  }();
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  hfuse::OnnxModel model;
  try {
    model = hfuse::ImportOnnx(bytes, "fuzz.onnx", dir);
  } catch (const hfuse::InputError&) {
    return 0;
  }
  try {
    hfuse::VerifyGraph(model.graph);  // what the importer gives verifies
  } catch (const hfuse::InputError& e) {
    hfuse::fuzz::InvariantFailed("the imported graph does not verify:", e.what());
  }
  try {
    const hfuse::DimValues dims = hfuse::BindDims(model.graph);
    const hfuse::TensorMap feeds = hfuse::RandomFeeds(model.graph, dims, 1);
    hfuse::RunOnCpu(model.graph, feeds, dims);
  } catch (const hfuse::InputError&) {
  }
  return 0;
}
