// Plans where inference really runs: the whole process pinned to one core (its own executable,
// so the default pool is created after the pinning and inherits it; ctest sets
// KFUSE_NUM_THREADS=4 so that pool oversubscribes the core), pools of 1..8 threads, several
// application threads replaying their own plans while a busy-loop thread competes, and one
// replay buffer used from two threads at once (a clear kfuse::error, never a race). Results are
// compared bitwise with one thread, f32 and int8. Correctness only: nothing here is timed.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif

#include "graph/graph_common.hpp"
#include "kfuse/tools/calibrate_graph.hpp"

using namespace kfuse;

namespace {

/// Pins the calling thread (and the threads it starts from now on) to the first CPU it may use.
void pin_to_one_cpu() {
#if defined(__linux__)
  const std::vector<int> cpus = affinity_cpus();
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpus.front(), &set);
  REQUIRE(sched_setaffinity(0, sizeof set, &set) == 0);
  REQUIRE(affinity_cpus().size() == 1);
#endif
}

template <class T>
std::vector<T> run(const plan& p, const std::vector<float>& x, std::size_t n_out) {
  std::vector<T> y(n_out);
  std::fill(y.begin(), y.end(), T(0x5A));  // poison
  auto r = p.record({bind(x)}, {bind(y)});
  r.replay();
  return y;
}

struct models {
  gt::mlp net{64};
  gt::cnn conv;
  graph mlp_f32 = net.build(), mlp_i8 = net.build(), cnn_f32 = conv.build();
  std::vector<float> x_mlp = gt::random_vec(std::size_t(64 * net.K), 21);
  std::vector<float> x_cnn =
      gt::random_vec(std::size_t(gt::cnn::N * gt::cnn::C * gt::cnn::H * gt::cnn::W), 22);
  models() {
    // int8: calibrate the linear layers' inputs on the sample itself.
    const std::vector<tensor_id> t = {mlp_i8.find("x"), mlp_i8.find("gelu1"), mlp_i8.find("relu")};
    const std::vector<std::vector<float>> samples = {x_mlp};
    apply_calibration(mlp_i8, calibrate_graph(mlp_i8, t, samples));
  }
  std::size_t mlp_out() const { return std::size_t(64 * net.N); }
  static std::size_t cnn_out() { return std::size_t(gt::cnn::N * gt::cnn::K); }
};

const models& the_models() {
  static const models m;
  return m;
}

}  // namespace

TEST_CASE("threading: pinned to one core, pools of 1..8 threads give one thread's results",
          "[graph][threads][pinned]") {
  pin_to_one_cpu();
  const models& m = the_models();
  const auto f1 = run<float>(compile(m.mlp_f32, {.threads = 1}), m.x_mlp, m.mlp_out());
  const auto q1 =
      run<float>(compile(m.mlp_i8, {.threads = 1, .prec = precision::int8}), m.x_mlp, m.mlp_out());
  const auto c1 = run<float>(compile(m.cnn_f32, {.threads = 1}), m.x_cnn, m.cnn_out());
  REQUIRE(gt::bitwise_equal(f1, m.net.direct(m.x_mlp)));
  for (int n = 1; n <= 8; ++n) {
    INFO("pool of " << n << " threads on one core");
    gt::pool_executor pe(n);
    const executor ex = pe.get();
    const compile_options split{.threads = n, .fork_join_ns = 0, .exec = &ex};
    for (int rep = 0; rep < 3; ++rep) {
      CHECK(gt::bitwise_equal(run<float>(compile(m.mlp_f32, split), m.x_mlp, m.mlp_out()), f1));
      compile_options i8 = split;
      i8.prec = precision::int8;
      CHECK(gt::bitwise_equal(run<float>(compile(m.mlp_i8, i8), m.x_mlp, m.mlp_out()), q1));
      CHECK(gt::bitwise_equal(run<float>(compile(m.cnn_f32, split), m.x_cnn, m.cnn_out()), c1));
    }
  }
  // The default pool, created now: pinned too (KFUSE_NUM_THREADS from ctest oversubscribes it).
  INFO(default_pool().size_reason());
  const compile_options all{.fork_join_ns = 0};
  for (int rep = 0; rep < 20; ++rep) {
    CHECK(gt::bitwise_equal(run<float>(compile(m.mlp_f32, all), m.x_mlp, m.mlp_out()), f1));
    CHECK(gt::bitwise_equal(run<float>(compile(m.cnn_f32, all), m.x_cnn, m.cnn_out()), c1));
  }
  // The measured split cost (whatever it is here) only changes which nodes are split.
  CHECK(gt::bitwise_equal(run<float>(compile(m.mlp_f32, {}), m.x_mlp, m.mlp_out()), f1));
}

TEST_CASE("threading: application threads replay their own plans while a busy loop competes",
          "[graph][threads]") {
  const models& m = the_models();
  const auto f1 = run<float>(compile(m.mlp_f32, {.threads = 1}), m.x_mlp, m.mlp_out());
  const auto c1 = run<float>(compile(m.cnn_f32, {.threads = 1}), m.x_cnn, m.cnn_out());
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> spins{0};
  std::thread busy([&] {
    while (!stop.load(std::memory_order_relaxed)) spins.fetch_add(1, std::memory_order_relaxed);
  });
  std::atomic<int> bad{0};
  std::vector<std::thread> apps;
  for (int t = 0; t < 3; ++t)
    apps.emplace_back([&, t] {
      const bool is_mlp = t % 2 == 0;
      const plan p = compile(is_mlp ? m.mlp_f32 : m.cnn_f32, {.fork_join_ns = 0});
      const auto& x = is_mlp ? m.x_mlp : m.x_cnn;
      std::vector<float> y((is_mlp ? f1 : c1).size());
      auto r = p.record({bind(x)}, {bind(y)});
      for (int i = 0; i < 40; ++i) {
        std::fill(y.begin(), y.end(), std::nanf(""));
        r.replay();
        if (!gt::bitwise_equal(y, is_mlp ? f1 : c1)) ++bad;
      }
    });
  for (auto& a : apps) a.join();
  stop = true;
  busy.join();
  CHECK(bad.load() == 0);
}

TEST_CASE("threading: one replay buffer used from two threads at once is an error",
          "[graph][threads]") {
  // A custom node that holds the first replay inside it until the second thread has tried.
  struct gate {
    std::mutex m;
    std::condition_variable cv;
    bool entered = false, release = false;
  };
  auto g8 = std::make_shared<gate>();
  graph g;
  auto x = g.input("x", {4});
  auto y = g.custom("hold", {x},
                    make_custom_op(
                        [g8](const void* const* in, void* out) {
                          std::unique_lock<std::mutex> lock(g8->m);
                          g8->entered = true;
                          g8->cv.notify_all();
                          g8->cv.wait(lock, [&] { return g8->release; });
                          for (int i = 0; i < 4; ++i)
                            static_cast<float*>(out)[i] = static_cast<const float*>(in[0])[i] + 1;
                        },
                        {4}));
  g.output(y);
  const plan p = compile(g, {.threads = 1});
  std::vector<float> xv = {1, 2, 3, 4}, yv(4, 0.f), other(4, 0.f);
  auto r = p.record({bind(xv)}, {bind(yv)});
  std::thread first([&] { r.replay(); });
  {
    std::unique_lock<std::mutex> lock(g8->m);
    g8->cv.wait(lock, [&] { return g8->entered; });
  }
  CHECK_THROWS_WITH(r.replay(), Catch::Contains("already in use on another thread"));
  CHECK_THROWS_WITH(r.bind_output(0, other.data(), other.size()),
                    Catch::Contains("already in use on another thread"));
  {
    const std::lock_guard<std::mutex> lock(g8->m);
    g8->release = true;
  }
  g8->cv.notify_all();
  first.join();
  CHECK(yv == std::vector<float>({2, 3, 4, 5}));
  // Free again: the same thread, or another, may replay it now.
  {
    const std::lock_guard<std::mutex> lock(g8->m);
    g8->entered = false;
  }
  std::thread([&] { r.replay(); }).join();
  CHECK(yv == std::vector<float>({2, 3, 4, 5}));
  // Distinct buffers of one plan on two threads at once: fine.
  std::vector<float> y2(4, 0.f);
  auto r2 = p.record({bind(xv)}, {bind(y2)});
  std::thread a([&] { r.replay(); }), b([&] { r2.replay(); });
  a.join();
  b.join();
  CHECK(y2 == std::vector<float>({2, 3, 4, 5}));
  // Bad thread options are errors.
  CHECK_THROWS_WITH(compile(g, {.threads = -4}),
                    Catch::Contains("threads = -4: must be >= 1, or 0 for the default"));
  CHECK_THROWS_WITH(compile(g, {.fork_join_ns = std::nan("")}),
                    Catch::Contains("fork_join_ns is NaN"));
  // A default-constructed or moved-from buffer: an error, not a crash.
  replay_buffer empty;
  CHECK_THROWS_WITH(empty.replay(), Catch::Contains("empty replay buffer"));
  CHECK_THROWS_WITH(empty.bind_input(0, xv.data(), xv.size()),
                    Catch::Contains("empty replay buffer"));
  replay_buffer moved = std::move(r2);
  CHECK_THROWS_WITH(r2.replay(), Catch::Contains("empty replay buffer"));
}
