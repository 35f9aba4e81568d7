// conv_transpose2d: geometries (2x2 stride 2 as in U-Nets, 4x4 stride 2 pad 1 as in GAN decoders,
// 3x3 stride 2 with output padding, stride 1, dilation, groups, a window smaller than the stride
// so some pixels get no tap, 1x1 images, tails of every vector width, columns so wide that a
// scratch block is a few pixels), with and without bias, against a double-precision scatter
// reference (the kernel gathers per band: a different order of the same sums); poisoned outputs,
// 1 vs 2 threads bitwise, and the errors of a bad call.
#include "kfuse/kernels/conv/conv_transpose2d.hpp"

#include "support/test_support.hpp"

using namespace kt;
using kfuse::conv_transpose_shape;

namespace {

using K = kfuse::conv_transpose2d<test_arch>;

conv_transpose_shape make_t(index_t n, index_t c, index_t h, index_t w, index_t k, index_t r,
                            index_t stride, index_t pad, index_t out_pad = 0, index_t dil = 1,
                            index_t groups = 1) {
  conv_transpose_shape s;
  s.n = n, s.c = c, s.h = h, s.w = w, s.k = k, s.r = r, s.s = r;
  s.stride_h = s.stride_w = stride;
  s.dilation_h = s.dilation_w = dil;
  s.pad_top = s.pad_left = pad;
  s.groups = groups;
  s.out_h = conv_transpose_shape::natural(h, stride, dil, r, 2 * pad) + out_pad;
  s.out_w = conv_transpose_shape::natural(w, stride, dil, r, 2 * pad) + out_pad;
  return s;
}

std::vector<conv_transpose_shape> shapes() {
  std::vector<conv_transpose_shape> v = {
      make_t(1, 64, 16, 16, 32, 2, 2, 0),        // U-Net up-sampling
      make_t(2, 13, 5, 7, 17, 4, 2, 1),          // 4x4 stride 2 pad 1, odd channels, batch 2
      make_t(1, 9, 6, 5, 11, 3, 2, 1, 1),        // output padding: a row and column of bias
      make_t(1, 7, 8, 8, 5, 3, 1, 1),            // stride 1 (a plain conv's adjoint)
      make_t(1, 6, 5, 6, 10, 3, 2, 2, 0, 2),     // dilation 2
      make_t(1, 8, 5, 5, 12, 3, 2, 1, 0, 1, 4),  // groups 4
      make_t(1, 5, 4, 4, 6, 2, 3, 0),            // R < stride: pixels no tap reaches
      make_t(1, 3, 1, 1, 19, 3, 2, 0),           // a 1x1 image
      make_t(1, 16, 3, 9, 33, 5, 3, 2, 2),       // stride 3, pads, output padding 2
      make_t(1, 8, 5, 7, 300, 4, 2, 1),          // 4800 columns: 8-pixel scratch blocks
  };
  conv_transpose_shape a = make_t(1, 4, 5, 3, 6, 3, 2, 0);
  a.s = 2, a.stride_w = 1, a.pad_left = 1;  // unequal axes
  a.out_w = conv_transpose_shape::natural(a.w, 1, 1, 2, 2);
  v.push_back(a);
  return v;
}

/// y[n, oh, ow, k] = bias + sum over (c, r, s) whose tap lands on (oh, ow), as a scatter.
struct reference {
  std::vector<double> y, mag;
  reference(const conv_transpose_shape& s, const std::vector<float>& x, const std::vector<float>& w,
            const std::vector<float>& bias) {
    const index_t cg = s.c / s.groups, kg = s.k / s.groups;
    const std::size_t n_out = std::size_t(s.n * s.out_h * s.out_w * s.k);
    y.assign(n_out, 0.0);
    mag.assign(n_out, 0.0);
    for (index_t n = 0; n < s.n; ++n)
      for (index_t ih = 0; ih < s.h; ++ih)
        for (index_t iw = 0; iw < s.w; ++iw)
          for (index_t c = 0; c < s.c; ++c) {
            const double xv = x[std::size_t(((n * s.h + ih) * s.w + iw) * s.c + c)];
            const index_t g = c / cg;
            for (index_t ko = 0; ko < kg; ++ko)
              for (index_t r = 0; r < s.r; ++r)
                for (index_t q = 0; q < s.s; ++q) {
                  const index_t oh = ih * s.stride_h - s.pad_top + r * s.dilation_h;
                  const index_t ow = iw * s.stride_w - s.pad_left + q * s.dilation_w;
                  if (oh < 0 || oh >= s.out_h || ow < 0 || ow >= s.out_w) continue;
                  const double p = xv * w[std::size_t(((c * kg + ko) * s.r + r) * s.s + q)];
                  const std::size_t o =
                      std::size_t(((n * s.out_h + oh) * s.out_w + ow) * s.k + g * kg + ko);
                  y[o] += p;
                  mag[o] += std::fabs(p);
                }
          }
    if (!bias.empty())
      for (std::size_t i = 0; i < n_out; ++i) y[i] += bias[i % std::size_t(s.k)];
  }
};

std::vector<float> run(const conv_transpose_shape& s, const K::packed& p,
                       const std::vector<float>& x, int threads) {
  const index_t n_out = kfuse::numel(s.out_dims());
  guarded<float> y(n_out, 0xFF);  // NaN: every output must be written
  kfuse::workspace_buffer ws(K::workspace_size(s, threads));
  const auto info =
      K::run(kfuse::view<kfuse::nhwc>(x.data(), s.in_dims()), p,
             kfuse::view<kfuse::nhwc>(y.data, s.out_dims()), {}, ws.view(), {threads});
  CHECK(info.kernel == "conv_transpose2d");
  CHECK(info.threads >= 1);
  CHECK(y.guards_intact());
  return {y.data, y.data + n_out};
}

}  // namespace

TEST_CASE("conv_transpose2d: geometries vs the double scatter reference, 1 and 2 threads",
          "[conv_transpose2d]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(17);
  for (const conv_transpose_shape& s : shapes()) {
    for (const bool with_bias : {true, false}) {
      std::vector<float> x(std::size_t(kfuse::numel(s.in_dims()))),
          w(std::size_t(s.c * (s.k / s.groups) * s.r * s.s)), bias;
      fill_random(x.data(), index_t(x.size()), rng, -2.f, 2.f);
      fill_random(w.data(), index_t(w.size()), rng, -1.f, 1.f);
      if (with_bias) {
        bias.resize(std::size_t(s.k));
        fill_random(bias.data(), s.k, rng, -1.f, 1.f);
      }
      const reference ref(s, x, w, bias);
      const K::packed p = K::initialize(s, w.data(), with_bias ? bias.data() : nullptr);
      const std::vector<float> y1 = run(s, p, x, 1), y2 = run(s, p, x, 2);
      CHECK(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)) == 0);
      int failures = 0;
      for (std::size_t i = 0; i < y1.size(); ++i) {
        // f32 products summed in another order: a few units of rounding of the magnitudes.
        const double tol = 4e-7 * (ref.mag[i] + std::fabs(ref.y[i])) * 4 + 1e-7;
        if (!(std::fabs(y1[i] - ref.y[i]) <= tol) && failures++ < 5)
          UNSCOPED_INFO("C" << s.c << " " << s.h << "x" << s.w << " K" << s.k << " " << s.r << "x"
                            << s.s << " stride " << s.stride_h << " groups " << s.groups
                            << (with_bias ? " bias" : "") << " at " << i << ": got " << y1[i]
                            << " want " << ref.y[i]);
      }
      CHECK(failures == 0);
    }
  }
}

TEST_CASE("conv_transpose2d: bad calls throw kfuse::error naming the kernel",
          "[conv_transpose2d][errors]") {
  if (!cpu_can_run()) return;
  const conv_transpose_shape s = make_t(1, 4, 3, 3, 6, 2, 2, 0);
  std::vector<float> w(std::size_t(4 * 6 * 4), 0.5f), x(std::size_t(kfuse::numel(s.in_dims())));
  std::vector<float> y(std::size_t(kfuse::numel(s.out_dims())));
  const K::packed p = K::initialize(s, w.data(), nullptr);
  kfuse::workspace_buffer ws(K::workspace_size(s, 2));
  auto call = [&](kfuse::dims4 in, kfuse::dims4 out, kfuse::workspace wsv) {
    K::run(kfuse::view<kfuse::nhwc>(x.data(), in), p, kfuse::view<kfuse::nhwc>(y.data(), out), {},
           wsv, {1});
  };
  CHECK_NOTHROW(call(s.in_dims(), s.out_dims(), ws.view()));
  CHECK_THROWS_WITH(call({1, 5, 3, 3}, s.out_dims(), ws.view()),
                    Catch::Contains("conv_transpose2d") && Catch::Contains("input"));
  CHECK_THROWS_WITH(call(s.in_dims(), {1, 6, 6, 5}, ws.view()),
                    Catch::Contains("conv_transpose2d") && Catch::Contains("output"));
  CHECK_THROWS_WITH(call(s.in_dims(), s.out_dims(), kfuse::workspace{}),
                    Catch::Contains("conv_transpose2d") && Catch::Contains("workspace"));
  CHECK_THROWS_WITH(K::run(kfuse::view<kfuse::nhwc>(x.data(), s.in_dims()), K::packed{},
                           kfuse::view<kfuse::nhwc>(y.data(), s.out_dims()), {}, ws.view()),
                    Catch::Contains("empty"));
  conv_transpose_shape bad = s;
  bad.groups = 4;
  bad.k = 6;
  CHECK_FALSE(K::can_implement(bad).ok());
  CHECK_THROWS_WITH(K::initialize(bad, w.data(), nullptr), Catch::Contains("groups"));
  bad = s;
  bad.out_h = 0;
  CHECK_THROWS_AS(K::workspace_size(bad, 1), kfuse::error);
  bad = s;
  bad.k = index_t(1) << 40;
  bad.r = bad.s = index_t(1) << 20;
  CHECK_THROWS_WITH(K::initialize(bad, w.data(), nullptr), Catch::Contains("conv_transpose2d"));
}
