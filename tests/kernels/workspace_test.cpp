// The workspace's slots (kernels/workspace.hpp): one per worker, each up to workspace_slot_guard
// bytes (and at most its own size) past the end of the one before it, sized by
// workspace_slots_bytes(); a workspace too small for every thread's slot gives fewer threads, never
// overlapping slots.
#include "kfuse/kernels/workspace.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "support/test_support.hpp"

namespace {
constexpr std::size_t guard = kfuse::workspace_slot_guard;
}

TEST_CASE("workspace: slots sit a guard apart and never overlap") {
  for (const std::size_t each : {std::size_t(1), std::size_t(64), std::size_t(1000),
                                 std::size_t(68096), std::size_t(3) << 20}) {
    CAPTURE(each);
    const std::size_t stride = kfuse::workspace_slot_stride(each);
    CHECK(stride % kfuse::workspace_alignment == 0);
    CHECK(stride >= each + std::min(guard, each));  // a guard, at most the slot's size
    CHECK(stride <= 2 * kfuse::workspace_round(each));
    CHECK(kfuse::workspace_slots_bytes(1, each) == each);
    CHECK(kfuse::workspace_slots_bytes(0, each) == each);  // 0 threads: the calling one
    CHECK(kfuse::workspace_slots_bytes(4, each) == 3 * stride + each);
    const std::size_t bytes = kfuse::workspace_slots_bytes(3, each);
    const kfuse::workspace_buffer buffer(bytes);
    const kfuse::workspace ws{buffer.view().data, bytes};
    std::byte* const base = ws.data;
    CHECK(ws.slots(each) == 3);
    const auto at = [&](int worker) {
      return std::size_t(ws.slot<std::byte>(worker, each) - base);
    };
    CHECK(at(0) == 0);
    CHECK(at(1) == stride);
    CHECK(at(2) == 2 * stride);
    CHECK(at(2) + each == bytes);  // the last slot ends where the workspace does
    CHECK(at(3) == 0);             // past the slots: wraps around (nested calls)
    CHECK(kfuse::workspace{base, bytes - 1}.slots(each) == 2);
    CHECK(kfuse::workspace{base, each}.slots(each) == 1);
    CHECK(kfuse::workspace{base, each - 1}.slots(each) == 0);
  }
  CHECK(kfuse::workspace_slots_bytes(8, 0) == 0);  // no scratch
}

TEST_CASE("workspace: a workspace for fewer threads than asked runs on the slots it has") {
  const std::size_t each = 4096;
  const kfuse::workspace_buffer two(kfuse::workspace_slots_bytes(2, each));
  CHECK(kfuse::detail::workspace_threads("test", two, each, 8) == 2);
  CHECK(kfuse::detail::workspace_threads("test", two, each, 1) == 1);
  const kfuse::workspace_buffer one(each);
  CHECK(kfuse::detail::workspace_threads("test", one, each, 8) == 1);
  const kfuse::workspace_buffer none(each / 2);
  CHECK_THROWS_WITH(kfuse::detail::workspace_threads("test", none, each, 2),
                    Catch::Matchers::Contains("smaller than the 4096 bytes one thread"));
}
