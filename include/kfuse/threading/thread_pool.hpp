#pragma once
// A persistent thread pool: thread_pool::parallel_for(begin, end, grain, fn(range, worker)).
//
// Work is claimed, never assigned. The caller (worker 0) publishes a job and runs chunks itself,
// claiming them from the front of the range; workers that are awake join the open job and claim
// chunks from its back. So with two threads each runs a contiguous half that stays on the same
// core from one call to the next (a small layer's rows, interleaved chunk by chunk, had both
// cores fetch every input row and each output line bounce between them: a 10 us depthwise ran
// slower on two threads than on one), and a helper that is late leaves the caller only the
// chunks it never claimed. When every chunk is claimed the caller closes the job: from then on no
// worker can join, and the caller waits only for the chunks that joined workers are running. It
// never waits for a worker that has not started: a worker that wakes late finds the job closed and
// goes back to waiting. So the cost of a parallel_for is never more than running it alone plus the
// last chunk a helper holds.
//
// Waiting (backoff.hpp): idle workers spin with pause, then with sched_yield, then park on a
// futex; a spinning thread that finds itself descheduled stops spinning. The caller counts the
// jobs where helpers could not help (none joined in time, or the one that joined was descheduled
// mid-chunk and kept the caller waiting): after two in a row the pool is oversubscribed - two
// threads on one core (taskset, a CPU quota, a busy neighbour) - and runs jobs on the caller
// alone for a back-off period (1 ms, doubling up to 128 ms while it stays so), then tries its
// workers again. Two threads on one core cost about one thread's time.
//
// One job runs at a time: a parallel_for issued while the pool is busy (another application
// thread) runs on the calling thread alone, as worker 0, so the pool never oversubscribes cores.
// A nested parallel_for (from inside a body running on this pool) runs inline and keeps the
// worker index of the thread it runs on, so per-worker scratch indexed by it is never shared by
// two threads. An exception thrown by a body stops the hand-out of chunks and is rethrown by
// parallel_for once every thread has left the job (the first one wins when several throw).
//
// Default size (cpu_budget.hpp): the physical cores in the affinity mask, capped by a cgroup CPU
// quota; KFUSE_NUM_THREADS overrides it. size_reason() says why.
//
// parallel_for (parallel_for.hpp) runs on this pool unless a user-supplied executor takes its
// place.
//
// Several application threads at once: each parallel_for either owns the pool or runs inline
// on its caller; with N application threads replaying plans concurrently, at most one of them
// uses the pool's workers at a time, the others compute on their own threads. The total number
// of busy threads is therefore at most N + pool size - 1, never N x pool size.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "kfuse/config/macros.hpp"
#include "kfuse/error.hpp"
#include "kfuse/threading/backoff.hpp"
#include "kfuse/threading/cpu_budget.hpp"
#include "kfuse/types/elem.hpp"

namespace kfuse {
/// A half-open range of work items handed to one call of a parallel_for body.
struct range {
  index_t begin = 0;
  index_t end = 0;
  index_t size() const noexcept { return end - begin; }
};
}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

/// Physical cores this process may run on (the affinity mask's cores; see cpu_budget.hpp).
inline int physical_core_count() { return physical_cores_of(affinity_cpus()); }

/// Threads to use by default: KFUSE_NUM_THREADS if valid, else the cores in the affinity mask
/// capped by the cgroup quota (current_thread_budget() says why).
inline int default_thread_count() { return current_thread_budget().threads; }

namespace detail {
/// Idle workers: pause for 20 us, then yield until 100 us after their last job, then park.
/// Parking is a futex, and in a VM a futex wake-up takes 10-90 us (the sleeper's vCPU may have
/// halted), while the nodes of a replayed plan arrive microseconds apart.
inline constexpr backoff_window idle_window{std::chrono::microseconds(20),
                                            std::chrono::microseconds(100)};
/// The caller waiting for chunks its helpers hold: pause 2 us (a balanced job ends together),
/// then yield (the helper may share this core) up to 1 ms, then park.
inline constexpr backoff_window join_window{std::chrono::microseconds(2),
                                            std::chrono::microseconds(1000)};
/// Oversubscription: a job where no helper joined although the caller was busy this long (a
/// spinning worker on a free core joins within ~1 us; a parked one within a futex wake-up).
inline constexpr std::chrono::microseconds late_after_spinning{20}, late_after_parked{150};
/// The first and the longest period the pool runs jobs on the caller alone once oversubscribed.
inline constexpr std::chrono::microseconds solo_first{1000}, solo_longest{128000};
}  // namespace detail

/// Counters of a pool's jobs (diagnostics and tests).
struct pool_stats {
  std::uint64_t jobs = 0;          // parallel_for calls that published a job to the workers
  std::uint64_t solo_jobs = 0;     // calls run on the caller alone while oversubscribed
  std::uint64_t missed_jobs = 0;   // jobs where the helpers could not help:
  std::uint64_t late_jobs = 0;     //   none joined in time
  std::uint64_t stalled_jobs = 0;  //   one kept the caller waiting (descheduled mid-chunk)
  std::uint64_t solo_periods = 0;  // times the pool found itself oversubscribed
  std::uint64_t parks = 0;         // times a worker parked (each costs a wake-up later)
  std::uint64_t wakes = 0;         // jobs whose caller made the wake-up system call
};

class thread_pool {
 public:
  /// `threads` counts the calling thread: thread_pool(2) starts one worker.
  explicit thread_pool(int threads)
      : thread_pool(thread_budget{checked_size(threads),
                                  std::to_string(std::max(1, threads)) + " threads: asked for",
                                  {}}) {}
  /// The default size (current_thread_budget()); prints KFUSE_NUM_THREADS's warning, if any.
  thread_pool() : thread_pool(current_thread_budget()) {}
  explicit thread_pool(thread_budget b) : threads_(std::max(1, b.threads)), reason_(b.reason) {
    if (!b.warning.empty()) std::fprintf(stderr, "%s\n", b.warning.c_str());
    for (int w = 1; w < threads_; ++w) workers_.emplace_back([this, w] { worker_loop(w); });
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  ~thread_pool() {
    stop_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_seq_cst);
    generation_.notify_all();
    for (auto& t : workers_) t.join();
  }

  int size() const noexcept { return threads_; }
  /// Why the pool has this size, in one line ("1 thread: 1 core in the affinity mask of 2
  /// online; no cgroup quota").
  const std::string& size_reason() const noexcept { return reason_; }
  pool_stats stats() const {
    const std::lock_guard<std::mutex> lock(job_mutex_);
    pool_stats s = stats_;
    s.parks = parks_.load(std::memory_order_relaxed);
    return s;
  }

  /// What splitting a node over two threads costs, in ns: a job of two chunks of 10 us of
  /// spinning each, minus 10 us (median of 15, measured once, on first use). On an idle machine
  /// ~1 us; on an oversubscribed one up to 10 us (the caller ran both chunks), so plans compiled
  /// there keep small nodes on the calling thread.
  double fork_join_ns() {
    std::call_once(fork_join_once_, [this] { fork_join_ns_ = measure_fork_join(); });
    return fork_join_ns_;
  }

  /// Calls fn(range, worker) over [begin, end) in chunks of `grain` items, on at most
  /// max_threads threads (0: all). Returns when every chunk is done.
  template <class F>
  void parallel_for(index_t begin, index_t end, index_t grain, F&& fn, int max_threads = 0) {
    if (end <= begin) return;
    if (current_pool_ == this) {  // nested: inline, on this thread's worker index
      fn(range{begin, end}, current_worker_);
      return;
    }
    // At most 2^30 chunks: claim()'s 32-bit halves.
    grain = std::max<index_t>({grain, 1, (end - begin + (index_t(1) << 30) - 1) >> 30});
    const index_t chunks = (end - begin + grain - 1) / grain;
    int want = max_threads > 0 ? std::min(max_threads, threads_) : threads_;
    want = int(std::min<index_t>(want, chunks));
    std::unique_lock<std::mutex> busy(job_mutex_, std::defer_lock);
    if (want <= 1 || !busy.try_lock()) {
      run_alone(fn, begin, end);
      return;
    }
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    if (solo_.load(std::memory_order_relaxed)) {
      if (t0 < solo_until_) {
        ++stats_.solo_jobs;
        run_alone(fn, begin, end);
        return;
      }
      solo_.store(false, std::memory_order_relaxed);  // try the workers again
    }
    using Fn = std::remove_reference_t<F>;
    job_ = job{begin, end, grain, chunks, want, &fn, [](void* f, range r, int w) {
                 (*static_cast<Fn*>(f))(r, w);
               }};
    claims_.store(std::uint64_t(chunks) << 32, std::memory_order_relaxed);  // front 0, back chunks
    helped_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    ++stats_.jobs;
    // Open the job: workers that CAS-join it (acquire) see job_ as written above.
    state_.store(std::uint64_t(++seq_) << 32 | open_bit, std::memory_order_release);
    // seq_cst pairs with the workers' (sleepers_ then generation_): either a worker sees the new
    // generation before it parks, or this thread sees it parked and wakes it. The wake-up is a
    // system call, made only when needed.
    generation_.fetch_add(1, std::memory_order_seq_cst);
    const bool parked = sleepers_.load(std::memory_order_seq_cst) != 0;
    if (parked) {
      ++stats_.wakes;
      generation_.notify_all();
    }
    run_chunks(0);
    const auto t1 = clock::now();
    // Close it: no worker joins from here on; wait for those inside (their chunks only).
    const std::uint64_t prev = state_.fetch_and(~open_bit, std::memory_order_acq_rel);
    if ((prev & active_mask) != 0) wait_for_helpers();
    judge(t1 - t0, clock::now() - t1, parked);
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  static int checked_size(int threads) {
    if (threads < 0)
      throw error("thread_pool: threads = " + std::to_string(threads) +
                  " (0 or 1: the calling thread alone, N > 1: N - 1 workers)");
    return std::max(1, threads);
  }

  struct job {
    index_t begin, end, grain, chunks;
    int threads;
    void* fn;
    void (*call)(void*, range, int);
  };
  // state_: [job sequence number : 32][open : 1][workers inside the job : 31].
  static constexpr std::uint64_t open_bit = std::uint64_t(1) << 31;
  static constexpr std::uint64_t active_mask = open_bit - 1;

  // Marks the calling thread as running a body of this pool, as `worker`, for nested calls.
  struct inside {
    const thread_pool* saved_pool;
    int saved_worker;
    inside(const thread_pool* p, int w) : saved_pool(current_pool_), saved_worker(current_worker_) {
      current_pool_ = p;
      current_worker_ = w;
    }
    ~inside() {
      current_pool_ = saved_pool;
      current_worker_ = saved_worker;
    }
  };

  template <class F>
  void run_alone(F& fn, index_t begin, index_t end) {
    const inside scope(this, 0);
    fn(range{begin, end}, 0);
  }

  /// The next unclaimed chunk, from the front (the caller) or the back (workers), or -1: one
  /// atomic add on claims_ ([back : 32][front : 32], signed halves), which hands out each chunk
  /// of [front, back) once. A failed claim moves its end past the other (by one per thread:
  /// each stops at its first failure), which keeps the range empty.
  index_t claim(bool front) {
    const std::uint64_t was =
        front ? claims_.fetch_add(1, std::memory_order_relaxed)
              : claims_.fetch_sub(std::uint64_t(1) << 32, std::memory_order_relaxed);
    const auto f = std::int32_t(std::uint32_t(was)), b = std::int32_t(std::uint32_t(was >> 32));
    return f < b ? (front ? f : b - 1) : -1;
  }

  /// Claims and runs chunks until none is left; returns how many it ran.
  index_t run_chunks(int worker) {
    const job& j = job_;
    const inside scope(this, worker);
    for (index_t ran = 0;; ++ran) {
      const index_t c = claim(worker == 0);
      if (c < 0) return ran;
      const index_t b = j.begin + c * j.grain;
      try {
        j.call(j.fn, range{b, std::min(j.end, b + j.grain)}, worker);
      } catch (...) {
        {
          const std::lock_guard<std::mutex> lock(error_mutex_);
          if (!error_) error_ = std::current_exception();
        }
        // Hand out no more chunks: front = chunks, back = 0.
        claims_.store(std::uint64_t(j.chunks), std::memory_order_relaxed);
        return ran + 1;
      }
    }
  }

  void wait_for_helpers() {
    auto done = [&] { return (state_.load(std::memory_order_acquire) & active_mask) == 0; };
    if (detail::spin_until(done, detail::join_window)) return;
    unsigned w = caller_wake_.load(std::memory_order_seq_cst);
    caller_parked_.store(true, std::memory_order_seq_cst);
    while ((state_.load(std::memory_order_seq_cst) & active_mask) != 0) {
      caller_wake_.wait(w, std::memory_order_seq_cst);
      w = caller_wake_.load(std::memory_order_seq_cst);
    }
    caller_parked_.store(false, std::memory_order_relaxed);
  }

  /// After a job: did the helpers help? Two misses in a row: oversubscribed, run alone a while.
  void judge(std::chrono::steady_clock::duration busy, std::chrono::steady_clock::duration waited,
             bool were_parked) {
    const auto late = were_parked ? detail::late_after_parked : detail::late_after_spinning;
    const bool helped = helped_.load(std::memory_order_relaxed) != 0;
    const bool nobody = !helped && busy > late;
    const bool stalled = waited > 2 * busy + late;
    // A job shorter than a parked worker's wake-up that ran alone says nothing: counted as a
    // success, the first job after each solo period (its workers parked) would halve the period
    // and reset the misses, and two threads on one core would pay a wake-up and a spinning
    // worker every 1 ms (an MLP replay at 1.28x its one-thread time).
    if (were_parked && !helped && busy <= late && !stalled) return;
    if (!nobody && !stalled) {
      misses_ = 0;
      solo_period_ = std::max(detail::solo_first, solo_period_ / 2);
      return;
    }
    ++stats_.missed_jobs;
    stats_.late_jobs += nobody;
    stats_.stalled_jobs += stalled;
    if (++misses_ < 2) return;
    misses_ = 0;
    ++stats_.solo_periods;
    solo_until_ = std::chrono::steady_clock::now() + solo_period_;
    solo_period_ = std::min(detail::solo_longest, solo_period_ * 2);
    solo_.store(true, std::memory_order_relaxed);  // spinning workers park at once
  }

  void worker_loop(int w) {
    // Workers start in the constructor, before any job: generation 0. Reading generation_ here
    // instead would lose a job published before this thread first ran.
    unsigned seen = 0;
    std::uint32_t last_job = 0;
    for (;;) {
      unsigned now = seen;
      auto changed = [&] { return (now = generation_.load(std::memory_order_acquire)) != seen; };
      if (!detail::spin_until(changed, detail::idle_window,
                              [&] { return solo_.load(std::memory_order_relaxed); })) {
        parks_.fetch_add(1, std::memory_order_relaxed);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        generation_.wait(seen, std::memory_order_seq_cst);
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
        now = generation_.load(std::memory_order_acquire);
      }
      seen = now;
      if (stop_.load(std::memory_order_relaxed)) return;
      // Join the open job, if it is one this worker has not been in.
      std::uint64_t s = state_.load(std::memory_order_acquire);
      bool joined = false;
      while ((s & open_bit) != 0 && std::uint32_t(s >> 32) != last_job && !joined)
        joined = state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel,
                                              std::memory_order_acquire);
      if (!joined) continue;  // late: the caller did it all
      last_job = std::uint32_t(s >> 32);
      if (w < job_.threads && run_chunks(w) > 0) helped_.fetch_add(1, std::memory_order_relaxed);
      const std::uint64_t prev = state_.fetch_sub(1, std::memory_order_seq_cst);
      if ((prev & active_mask) == 1 && (prev & open_bit) == 0 &&
          caller_parked_.load(std::memory_order_seq_cst)) {
        caller_wake_.fetch_add(1, std::memory_order_seq_cst);
        caller_wake_.notify_one();
      }
    }
  }

  double measure_fork_join() {
    if (threads_ < 2) return 0;
    using clock = std::chrono::steady_clock;
    constexpr auto chunk = std::chrono::microseconds(10);
    std::vector<double> ns;
    for (int rep = 0; rep < 20; ++rep) {
      const auto t0 = clock::now();
      parallel_for(
          0, 2, 1,
          [&](range, int) {
            const auto s = clock::now();
            while (clock::now() - s < chunk) detail::cpu_relax();
          },
          2);
      const double t = double(
          std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - t0 - chunk).count());
      if (rep >= 5) ns.push_back(std::max(0.0, t));  // the first ones may wake parked workers
    }
    std::nth_element(ns.begin(), ns.begin() + long(ns.size() / 2), ns.end());
    return ns[ns.size() / 2];
  }

  int threads_;
  std::string reason_;
  std::vector<std::thread> workers_;
  mutable std::mutex job_mutex_;
  // Written by the job's caller (under job_mutex_) while no job is open and no worker inside.
  job job_{};
  std::uint32_t seq_ = 0;
  pool_stats stats_;
  int misses_ = 0;
  std::chrono::steady_clock::time_point solo_until_{};
  std::chrono::microseconds solo_period_ = detail::solo_first;
  std::mutex error_mutex_;
  std::exception_ptr error_;
  std::atomic<std::uint64_t> state_{0};
  std::atomic<std::uint64_t> claims_{0};  // the job's unclaimed chunks (claim())
  std::atomic<int> helped_{0};            // workers that ran a chunk of this job
  std::atomic<unsigned> generation_{0};   // bumped per job: idle workers wait on it
  std::atomic<int> sleepers_{0};          // workers parked on generation_
  std::atomic<std::uint64_t> parks_{0};
  std::atomic<unsigned> caller_wake_{0};  // the job's caller parks on it
  std::atomic<bool> caller_parked_{false};
  std::atomic<bool> solo_{false};  // oversubscribed: jobs run on the caller alone
  std::atomic<bool> stop_{false};
  std::once_flag fork_join_once_;
  double fork_join_ns_ = 0;
  static inline thread_local const thread_pool* current_pool_ = nullptr;
  static inline thread_local int current_worker_ = 0;
  friend class as_worker_zero;
};

/// The process-wide pool of this ISA's copy of kfuse, created on first use.
inline thread_pool& default_pool() {
  static thread_pool pool;
  return pool;
}

/// Threads a call asking for `requested` (0: all) gets from the default pool; kfuse::error naming
/// `who` (the kernel or option) for a negative count, as compile() does.
inline int pool_threads(int requested, std::string_view who = "run_options") {
  if (requested < 0)
    throw error(std::string(who) + ": threads = " + std::to_string(requested) +
                " (0 uses every thread of the pool, N > 0 at most N)");
  const int size = default_pool().size();
  return requested > 0 ? std::min(requested, size) : size;
}

KFUSE_END_NAMESPACE
