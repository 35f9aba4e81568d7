// 03_dispatch: one binary with the kernel compiled for every arch; kfuse::dispatch picks the
// best one the CPU running it supports. This TU is built without -march flags (the generic
// tier): it holds no vector code and only calls the per-arch instantiations.
//
// Every arch the CPU supports is also run and checked against the generic (scalar) result.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "chain.hpp"

namespace {

constexpr kfuse::dims4 dims{1, 16, 20, 20};

struct result {
  std::string arch, impl;
  long long checksum = 0;
  int max_diff = 0;
};

template <class A, class... Rest>
void run_supported(kfuse::arch::list<A, Rest...>, const std::vector<float>& x,
                   const std::vector<float>& bias, const std::vector<std::int8_t>& want,
                   std::vector<result>& out) {
  if (kfuse::cpu_supports<A>()) {
    std::vector<std::int8_t> y(x.size());
    const kfuse::run_info info = chain_kernel{}(A{}, x.data(), y.data(), dims, bias.data());
    result r{std::string(info.arch), info.impl};
    for (std::size_t i = 0; i < y.size(); ++i) {
      r.checksum += y[i];
      r.max_diff = std::max(r.max_diff, std::abs(int(y[i]) - int(want[i])));
    }
    out.push_back(r);
  }
  if constexpr (sizeof...(Rest) > 0)
    run_supported(kfuse::arch::list<Rest...>{}, x, bias, want, out);
}

}  // namespace

int main() {
  const std::size_t n = std::size_t(kfuse::numel(dims));
  std::vector<float> x(n), bias(std::size_t(dims.c));
  for (std::size_t i = 0; i < n; ++i) x[i] = float(int(i * 37 % 256) - 128) / 40.f;
  for (std::size_t c = 0; c < bias.size(); ++c) bias[c] = float(int(c % 5) - 2) / 8.f;

  std::vector<std::int8_t> want(n);
  chain_kernel{}(kfuse::arch::generic{}, x.data(), want.data(), dims, bias.data());

  // The dispatcher: the first arch of the list (best first) that this CPU runs.
  std::vector<std::int8_t> y(n);
  const kfuse::run_info info =
      kfuse::dispatch(kfuse::arch::all{}, chain_kernel{}, x.data(), y.data(), dims, bias.data());
  std::printf("best arch for this CPU: %s\n",
              std::string(kfuse::best_arch_name(kfuse::arch::all{})).c_str());
  std::printf("dispatched: arch %s, impl %s\n", std::string(info.arch).c_str(), info.impl);

  std::vector<result> results;
  run_supported(kfuse::arch::all{}, x, bias, want, results);
  bool ok = info.arch == kfuse::best_arch_name(kfuse::arch::all{});
  std::printf("%-13s %-18s %9s %9s  %s\n", "arch", "impl", "checksum", "max|diff|", "ok");
  for (const result& r : results) {
    // Vector and scalar float paths may differ by one unit at the quantizer's .5 boundaries.
    const bool good = r.max_diff <= 1;
    ok = ok && good;
    std::printf("%-13s %-18s %9lld %9d  %s\n", r.arch.c_str(), r.impl.c_str(), r.checksum,
                r.max_diff, good ? "yes" : "NO");
  }
  std::printf("result: %s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
