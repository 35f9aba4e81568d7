#pragma once
// Op sets: which ops' lowerings a plan compiler instantiates. Lowering an op instantiates its
// kernels for the plan's arch, and that is nearly all of a plan compiler's build time, so a
// translation unit that compiles plans itself can name the ops its graphs use:
//
//   using namespace kfuse;
//   plan p = compile<ops<op_kind::linear, op_kind::eltwise, op_kind::softmax>>(g);
//
// A graph holding another op then fails with a kfuse::error naming the node and the op.
// kfuse/graph/compile.hpp's compile<A, B> instantiates every op (all_ops); kfuse::runtime links
// each op's lowering from its own prebuilt object (prebuilt_ops).
#include <string>
#include <type_traits>
#include <vector>

#include "kfuse/graph/names.hpp"

namespace kfuse {

/// A selective op set for compile<ops<...>>(g): the op kinds the plan compiler instantiates.
template <op_kind... K>
struct ops {
  static_assert(sizeof...(K) > 0, "kfuse::ops<...> needs at least one op_kind");
  static constexpr bool contains(op_kind k) noexcept { return ((k == K) || ...); }
};

namespace detail {

/// Every op (the header-only plan compiler).
struct all_ops {};
/// Every op, each lowering defined in its own object of kfuse::runtime (src/runtime/ops/).
struct prebuilt_ops {};

template <class T>
inline constexpr bool is_selective_op_set = false;
template <op_kind... K>
inline constexpr bool is_selective_op_set<ops<K...>> = true;

}  // namespace detail

/// A type that names a set of ops for compile<Ops>(g): kfuse::ops<...>.
template <class T>
concept op_set = detail::is_selective_op_set<T>;

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE
namespace detail {

/// "linear, eltwise, softmax": the ops of a selective set, for its error messages.
template <op_kind... K>
std::string op_set_names(ops<K...>) {
  std::string r;
  ((r += (r.empty() ? "" : ", ") + std::string(op_name(K))), ...);
  return r;
}

}  // namespace detail
KFUSE_END_NAMESPACE
