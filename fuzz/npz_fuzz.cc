// libFuzzer target: the .npz reader (src/exec/npz.cc): zip directory,
// zip64 fields, deflate, .npy headers. Any input gives arrays or an
// InputError; the arrays it gives are written and read back unchanged.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "fuzz_util.h"
#include "hfuse/exec/npz.h"
#include "hfuse/support/error.h"
#include "hfuse/support/file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hfuse::fuzz::Init();
  // ReadNpz reads a file: one per process, rewritten each time.
  static const std::string dir = [] {
    char tmpl[] = "/tmp/hfuse_npz_fuzz.XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    if (d == nullptr) std::abort();
    return std::string(d);
  }();
  const std::string in = dir + "/in.npz", out = dir + "/out.npz";
  std::FILE* f = std::fopen(in.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0) std::fwrite(data, 1, size, f);
  std::fclose(f);
  hfuse::TensorMap arrays;
  try {
    arrays = hfuse::ReadNpz(in);
  } catch (const hfuse::InputError&) {
    return 0;
  }
  hfuse::WriteNpz(out, arrays);
  const hfuse::TensorMap back = hfuse::ReadNpz(out);
  HFUSE_FUZZ_EXPECT(back.size() == arrays.size(), "arrays lost in a write and read");
  for (const auto& [name, t] : arrays) {
    auto it = back.find(name);
    HFUSE_FUZZ_EXPECT(it != back.end(), name.c_str());
    HFUSE_FUZZ_EXPECT(it->second.dtype == t.dtype && it->second.shape == t.shape &&
                          it->second.bytes == t.bytes,
                      name.c_str());
  }
  return 0;
}
