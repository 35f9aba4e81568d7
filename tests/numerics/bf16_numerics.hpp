#pragma once
// The bf16 computations the cross-arch numerics test runs on every arch (bf16_numerics_test.cpp).
//
// bn::run_arch::operator()<A> is defined in bf16_numerics_arch.cpp and instantiated once per arch
// of the build, each in a TU that carries only that arch's flags (kfuse_add_arch_sources). The
// main TU sees only this header: the inputs (made once, shared by every arch) and the outputs.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kfuse/arch/tags.hpp"
#include "kfuse/kernels/conv/conv_shape.hpp"
#include "kfuse/kernels/gemm/packed_weights.hpp"
#include "kfuse/types/elem.hpp"

namespace bn {

using kfuse::index_t;

/// gemm<bf16> shapes: M = 1 (the small-M path), row and column tails of every tile, odd K (the
/// pair tail), K > 512 with 7 rows (the K-chunked small-M path), both B layouts.
struct gemm_case {
  index_t m, n, k;
  kfuse::b_layout layout;
};
inline constexpr gemm_case gemm_cases[] = {
    {1, 37, 33, kfuse::b_layout::nk},   {1, 130, 256, kfuse::b_layout::kn},
    {7, 70, 1101, kfuse::b_layout::nk}, {13, 100, 64, kfuse::b_layout::kn},
    {37, 67, 301, kfuse::b_layout::nk},
};
inline constexpr int n_gemm = int(std::size(gemm_cases));

/// conv2d<bf16> geometries: NHWC implicit GEMM (odd C, padding, stride), NHWC 1x1 (the GEMM path),
/// grouped NHWC, NCHW channel rows (panel path), and depthwise shapes (depthwise_conv2d) in both
/// layouts.
struct conv_case {
  kfuse::conv_shape s;
  bool nhwc;
};
inline kfuse::conv_shape conv_geometry(index_t n, index_t c, index_t h, index_t w, index_t k,
                                       index_t r, index_t stride, index_t pad, index_t groups) {
  kfuse::conv_shape s;
  s.n = n, s.c = c, s.h = h, s.w = w, s.k = k, s.r = r, s.s = r;
  s.stride_h = s.stride_w = stride;
  s.pad_top = s.pad_left = s.pad_bottom = s.pad_right = pad;
  s.groups = groups;
  return s;
}
inline const std::array<conv_case, 7>& conv_cases() {
  static const std::array<conv_case, 7> cases{{
      {conv_geometry(1, 7, 9, 9, 20, 3, 1, 1, 1), true},     // implicit GEMM, odd C
      {conv_geometry(2, 33, 5, 6, 17, 1, 1, 0, 1), true},    // 1x1: gemm [N*H*W, C] x [C, K]
      {conv_geometry(1, 8, 7, 7, 6, 3, 2, 1, 2), true},      // grouped, stride 2
      {conv_geometry(1, 5, 11, 11, 13, 3, 2, 1, 1), false},  // NCHW channel rows, stride 2
      {conv_geometry(1, 16, 6, 5, 9, 1, 1, 0, 1), false},    // NCHW 1x1
      {conv_geometry(1, 19, 8, 8, 19, 3, 1, 1, 19), true},   // depthwise 3x3 s1
      {conv_geometry(1, 6, 10, 9, 6, 5, 2, 2, 6), false},    // depthwise 5x5 s2
  }};
  return cases;
}
inline constexpr int n_conv = 7;

/// Inputs shared by every arch: bf16 activations, f32 weights (the kernels round them).
struct inputs {
  std::vector<float> cast_in;  // f32 -> bf16 conversion (the graph's activation cast)
  std::vector<kfuse::bf16_t> gemm_a[n_gemm];
  std::vector<float> gemm_b[n_gemm], gemm_bias[n_gemm];
  std::vector<kfuse::bf16_t> conv_x[n_conv];  // in the case's layout
  std::vector<float> conv_w[n_conv];          // OIHW
};

/// One backend's outputs (xsimd, and Highway where the arch has a Highway target).
struct backend_out {
  std::string impl;                              // run_info::impl
  std::vector<kfuse::bf16_t> cast_out;           // eltwise cast<bf16>
  std::vector<float> gemm_c[n_gemm];             // bare epilogue
  std::vector<std::int8_t> gemm_q[n_gemm];       // bias + quantize<i8>
  std::string gemm_kernel, conv_kernel[n_conv];  // run_info::micro_kernel
  std::vector<float> conv_y[n_conv];
};

struct arch_out {
  std::string compiled_arch;  // kfuse::compiled_arch() of the TU that ran
  std::vector<backend_out> backends;
};

/// Scale and zero point of the gemm's quantized output.
inline constexpr float q_scale = 1.f / 16.f;
inline constexpr std::int32_t q_zero = 3;

struct run_arch {
  template <class A>
  arch_out operator()(A, const inputs& in) const;
};

}  // namespace bn

#define BN_DECLARE(A) \
  extern template bn::arch_out bn::run_arch::operator()(A, const bn::inputs&) const;
#if defined(__x86_64__) || defined(_M_X64)
BN_DECLARE(kfuse::arch::generic)
BN_DECLARE(kfuse::arch::sse4)
BN_DECLARE(kfuse::arch::avx2)
BN_DECLARE(kfuse::arch::avx2_vnni)
BN_DECLARE(kfuse::arch::avx512)
BN_DECLARE(kfuse::arch::avx512_vnni)
BN_DECLARE(kfuse::arch::avx512_bf16)
#elif defined(__aarch64__)
BN_DECLARE(kfuse::arch::generic)
BN_DECLARE(kfuse::arch::neon)
BN_DECLARE(kfuse::arch::neon_dotprod)
#endif
#undef BN_DECLARE
