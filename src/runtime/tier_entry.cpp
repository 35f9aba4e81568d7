// kfuse::runtime: the two entry points of one tier's object (src/CMakeLists.txt links each
// tier's objects into one and keeps only these symbols global). Named after the tier's per-ISA
// namespace: kfuse_tier_compile_isa_avx2, kfuse_tier_limits_isa_avx2.
#include <string>

#include "kfuse/graph/prebuilt_compile.hpp"
#include "kfuse/tools/machine_limits.hpp"

#define KFUSE_TIER_CAT2(a, b) a##b
#define KFUSE_TIER_CAT(a, b) KFUSE_TIER_CAT2(a, b)

// The graph, options and plan are the dispatcher's caller's (kfuse/runtime.hpp): the same
// layout in every per-ISA namespace.
extern "C" void KFUSE_TIER_CAT(kfuse_tier_compile_, KFUSE_ISA_NS)(const void* g, const void* o,
                                                                  void* out, const char* why) {
  *static_cast<kfuse::plan*>(out) = kfuse::detail::compile_prebuilt(
      *static_cast<const kfuse::graph*>(g), *static_cast<const kfuse::compile_options*>(o), why);
}

extern "C" void KFUSE_TIER_CAT(kfuse_tier_limits_, KFUSE_ISA_NS)(void* out) {
  *static_cast<kfuse::machine_limits*>(out) = kfuse::cached_machine_limits();
}
