#pragma once
// The one lifecycle every kernel family with state (weights, precomputed tables or scratch)
// follows, after CUTLASS's can_implement / get_workspace_size / initialize / run:
//
//   K::problem                              what is asked: conv_shape, pool_shape, gemm_problem
//   K::can_implement(problem) -> kernel_status    ok, or why this kernel cannot run it
//   K::workspace_size(problem, threads) -> bytes  scratch for a call on that many threads
//   K::initialize(problem[, weights]) -> K::packed     once: packed weights, tables
//   K::run(inputs, packed, outputs, epilogue, workspace, run_options[, zero point]) -> run_info
//
// run() checks what initialize() could not (the tensors, the workspace) and throws kfuse::error;
// it never allocates. Each family keeps its convenience form (pack() + run() without a
// workspace) for direct callers; that form allocates a workspace_buffer per call. The plan
// compiler lowers every image kernel through one adapter (graph/ops/kernel_command.hpp).
// Element-wise families without state (eltwise, softmax, norms, batch norm, layout conversion)
// are plain functions: their workspace_size is 0 and they have nothing to initialize.
#include <concepts>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

#include "kfuse/detail/checks.hpp"
#include "kfuse/kernels/workspace.hpp"
#include "kfuse/layout/tensor_view.hpp"

namespace kfuse {  // plain data and the concept, shared by every arch's TUs

/// What can_implement() answers: ok, or the reason the problem cannot run on this kernel.
struct kernel_status {
  std::string reason;  // empty: ok
  bool ok() const noexcept { return reason.empty(); }
  explicit operator bool() const noexcept { return ok(); }
};

/// A kernel family that follows the lifecycle above.
template <class K>
concept kernel_contract = requires(const typename K::problem& p, int threads) {
  typename K::packed;
  { K::can_implement(p) } -> std::same_as<kernel_status>;
  { K::workspace_size(p, threads) } -> std::same_as<std::size_t>;
};

/// The tensor vocabulary of an image kernel (conv2d, depthwise_conv2d, pool2d): views of dims4
/// in layout L, and its epilogue type (what the graph adapter needs to call run()).
template <class L, class Ep>
struct image_kernel_types {
  using epilogue_type = Ep;
  using extents = dims4;
  template <class T>
  using view = tensor_view<T, L>;
};

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// Runs a check that throws kfuse::error and returns its message (without the "kernel: "
/// prefix) as a status.
template <class F>
kernel_status status_of(std::string_view kernel, F&& check) {
  try {
    std::forward<F>(check)();
    return {};
  } catch (const error& e) {
    std::string m = e.what();
    const std::string prefix = std::string(kernel) + ": ";
    if (m.compare(0, prefix.size(), prefix) == 0) m.erase(0, prefix.size());
    return {std::move(m)};
  }
}

/// Throws kfuse::error naming the kernel when the status is not ok.
inline void require(std::string_view kernel, const kernel_status& s) {
  if (!s.ok()) fail(kernel, s.reason);
}

/// workspace_size of a kernel K without scratch: the problem checked, 0 bytes.
template <class K>
std::size_t no_workspace(const typename K::problem& p) {
  require(K::name, K::can_implement(p));
  return 0;
}

/// The workspace of K's convenience run() (one allocation per call): sized for p on `threads`,
/// or empty when p cannot run (run() then throws the reason).
template <class K>
workspace_buffer own_workspace(const typename K::problem& p, int threads) {
  return workspace_buffer(K::can_implement(p).ok() ? K::workspace_size(p, threads) : 0);
}

}  // namespace detail

KFUSE_END_NAMESPACE
