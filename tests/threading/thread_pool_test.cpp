// thread_pool / parallel_for: coverage of every index exactly once, worker indices, the caller
// as worker 0, nested calls inline, concurrent callers, max_threads, exceptions, and clean
// destruction. Built once (not per arch); meant to run clean under ThreadSanitizer.
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif

#include "support/test_support.hpp"

using kfuse::index_t;
using kfuse::range;
using kfuse::thread_pool;

namespace {

struct combo {
  index_t begin, end, grain;
};

const combo combos[] = {
    {0, 0, 1},    {5, 5, 3},    {7, 3, 1},      {0, 1, 1},     {0, 1, 100},      {0, 10, 0},
    {0, 10, -4},  {0, 10, 1},   {0, 10, 3},     {0, 10, 10},   {0, 10, 11},      {-17, 23, 4},
    {3, 1000, 1}, {0, 1000, 7}, {0, 1000, 999}, {0, 4096, 64}, {100, 20000, 13},
};

/// Runs one parallel_for and checks: each index once, ranges of whole chunks of `grain`, worker
/// indices in [0, limit), the same worker index always on the same thread.
void check_cover(thread_pool& pool, const combo& k, int max_threads) {
  INFO("pool " << pool.size() << " begin " << k.begin << " end " << k.end << " grain " << k.grain
               << " max_threads " << max_threads);
  const index_t n = std::max<index_t>(0, k.end - k.begin);
  std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
  std::mutex m;
  std::vector<std::thread::id> thread_of(8);
  std::vector<std::set<std::thread::id>> seen(8);
  std::atomic<bool> bad_range{false}, bad_worker{false};
  const index_t g = std::max<index_t>(k.grain, 1);
  const int limit = max_threads > 0 ? std::min(max_threads, pool.size()) : pool.size();
  pool.parallel_for(
      k.begin, k.end, k.grain,
      [&](range r, int w) {
        // A range is whole chunks: it starts on a chunk boundary and ends on one or at `end`
        // (a call that runs on the caller alone may get every chunk at once).
        if (r.begin < k.begin || r.end > k.end || r.size() <= 0 || (r.begin - k.begin) % g != 0 ||
            (r.end != k.end && (r.end - k.begin) % g != 0))
          bad_range = true;
        if (w < 0 || w >= limit) {
          bad_worker = true;
          return;
        }
        {
          const std::lock_guard<std::mutex> lock(m);
          seen[std::size_t(w)].insert(std::this_thread::get_id());
        }
        for (index_t i = r.begin; i < r.end; ++i) hits[std::size_t(i - k.begin)]++;
      },
      max_threads);
  CHECK_FALSE(bad_range);
  CHECK_FALSE(bad_worker);
  for (index_t i = 0; i < n; ++i) REQUIRE(hits[std::size_t(i)].load() == 1);
  for (const auto& s : seen) CHECK(s.size() <= 1);
  // the caller is worker 0
  if (!seen[0].empty()) CHECK(*seen[0].begin() == std::this_thread::get_id());
}

}  // namespace

TEST_CASE("parallel_for visits every index exactly once", "[threads]") {
  for (int size = 1; size <= 4; ++size) {
    thread_pool pool(size);
    CHECK(pool.size() == size);
    for (const combo& k : combos)
      for (int max_threads : {0, 1, 2, 3, 4, 7}) check_cover(pool, k, max_threads);
  }
}

TEST_CASE("parallel_for: the caller is worker 0 and takes part", "[threads]") {
  thread_pool pool(4);
  const auto me = std::this_thread::get_id();
  for (int rep = 0; rep < 50; ++rep) {
    std::mutex m;
    std::set<std::thread::id> threads;
    std::atomic<int> zero_on_caller{0}, zero_elsewhere{0};
    pool.parallel_for(0, 64, 1, [&](range, int w) {
      const auto id = std::this_thread::get_id();
      if (w == 0) (id == me ? zero_on_caller : zero_elsewhere)++;
      // a little work so that the helpers join in
      std::this_thread::sleep_for(std::chrono::microseconds(50));
      const std::lock_guard<std::mutex> lock(m);
      threads.insert(id);
    });
    CHECK(zero_elsewhere.load() == 0);
    CHECK(zero_on_caller.load() >= 1);
    CHECK(threads.size() <= 4);
  }
  // a pool of one never leaves the caller
  thread_pool single(1);
  single.parallel_for(0, 1000, 1, [&](range, int w) {
    REQUIRE(w == 0);
    REQUIRE(std::this_thread::get_id() == me);
  });
}

TEST_CASE("parallel_for: the caller runs a prefix of the chunks, the helpers a suffix",
          "[threads]") {
  // Whatever the timing: the caller claims from the front, workers from the back, so each side's
  // chunks are contiguous (a thread keeps the same part of a layer from call to call).
  for (int threads : {2, 4}) {
    thread_pool pool(threads);
    for (int rep = 0; rep < 50; ++rep) {
      constexpr index_t n = 37;
      std::vector<int> by(n, -1);
      pool.parallel_for(0, n, 1, [&](range r, int w) {
        for (index_t i = r.begin; i < r.end; ++i) by[std::size_t(i)] = w;
        std::this_thread::sleep_for(std::chrono::microseconds(20));
      });
      index_t k = 0;
      while (k < n && by[std::size_t(k)] == 0) ++k;
      INFO("threads " << threads << " caller's prefix " << k);
      for (index_t i = k; i < n; ++i) CHECK(by[std::size_t(i)] > 0);
    }
  }
}

TEST_CASE("parallel_for: max_threads is respected", "[threads]") {
  thread_pool pool(4);
  for (int max_threads : {1, 2, 3}) {
    std::mutex m;
    std::set<std::thread::id> threads;
    std::set<int> workers;
    pool.parallel_for(
        0, 200, 1,
        [&](range, int w) {
          std::this_thread::sleep_for(std::chrono::microseconds(20));
          const std::lock_guard<std::mutex> lock(m);
          threads.insert(std::this_thread::get_id());
          workers.insert(w);
        },
        max_threads);
    CHECK(int(threads.size()) <= max_threads);
    CHECK(*workers.rbegin() < max_threads);
  }
}

TEST_CASE("parallel_for: nested calls run inline without deadlock", "[threads]") {
  for (int size : {1, 2, 4}) {
    thread_pool pool(size);
    std::vector<std::atomic<int>> hits(64 * 50);
    std::atomic<bool> wrong_thread{false}, wrong_worker{false};
    pool.parallel_for(0, 64, 1, [&](range outer, int w) {
      const auto id = std::this_thread::get_id();
      for (index_t o = outer.begin; o < outer.end; ++o)
        pool.parallel_for(0, 50, 3, [&](range inner, int w2) {
          if (std::this_thread::get_id() != id) wrong_thread = true;
          // inline on the same thread, under the same worker index (per-worker scratch safe)
          if (w2 != w) wrong_worker = true;
          for (index_t i = inner.begin; i < inner.end; ++i) hits[std::size_t(o * 50 + i)]++;
        });
    });
    CHECK_FALSE(wrong_thread);
    CHECK_FALSE(wrong_worker);
    for (auto& h : hits) REQUIRE(h.load() == 1);
  }
  // nesting through the default pool too
  std::atomic<index_t> sum{0};
  kfuse::parallel_for(0, 8, 1, [&](range r, int) {
    for (index_t i = r.begin; i < r.end; ++i)
      kfuse::parallel_for(0, 100, 10, [&](range q, int) {
        for (index_t j = q.begin; j < q.end; ++j) sum += j;
      });
  });
  CHECK(sum.load() == 8 * 4950);
}

TEST_CASE("parallel_for: concurrent callers on one pool get correct results", "[threads]") {
  thread_pool pool(3);
  constexpr int callers = 3, reps = 150;
  constexpr index_t n = 5000;
  std::vector<std::vector<index_t>> out(callers, std::vector<index_t>(n));
  std::atomic<bool> bad{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < callers; ++t)
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < reps; ++rep) {
        auto& o = out[std::size_t(t)];
        pool.parallel_for(0, n, 97, [&](range r, int w) {
          if (w < 0 || w >= pool.size()) bad = true;
          for (index_t i = r.begin; i < r.end; ++i) o[std::size_t(i)] = i * (t + 1) + rep;
        });
        for (index_t i = 0; i < n; ++i)
          if (o[std::size_t(i)] != i * (t + 1) + rep) bad = true;
      }
    });
  for (auto& th : threads) th.join();
  CHECK_FALSE(bad);
}

TEST_CASE("parallel_for: an exception in a body reaches the caller, the pool stays usable",
          "[threads]") {
  for (int size : {1, 2, 4}) {
    thread_pool pool(size);
    for (int thrower : {0, 17, 63}) {
      std::atomic<int> ran{0};
      CHECK_THROWS_WITH(pool.parallel_for(0, 64, 1,
                                          [&](range r, int) {
                                            ran++;
                                            if (r.begin <= thrower && thrower < r.end)
                                              throw std::runtime_error("boom");
                                          }),
                        "boom");
      CHECK(ran.load() >= 1);
      check_cover(pool, combo{0, 1000, 7}, 0);
    }
  }
}

TEST_CASE("thread_pool: construction and destruction are clean", "[threads]") {
  // destroyed at once, with workers possibly not started yet
  for (int rep = 0; rep < 50; ++rep) thread_pool pool(1 + rep % 4);
  // first job right after construction (a worker may start after the job is published)
  for (int rep = 0; rep < 50; ++rep) {
    thread_pool pool(2 + rep % 3);
    check_cover(pool, combo{0, 100, 1}, 0);
  }
  // destroyed while the workers are parked
  for (int rep = 0; rep < 3; ++rep) {
    thread_pool pool(4);
    check_cover(pool, combo{0, 1000, 10}, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  CHECK(kfuse::default_pool().size() >= 1);
  CHECK(kfuse::default_thread_count() >= 1);
}

TEST_CASE("thread_pool: default size is the cores it may use, and says why", "[threads]") {
  const int cores = kfuse::physical_core_count();
  CHECK(cores >= 1);
  CHECK(cores <= int(std::max(1u, std::thread::hardware_concurrency())));
  const kfuse::thread_budget b = kfuse::current_thread_budget();
  CHECK(kfuse::default_thread_count() == b.threads);
  const auto in = kfuse::current_cpu_budget_inputs();
  if (!in.env && !in.quota) CHECK(b.threads == cores);
  CHECK(kfuse::default_pool().size_reason().find(std::to_string(kfuse::default_pool().size()) +
                                                 " thread") == 0);
  thread_pool three(3);
  CHECK(three.size_reason() == "3 threads: asked for");
}

TEST_CASE("thread_pool: two threads on one core stay correct, late workers find nothing",
          "[threads]") {
#if defined(__linux__)
  // A thread pinned to one CPU; the pools it creates inherit the mask.
  std::thread([] {
    const auto cpus = kfuse::affinity_cpus();
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpus.front(), &set);
    REQUIRE(sched_setaffinity(0, sizeof set, &set) == 0);
    for (int size : {2, 3, 8}) {
      thread_pool pool(size);
      index_t calls = 0;
      std::atomic<bool> bad_worker{false};
      for (int rep = 0; rep < 200; ++rep) {
        // jobs of ~20-200 us: long enough for the pool to notice its workers are late
        const index_t n = 4 + rep % 7;
        std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
        pool.parallel_for(0, n, 1, [&](range r, int w) {
          if (w >= size) bad_worker = true;  // Catch's macros are not thread-safe
          const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
          while (std::chrono::steady_clock::now() < until) {
          }
          for (index_t i = r.begin; i < r.end; ++i) hits[std::size_t(i)]++;
        });
        ++calls;
        for (auto& h : hits) REQUIRE(h.load() == 1);
      }
      CHECK_FALSE(bad_worker.load());
      const kfuse::pool_stats s = pool.stats();
      // Every call either published a job or ran alone while oversubscribed (never timed).
      CHECK(index_t(s.jobs + s.solo_jobs) == calls);
      CHECK(s.missed_jobs <= s.jobs);
      INFO("jobs " << s.jobs << ", alone " << s.solo_jobs << ", missed " << s.missed_jobs);
      CHECK(pool.fork_join_ns() >= 0);
    }
  }).join();
#endif
}

namespace {
/// An executor that runs task i on a fresh std::thread (task 0 on the caller) and counts calls.
struct spawning {
  std::atomic<int> calls{0};
  std::atomic<int> tasks{0};
  kfuse::executor ex() {
    kfuse::executor e;
    e.context = this;
    e.concurrency = 3;
    e.run = [](void* ctx, int n, void (*task)(void*, int), void* arg) {
      auto& self = *static_cast<spawning*>(ctx);
      self.calls++;
      self.tasks += n;
      std::vector<std::thread> ts;
      for (int i = 1; i < n; ++i) ts.emplace_back(task, arg, i);
      task(arg, 0);
      for (auto& t : ts) t.join();
    };
    return e;
  }
};
}  // namespace

TEST_CASE("parallel_for: a user executor takes the pool's place", "[threads]") {
  spawning s;
  const kfuse::executor ex = s.ex();
  const int limit = kfuse::pool_threads(0);
  for (const combo& k : combos) {
    const index_t n = std::max<index_t>(0, k.end - k.begin);
    std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
    std::atomic<bool> bad_worker{false};
    {
      const kfuse::scoped_executor use(&ex);
      kfuse::parallel_for(k.begin, k.end, k.grain, [&](range r, int w) {
        if (w < 0 || w >= limit) bad_worker = true;
        for (index_t i = r.begin; i < r.end; ++i) hits[std::size_t(i - k.begin)]++;
        // nested: inline, on this task's worker index
        kfuse::parallel_for(0, 4, 1, [&](range, int inner) {
          if (inner != w) bad_worker = true;
        });
      });
    }
    CHECK_FALSE(bad_worker);
    for (index_t i = 0; i < n; ++i) REQUIRE(hits[std::size_t(i)].load() == 1);
  }
  if (limit >= 2) CHECK(s.calls > 0);
  // Outside the scope the pool runs the work again.
  const int before = s.calls;
  kfuse::parallel_for(0, 1000, 1, [](range, int) {});
  CHECK(s.calls == before);
  // Process-wide, and exceptions come back through it.
  kfuse::set_default_executor(&ex);
  CHECK_THROWS_AS(kfuse::parallel_for(0, 100, 1,
                                      [](range r, int) {
                                        if (r.begin == 50) throw std::runtime_error("boom");
                                      }),
                  std::runtime_error);
  std::atomic<index_t> sum{0};
  kfuse::parallel_for(0, 100, 7, [&](range r, int) {
    for (index_t i = r.begin; i < r.end; ++i) sum += i;
  });
  kfuse::set_default_executor(nullptr);
  CHECK(sum == 4950);
}
