// Compile-time probe: one fused gemm instantiation (bias, gelu, quantize to i8 in one pass).
#include <cstdint>
#include <vector>

#include "kfuse/kfuse.hpp"

int main() {
  using namespace kfuse;
  using G = gemm<f32, arch::native, epilogue<bias, gelu_tanh, quantize<i8>>>;
  const index_t M = 8, N = 16, K = 32;
  const std::vector<float> a(std::size_t(M * K), 0.5f), w(std::size_t(N * K), 0.25f);
  const std::vector<float> b(16, 0.1f);
  std::vector<std::int8_t> c(std::size_t(M * N));
  const auto packed = G::pack(w.data(), K, N, b_layout::nk);
  G::run(a.data(), M, K, packed, c.data(), N,
         epilogue<bias, gelu_tanh, quantize<i8>>{bias{b}, gelu_tanh{}, quantize<i8>{{0.1f, 0}}});
  return c[0] == 0;
}
