// Picks the kernel tier at run time (built for plain x86-64: only CPUID runs before the choice).
#include <cstdlib>
#include <string>

#include "kernels.hpp"
#include "kfuse/error.hpp"

namespace kfuse::llm::detail {

namespace {
bool cpu_has_avx512_vnni() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}
bool cpu_has_avx2() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}
}  // namespace

const kernel_table& select_kernels(std::string& reason) {
  const char* env = std::getenv("KFUSE_LLM_KERNELS");
  const std::string want = env ? env : "";
#if defined(__x86_64__)
  if (want == "avx512_vnni" || want == "avx2" || want == "scalar") {
    const bool ok = want == "scalar" || (want == "avx2" ? cpu_has_avx2() : cpu_has_avx512_vnni());
    if (!ok)
      throw kfuse::error("kfuse::llm: KFUSE_LLM_KERNELS=" + want + ": this CPU does not run it");
    reason = "KFUSE_LLM_KERNELS=" + want;
    return want == "scalar" ? scalar_kernels() : want == "avx2" ? avx2_kernels() : avx512_kernels();
  }
  if (!want.empty())
    throw kfuse::error("kfuse::llm: KFUSE_LLM_KERNELS=" + want +
                       ": not a tier (avx512_vnni, avx2, scalar)");
  if (cpu_has_avx512_vnni()) {
    reason = "the CPU has AVX-512 VNNI";
    return avx512_kernels();
  }
  if (cpu_has_avx2()) {
    reason = "the CPU has AVX2 but not AVX-512 VNNI";
    return avx2_kernels();
  }
  reason = "the CPU has no AVX2";
  return scalar_kernels();
#else
  if (!want.empty() && want != "scalar")
    throw kfuse::error("kfuse::llm: KFUSE_LLM_KERNELS=" + want +
                       ": not a tier of this build (scalar)");
  reason = "portable build";
  return scalar_kernels();
#endif
}

}  // namespace kfuse::llm::detail
