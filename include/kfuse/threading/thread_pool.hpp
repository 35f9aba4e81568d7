#pragma once
// A persistent thread pool and parallel_for(begin, end, grain, fn(range, worker)).
//
// The calling thread takes part (it is worker 0). Workers spin for up to spin_window after a
// job, then park on an atomic wait (a futex on Linux), so an idle pool costs no CPU. One job runs
// at a time: a parallel_for issued while the pool is busy (another application thread) runs on the
// calling thread alone, as worker 0, so the pool never oversubscribes cores. A nested parallel_for
// (from inside a body running on this pool) runs inline and keeps the worker index of the thread it
// runs on, so per-worker scratch indexed by it is never shared by two threads. An exception
// thrown by a body stops the hand-out of chunks and is rethrown by parallel_for once every thread
// has left the job (the first one wins when several throw).
//
// Default size: one thread per physical core (SMT siblings share one core's FMA units, so a
// second thread per core only adds contention); KFUSE_NUM_THREADS overrides it.
//
// A user-supplied executor (kfuse::executor: context + run(n_tasks, task)) can take the place of
// the pool: set_default_executor(&ex) for the whole process, or scoped_executor for the calling
// thread (plans compiled with compile_options::exec use it during replay). kfuse then never
// starts threads of its own for that work, so it does not fight the host application's pool.
//
// Several application threads at once: each parallel_for either owns the pool or runs inline
// on its caller; with N application threads replaying plans concurrently, at most one of them
// uses the pool's workers at a time, the others compute on their own threads. The total number
// of busy threads is therefore at most N + pool size - 1, never N x pool size.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kfuse/config/macros.hpp"
#include "kfuse/types/elem.hpp"

namespace kfuse {
/// A half-open range of work items handed to one call of a parallel_for body.
struct range {
  index_t begin = 0;
  index_t end = 0;
  index_t size() const noexcept { return end - begin; }
};

/// A user-supplied executor: run(context, n_tasks, task, task_arg) calls task(task_arg, i) once
/// for every i in [0, n_tasks), possibly concurrently, and returns when all are done.
/// `concurrency` is how many tasks it can run at once (the most kfuse asks for).
struct executor {
  void* context = nullptr;
  int concurrency = 1;
  void (*run)(void* context, int n_tasks, void (*task)(void* task_arg, int index),
              void* task_arg) = nullptr;
};
}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

/// Physical cores: distinct sibling sets in /sys/devices/system/cpu/cpu*/topology (Linux); the
/// hardware thread count where that is not readable.
inline int physical_core_count() {
  const int logical = int(std::max(1u, std::thread::hardware_concurrency()));
  std::set<std::string> cores;
  for (int cpu = 0; cpu < logical; ++cpu) {
    const std::string base = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::string siblings;
    std::ifstream f(base + "core_cpus_list");
    if (!(f >> siblings)) {
      std::ifstream g(base + "thread_siblings_list");
      if (!(g >> siblings)) return logical;
    }
    cores.insert(siblings);
  }
  return cores.empty() ? logical : int(cores.size());
}

/// Threads to use by default: KFUSE_NUM_THREADS if set, else one per physical core.
inline int default_thread_count() {
  if (const char* env = std::getenv("KFUSE_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  return physical_core_count();
}

namespace detail {
/// How long an idle worker spins before it parks. Parking is a futex, and in a VM a futex
/// wake-up takes 10-90 us (the sleeper's vCPU may have halted), while the nodes of a replayed
/// plan arrive microseconds apart. Measured here, a 2-thread fork/join of ~1 us of work: 10.6 us
/// back to back with the earlier 2048-iteration spins (every job woke a parked worker), 1.9 us
/// with these windows, 65-75 us after 1 ms idle (the worker parked: by design).
inline constexpr std::chrono::microseconds spin_window{100};
/// How long a job's caller spins for its helpers before it parks. Longer than any wake-up: if
/// the caller parked while a helper was being woken, the helper's acknowledgement would have
/// to wake the caller in turn, the helper would park meanwhile, and every following job would
/// pay two wake-ups (seen: 160-210 us per fork/join with a 100 us window here). The caller only
/// spins while its own job is still running.
inline constexpr std::chrono::microseconds join_spin_window{1000};

KFUSE_INLINE void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Spins until done() or `window` has passed; returns done()'s last value.
template <class Done>
bool spin_until(Done&& done, std::chrono::microseconds window) {
  const auto start = std::chrono::steady_clock::now();
  for (unsigned i = 1;; ++i) {
    if (done()) return true;
    cpu_relax();
    if (i % 64 == 0 && std::chrono::steady_clock::now() - start > window) return done();
  }
}
}  // namespace detail

class thread_pool {
 public:
  /// `threads` counts the calling thread: thread_pool(2) starts one worker.
  explicit thread_pool(int threads = default_thread_count()) : threads_(std::max(1, threads)) {
    for (int w = 1; w < threads_; ++w) workers_.emplace_back([this, w] { worker_loop(w); });
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  ~thread_pool() {
    stop_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (auto& t : workers_) t.join();
  }

  int size() const noexcept { return threads_; }

  /// Calls fn(range, worker) over [begin, end) in chunks of `grain` items, on at most
  /// max_threads threads (0: all). Returns when every chunk is done.
  template <class F>
  void parallel_for(index_t begin, index_t end, index_t grain, F&& fn, int max_threads = 0) {
    if (end <= begin) return;
    if (current_pool_ == this) {  // nested: inline, on this thread's worker index
      fn(range{begin, end}, current_worker_);
      return;
    }
    grain = std::max<index_t>(grain, 1);
    const index_t chunks = (end - begin + grain - 1) / grain;
    int want = max_threads > 0 ? std::min(max_threads, threads_) : threads_;
    want = int(std::min<index_t>(want, chunks));
    std::unique_lock<std::mutex> busy(job_mutex_, std::defer_lock);
    if (want <= 1 || !busy.try_lock()) {
      const inside scope(this, 0);
      fn(range{begin, end}, 0);
      return;
    }
    using Fn = std::remove_reference_t<F>;
    job_ = job{begin, end, grain, chunks, want, &fn, [](void* f, range r, int w) {
                 (*static_cast<Fn*>(f))(r, w);
               }};
    next_chunk_.store(0, std::memory_order_relaxed);
    // Every worker acknowledges every job (idle ones at once), so job_ is never rewritten
    // while a worker may still read it.
    pending_.store(threads_ - 1, std::memory_order_relaxed);
    error_ = nullptr;
    // seq_cst pairs with the workers' (sleepers_ then generation_): either a worker sees the new
    // generation before it parks, or this thread sees it parked and wakes it. The wake-up is a
    // system call, made only when needed.
    generation_.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) != 0) generation_.notify_all();
    run_chunks(0);
    // Wait for the helpers: spin (jobs are usually balanced), then park.
    if (!detail::spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; },
                            detail::join_spin_window)) {
      caller_parked_.store(true, std::memory_order_seq_cst);
      for (int p; (p = pending_.load(std::memory_order_seq_cst)) != 0;)
        pending_.wait(p, std::memory_order_seq_cst);
      caller_parked_.store(false, std::memory_order_relaxed);
    }
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  struct job {
    index_t begin, end, grain, chunks;
    int threads;
    void* fn;
    void (*call)(void*, range, int);
  };

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

  void run_chunks(int worker) {
    const job& j = job_;
    const inside scope(this, worker);
    for (;;) {
      const index_t c = next_chunk_.fetch_add(1, std::memory_order_relaxed);
      if (c >= j.chunks) return;
      const index_t b = j.begin + c * j.grain;
      try {
        j.call(j.fn, range{b, std::min(j.end, b + j.grain)}, worker);
      } catch (...) {
        {
          const std::lock_guard<std::mutex> lock(error_mutex_);
          if (!error_) error_ = std::current_exception();
        }
        next_chunk_.store(j.chunks, std::memory_order_relaxed);  // hand out no more chunks
        return;
      }
    }
  }

  void worker_loop(int w) {
    // Workers start in the constructor, before any job: generation 0. Reading generation_ here
    // instead would lose a job published before this thread first ran (a deadlock).
    unsigned seen = 0;
    for (;;) {
      // Spin for back-to-back jobs, then park until the generation changes.
      unsigned now = seen;
      if (!detail::spin_until(
              [&] { return (now = generation_.load(std::memory_order_acquire)) != seen; },
              detail::spin_window)) {
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        generation_.wait(seen, std::memory_order_seq_cst);
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
        now = generation_.load(std::memory_order_acquire);
      }
      seen = now;
      if (stop_.load(std::memory_order_relaxed)) return;
      if (w < job_.threads) run_chunks(w);
      if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
          caller_parked_.load(std::memory_order_seq_cst))
        pending_.notify_one();
    }
  }

  int threads_;
  std::vector<std::thread> workers_;
  std::mutex job_mutex_;
  job job_{};
  std::mutex error_mutex_;
  std::exception_ptr error_;
  std::atomic<index_t> next_chunk_{0};
  std::atomic<int> pending_{0};
  std::atomic<unsigned> generation_{0};
  std::atomic<int> sleepers_{0};            // workers parked on generation_
  std::atomic<bool> caller_parked_{false};  // the job's caller parked on pending_
  std::atomic<bool> stop_{false};
  static inline thread_local const thread_pool* current_pool_ = nullptr;
  static inline thread_local int current_worker_ = 0;
};

/// The process-wide pool of this ISA's copy of kfuse, created on first use.
inline thread_pool& default_pool() {
  static thread_pool pool;
  return pool;
}

/// Threads a call asking for `requested` (0: all) gets from the default pool.
inline int pool_threads(int requested) {
  const int size = default_pool().size();
  return requested > 0 ? std::min(requested, size) : size;
}

namespace detail {
// The executor parallel_for runs on instead of the pool: this thread's (scoped_executor), else
// the process-wide one (set_default_executor), else none.
inline thread_local const executor* thread_executor = nullptr;
inline thread_local bool inside_executor_task = false;
inline thread_local int executor_worker = 0;
// A plain pointer read and written with the compiler's atomic builtins: std::atomic<const
// kfuse::executor*> would be a weak std:: instantiation on a kfuse type shared by TUs of different
// ISAs (tests/odr's nm check). Each per-ISA copy of kfuse has its own slot, like its own pool.
inline const executor*& process_executor_slot() {
  static const executor* e = nullptr;
  return e;
}
inline const executor* process_executor() {
  return __atomic_load_n(&process_executor_slot(), __ATOMIC_ACQUIRE);
}

template <class F>
void parallel_for_on(const executor& ex, index_t begin, index_t end, index_t grain, F& fn,
                     int max_threads) {
  grain = std::max<index_t>(grain, 1);
  const index_t chunks = (end - begin + grain - 1) / grain;
  // Worker indices stay below pool_threads(max_threads), as with the pool (per-worker scratch).
  int want = std::min(pool_threads(max_threads), std::max(1, ex.concurrency));
  want = int(std::min<index_t>(want, chunks));
  if (want <= 1 || ex.run == nullptr) {
    // One task, on the caller: still an executor task, so a nested parallel_for runs inline on
    // worker 0 instead of fanning out with other worker indices.
    struct as_task {
      bool saved = inside_executor_task;
      int saved_worker = executor_worker;
      as_task() { inside_executor_task = true, executor_worker = 0; }
      ~as_task() { inside_executor_task = saved, executor_worker = saved_worker; }
    } scope;
    fn(range{begin, end}, 0);
    return;
  }
  struct state {
    F* fn;
    index_t begin, end, grain, chunks;
    std::atomic<index_t> next{0};
    std::mutex error_mutex;
    std::exception_ptr error;
  } st{&fn, begin, end, grain, chunks};
  ex.run(
      ex.context, want,
      [](void* arg, int worker) {
        auto& s = *static_cast<state*>(arg);
        const bool saved = inside_executor_task;
        const int saved_worker = executor_worker;
        inside_executor_task = true;
        executor_worker = worker;
        for (;;) {
          const index_t c = s.next.fetch_add(1, std::memory_order_relaxed);
          if (c >= s.chunks) break;
          const index_t b = s.begin + c * s.grain;
          try {
            (*s.fn)(range{b, std::min(s.end, b + s.grain)}, worker);
          } catch (...) {
            const std::lock_guard<std::mutex> lock(s.error_mutex);
            if (!s.error) s.error = std::current_exception();
            s.next.store(s.chunks, std::memory_order_relaxed);
            break;
          }
        }
        inside_executor_task = saved;
        executor_worker = saved_worker;
      },
      &st);
  if (st.error) std::rethrow_exception(st.error);
}
}  // namespace detail

/// Runs kfuse's parallel work on `ex` (process-wide; nullptr: back to the pool). `ex` must
/// outlive its use.
inline void set_default_executor(const executor* ex) {
  __atomic_store_n(&detail::process_executor_slot(), ex, __ATOMIC_RELEASE);
}

/// For the lifetime of this object, parallel_for on the calling thread runs on `ex` (nullptr:
/// no change).
class scoped_executor {
 public:
  explicit scoped_executor(const executor* ex) noexcept
      : saved_(detail::thread_executor), set_(ex != nullptr) {
    if (set_) detail::thread_executor = ex;
  }
  ~scoped_executor() {
    if (set_) detail::thread_executor = saved_;
  }
  scoped_executor(const scoped_executor&) = delete;
  scoped_executor& operator=(const scoped_executor&) = delete;

 private:
  const executor* saved_;
  bool set_;
};

/// parallel_for on the default pool (or on the executor in effect, see scoped_executor).
template <class F>
void parallel_for(index_t begin, index_t end, index_t grain, F&& fn, int max_threads = 0) {
  if (end <= begin) return;
  // Nested inside an executor task (on whatever thread the executor runs it): inline, on this
  // task's worker index. Checked first: the executor's threads need not see a scoped_executor.
  if (detail::inside_executor_task) {
    fn(range{begin, end}, detail::executor_worker);
    return;
  }
  const executor* ex = detail::thread_executor;
  if (!ex) ex = detail::process_executor();
  if (ex) {
    detail::parallel_for_on(*ex, begin, end, grain, fn, max_threads);
    return;
  }
  default_pool().parallel_for(begin, end, grain, std::forward<F>(fn), max_threads);
}

KFUSE_END_NAMESPACE
