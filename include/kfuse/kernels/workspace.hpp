#pragma once
// workspace: the scratch memory of one kernel call, provided by its caller. A plan gives each
// step its own slice of the replay buffer's arena; a direct caller owns a workspace_buffer sized
// by the kernel's workspace_size(). Kernels never allocate per call and keep no thread-local
// state, so a replay allocates nothing and two plans on two threads share no scratch.
//
// Kernels split a workspace into one slot per worker (parallel_for's worker index), each slot up
// to 64 KiB past the end of the one before it (workspace_slot_guard: two threads whose scratch
// rows lay side by side each ran a conv ~1.8x slower than alone). A call
// given fewer slots than threads runs on as many threads as it has slots; a workspace smaller
// than one slot is an error naming the kernel and both sizes. The contents belong to the kernel
// between calls (depthwise remembers the geometry of its last fill there): one workspace serves
// one call at a time, and only the kernel it was sized for.
#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>

#include "kfuse/detail/checks.hpp"

namespace kfuse {  // plain data, shared by every arch's TUs

/// Workspace sizes and slots are whole multiples of this (a cache line; the AVX-512 vector).
inline constexpr std::size_t workspace_alignment = 64;

/// Bytes rounded up to a whole number of workspace_alignment.
constexpr std::size_t workspace_round(std::size_t bytes) noexcept {
  return (bytes + workspace_alignment - 1) / workspace_alignment * workspace_alignment;
}

/// Free bytes between the end of one worker's slot and the start of the next, at most (and at
/// most the slot's own size, so that guards never take more than the slots). Two threads each
/// copying rows into a 68 KB slot and reading them back ran ~1.8x slower than one alone while
/// their slots lay side by side (AMD Zen 5 VM: the RGB stem on two threads 134 us against 146 on
/// one); 32 KiB apart 104 us, 64 KiB apart 83 us.
inline constexpr std::size_t workspace_slot_guard = 64 * 1024;

/// Bytes from the start of one worker's slot of `each` bytes to the next one's.
constexpr std::size_t workspace_slot_stride(std::size_t each) noexcept {
  return workspace_round(each) + std::min(workspace_slot_guard, workspace_round(each));
}

/// The workspace `threads` slots of `each` bytes take (0 when each is 0).
constexpr std::size_t workspace_slots_bytes(int threads, std::size_t each) noexcept {
  if (each == 0) return 0;
  return std::size_t(std::max(threads, 1) - 1) * workspace_slot_stride(each) + each;
}

/// A view of caller-owned scratch memory, 64-byte aligned (the plan's arena and a
/// workspace_buffer are; a kernel rejects a misaligned one).
struct workspace {
  std::byte* data = nullptr;
  std::size_t bytes = 0;

  /// How many slots of `each` bytes it holds (each > 0), workspace_slot_stride() apart.
  int slots(std::size_t each) const noexcept {
    if (bytes < each) return 0;
    return int(std::min<std::size_t>(1 + (bytes - each) / workspace_slot_stride(each),
                                     std::size_t(INT_MAX)));
  }
  /// Slot `worker` of `each` bytes (a worker index past the slots wraps around: a nested
  /// parallel_for runs the whole call on one thread under its outer worker index).
  template <class T>
  T* slot(int worker, std::size_t each) const noexcept {
    const int n = slots(each);
    return reinterpret_cast<T*>(data + std::size_t(worker % n) * workspace_slot_stride(each));
  }
};

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// Carves one thread's slot into typed arrays, each starting on a 64-byte boundary. Without a
/// base it only measures: a kernel writes its slot layout once and gets both its size
/// (workspace_size) and its arrays (run) from it.
class slot_cursor {
 public:
  slot_cursor() = default;
  explicit slot_cursor(std::byte* base) noexcept : base_(base) {}
  template <class T>
  T* take(std::size_t count) noexcept {
    T* r = base_ ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += workspace_round(count * sizeof(T));
    return r;
  }
  std::size_t used() const noexcept { return used_; }

 private:
  std::byte* base_ = nullptr;
  std::size_t used_ = 0;
};

/// The threads a call may use with workspace ws when each needs a slot of `each` bytes
/// (0: no scratch). Throws kfuse::error naming the kernel when not even one slot fits.
inline int workspace_threads(std::string_view kernel, const workspace& ws, std::size_t each,
                             int threads) {
  if (each == 0) return threads;
  if (ws.bytes > 0 && ws.data == nullptr) fail(kernel, "workspace has a size but no data");
  const int n = ws.slots(each);
  if (n == 0)
    fail(kernel, "workspace of " + std::to_string(ws.bytes) + " bytes is smaller than the " +
                     std::to_string(each) +
                     " bytes one thread of this call needs (size it with workspace_size())");
  if (reinterpret_cast<std::uintptr_t>(ws.data) % workspace_alignment != 0)
    fail(kernel, "workspace is not aligned to " + std::to_string(workspace_alignment) + " bytes");
  return std::min(threads, n);
}

struct free_deleter {
  void operator()(void* p) const noexcept { std::free(p); }
};

}  // namespace detail

/// An owning, 64-byte aligned workspace for direct kernel calls:
///   workspace_buffer ws(pool2d<...>::workspace_size(shape, threads));
///   pool2d<...>::run(in, packed, out, ep, ws, opt);
class workspace_buffer {
 public:
  workspace_buffer() = default;
  explicit workspace_buffer(std::size_t bytes) : bytes_(workspace_round(bytes)) {
    if (bytes_ == 0) return;
    data_.reset(static_cast<std::byte*>(std::aligned_alloc(workspace_alignment, bytes_)));
    if (!data_) throw std::bad_alloc();
    // Zeroed: a kernel may keep state in its slot between calls (depthwise: the geometry of its
    // last fill), and fresh memory from the allocator can hold a freed workspace's stale copy.
    std::memset(data_.get(), 0, bytes_);
  }
  std::size_t bytes() const noexcept { return bytes_; }
  workspace view() const noexcept { return {data_.get(), bytes_}; }
  operator workspace() const noexcept { return view(); }  // NOLINT: a buffer is a workspace

 private:
  std::unique_ptr<std::byte, detail::free_deleter> data_;
  std::size_t bytes_ = 0;
};

KFUSE_END_NAMESPACE
