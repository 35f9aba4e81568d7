#pragma once
// How kfuse's threads wait for each other without stealing the CPU they wait for.
//
// A wait first spins with `pause` (the answer usually comes within microseconds on an idle
// machine), then spins with sched_yield (if the thread it waits for shares this core - taskset,
// a CPU quota, a busy neighbour - yielding lets it run at once instead of at the next scheduler
// tick), and gives up when its window has passed or when it notices it was descheduled itself
// (a gap of more than `deschedule_gap` between two looks at the clock: the core is contended, so
// spinning only takes time from someone who needs it). The caller then parks (a futex).
#include <chrono>

#if defined(__linux__) || defined(__APPLE__)
#include <sched.h>
#endif

#include "kfuse/config/macros.hpp"

KFUSE_BEGIN_NAMESPACE
namespace detail {

KFUSE_INLINE void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

inline void yield_cpu() noexcept {
#if defined(__linux__) || defined(__APPLE__)
  sched_yield();
#endif
}

/// The phases of one wait.
struct backoff_window {
  std::chrono::microseconds pause;  // spin with pause this long
  std::chrono::microseconds total;  // then with sched_yield until this long
};

/// Seen between two looks at the clock, the spinning thread was not running: give up.
inline constexpr std::chrono::microseconds deschedule_gap{50};

/// Spins until done() or the window has passed (or the thread was descheduled, or stop());
/// returns done()'s last value.
template <class Done, class Stop>
bool spin_until(Done&& done, backoff_window w, Stop&& stop) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto last = start;
  bool yielding = w.pause.count() <= 0;
  for (unsigned i = 1;; ++i) {
    if (done()) return true;
    if (yielding) {
      yield_cpu();
    } else {
      cpu_relax();
      if (i % 32 != 0) continue;  // the clock every ~32 pauses (~0.5-2 us)
    }
    const auto now = clock::now();
    if (now - last > deschedule_gap || now - start > w.total || stop()) return done();
    last = now;
    if (!yielding && now - start > w.pause) yielding = true;
  }
}

template <class Done>
bool spin_until(Done&& done, backoff_window w) {
  return spin_until(done, w, [] { return false; });
}

}  // namespace detail
KFUSE_END_NAMESPACE
