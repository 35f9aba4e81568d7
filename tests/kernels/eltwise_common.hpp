#pragma once
// The eltwise check shared by the covering (ci) and full test files: one epilogue, one input
// and output type, every backend of the arch under test, many lengths, both layouts.
#include "support/test_support.hpp"

namespace kt {

/// Runs the kernel for (A, B) on `in` into a poisoned, guarded output, twice with different
/// poison so that no unwritten element can pass; returns the output.
template <class A, class B, class In, class Out, class Ep, class L = void>
std::vector<Out> run_eltwise(const In* in, index_t n, const Ep& ep, const kfuse::dims4* dims,
                             std::string_view expect_impl_prefix) {
  std::vector<Out> result(static_cast<std::size_t>(n));
  for (unsigned char poison : {0xA5, 0x5A}) {
    guarded<Out> out(n, poison);
    kfuse::run_info info;
    if constexpr (std::is_void_v<L>)
      info = kfuse::eltwise<A, B>(in, out.data, n, ep);
    else
      info = kfuse::eltwise<A, B>(kfuse::view<L>(in, *dims), kfuse::view<L>(out.data, *dims), ep);
    CHECK(info.kernel == "eltwise");
    CHECK(info.arch == A::name);
    CHECK(std::string_view(info.impl).substr(0, expect_impl_prefix.size()) == expect_impl_prefix);
    REQUIRE(out.guards_intact());
    if (poison == 0xA5)
      std::copy(out.data, out.data + n, result.begin());
    else if (n > 0)  // memcmp's pointers must not be null, even for 0 bytes
      REQUIRE(std::memcmp(result.data(), out.data, sizeof(Out) * std::size_t(n)) == 0);
  }
  return result;
}

template <class Out>
double as_double(Out v) {
  return double(kfuse::to_float(v));
}

/// Checks `got` against the double reference (rounded to Out) and against the generic arch.
template <class Out, class In, class Ep>
void check_against_reference(const std::vector<Out>& got, const std::vector<Out>& generic,
                             const In* in, index_t n, const Ep& ep, const kfuse::dims4* dims,
                             bool nhwc, std::string_view what) {
  int failures = 0;
  for (index_t i = 0; i < n && failures < 5; ++i) {
    index_t c = 0;
    if (dims) c = nhwc ? i % dims->c : (i / (dims->h * dims->w)) % dims->c;
    const double exact = ref_epilogue(ep, double(kfuse::to_float(in[i])), ref_ctx{i, c});
    const double want = representable<Out>(exact);
    const double tol = tolerance<Out>(exact);
    const double g = as_double(got[std::size_t(i)]);
    const double s = as_double(generic[std::size_t(i)]);
    const bool same_inf = std::isinf(want) && g == want && s == want;
    if (!same_inf && (!(std::fabs(g - want) <= tol) || !(std::fabs(g - s) <= 2 * tol))) {
      ++failures;
      UNSCOPED_INFO(what << " i=" << i << " in=" << kfuse::to_float(in[i]) << " got=" << g
                         << " reference=" << want << " generic=" << s << " tol=" << tol);
    }
  }
  CHECK(failures == 0);
}

using kt::impl_prefix;

// The generic (scalar) run a SIMD result is also compared with; WithGeneric = false compares
// with the double reference only (halves the instantiations where generic is covered elsewhere).
template <bool WithGeneric, class B, class In, class Out, class Ep, class L = void>
std::vector<Out> generic_or(const std::vector<Out>& got, const In* in, index_t n, const Ep& ep,
                            const kfuse::dims4* dims) {
  if constexpr (WithGeneric)
    return run_eltwise<kfuse::arch::generic, B, In, Out, Ep, L>(in, n, ep, dims, "scalar");
  else
    return got;
}

/// Flat runs of many lengths, plus in-place when the types allow it.
template <class B, class In, class Out, bool WithGeneric = true, class Ep>
void check_flat(const Ep& ep, std::mt19937& rng, float lo = -6.f, float hi = 6.f) {
  using V = kfuse::simd::vec_for<test_arch, B>;
  for (index_t n : test_lengths(V::lanes)) {
    guarded<In> in(n, 0);
    fill_random(in.data, n, rng, lo, hi);
    const auto got = run_eltwise<test_arch, B, In, Out>(in.data, n, ep, nullptr, impl_prefix<B>());
    const auto generic = generic_or<WithGeneric, B, In, Out>(got, in.data, n, ep, nullptr);
    check_against_reference(got, generic, in.data, n, ep, nullptr, false,
                            "flat n=" + std::to_string(n));
    if constexpr (std::is_same_v<In, Out>) {
      if (n > 0) {  // memcmp's pointers must not be null, even for 0 bytes
        std::vector<In> inplace(in.data, in.data + n);
        kfuse::eltwise<test_arch, B>(inplace.data(), inplace.data(), n, ep);
        CHECK(std::memcmp(inplace.data(), got.data(), sizeof(In) * std::size_t(n)) == 0);
      }
    }
  }
}

/// Dense 4-D tensors in both layouts (per-channel stages see the right channel).
template <class B, class In, class Out, bool WithGeneric = true, class Ep>
void check_layouts(const Ep& ep, const kfuse::dims4& d, std::mt19937& rng) {
  const index_t n = kfuse::numel(d);
  guarded<In> in(n, 0);
  fill_random(in.data, n, rng);
  {
    const auto got =
        run_eltwise<test_arch, B, In, Out, Ep, kfuse::nchw>(in.data, n, ep, &d, impl_prefix<B>());
    const auto generic =
        generic_or<WithGeneric, B, In, Out, Ep, kfuse::nchw>(got, in.data, n, ep, &d);
    check_against_reference(got, generic, in.data, n, ep, &d, false, "nchw");
  }
  {
    const auto got =
        run_eltwise<test_arch, B, In, Out, Ep, kfuse::nhwc>(in.data, n, ep, &d, impl_prefix<B>());
    const auto generic =
        generic_or<WithGeneric, B, In, Out, Ep, kfuse::nhwc>(got, in.data, n, ep, &d);
    check_against_reference(got, generic, in.data, n, ep, &d, true, "nhwc");
  }
}

}  // namespace kt
