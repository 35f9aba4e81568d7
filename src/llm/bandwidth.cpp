#include "kfuse/llm/bandwidth.hpp"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kfuse/threading/thread_pool.hpp"
#include "panels.hpp"

namespace kfuse::llm {

namespace {
// Eight independent sums: enough loads in flight to stream at the memory's rate.
std::uint64_t sum_words(const std::uint64_t* p, std::int64_t n) {
  std::uint64_t s[8] = {};
  for (std::int64_t i = 0; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) s[k] += p[i + k];
  return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}
}  // namespace

double probe_read_bandwidth(int threads) {
  constexpr std::int64_t bytes = std::int64_t(256) << 20;
  constexpr std::int64_t words = bytes / 8;
  auto buf = detail::allocate_aligned(std::size_t(bytes));
  auto* w = reinterpret_cast<std::uint64_t*>(buf.get());
  thread_pool pool = threads > 0 ? thread_pool(threads) : thread_pool();
  constexpr std::int64_t chunk = std::int64_t(1) << 17;  // 1 MiB of words per chunk
  pool.parallel_for(0, words / chunk, 1, [&](range r, int) {
    for (std::int64_t c = r.begin; c < r.end; ++c)
      std::memset(w + c * chunk, int(c & 0xff), std::size_t(chunk) * 8);
  });
  double best = 0;
  volatile std::uint64_t sink = 0;
  for (int pass = 0; pass < 5; ++pass) {
    std::vector<std::uint64_t> partial(std::size_t(pool.size()), 0);
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(0, words / chunk, 1, [&](range r, int worker) {
      for (std::int64_t c = r.begin; c < r.end; ++c)
        partial[std::size_t(worker)] += sum_words(w + c * chunk, chunk);
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (auto v : partial) sink = sink + v;
    if (s > 0 && double(bytes) / s / 1e9 > best) best = double(bytes) / s / 1e9;
  }
  return best;
}

}  // namespace kfuse::llm
