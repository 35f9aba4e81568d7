// One source, compiled twice into the same executable: with -march=x86-64-v2 (ODR_SUFFIX=v2) and
// with -march=x86-64-v4 -maes -mpclmul (ODR_SUFFIX=v4). Both copies call the same kfuse API
// (compiled_arch(), eltwise with the same epilogue types, the same user stage). Without the
// per-ISA inline namespace the linker would keep one copy of each inline function for both TUs
// and the v2 TU would report (and run) the v4 code. main.cpp asserts it does not; the nm check
// (check_weak_symbols.cmake) asserts no weak kfuse symbol is defined in both objects.
#include <cstdint>

#include "kfuse/kfuse.hpp"

#define ODR_CAT2(a, b) a##b
#define ODR_CAT(a, b) ODR_CAT2(a, b)
#define ODR_FN(name) ODR_CAT(kfuse_odr_##name##_, ODR_SUFFIX)

namespace odr_user {
/// A user stage: y = x + value. Identical in both TUs; its operator() is instantiated with each
/// TU's vector type, so its instantiations are per-ISA too.
struct offset {
  float value = 0.f;
  template <class V, class Ctx>
  V operator()(V x, const Ctx&) const {
    return x + V(value);
  }
};
}  // namespace odr_user

extern "C" {

struct kfuse_odr_result {
  const char* compiled_arch;  // kfuse::compiled_arch() of the TU
  const char* run_arch;       // run_info::arch of the eltwise calls
  const char* impl;           // run_info::impl
  const char* generic_impl;   // run_info::impl of the arch::generic instantiation
};

/// kfuse::compiled_arch() of this TU.
const char* ODR_FN(compiled_arch)() { return kfuse::compiled_arch().data(); }

/// q = quantize<i8>(gelu_tanh(offset(scale(x)))), y = silu(scale(x)), g = the generic arch's q.
kfuse_odr_result ODR_FN(run)(const float* x, std::int8_t* q, float* y, std::int8_t* g, long n,
                             float s) {
  using ep_q =
      kfuse::epilogue<kfuse::scale, odr_user::offset, kfuse::gelu_tanh, kfuse::quantize<kfuse::i8>>;
  const ep_q epq{{s}, {0.25f}, {}, {{0.02f, 3}}};
  const kfuse::run_info a = kfuse::eltwise(x, q, n, epq);
  const kfuse::run_info b =
      kfuse::eltwise(x, y, n, kfuse::epilogue<kfuse::scale, kfuse::silu>{{s}, {}});
  const kfuse::run_info c = kfuse::eltwise<kfuse::arch::generic>(x, g, n, epq);
  if (a.arch != b.arch) return {"", "", "", ""};
  return {kfuse::compiled_arch().data(), a.arch.data(), a.impl, c.impl};
}
}
