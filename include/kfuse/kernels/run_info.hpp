#pragma once
// What a kernel call reports about itself, so tests can assert the path they meant to test.
#include <string_view>

namespace kfuse {

struct run_info {
  std::string_view kernel;          // "eltwise", "gemm" ...
  std::string_view arch;            // the kfuse arch tag it was instantiated for
  const char* impl = "";            // the vector impl: "xsimd:avx512bw", "hwy:AVX3_DL", "scalar"
  std::string_view micro_kernel{};  // the inner loop that ran (e.g. "vdpbf16ps 16x4")
  int threads = 1;                  // threads that took part
};

/// Per-call options shared by kernels.
struct run_options {
  int threads = 0;  // 0: every thread of the pool, N > 0: at most N; negative: kfuse::error
};

}  // namespace kfuse
