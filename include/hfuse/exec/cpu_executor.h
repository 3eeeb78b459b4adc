// The CPU executor: runs any graph of the spec, original or fused, with
// two sets of kernels.
//
// The reference kernels (RunOnCpuReference; CpuRunOptions::reference) are
// simple loops that every other path is checked against. Arithmetic is
// fp32; float16 and bfloat16 tensors are stored in their own type and
// converted on load and store with round-to-nearest-even, as a GPU kernel
// does. GEMMs go through OpenBLAS (cblas_sgemm); LayerNorm computes its
// statistics in fp32, two-pass.
//
// The fast kernels (the default: `hfuse run`, the session) compute float32
// tensors in place, every matrix product through OpenBLAS, over the
// threads (src/exec/cpu_fast_kernels.h), and take the reference for every
// other form. Either way a group op runs each member with the same kernel
// as the ungrouped op, so a fused graph gives results bitwise equal to the
// original's; buffers are freed after their last use (the memory plan), and
// reshapes take over their input's buffer where it is read for the last time.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "hfuse/runtime/bound_dims.h"
#include "hfuse/runtime/host_tensor.h"
#include "hfuse/ir/graph.h"

namespace hfuse {

// A param's own values (Tensor::data, e.g. an ONNX initializer); throws
// InputError when it has none or their size does not fit its shape.
HostTensor ParamValue(const Tensor& tensor, const DimValues& dims);

// Counts every live tensor's bytes (support/checked.h) at these dims and
// throws InputError, naming the tensor, when a count overflows or a tensor,
// or all of them together (a run keeps every value), exceed the memory
// budget. RandomFeeds and RunOnCpu call it before they allocate anything.
void CheckTensorSizes(const Graph& graph, const DimValues& dims);

// Values for every input and param tensor of `graph`, drawn from a seeded
// generator: uniform in [-1, 1), rounded to the tensor's dtype; gammas
// (params read as a LayerNorm's gamma) uniform in [0.5, 1.5). A tensor's
// values depend only on the seed, its name and its shape, so two graphs
// with the same tensor names get the same values. A param that came with
// its values (Tensor::data) gets them instead.
TensorMap RandomFeeds(const Graph& graph, const DimValues& dims, uint64_t seed);

// Runs the graph on `feeds` (every input and param tensor, by name, with the
// right shape and dtype; checked; a param left out runs on its own values
// when it has them) and returns the graph outputs by name. Opaque ops run
// only for the few ONNX operators of src/exec/cpu_onnx_ops.h; others throw
// InputError.
// One op of a profiled run: its time, and what it moved and computed
// (every operand read and result written once; 2 FLOPs per multiply-add
// of a product, 1 per element of the rest).
struct CpuOpProfile {
  std::string op;    // its name
  std::string kind;  // op type or ONNX operator; a group op's member count and path
  double us = 0;
  int64_t bytes = 0;
  int64_t flops = 0;
};
struct CpuMemory {
  int64_t largest_live_bytes = 0;  // inputs, params, and the intermediates live at once, at most
  int64_t peak_bytes = 0;          // what the run allocated at once, at most (views' copies too)
};
// Buffers kept from one run to the next (a session's): an intermediate's
// buffer goes back here after its last use and a later tensor of about its
// size takes it, so that a run after the first touches no fresh page (a
// page fault per 4 KiB costs more than the kernel that fills it). After a
// run it drops the buffers no tensor of that run took, and holds at most
// what the run held at once (its live tensors and the pool together) less
// the outputs it handed over: so a run like the last one allocates nothing.
class CpuBufferPool {
 public:
  // A buffer of n bytes, its contents unspecified (an earlier tensor's, or
  // zeros): every kernel writes all of its output. Poisoned, 0xFF bytes.
  std::vector<uint8_t> Take(size_t n);
  void Give(std::vector<uint8_t>&& buffer);
  // A run starts: the buffers given back from here on are this run's.
  void BeginRun() { ++run_; }
  // Frees the buffers given back before this run (none of its tensors took
  // them), then buffers, largest first, until the pool holds at most `bytes`.
  void Trim(size_t bytes);
  size_t bytes() const { return bytes_; }
  // Tests: every buffer a run allocates for a tensor, from the pool or
  // not, is first filled with 0xFF bytes (a NaN in every float dtype), so
  // that a kernel that leaves part of its output unwritten shows
  // (`hfuse run --poison-buffers`).
  void set_poison(bool on) { poison_ = on; }
  bool poison() const { return poison_; }

 private:
  struct Free {
    std::vector<uint8_t> buffer;
    uint64_t run = 0;  // the run that gave it back
  };
  std::multimap<size_t, Free> free_;  // by capacity
  size_t bytes_ = 0;
  uint64_t run_ = 0;
  bool poison_ = false;
};

// GEMM weights packed for the fast kernels' product (a session's): a
// GEMM whose weight is one of the session's params (CpuRunOptions::params,
// which stay the same from run to run) packs it on its first run and
// reads the packing from here after, where a product would otherwise pack
// it again on every call. The packing holds the weight's values, so the
// bytes of a run do not depend on whether they came from here.
class CpuPackedWeights {
 public:
  // The packing of op(b) (b: n x k values at `data`, rows `ld` apart, `trans`
  // as fast::Matrix), made on the first call for these arguments.
  const float* Get(const float* data, int64_t ld, bool trans, int64_t n, int64_t k);
  // Forgets every packing: call it when the params it was made from go.
  void Clear() { packed_.clear(); }
  size_t size() const { return packed_.size(); }

 private:
  std::map<std::tuple<const float*, int64_t, bool, int64_t, int64_t>, std::vector<float>> packed_;
};

// What runs of a graph work out before their first op (every tensor's
// shape and bytes, checked against the budget; the op order; the memory
// plan), kept per set of dim values, so that a session's run of a shape it
// has run before starts at its first op. For one graph at a time (another
// graph's plans are made anew).
class CpuRunPlans {
 public:
  struct Plan;  // cpu_executor.cc
  CpuRunPlans();
  ~CpuRunPlans();
  CpuRunPlans(const CpuRunPlans&) = delete;
  CpuRunPlans& operator=(const CpuRunPlans&) = delete;
  const Plan& For(const Graph& graph, const DimValues& dims);

 private:
  std::map<DimValues, std::unique_ptr<Plan>> plans_;
};

struct CpuRunOptions {
  bool reference = false;  // the reference kernels alone
  int threads = 0;         // fast kernels: 0 = OMP_NUM_THREADS, or the cores
  bool keep_all = false;   // keep every value (RunOnCpuKeepAll)
  // How group ops run (cpu_group_rule.h): 0 the rule, 1 side by side, 2 one by one.
  uint8_t group_mode = 0;
  // Param values kept by the caller across runs (a session's), read in place.
  const TensorMap* params = nullptr;
  CpuBufferPool* pool = nullptr;  // where intermediates' buffers come from and go back to
  CpuPackedWeights* packed = nullptr;  // packings of the weights in `params`
  CpuRunPlans* plans = nullptr;        // this graph's plans, kept from run to run
  std::vector<CpuOpProfile>* profile = nullptr;  // filled, op by op, when set
  CpuMemory* memory = nullptr;                   // filled when set
};
TensorMap RunOnCpu(const Graph& graph, const TensorMap& feeds, const DimValues& dims,
                   const CpuRunOptions& options = {});
// The OpenBLAS kernel set this CPU can run (OPENBLAS_CORETYPE): "SkylakeX"
// with AVX-512 (F, DQ, CD, BW, VL, enabled by the OS), "Haswell" with AVX2
// and FMA, else null.
const char* CpuBlasCoreType();
// OpenBLAS picks its kernels by CPU model when it is loaded, and falls back
// to its SSE3 ones (Prescott, a third of the speed or less) on a model it
// does not know, as virtual machines often report. The kernel set to ask
// for instead, when that happened and OPENBLAS_CORETYPE is unset; else
// null. The variable is read once, when OpenBLAS loads: hfuse's main sets
// it and runs itself again; the Python package sets it before it imports
// its extension.
const char* CpuBlasCoreToAskFor();
// The kernel set OpenBLAS runs (its core name), or null without OpenBLAS.
const char* CpuBlasCoreName();
// The fast kernels' thread count for CpuRunOptions::threads = n.
int CpuFastThreads(int n);
// RunOnCpu with the reference kernels: what `verify` compares against.
TensorMap RunOnCpuReference(const Graph& graph, const TensorMap& feeds, const DimValues& dims);
// As RunOnCpuReference, and returns every live tensor's value, indexed by tensor id
// (for checking an execution plan against the reference, tensor by tensor).
std::vector<HostTensor> RunOnCpuKeepAll(const Graph& graph, const TensorMap& feeds, const DimValues& dims);

}  // namespace hfuse
