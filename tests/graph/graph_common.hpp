#pragma once
// Shared helpers of the graph tests: seeded data, a small MLP with a residual branch, and the
// same computation through the kernels called one by one.
#include <random>
#include <string>
#include <vector>

#include "graph/compiler_instance.hpp"
#include "support/test_support.hpp"

namespace gt {

using kfuse::index_t;

/// The plan's step named `name` (nullptr: none).
inline const kfuse::step_info* step_named(const kfuse::plan& p, const std::string& name) {
  for (const kfuse::step_info& s : p.steps())
    if (s.name == name) return &s;
  return nullptr;
}

inline std::vector<float> random_vec(std::size_t n, std::uint32_t seed, float lo = -1.f,
                                     float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

/// Kaiming-style weights for a [N, K] layer.
inline std::vector<float> kaiming(index_t N, index_t K, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, std::sqrt(2.f / float(K)));
  std::vector<float> v(std::size_t(N * K));
  for (float& x : v) x = d(rng);
  return v;
}

/// y = relu(fc2(gelu(fc1(x))) * 0.5 + fc_skip(x)), then fc3 with bias; M rows.
struct mlp {
  index_t M, K = 37, H = 50, N = 11;
  std::vector<float> w1, b1, w2, ws, w3, b3;
  explicit mlp(index_t m) : M(m) {
    w1 = kaiming(H, K, 1);
    b1 = random_vec(std::size_t(H), 2, -0.1f, 0.1f);
    w2 = kaiming(H, H, 3);
    ws = kaiming(H, K, 4);
    w3 = kaiming(N, H, 5);
    b3 = random_vec(std::size_t(N), 6, -0.1f, 0.1f);
  }
  kfuse::graph build() const {
    kfuse::graph g;
    auto x = g.input("x", {M, K});
    auto h1 = g.gelu("gelu1", g.linear("fc1", x, g.constant("w1", {H, K}, w1.data()),
                                       g.constant("b1", {H}, b1.data())));
    auto h2 = g.scale("half", g.linear("fc2", h1, g.constant("w2", {H, H}, w2.data())), 0.5f);
    auto skip = g.linear("fc_skip", x, g.constant("ws", {H, K}, ws.data()));
    auto r = g.relu("relu", g.add("residual", skip, h2));
    auto y =
        g.linear("fc3", r, g.constant("w3", {N, H}, w3.data()), g.constant("b3", {N}, b3.data()));
    g.output(y);
    return g;
  }
  /// The same through the kernels, one call per op, unfused, intermediates in vectors.
  std::vector<float> direct(const std::vector<float>& x) const {
    using namespace kfuse;
    using G = gemm<f32>;
    auto lin = [&](const std::vector<float>& a, index_t k, const std::vector<float>& w, index_t n) {
      std::vector<float> out(std::size_t(M * n));
      const auto pw = G::pack(w.data(), k, n, b_layout::nk);
      G::run(a.data(), M, k, pw, out.data(), n);
      return out;
    };
    auto ew = [&](std::vector<float> v, index_t n, auto ep) {
      std::vector<float> out(v.size());
      eltwise(view<nhwc>(static_cast<const float*>(v.data()), dims4{M, n, 1, 1}),
              view<nhwc>(out.data(), dims4{M, n, 1, 1}), ep);
      return out;
    };
    auto h1 = lin(x, K, w1, H);
    h1 = ew(h1, H, epilogue<bias>{bias{b1}});
    h1 = ew(h1, H, epilogue<gelu_tanh>{});
    auto h2 = ew(lin(h1, H, w2, H), H, epilogue<scale>{scale{0.5f}});
    auto s = lin(x, K, ws, H);
    auto r = ew(s, H, epilogue<add<f32>>{add<f32>{{h2}}});
    r = ew(r, H, epilogue<relu>{});
    auto y = lin(r, H, w3, N);
    return ew(y, N, epilogue<bias>{bias{b3}});
  }
  /// Double-precision reference.
  std::vector<double> reference(const std::vector<float>& x) const {
    auto lin = [&](const std::vector<double>& a, index_t k, const std::vector<float>& w, index_t n,
                   const std::vector<float>* b) {
      std::vector<double> out(std::size_t(M * n));
      for (index_t m = 0; m < M; ++m)
        for (index_t j = 0; j < n; ++j) {
          double acc = b ? (*b)[std::size_t(j)] : 0.0;
          for (index_t q = 0; q < k; ++q)
            acc += a[std::size_t(m * k + q)] * w[std::size_t(j * k + q)];
          out[std::size_t(m * n + j)] = acc;
        }
      return out;
    };
    std::vector<double> xd(x.begin(), x.end());
    auto h1 = lin(xd, K, w1, H, &b1);
    for (double& v : h1)
      v = 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    auto h2 = lin(h1, H, w2, H, nullptr);
    auto s = lin(xd, K, ws, H, nullptr);
    for (std::size_t i = 0; i < s.size(); ++i) s[i] = std::max(0.0, s[i] + 0.5 * h2[i]);
    return lin(s, H, w3, N, &b3);
  }
};

/// A small CNN on NHWC 12x12 images (batch N unless build() is given another): conv3x3-BN-ReLU,
/// depthwise 3x3, hardswish, global average pool, linear to 10 classes.
struct cnn {
  static constexpr index_t N = 2, C = 16, H = 12, W = 12, K = 10;
  std::vector<float> w1 = kaiming(C, C * 9, 11), dw = kaiming(C, 9, 12),
                     mean = random_vec(C, 13, -0.1f, 0.1f), var = random_vec(C, 14, 0.5f, 1.5f),
                     gamma = random_vec(C, 15, 0.9f, 1.1f), beta = random_vec(C, 16, -0.1f, 0.1f),
                     fw = kaiming(K, C, 17), fb = random_vec(K, 18, -0.1f, 0.1f);
  /// The same network for a batch of `n` images.
  kfuse::graph build(index_t n = N) const {
    using namespace kfuse;
    graph g;
    auto x = g.input("x", {n, C, H, W}, dtype::f32, tensor_layout::nhwc);
    conv2d_params same;
    same.pad_top = same.pad_left = same.pad_bottom = same.pad_right = 1;
    auto c1 = g.conv2d("conv1", x, g.constant("w1", {C, C, 3, 3}, w1.data()), {}, same);
    auto bn = g.batch_norm(
        "bn1", c1, g.constant("mean", {C}, mean.data()), g.constant("var", {C}, var.data()),
        g.constant("gamma", {C}, gamma.data()), g.constant("beta", {C}, beta.data()), 1e-5f);
    auto r = g.relu("relu1", bn);
    conv2d_params dwp = same;
    dwp.groups = int(C);
    auto d = g.hardswish("hswish",
                         g.conv2d("dw", r, g.constant("dw.w", {C, 1, 3, 3}, dw.data()), {}, dwp));
    pool2d_params gap;
    gap.kind = kfuse::pool_kind::avg;
    gap.global = true;
    auto pooled = g.flatten("flatten", g.pool2d("gap", d, gap));
    g.output(g.linear("fc", pooled, g.constant("fc.w", {K, C}, fw.data()),
                      g.constant("fc.b", {K}, fb.data())));
    return g;
  }
};

/// An executor over a pool of its own (so one process tries pools of 1..8 threads).
struct pool_executor {
  kfuse::thread_pool pool;
  explicit pool_executor(int n) : pool(n) {}
  kfuse::executor get() {
    kfuse::executor e;
    e.context = this;
    e.concurrency = pool.size();
    e.run = [](void* ctx, int n, void (*task)(void*, int), void* arg) {
      static_cast<pool_executor*>(ctx)->pool.parallel_for(0, n, 1, [&](kfuse::range r, int) {
        for (index_t i = r.begin; i < r.end; ++i) task(arg, int(i));
      });
    };
    return e;
  }
};

inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace gt
