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

TEST_CASE("replay: convolutions and pooling take their scratch from the plan's arena",
          "[graph][threads]") {
  // NCHW 3x3 conv (padded bands), depthwise (padded rows), max / average pooling (padded rows)
  // and an NHWC conv (padded input rows): each used to allocate or keep thread-local scratch.
  for (auto layout : {tensor_layout::nchw, tensor_layout::nhwc}) {
    graph g;
    auto x = g.input("x", {2, 3, 12, 12}, dtype::f32, layout);
    const auto w1 = gt::random_vec(8 * 3 * 9, 4), wd = gt::random_vec(8 * 9, 5);
    conv2d_params p;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = 1;
    auto c1 = g.relu("r1", g.conv2d("c1", x, g.constant("w1", {8, 3, 3, 3}, w1.data()), {}, p));
    conv2d_params dp = p;
    dp.groups = 8;
    auto d = g.conv2d("dw", c1, g.constant("wd", {8, 1, 3, 3}, wd.data()), {}, dp);
    pool2d_params mp{pool_kind::max, 3, 3, 2, 2, 1, 1, 1, 1};
    pool2d_params ap{pool_kind::avg, 2, 2, 1, 1};
    g.output(g.pool2d("avg", g.pool2d("max", d, mp), ap));
    for (int threads : {1, 2}) {
      INFO("layout " << int(layout) << " threads " << threads);
      const plan pl = compile(g, {.threads = threads, .fork_join_ns = 0});
      if (layout == tensor_layout::nchw) CHECK(pl.workspace_bytes() > 0);
      CHECK(pl.arena_bytes() >= pl.workspace_bytes());
      const auto xv = gt::random_vec(std::size_t(2 * 3 * 12 * 12), 6);
      std::vector<float> y(std::size_t(shape_numel(pl.output(0).shape))), e(y.size());
      auto r = pl.record({bind(xv)}, {bind(y)});
      CHECK(allocations_during(10, [&] { r.replay(); }) == 0);
      pl.run({bind(xv)}, {bind(e)});  // eager: fresh scratch per command
      CHECK(gt::bitwise_equal(y, e));
    }
  }
}
