// bn::run_arch::operator()<A> for this TU's arch::native: every bf16 computation of
// bf16_numerics.hpp, with each backend this arch has. Compiled once per arch of the build, each
// time with only that arch's flags (kfuse_add_arch_sources in bf16_numerics_tests.cmake).
#include "kfuse/kfuse.hpp"
#include "numerics/bf16_numerics.hpp"

namespace bn {
namespace {

template <class A, class B>
backend_out run_backend(const inputs& in) {
  using namespace kfuse;
  backend_out o;
  o.impl = simd::impl_name<A, B>();

  // The graph's f32 -> bf16 activation cast (compile.hpp: convert_cmd, eltwise with cast<bf16>).
  o.cast_out.resize(in.cast_in.size());
  eltwise<A, B>(in.cast_in.data(), o.cast_out.data(), index_t(in.cast_in.size()),
                epilogue<cast<bf16>>{{}});

  using G = gemm<bf16, A, epilogue<>, B>;
  using GQ = gemm<bf16, A, epilogue<bias, quantize<i8>>, B>;
  for (int i = 0; i < n_gemm; ++i) {
    const gemm_case& g = gemm_cases[i];
    const auto w = G::pack(in.gemm_b[i].data(), g.k, g.n, g.layout);
    o.gemm_c[i].resize(std::size_t(g.m * g.n));
    o.gemm_kernel = G::run(in.gemm_a[i].data(), g.m, g.k, w, o.gemm_c[i].data(), g.n).micro_kernel;
    const auto wq = GQ::pack(in.gemm_b[i].data(), g.k, g.n, g.layout);
    o.gemm_q[i].resize(std::size_t(g.m * g.n));
    GQ::run(in.gemm_a[i].data(), g.m, g.k, wq, o.gemm_q[i].data(), g.n,
            {{in.gemm_bias[i]}, {{q_scale, q_zero}}});
  }

  for (int i = 0; i < n_conv; ++i) {
    const conv_case& c = conv_cases()[std::size_t(i)];
    o.conv_y[i].resize(std::size_t(numel(c.s.out_dims())));
    auto run = [&]<class L>(L) {
      using C = conv2d<bf16, L, A, epilogue<>, B>;
      const auto w = C::pack(in.conv_w[i].data(), c.s);
      o.conv_kernel[i] = C::run(view<L>(in.conv_x[i].data(), c.s.in_dims()), w,
                                view<L>(o.conv_y[i].data(), c.s.out_dims()))
                             .micro_kernel;
    };
    if (c.nhwc)
      run(nhwc{});
    else
      run(nchw{});
  }
  return o;
}

}  // namespace

template <class A>
arch_out run_arch::operator()(A, const inputs& in) const {
  arch_out r;
  r.compiled_arch = std::string(kfuse::compiled_arch());
  r.backends.push_back(run_backend<A, kfuse::backend::xsimd>(in));
  // Highway is a second vector implementation of the same arch (the generic arch runs the scalar
  // impl with either backend tag; plain armv8-a has no Highway target).
  if constexpr (!std::is_same_v<A, kfuse::arch::generic> && KFUSE_WITH_HWY)
    r.backends.push_back(run_backend<A, kfuse::backend::hwy>(in));
  return r;
}

template arch_out run_arch::operator()(kfuse::arch::native, const inputs&) const;

}  // namespace bn
