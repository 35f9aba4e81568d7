// replay() makes no heap allocation on any thread: every global operator new / delete is
// replaced by a counting version; after a warm-up, N replays (and rebinding) must count zero.
// Not for the AddressSanitizer build (it replaces operator new itself): label no_asan.
#include <atomic>
#include <cstdlib>
#include <new>

#include "graph/graph_common.hpp"

namespace {
std::atomic<bool> armed{false};
std::atomic<long> allocations{0};

void* counted(std::size_t n, std::size_t align = 0) {
  if (armed.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  if (n == 0) n = 1;
  void* p = align > alignof(std::max_align_t)
                ? std::aligned_alloc(align, (n + align - 1) / align * align)
                : std::malloc(n);
  return p;
}
}  // namespace

void* operator new(std::size_t n) {
  if (void* p = counted(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = counted(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  if (void* p = counted(n, std::size_t(a))) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) {
  if (void* p = counted(n, std::size_t(a))) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted(n, std::size_t(a));
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted(n, std::size_t(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

using namespace kfuse;

namespace {
/// Allocations during `runs` calls of f, after two warm-up calls.
template <class F>
long allocations_during(int runs, F&& f) {
  f();
  f();
  allocations = 0;
  armed = true;
  for (int i = 0; i < runs; ++i) f();
  armed = false;
  return allocations.load();
}
}  // namespace

TEST_CASE("replay: no heap allocation on any thread", "[graph][threads]") {
  const gt::mlp net(32);
  for (int threads : {1, 2}) {
    INFO("threads=" << threads);
    const plan p = compile(net.build(), {.threads = threads, .fork_join_ns = 0});
    const auto xa = gt::random_vec(std::size_t(32 * net.K), 1), xb = gt::random_vec(xa.size(), 2);
    std::vector<float> y(std::size_t(32 * net.N));
    auto r = p.record({bind(xa)}, {bind(y)});
    CHECK(allocations_during(50, [&] { r.replay(); }) == 0);
    CHECK(allocations_during(20, [&] {
            r.bind_input(0, xb.data(), xb.size());
            r.replay();
            r.bind_input(0, xa.data(), xa.size());
          }) == 0);
    profiler_hook hook{nullptr,
                       [](void*, std::int32_t, std::int32_t, std::int64_t, std::int64_t) {}};
    CHECK(allocations_during(20, [&] { r.replay(hook); }) == 0);
    CHECK(gt::bitwise_equal(y, net.direct(xa)));
  }
  // Shape ops, casts and a long eltwise chain.
  graph g;
  auto x = g.input("x", {4, 3, 5, 5}, dtype::f32, tensor_layout::nchw);
  auto h = g.convert_layout("nhwc", x, tensor_layout::nhwc);
  auto f = g.flatten("flat", g.convert_layout("nchw", h, tensor_layout::nchw));
  auto c = g.concat("cat", {f, f}, 1);
  auto b = g.cast("cast", c, dtype::bf16);
  auto y = g.cast("back", b, dtype::f32);
  for (int i = 0; i < 100; ++i) y = g.relu("r" + std::to_string(i), y);
  g.output(y);
  const plan p = compile(g, {.threads = 2, .fuse = false, .fork_join_ns = 0});
  const auto xv = gt::random_vec(300, 3);
  std::vector<float> out(600);
  auto r = p.record({bind(xv)}, {bind(out)});
  CHECK(allocations_during(30, [&] { r.replay(); }) == 0);
}
