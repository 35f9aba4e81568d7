#pragma once
// parallel_for(begin, end, grain, fn(range, worker)): kfuse's parallel work, on the default
// thread pool (thread_pool.hpp) or on a user-supplied executor in its place.
//
// A user-supplied executor (kfuse::executor: context + run(n_tasks, task)) can take the place of
// the pool: set_default_executor(&ex) for the whole process, or scoped_executor for the calling
// thread (plans compiled with compile_options::exec use it during replay). kfuse then never
// starts threads of its own for that work, so it does not fight the host application's pool.
#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <utility>

#include "kfuse/config/macros.hpp"
#include "kfuse/threading/thread_pool.hpp"
#include "kfuse/types/elem.hpp"

namespace kfuse {
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

/// For its lifetime, a parallel_for nested in a pool job or an executor task on this thread runs
/// inline as worker 0: for a body that replays a one-thread plan of its own (split_replay), whose
/// kernels have scratch for one worker only.
class as_worker_zero {
 public:
  as_worker_zero() noexcept
      : pool_worker_(thread_pool::current_worker_), task_worker_(detail::executor_worker) {
    thread_pool::current_worker_ = 0;
    detail::executor_worker = 0;
  }
  ~as_worker_zero() {
    thread_pool::current_worker_ = pool_worker_;
    detail::executor_worker = task_worker_;
  }
  as_worker_zero(const as_worker_zero&) = delete;
  as_worker_zero& operator=(const as_worker_zero&) = delete;

 private:
  int pool_worker_, task_worker_;
};

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
