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
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
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

/// kfuse::runtime's op families: the objects a tier is built from (src/runtime/ops/), which
/// CMake's KFUSE_RUNTIME_OPS selects (CMakeLists.txt's kfuse_runtime_families, in this order
/// after core). `core` (eltwise, cast and data movement) is always built: the plan compiler
/// inserts those ops itself. conv2d holds the dense kernels of NHWC convs; its other families:
/// nchw (the dense kernels of NCHW convs), depthwise (one channel per group; and int8 convs
/// writing bf16 for them), gated (a fused channel gate) and few_channel (an NCHW stem of at most
/// 4 channels writing NHWC). Without gated or few_channel those convs run on the dense kernels
/// and a separate gate or layout conversion step.
#define KFUSE_RUNTIME_FAMILIES(X) \
  X(core)                         \
  X(attention)                    \
  X(conv2d)                       \
  X(conv2d_depthwise)             \
  X(conv2d_gated)                 \
  X(conv2d_few_channel)           \
  X(conv2d_nchw)                  \
  X(image)                        \
  X(linear)                       \
  X(matmul)                       \
  X(norm)                         \
  X(pool)                         \
  X(reduce)

#define KFUSE_RUNTIME_FAMILY_ENUM(name) name,
enum class runtime_family : std::uint8_t { KFUSE_RUNTIME_FAMILIES(KFUSE_RUNTIME_FAMILY_ENUM) };
#undef KFUSE_RUNTIME_FAMILY_ENUM

constexpr std::string_view runtime_family_name(runtime_family f) noexcept {
#define KFUSE_RUNTIME_FAMILY_NAME(name) #name,
  constexpr std::string_view names[] = {KFUSE_RUNTIME_FAMILIES(KFUSE_RUNTIME_FAMILY_NAME)};
#undef KFUSE_RUNTIME_FAMILY_NAME
  return names[std::size_t(f)];
}

/// The family whose object holds op k's lowering.
constexpr runtime_family runtime_family_of(op_kind k) noexcept {
  switch (k) {
    case op_kind::attention:
    case op_kind::cached_attention:
      return runtime_family::attention;
    case op_kind::conv2d:
      return runtime_family::conv2d;
    case op_kind::resize:
    case op_kind::conv_transpose2d:
      return runtime_family::image;
    case op_kind::linear:
      return runtime_family::linear;
    case op_kind::matmul:
      return runtime_family::matmul;
    case op_kind::softmax:
    case op_kind::layer_norm:
    case op_kind::rms_norm:
    case op_kind::batch_norm:
      return runtime_family::norm;
    case op_kind::pool2d:
    case op_kind::max_pool_indices:
      return runtime_family::pool;
    case op_kind::reduce:
    case op_kind::arg_reduce:
      return runtime_family::reduce;
    default:
      return runtime_family::core;
  }
}

/// The families a kfuse::runtime tier leaves out, comma-separated: the build defines
/// KFUSE_RUNTIME_LEFT_OUT_FAMILIES for a tier built without some (KFUSE_RUNTIME_OPS).
#ifdef KFUSE_RUNTIME_LEFT_OUT_FAMILIES
inline constexpr std::string_view runtime_left_out_families = KFUSE_RUNTIME_LEFT_OUT_FAMILIES;
#else
inline constexpr std::string_view runtime_left_out_families = "";
#endif

/// Whether this kfuse::runtime tier was built with family f (KFUSE_RUNTIME_OPS).
constexpr bool runtime_builds(runtime_family f) noexcept {
  std::string_view rest = runtime_left_out_families;
  while (!rest.empty()) {
    const std::size_t comma = rest.find(',');
    if (rest.substr(0, comma) == runtime_family_name(f)) return false;
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return true;
}

/// Whether plan compilers of op set Ops hold family f's kernels: kfuse::runtime's tiers those
/// of KFUSE_RUNTIME_OPS, the header-only ones every family of the ops they instantiate.
template <class Ops>
constexpr bool set_builds(runtime_family f) noexcept {
  if constexpr (std::is_same_v<Ops, runtime_ops> || std::is_same_v<Ops, prebuilt_ops>)
    return runtime_builds(f);
  else
    return true;
}

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
