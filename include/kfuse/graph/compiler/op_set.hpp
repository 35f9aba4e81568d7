#pragma once
// Op sets: which ops' lowerings a plan compiler instantiates. Lowering an op instantiates its
// kernels for the plan's arch, and that is nearly all of a plan compiler's build time, so a
// translation unit that compiles plans itself can name the ops its graphs use:
//
//   using namespace kfuse;
//   plan p = compile<ops<op_kind::linear, op_kind::eltwise, op_kind::softmax>>(g);
//
// A graph holding another op then fails with a kfuse::error naming the node and the op. The
// set may also name the precisions its kernels run in (linear, conv2d and matmul have kernels
// per precision, eltwise and softmax per tensor type; f32 alone is what most graphs need):
//
//   compile<ops<op_kind::linear, op_kind::eltwise, op_kind::softmax>::in<precision::f32>>(g);
//
// A node of another precision (a bf16 or int8 plan, a node's own precision, a bf16 tensor)
// then fails the same way.
// kfuse/graph/compile.hpp's compile<A, B> instantiates every op (all_ops); kfuse::runtime links
// each op's lowering from its own prebuilt object (prebuilt_ops).
#include <string>
#include <type_traits>
#include <vector>

#include "kfuse/graph/names.hpp"

namespace kfuse {

template <class Ops, precision... P>
struct ops_in;

/// A selective op set for compile<ops<...>>(g): the op kinds the plan compiler instantiates,
/// in every precision; ops<...>::in<precision...> restricts the precisions too.
template <op_kind... K>
struct ops {
  static_assert(sizeof...(K) > 0, "kfuse::ops<...> needs at least one op_kind");
  static constexpr bool contains(op_kind k) noexcept { return ((k == K) || ...); }
  static constexpr bool runs_in(precision) noexcept { return true; }
  template <precision... P>
  using in = ops_in<ops, P...>;
};

/// ops<...>::in<precision...>: the ops of Ops, their kernels in precisions P only.
template <class Ops, precision... P>
struct ops_in {
  static_assert(sizeof...(P) > 0, "kfuse::ops<...>::in<...> needs at least one precision");
  static_assert(((P != precision::inherit) && ...),
                "kfuse::ops<...>::in<...>: name f32, bf16 or int8 (inherit is not a precision "
                "kernels run in)");
  static constexpr bool contains(op_kind k) noexcept { return Ops::contains(k); }
  static constexpr bool runs_in(precision p) noexcept { return ((p == P) || ...); }
};

namespace detail {

/// Every op (the header-only plan compiler).
struct all_ops {
  static constexpr bool runs_in(precision) noexcept { return true; }
};
/// Every op, each lowering defined in its own object of kfuse::runtime (src/runtime/ops/).
struct prebuilt_ops {
  static constexpr bool runs_in(precision) noexcept { return true; }
};
/// The op set kfuse::runtime's objects instantiate the lowerings with: every op, in the
/// precisions of KFUSE_RUNTIME_PRECISIONS (CMake; the build defines KFUSE_RUNTIME_NO_BF16 /
/// KFUSE_RUNTIME_NO_INT8 for the ones left out, whose kernels are then not compiled at all).
struct runtime_ops {
  static constexpr bool runs_in(precision p) noexcept {
#ifdef KFUSE_RUNTIME_NO_BF16
    if (p == precision::bf16) return false;
#endif
#ifdef KFUSE_RUNTIME_NO_INT8
    if (p == precision::int8) return false;
#endif
    return p != precision::inherit;
  }
};

template <class T>
inline constexpr bool is_selective_op_set = false;
template <op_kind... K>
inline constexpr bool is_selective_op_set<ops<K...>> = true;
template <op_kind... K, precision... P>
inline constexpr bool is_selective_op_set<ops_in<ops<K...>, P...>> = true;

}  // namespace detail

/// A type that names a set of ops for compile<Ops>(g): kfuse::ops<...>, or
/// kfuse::ops<...>::in<...>.
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

/// "compile<ops<linear, eltwise>>" or "compile<ops<linear, eltwise>::in<f32>>": how a
/// selective set was asked for, for its error messages.
template <op_kind... K>
std::string op_set_call(ops<K...> set) {
  return "compile<ops<" + op_set_names(set) + ">>";
}
template <class Ops, precision... P>
std::string op_set_call(ops_in<Ops, P...>) {
  std::string in;
  ((in += (in.empty() ? "" : ", ") + std::string(precision_name(P))), ...);
  return "compile<ops<" + op_set_names(Ops{}) + ">::in<" + in + ">>";
}

}  // namespace detail
KFUSE_END_NAMESPACE
