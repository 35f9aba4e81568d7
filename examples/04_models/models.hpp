#pragma once
// The two models of the demo and of bench/models_bench.cpp, with seeded weights:
//
//   MLP    784 -> 1024 -> 1024 -> 10, ReLU, softmax (PyTorch Linear layout, weights [out, in])
//   block  ResNet basic block on an NHWC image: conv3x3-BN-ReLU, conv3x3-BN, + input, ReLU,
//          then global average pool and a linear layer to 10 classes (convs without bias)
//
// Weights: Kaiming normal, N(0, sqrt(2 / fan_in)) (what ReLU networks are initialised with and
// keep roughly at that scale when trained); biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (PyTorch's
// default). Batch norm: running mean N(0, 0.1), running variance U(0.5, 1.5), gamma
// 1 + N(0, 0.1), beta N(0, 0.1). Inputs: standard normal (MLP: N(0, 1) features; block: N(0, 1)
// images), so every layer sees activations of the scale a trained network's see.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kfuse/graph/graph.hpp"

namespace models {

using kfuse::index_t;

class rng {
 public:
  explicit rng(std::uint64_t seed) : g_(seed) {}
  std::vector<float> normal(std::size_t n, double mean, double stddev) {
    std::normal_distribution<double> d(mean, stddev);
    std::vector<float> v(n);
    for (auto& x : v) x = float(d(g_));
    return v;
  }
  std::vector<float> uniform(std::size_t n, double lo, double hi) {
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = float(d(g_));
    return v;
  }
  /// Kaiming (He) normal for a layer with `fan_in` inputs per output.
  std::vector<float> kaiming(std::size_t n, index_t fan_in) {
    return normal(n, 0.0, std::sqrt(2.0 / double(fan_in)));
  }
  std::vector<float> bias(std::size_t n, index_t fan_in) {
    const double b = 1.0 / std::sqrt(double(fan_in));
    return uniform(n, -b, b);
  }

 private:
  std::mt19937_64 g_;
};

// ---- MLP ---------------------------------------------------------------------------------------
struct mlp_weights {
  static constexpr index_t in = 784, hidden = 1024, out = 10;
  std::vector<float> w1, b1, w2, b2, w3, b3;  // w: [out, in]

  static mlp_weights make(std::uint64_t seed) {
    rng r(seed);
    mlp_weights m;
    m.w1 = r.kaiming(hidden * in, in);
    m.b1 = r.bias(hidden, in);
    m.w2 = r.kaiming(hidden * hidden, hidden);
    m.b2 = r.bias(hidden, hidden);
    m.w3 = r.kaiming(out * hidden, hidden);
    m.b3 = r.bias(out, hidden);
    return m;
  }
  static double flops(index_t batch) {
    return 2.0 * double(batch) * double(in * hidden + hidden * hidden + hidden * out);
  }
};

/// The MLP's graph and the tensors an int8 plan needs quantization parameters for (the inputs
/// of the three linear layers).
struct mlp_graph {
  kfuse::graph g;
  kfuse::tensor_id x, h1, h2, y;
  std::vector<kfuse::tensor_id> linear_inputs() const { return {x, h1, h2}; }
};

inline mlp_graph build_mlp(const mlp_weights& m, index_t batch) {
  using W = mlp_weights;
  mlp_graph r;
  auto& g = r.g;
  r.x = g.input("x", {batch, W::in});
  auto w1 = g.constant("fc1.w", {W::hidden, W::in}, m.w1.data());
  auto b1 = g.constant("fc1.b", {W::hidden}, m.b1.data());
  auto w2 = g.constant("fc2.w", {W::hidden, W::hidden}, m.w2.data());
  auto b2 = g.constant("fc2.b", {W::hidden}, m.b2.data());
  auto w3 = g.constant("fc3.w", {W::out, W::hidden}, m.w3.data());
  auto b3 = g.constant("fc3.b", {W::out}, m.b3.data());
  r.h1 = g.relu("relu1", g.linear("fc1", r.x, w1, b1));
  r.h2 = g.relu("relu2", g.linear("fc2", r.h1, w2, b2));
  r.y = g.softmax("softmax", g.linear("fc3", r.h2, w3, b3));
  g.output(r.y);
  return r;
}

/// Double-precision forward pass of the MLP for `rows` rows of x (the check of the fp32 plan).
inline std::vector<double> mlp_reference(const mlp_weights& m, const float* x, index_t rows) {
  using W = mlp_weights;
  auto linear = [](const std::vector<double>& in, const std::vector<float>& w,
                   const std::vector<float>& b, index_t K, index_t N, bool relu) {
    std::vector<double> out(static_cast<std::size_t>(N));
    for (index_t n = 0; n < N; ++n) {
      double s = b[std::size_t(n)];
      for (index_t k = 0; k < K; ++k) s += in[std::size_t(k)] * double(w[std::size_t(n * K + k)]);
      out[std::size_t(n)] = relu ? std::max(s, 0.0) : s;
    }
    return out;
  };
  std::vector<double> y;
  for (index_t r = 0; r < rows; ++r) {
    std::vector<double> in(x + r * W::in, x + (r + 1) * W::in);
    auto h1 = linear(in, m.w1, m.b1, W::in, W::hidden, true);
    auto h2 = linear(h1, m.w2, m.b2, W::hidden, W::hidden, true);
    auto z = linear(h2, m.w3, m.b3, W::hidden, W::out, false);
    double mx = z[0], sum = 0;
    for (double v : z) mx = std::max(mx, v);
    for (double& v : z) sum += (v = std::exp(v - mx));
    for (double v : z) y.push_back(v / sum);
  }
  return y;
}

// ---- ResNet basic block ------------------------------------------------------------------------
struct bn_params {
  std::vector<float> mean, var, gamma, beta;
  static bn_params make(rng& r, index_t c) {
    return {r.normal(std::size_t(c), 0.0, 0.1), r.uniform(std::size_t(c), 0.5, 1.5),
            r.normal(std::size_t(c), 1.0, 0.1), r.normal(std::size_t(c), 0.0, 0.1)};
  }
};

struct block_weights {
  static constexpr index_t classes = 10;
  static constexpr float bn_eps = 1e-5f;
  index_t c = 64;
  std::vector<float> w1, w2;  // OIHW [c, c, 3, 3]
  bn_params bn1, bn2;
  std::vector<float> fc_w, fc_b;  // [classes, c], [classes]

  static block_weights make(std::uint64_t seed, index_t channels) {
    rng r(seed);
    block_weights b;
    b.c = channels;
    const auto n = std::size_t(channels * channels * 9);
    b.w1 = r.kaiming(n, channels * 9);
    b.bn1 = bn_params::make(r, channels);
    b.w2 = r.kaiming(n, channels * 9);
    b.bn2 = bn_params::make(r, channels);
    b.fc_w = r.kaiming(std::size_t(classes * channels), channels);
    b.fc_b = r.bias(classes, channels);
    return b;
  }
  /// FLOPs per run (padded taps counted, the kfuse convention).
  double flops(index_t batch, index_t h, index_t w) const {
    return 2.0 * 2.0 * double(batch * h * w) * double(c * c * 9) +
           2.0 * double(batch) * double(classes * c);
  }
};

struct block_graph {
  kfuse::graph g;
  kfuse::tensor_id x, r1, y;
  std::vector<kfuse::tensor_id> conv_inputs() const { return {x, r1}; }
  std::vector<kfuse::tensor_id> calibrated() const { return {x, r1, pooled}; }
  kfuse::tensor_id pooled;
};

/// Input x: (N, C, H, W) stored NHWC; output: logits [N, classes].
inline block_graph build_block(const block_weights& b, index_t batch, index_t h, index_t w) {
  block_graph r;
  auto& g = r.g;
  const index_t c = b.c;
  r.x = g.input("x", {batch, c, h, w}, kfuse::dtype::f32, kfuse::tensor_layout::nhwc);
  auto bn = [&](const char* name, const bn_params& p) {
    return std::array<kfuse::tensor_id, 4>{
        g.constant(std::string(name) + ".mean", {c}, p.mean.data()),
        g.constant(std::string(name) + ".var", {c}, p.var.data()),
        g.constant(std::string(name) + ".gamma", {c}, p.gamma.data()),
        g.constant(std::string(name) + ".beta", {c}, p.beta.data())};
  };
  kfuse::conv2d_params same;
  same.pad_top = same.pad_left = same.pad_bottom = same.pad_right = 1;
  auto w1 = g.constant("conv1.w", {c, c, 3, 3}, b.w1.data());
  auto w2 = g.constant("conv2.w", {c, c, 3, 3}, b.w2.data());
  const auto p1 = bn("bn1", b.bn1), p2 = bn("bn2", b.bn2);
  auto c1 = g.conv2d("conv1", r.x, w1, {}, same);
  auto n1 = g.batch_norm("bn1", c1, p1[0], p1[1], p1[2], p1[3], block_weights::bn_eps);
  r.r1 = g.relu("relu1", n1);
  auto c2 = g.conv2d("conv2", r.r1, w2, {}, same);
  auto n2 = g.batch_norm("bn2", c2, p2[0], p2[1], p2[2], p2[3], block_weights::bn_eps);
  auto sum = g.add("residual", n2, r.x);
  auto r2 = g.relu("relu2", sum);
  kfuse::pool2d_params gap;
  gap.kind = kfuse::pool_kind::avg;
  gap.global = true;
  auto pooled = g.pool2d("avgpool", r2, gap);
  r.pooled = g.flatten("flatten", pooled);
  auto fw = g.constant("fc.w", {block_weights::classes, c}, b.fc_w.data());
  auto fb = g.constant("fc.b", {block_weights::classes}, b.fc_b.data());
  r.y = g.linear("fc", r.pooled, fw, fb);
  g.output(r.y);
  return r;
}

/// Double-precision forward pass of the block for image `n` of an NHWC batch.
inline std::vector<double> block_reference(const block_weights& b, const float* x_nhwc, index_t n,
                                           index_t h, index_t w) {
  const index_t c = b.c;
  const float* x = x_nhwc + n * h * w * c;
  auto conv_bn = [&](const std::vector<double>& in, const std::vector<float>& wt,
                     const bn_params& p) {
    std::vector<double> out(static_cast<std::size_t>(h * w * c));
    for (index_t oy = 0; oy < h; ++oy)
      for (index_t ox = 0; ox < w; ++ox)
        for (index_t k = 0; k < c; ++k) {
          double s = 0;
          for (index_t ky = 0; ky < 3; ++ky)
            for (index_t kx = 0; kx < 3; ++kx) {
              const index_t iy = oy + ky - 1, ix = ox + kx - 1;
              if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
              const double* src = &in[std::size_t((iy * w + ix) * c)];
              for (index_t ci = 0; ci < c; ++ci)
                s += src[ci] * double(wt[std::size_t(((k * c + ci) * 3 + ky) * 3 + kx)]);
            }
          const auto kk = std::size_t(k);
          s = (s - p.mean[kk]) / std::sqrt(double(p.var[kk]) + double(block_weights::bn_eps)) *
                  p.gamma[kk] +
              p.beta[kk];
          out[std::size_t((oy * w + ox) * c + k)] = s;
        }
    return out;
  };
  std::vector<double> in(x, x + h * w * c);
  auto a = conv_bn(in, b.w1, b.bn1);
  for (double& v : a) v = std::max(v, 0.0);
  auto o = conv_bn(a, b.w2, b.bn2);
  std::vector<double> pooled(static_cast<std::size_t>(c), 0.0);
  for (index_t i = 0; i < h * w; ++i)
    for (index_t k = 0; k < c; ++k) {
      const auto j = std::size_t(i * c + k);
      pooled[std::size_t(k)] += std::max(o[j] + in[j], 0.0);
    }
  for (double& v : pooled) v /= double(h * w);
  std::vector<double> y(static_cast<std::size_t>(block_weights::classes));
  for (index_t j = 0; j < block_weights::classes; ++j) {
    double s = b.fc_b[std::size_t(j)];
    for (index_t k = 0; k < c; ++k) s += pooled[std::size_t(k)] * b.fc_w[std::size_t(j * c + k)];
    y[std::size_t(j)] = s;
  }
  return y;
}

// ---- MobileNetV3-style small CNN ---------------------------------------------------------------
// The shape of MobileNetV3-small, shortened: a 3x3 stride-2 stem with hardswish, six inverted
// residual blocks (1x1 expansion, depthwise 3x3 or 5x5, optional squeeze-excite with ReLU and
// hardsigmoid, 1x1 projection, residual where the shape allows), a 1x1 head, global average pool
// and a linear layer to 10 classes. Convolutions carry a bias (batch norm folded). Input
// (N, 3, 224, 224), stored NHWC. scripts/make_models.py builds the same network in PyTorch.
struct mobile_block {
  index_t expand, out;
  int k, stride;
  index_t se;  // squeeze width (0: no squeeze-excite)
  bool hswish;
};

struct mobile_weights {
  static constexpr index_t stem = 16, head = 288, classes = 10, image = 224;
  static constexpr mobile_block blocks[] = {
      {16, 16, 3, 2, 8, false}, {72, 24, 3, 2, 0, false},  {88, 24, 3, 1, 0, false},
      {96, 40, 5, 2, 24, true}, {240, 40, 5, 1, 64, true}, {120, 48, 5, 2, 32, true},
  };
  struct conv {
    std::vector<float> w, b;
  };
  std::vector<conv> convs;  // in build order
  std::vector<conv> fcs;    // squeeze-excite linears and the classifier, in build order

  static mobile_weights make(std::uint64_t seed) {
    rng r(seed);
    mobile_weights m;
    auto add_conv = [&](index_t out, index_t in_per_group, int k) {
      const index_t fan_in = in_per_group * k * k;
      m.convs.push_back(
          {r.kaiming(std::size_t(out * fan_in), fan_in), r.bias(std::size_t(out), fan_in)});
    };
    auto add_fc = [&](index_t out, index_t in) {
      m.fcs.push_back({r.kaiming(std::size_t(out * in), in), r.bias(std::size_t(out), in)});
    };
    index_t c = stem;
    add_conv(stem, 3, 3);
    for (const mobile_block& b : blocks) {
      if (b.expand != c) add_conv(b.expand, c, 1);
      add_conv(b.expand, 1, b.k);
      if (b.se) add_fc(b.se, b.expand), add_fc(b.expand, b.se);
      add_conv(b.out, b.expand, 1);
      c = b.out;
    }
    add_conv(head, c, 1);
    add_fc(classes, head);
    return m;
  }
};

/// Input x: (1, 3, 224, 224) stored NHWC; output: logits [1, classes]. Batch 1 only: the
/// squeeze-excite multiply is a per-channel operand.
inline kfuse::graph build_mobile(const mobile_weights& m) {
  const index_t batch = 1;
  using M = mobile_weights;
  kfuse::graph g;
  std::size_t ci = 0, fi = 0;
  int uid = 0;
  auto name = [&](const char* what) { return std::string(what) + std::to_string(uid++); };
  auto conv = [&](kfuse::tensor_id x, index_t in, index_t out, int k, int stride, int groups) {
    const auto& w = m.convs[ci++];
    kfuse::conv2d_params p;
    p.stride_h = p.stride_w = stride;
    p.pad_top = p.pad_left = p.pad_bottom = p.pad_right = k / 2;
    p.groups = groups;
    const std::string n = name("conv");
    return g.conv2d(n, x, g.constant(n + ".w", {out, in / groups, k, k}, w.w.data()),
                    g.constant(n + ".b", {out}, w.b.data()), p);
  };
  auto fc = [&](kfuse::tensor_id x, index_t in, index_t out) {
    const auto& w = m.fcs[fi++];
    const std::string n = name("fc");
    return g.linear(n, x, g.constant(n + ".w", {out, in}, w.w.data()),
                    g.constant(n + ".b", {out}, w.b.data()));
  };
  auto act = [&](kfuse::tensor_id x, bool hs) {
    return hs ? g.hardswish(name("hswish"), x) : g.relu(name("relu"), x);
  };
  kfuse::pool2d_params gap;
  gap.kind = kfuse::pool_kind::avg;
  gap.global = true;
  auto x =
      g.input("x", {batch, 3, M::image, M::image}, kfuse::dtype::f32, kfuse::tensor_layout::nhwc);
  auto y = act(conv(x, 3, M::stem, 3, 2, 1), true);
  index_t c = M::stem;
  for (const mobile_block& b : M::blocks) {
    auto h = y;
    if (b.expand != c) h = act(conv(h, c, b.expand, 1, 1, 1), b.hswish);
    h = act(conv(h, b.expand, b.expand, b.k, b.stride, int(b.expand)), b.hswish);
    if (b.se) {
      auto s = g.flatten(name("flatten"), g.pool2d(name("se_pool"), h, gap));
      s = g.relu(name("relu"), fc(s, b.expand, b.se));
      s = g.hardsigmoid(name("hsigmoid"), fc(s, b.se, b.expand));
      // The channel multiply: a per-channel operand (batch 1: the gate has C values).
      kfuse::eltwise_stage gate{kfuse::stage_kind::mul};
      gate.operand = s;
      gate.per_channel = true;
      h = g.eltwise(name("se_mul"), h, {gate});
    }
    h = conv(h, b.expand, b.out, 1, 1, 1);
    if (b.stride == 1 && b.out == c) h = g.add(name("residual"), h, y);
    y = h;
    c = b.out;
  }
  y = act(conv(y, c, M::head, 1, 1, 1), true);
  y = g.flatten("flatten", g.pool2d("pool", y, gap));
  g.output(fc(y, M::head, M::classes));
  return g;
}

}  // namespace models
