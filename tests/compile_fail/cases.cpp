// Code that must not compile, one case per -DKFUSE_CF_<CASE>; run_case.cmake compiles each and
// matches the compiler's output against the diagnostic kfuse promises. KFUSE_CF_OK holds the
// valid neighbour of every case and must compile, so that a case fails for its own reason, not
// for a broken include or flag.
#include <cstdint>

#include "kfuse/graph/compile.hpp"
#include "kfuse/kernels/gemm/batched_gemm.hpp"
#include "kfuse/kfuse.hpp"

namespace cf {

/// A user stage with only a scalar operator(): fine on arch::generic, an error on a SIMD arch.
struct scalar_only_stage {
  template <class Ctx>
  float operator()(float x, const Ctx&) const {
    return x * 3.f;
  }
};

float in_f[64];
float out_f[64];
std::int8_t out_i8[64];
std::uint8_t out_u8[64];
kfuse::bf16_t out_bf16[64];
std::uint8_t in_u8[64];
std::int8_t in_i8[64];
std::int32_t out_i32[64];
const float channel_values[4] = {};

void run() {
  using namespace kfuse;
#if defined(KFUSE_CF_OK)
  // The valid neighbour of each case below.
  eltwise<arch::generic>(in_f, out_f, 64, epilogue<scale, scalar_only_stage>{{2.f}, {}});
  eltwise(in_f, out_i8, 64, epilogue<scale, quantize<i8>>{{2.f}, {{0.1f, 0}}});
  eltwise(view<nchw>(static_cast<const float*>(in_f), dims4{1, 4, 4, 4}),
          view<nchw>(out_f, dims4{1, 4, 4, 4}), epilogue<bias>{{{channel_values, 4}}});
  eltwise<arch::native>(in_f, out_f, 64, epilogue<relu>{});
  eltwise<arch::native, backend::hwy>(in_f, out_f, 64, epilogue<relu>{});
  eltwise(in_f, out_bf16, 64, epilogue<cast<bf16>>{});
  eltwise(in_f, out_u8, 64, epilogue<quantize<u8>>{{{0.1f, 0}}});
  batched_gemm<i8, arch::generic>::run(in_u8, in_i8, out_i32,
                                       batched_gemm_problem::dense({}, 4, 4, 4));
  (void)compile<ops<op_kind::reshape>>(graph{});
  (void)compile<ops<op_kind::reshape>::in<precision::f32>>(graph{});
#elif defined(KFUSE_CF_SELECTIVE_EMPTY_SET)
  (void)compile<ops<>>(graph{});
#elif defined(KFUSE_CF_SELECTIVE_NO_PRECISION)
  (void)compile<ops<op_kind::linear>::in<>>(graph{});
#elif defined(KFUSE_CF_SELECTIVE_INHERIT)
  (void)compile<ops<op_kind::linear>::in<precision::inherit>>(graph{});
#elif defined(KFUSE_CF_COMPILE_NOT_ARCH_OR_OPS)
  (void)compile<float>(graph{});
#elif defined(KFUSE_CF_SCALAR_ONLY_STAGE)
  // A user stage without a vector operator() on a SIMD arch: never a silent scalar fallback.
  eltwise<arch::native>(in_f, out_f, 64, epilogue<scale, scalar_only_stage>{{2.f}, {}});
#elif defined(KFUSE_CF_INT_OUTPUT_WITHOUT_QUANTIZE)
  eltwise(in_f, out_i8, 64, epilogue<scale, relu>{{2.f}, {}});
#elif defined(KFUSE_CF_OUTPUT_TYPE_MISMATCH)
  eltwise(in_f, out_i8, 64, epilogue<quantize<u8>>{{{0.1f, 0}}});
#elif defined(KFUSE_CF_BIAS_FLAT)
  eltwise(in_f, out_f, 64, epilogue<bias>{{{channel_values, 4}}});
#elif defined(KFUSE_CF_NON_NATIVE_ARCH)
  // This TU is built for avx2: avx512 code cannot be instantiated in it.
  eltwise<arch::avx512>(in_f, out_f, 64, epilogue<relu>{});
#elif defined(KFUSE_CF_CAST_I8)
  eltwise(in_f, out_i8, 64, epilogue<cast<i8>>{});
#elif defined(KFUSE_CF_QUANTIZE_F32)
  eltwise(in_f, out_f, 64, epilogue<quantize<f32>>{});
#elif defined(KFUSE_CF_BATCHED_I8_FLOAT_B)
  // The i8 recipe's B is s8: a float B is not quantized behind the caller's back.
  batched_gemm<i8, arch::generic>::run(in_u8, in_f, out_i32,
                                       batched_gemm_problem::dense({}, 4, 4, 4));
#elif defined(KFUSE_CF_BATCHED_I8_7BIT)
  // avx2 has no vpdpbusd: its vpmaddubsw kernel takes 7-bit weights, and B is data here.
  batched_gemm<i8, arch::avx2>::run(in_u8, in_i8, out_i32,
                                    batched_gemm_problem::dense({}, 4, 4, 4));
#elif defined(KFUSE_CF_HWY_TOO_NARROW)
  // Built with -march=x86-64-v3 and Highway included before kfuse (without -maes -mpclmul):
  // Highway 1.0.3's static target drops to SSSE3, narrower than the avx2 arch of this TU.
  eltwise<arch::native, backend::hwy>(in_f, out_f, 64, epilogue<relu>{});
#endif
}

}  // namespace cf

int main() {
  cf::run();
  return 0;
}
