// The CUTLASS grouped GEMM, as a template over element type and CTA tile;
// included by one small .cu file per instantiation (cutlass_gemm_*.cu).
// See cutlass_grouped_gemm.h.
//
// Layouts, in CUTLASS's terms: A is M x K row-major (row stride lda, so a
// split view needs no copy), B is K x N column-major (W stored [N, K]), D is
// M x N row-major (row stride ldy, so a concatenate view needs no copy).
// There is no C operand: the bias comes in through the epilogue visitor tree
// as a row broadcast over an array of per-member bias pointers, indexed by
// the group index that the ptr-array kernel hands the epilogue as L.
#pragma once

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/group_array_problem_shape.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass_grouped_gemm.h"

namespace hfuse::cuda::cutlass_impl {

// acc + bias, then the activation picked at plan time: relu or sigmoid (the
// GEMM kinds' activations, as EwFunc values) or kNoActivation; one kernel for
// the three, the branch taken once per fragment and uniform over the launch.
// (A switch over every EwFunc, tanh and gelu included, made the whole kernel
// 2.3x slower on the H200: bench/RESULTS.md, issue 12.) CUTLASS instantiates
// the functor for float (its Arguments) and for fragments (the call), so the
// arguments are one type outside it.
inline constexpr int kCutlassRelu = 0;     // EwFunc::kRelu (checked in cuda_executor.cc)
inline constexpr int kCutlassSigmoid = 1;  // EwFunc::kSigmoid
struct BiasActivationArguments {
  int act = kNoActivation;
};
template <class Frag>
struct BiasActivation {
  using Arguments = BiasActivationArguments;
  CUTLASS_DEVICE Frag operator()(Frag const& acc, Frag const& bias, Arguments const& args) const {
    Frag out;
    if (args.act == kCutlassRelu) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < Frag::kElements; ++i) out[i] = fmaxf(acc[i] + bias[i], 0.0f);
    } else if (args.act == kCutlassSigmoid) {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < Frag::kElements; ++i) out[i] = 1.0f / (1.0f + __expf(-(acc[i] + bias[i])));
    } else {
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < Frag::kElements; ++i) out[i] = acc[i] + bias[i];
    }
    return out;
  }
};

inline void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    throw std::runtime_error(std::string("CUTLASS grouped GEMM: ") + what + ": " + cudaGetErrorString(e));
  }
}

template <class T>
T* ToDevice(const std::vector<T>& host) {
  T* p = nullptr;
  Check(cudaMalloc(&p, std::max<size_t>(1, host.size()) * sizeof(T)), "cudaMalloc");
  if (!host.empty()) Check(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  return p;
}

// The cooperative schedule (both consumer warpgroups on one 128 x kTileN x 64
// tile). The pingpong schedule at 128x128 was measured too, 2.7x slower on
// every group tried (bench/RESULTS.md, issue 12), and is not compiled.
template <class Element, int kTileN>
class Grouped final : public CutlassGroupedGemm {
  using TileShape = cute::Shape<cute::_128, cute::Int<kTileN>, cute::_64>;
  using KernelSchedule = cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative;
  using EpilogueSchedule = cutlass::epilogue::PtrArrayTmaWarpSpecializedCooperative;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using ProblemShape = cutlass::gemm::GroupProblemShape<cute::Shape<int, int, int>>;
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::ColumnMajor;
  using LayoutD = cutlass::layout::RowMajor;
  static constexpr int kAlign = 16 / sizeof(Element);
  static constexpr auto kRound = cutlass::FloatRoundStyle::round_to_nearest;

  using Bias = cutlass::epilogue::fusion::Sm90RowBroadcast<0, TileShape, Element*, float,
                                                           cute::Stride<cute::_0, cute::_1, cute::_0>>;
  using Fusion = cutlass::epilogue::fusion::Sm90EVT<
      cutlass::epilogue::fusion::Sm90Compute<BiasActivation, Element, float, kRound>,
      cutlass::epilogue::fusion::Sm90AccFetch, Bias>;

  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD*, kAlign,
      Element, LayoutD*, kAlign, EpilogueSchedule, Fusion>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA*, kAlign, Element,
      LayoutB*, kAlign, float, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      KernelSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
  using StrideA = typename Kernel::InternalStrideA;
  using StrideB = typename Kernel::InternalStrideB;
  using StrideD = typename Kernel::InternalStrideD;
  using Shape3 = typename ProblemShape::UnderlyingProblemShape;

 public:
  Grouped(const std::vector<GroupedGemmMember>& members, int act) {
    // Largest work first: the persistent scheduler hands out tiles in group
    // order, so the small members fill the last wave.
    std::vector<size_t> order(members.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const auto& x = members[a];
      const auto& y = members[b];
      return x.m * x.n * x.k > y.m * y.n * y.k;
    });
    std::vector<const Element*> a, w, bias;
    std::vector<Element*> d;
    std::vector<StrideA> sa;
    std::vector<StrideB> sb;
    std::vector<StrideD> sd;
    for (size_t i : order) {
      const GroupedGemmMember& m = members[i];
      host_shapes_.push_back(Shape3{static_cast<int>(m.m), static_cast<int>(m.n), static_cast<int>(m.k)});
      a.push_back(static_cast<const Element*>(m.a));
      w.push_back(static_cast<const Element*>(m.w));
      bias.push_back(static_cast<const Element*>(m.bias));
      d.push_back(static_cast<Element*>(m.y));
      sa.push_back(cute::make_stride(m.lda, cute::Int<1>{}, cute::Int<0>{}));
      sb.push_back(cute::make_stride(m.k, cute::Int<1>{}, cute::Int<0>{}));
      sd.push_back(cute::make_stride(m.ldy, cute::Int<1>{}, cute::Int<0>{}));
    }
    shapes_ = Keep(ToDevice(host_shapes_));
    const bool has_bias = !members.empty() && members[0].bias != nullptr;

    typename Gemm::Arguments args;
    args.mode = cutlass::gemm::GemmUniversalMode::kGrouped;
    args.problem_shape = {static_cast<int>(members.size()), shapes_, host_shapes_.data()};
    args.mainloop.ptr_A = Keep(ToDevice(a));
    args.mainloop.dA = Keep(ToDevice(sa));
    args.mainloop.ptr_B = Keep(ToDevice(w));
    args.mainloop.dB = Keep(ToDevice(sb));
    args.epilogue.thread.op_1.ptr_row = has_bias ? Keep(ToDevice(bias)) : nullptr;
    args.epilogue.thread.op_1.null_default = Element(0);
    args.epilogue.thread.op_2.act = act;
    args.epilogue.ptr_C = nullptr;
    args.epilogue.dC = nullptr;
    args.epilogue.ptr_D = Keep(ToDevice(d));
    args.epilogue.dD = Keep(ToDevice(sd));
    int device = 0;
    Check(cudaGetDevice(&device), "cudaGetDevice");
    args.hw_info = cutlass::KernelHardwareInfo::make_kernel_hardware_info<Kernel>(device);

    if (gemm_.can_implement(args) != cutlass::Status::kSuccess) {
      throw std::runtime_error("CUTLASS grouped GEMM: can_implement refused the members");
    }
    const size_t ws = Gemm::get_workspace_size(args);
    Check(cudaMalloc(&workspace_, std::max<size_t>(ws, 1)), "cudaMalloc workspace");
    const cutlass::Status s = gemm_.initialize(args, workspace_);
    Check(cudaDeviceSynchronize(), "initialize");
    if (s != cutlass::Status::kSuccess) throw std::runtime_error("CUTLASS grouped GEMM: initialize failed");
  }

  ~Grouped() override {
    for (void* p : owned_) cudaFree(p);
    if (workspace_) cudaFree(workspace_);
  }

  void Run(cudaStream_t stream) override {
    const cutlass::Status s = gemm_.run(stream);
    if (s != cutlass::Status::kSuccess) {
      throw std::runtime_error(std::string("CUTLASS grouped GEMM: launch failed: ") +
                               cutlassGetStatusString(s));
    }
  }

 private:
  template <class P>
  P* Keep(P* p) {
    owned_.push_back(const_cast<void*>(static_cast<const void*>(p)));
    return p;
  }

  Gemm gemm_;
  std::vector<Shape3> host_shapes_;  // read by the kernel's host side at initialize
  Shape3* shapes_ = nullptr;
  std::vector<void*> owned_;
  void* workspace_ = nullptr;
};

}  // namespace hfuse::cuda::cutlass_impl
