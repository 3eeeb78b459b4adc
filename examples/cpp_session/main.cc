// Runs a model with hfuse's C++ session, built against the installed
// package (find_package(hfuse)); see README.md, "C++".
//
//   cpp_session MODEL [INPUTS.npz]
//
// Loads MODEL (graph JSON or .onnx), fuses it for the CPU, prints its inputs,
// outputs and groups, runs it on the arrays of INPUTS.npz (each input the
// model lists; zeros where none is given) and prints each output's dtype,
// shape, sum and byte hash, as `hfuse run` does. Then shows what a bad feed
// gets: an hfuse::InputError naming the tensor.
#include <hfuse/exec/npz.h>
#include <hfuse/session/session.h>
#include <hfuse/support/error.h>

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL [INPUTS.npz]\n", argv[0]);
    return 2;
  }
  try {
    hfuse::SessionOptions options;  // CPU, the hfuse grouping rules
    hfuse::Session session = hfuse::Session::FromFile(argv[1], options);
    const hfuse::TensorMap given = argc > 2 ? hfuse::ReadNpz(argv[2]) : hfuse::TensorMap{};

    hfuse::TensorMap feeds;
    for (const hfuse::TensorInfo& in : session.inputs()) {
      std::printf("input %s: %s, rank %zu\n", in.name.c_str(),
                  std::string(hfuse::DTypeName(in.dtype)).c_str(), in.shape.size());
      auto it = given.find(in.name);
      feeds[in.name] = it != given.end() ? it->second : hfuse::HostTensor(in.dtype, in.shape);
    }
    for (const hfuse::TensorInfo& out : session.outputs()) {
      std::printf("output %s: %s\n", out.name.c_str(), std::string(hfuse::DTypeName(out.dtype)).c_str());
    }
    const hfuse::FuseGroupOpsResult& fusion = session.fusion();
    std::printf("fused: %lld ops -> %lld ops, %zu groups\n", static_cast<long long>(fusion.ops_before),
                static_cast<long long>(fusion.ops_after), fusion.groups.size());

    const hfuse::TensorMap outputs = session.Run(feeds);
    for (const auto& [name, t] : outputs) {
      std::string shape;
      for (size_t i = 0; i < t.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(t.shape[i]);
      std::printf("%s: %s [%s] sum=%.6g hash=%016llx\n", name.c_str(),
                  std::string(hfuse::DTypeName(t.dtype)).c_str(), shape.c_str(), hfuse::Checksum(t),
                  static_cast<unsigned long long>(hfuse::BytesHash(t)));
    }

    // A feed of the wrong shape is rejected before anything runs.
    hfuse::TensorMap bad = feeds;
    const hfuse::TensorInfo& first = session.inputs().front();
    bad[first.name] = hfuse::HostTensor(first.dtype, {1});
    try {
      session.Run(bad);
    } catch (const hfuse::InputError& e) {
      std::printf("bad feed: %s\n", e.what());
    }
  } catch (const hfuse::InputError& e) {
    std::fprintf(stderr, "cpp_session: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
