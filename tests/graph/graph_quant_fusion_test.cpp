// Quantize absorption (compile.hpp fuse_quantize): a producer whose f32 output is only quantized
// writes the int8 tensor from its epilogue (chain, then quantize<E>): the input of an int8
// linear / conv (its convert command goes) and explicit quantize nodes (their step goes). Fused
// vs unfused plans agree within one quantization step of every quantized output; the report,
// the command count, the tensor types and the arena show the fusion; a tensor with a second use
// or that is a graph output keeps its f32 form and the consumer's convert.
#include <map>

#include "graph/graph_common.hpp"

using namespace kfuse;
using gt::index_t;

namespace {

constexpr bool have_int8 = graph_ops::gemm_available<i8, arch::native, backend::xsimd>();

std::size_t command_count(const plan& p) {
  std::size_t n = 0;
  for (const auto& s : p.data().commands) n += s.size();
  return n;
}

const plan_tensor& tensor(const plan& p, const std::string& name) {
  for (const plan_tensor& t : p.tensors())
    if (t.name == name) return t;
  FAIL("no plan tensor " << name);
  return p.tensors().front();
}

bool reported(const plan& p, const std::string& line) {
  for (const std::string& f : p.report().fused)
    if (f == line) return true;
  return false;
}

/// Runs p with f32 inputs and one output of `n` elements of T, twice with different poison
/// (NaN / 0x00 and 0xff for integers): every element must be written, both runs equal.
template <class T>
std::vector<T> run_poisoned(const plan& p, const std::vector<std::vector<float>>& xs,
                            std::size_t n) {
  std::vector<binding> in;
  for (const auto& x : xs) in.push_back(bind(x));
  std::vector<T> a(n), b(n);
  if constexpr (std::is_floating_point_v<T>) {
    std::fill(a.begin(), a.end(), std::numeric_limits<T>::quiet_NaN());
    std::fill(b.begin(), b.end(), std::numeric_limits<T>::quiet_NaN());
  } else {
    std::fill(a.begin(), a.end(), std::numeric_limits<T>::min());
    std::fill(b.begin(), b.end(), std::numeric_limits<T>::max());
  }
  const binding oa[] = {bind(a)}, ob[] = {bind(b)};
  auto r = p.record(in, oa);
  r.replay();
  p.run(in, ob);  // the eager path: same commands, fresh intermediates
  REQUIRE(std::memcmp(a.data(), b.data(), n * sizeof(T)) == 0);
  if constexpr (std::is_floating_point_v<T>)
    for (T v : a) REQUIRE(std::isfinite(v));
  return a;
}

/// Largest |a - b| in quantization steps of two int8 tensors.
template <class T>
int max_step_diff(const std::vector<T>& a, const std::vector<T>& b) {
  int d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(int(a[i]) - int(b[i])));
  return d;
}

/// Max |v| of graph tensors `names`, from an unfused f32 plan of `g` with them as outputs (the
/// calibration of these tests: scale = range / steps).
std::vector<float> ranges(graph g, const std::vector<std::string>& names,
                          const std::vector<std::vector<float>>& xs) {
  std::vector<std::size_t> slot;  // each name's output index
  for (const auto& n : names) {
    const tensor_id id = g.find(n);
    const auto& os = g.outputs();
    auto it = std::find_if(os.begin(), os.end(), [&](tensor_id o) { return o.index == id.index; });
    if (it == os.end()) {
      g.output(id);
      slot.push_back(g.outputs().size() - 1);
    } else {
      slot.push_back(std::size_t(it - os.begin()));
    }
  }
  const plan p = compile(g, {.threads = 1, .fuse = false});
  std::vector<std::vector<float>> outs;
  std::vector<binding> in, out;
  for (const auto& x : xs) in.push_back(bind(x));
  for (std::size_t k = 0; k < p.output_count(); ++k)
    outs.emplace_back(std::size_t(p.output(k).bytes / 4), 0.f);
  for (auto& o : outs) out.push_back(bind(o));
  p.run(in, out);
  std::vector<float> r;
  for (std::size_t k : slot) {
    float m = 0;
    for (float v : outs[k]) m = std::max(m, std::fabs(v));
    r.push_back(m);
  }
  return r;
}

// ---- MLP: x -> fc1 -> relu1 -> fc2 -> relu2 -> fc3 -> quantize (u8 output) -------------------
struct mlp8 {
  index_t M = 5, K = 37, H = 50, N = 11;
  std::vector<float> w1, b1, w2, b2, w3, b3, x;
  tensor_quant qx{2.f / 255, 128}, q1, q2, qy;
  mlp8() {
    w1 = gt::kaiming(H, K, 11);
    b1 = gt::random_vec(std::size_t(H), 12, -0.1f, 0.1f);
    w2 = gt::kaiming(H, H, 13);
    b2 = gt::random_vec(std::size_t(H), 14, -0.1f, 0.1f);
    w3 = gt::kaiming(N, H, 15);
    b3 = gt::random_vec(std::size_t(N), 16, -0.1f, 0.1f);
    x = gt::random_vec(std::size_t(M * K), 17);  // U(-1, 1): qx covers it
    const auto r = ranges(build(false), {"relu1", "relu2", "fc3"}, {x});
    q1 = {r[0] / 255, 0};  // after relu: [0, max]
    q2 = {r[1] / 255, 0};
    qy = {r[2] / 127, 128};  // logits: symmetric around the zero point
  }
  /// quantized_out: end in an explicit quantize node (u8 graph output), else the f32 logits.
  graph build(bool quantized_out, bool relu1_is_output = false, bool relu1_twice = false) const {
    graph g;
    auto xi = g.input("x", {M, K});
    auto h1 = g.relu("relu1", g.linear("fc1", xi, g.constant("w1", {H, K}, w1.data()),
                                       g.constant("b1", {H}, b1.data())));
    auto h2 = g.relu("relu2", g.linear("fc2", h1, g.constant("w2", {H, H}, w2.data()),
                                       g.constant("b2", {H}, b2.data())));
    auto y =
        g.linear("fc3", h2, g.constant("w3", {N, H}, w3.data()), g.constant("b3", {N}, b3.data()));
    g.output(quantized_out ? g.quantize("q", y, dtype::u8, qy) : y);
    if (relu1_is_output) g.output(h1);
    if (relu1_twice)  // a second int8 consumer of relu1
      g.output(g.linear("fc2b", h1, g.constant("w2b", {N, H}, w3.data())));
    return g;
  }
  void set_quant(graph& g) const {
    g.set_quant(g.find("x"), qx);
    g.set_quant(g.find("relu1"), q1);
    g.set_quant(g.find("relu2"), q2);
  }
};

}  // namespace

TEST_CASE("graph quant fusion: int8 MLP writes u8 activations from the gemm epilogue",
          "[graph][quant]") {
  if constexpr (!have_int8) {
    SUCCEED("no int8 gemm on this arch");
  } else {
    const mlp8 m;
    graph g = m.build(true);
    m.set_quant(g);
    const plan p = compile(g, {.threads = 1, .prec = precision::int8});
    const plan q = compile(g, {.threads = 1, .prec = precision::int8, .fuse = false});
    INFO(p.report().text());
    // fc1's input x is a graph input: it keeps its convert command.
    CHECK(reported(p, "fused relu1 (eltwise) into fc1 (linear)"));
    CHECK(reported(p, "fused quantize of fc2's input (u8) into fc1 (linear)"));
    CHECK(reported(p, "fused quantize of fc3's input (u8) into fc2 (linear)"));
    CHECK(reported(p, "fused q (quantize u8) into fc3 (linear)"));
    CHECK(p.report().fused.size() == 5);
    CHECK(q.report().fused.empty());
    // Steps: fc1, fc2, fc3 (relus and q absorbed); commands: x's convert + 3 gemms, against
    // 3 converts + 3 gemms + 2 relus + 1 quantize unfused.
    REQUIRE(p.steps().size() == 3);
    CHECK(q.steps().size() == 6);
    CHECK(command_count(p) == 4);
    CHECK(command_count(q) == 9);
    CHECK(p.data().commands[1].size() == 1);  // fc2: no convert
    CHECK(p.steps()[0].kernel.find("[mul, bias, relu, quantize u8]") != std::string::npos);
    CHECK(p.steps()[0].out_type == dtype::u8);
    CHECK(p.steps()[2].kernel.find("quantize u8]") != std::string::npos);
    CHECK(p.steps()[2].fused == std::vector<std::string>{"q"});
    // The intermediates are u8 now: the arena holds x's u8 copy and two u8 activations.
    CHECK(tensor(p, "relu1").type == dtype::u8);
    CHECK(tensor(p, "relu1").bytes == std::size_t(m.M * m.H));
    CHECK(tensor(q, "relu1").type == dtype::f32);
    CHECK(p.intermediate_bytes() == std::size_t(m.M * m.K + 2 * m.M * m.H));
    CHECK(p.arena_bytes() < q.arena_bytes());
    CHECK(p.arena_bytes() <= 64 * 12);  // 192 + 256 + 256 live in at most two pairs
    // The profiler's bytes: fc1 writes M*H bytes instead of 4*M*H.
    CHECK(q.steps()[0].bytes - p.steps()[0].bytes == 3.0 * double(m.M * m.H));

    const auto yp = run_poisoned<std::uint8_t>(p, {m.x}, std::size_t(m.M * m.N));
    const auto yq = run_poisoned<std::uint8_t>(q, {m.x}, std::size_t(m.M * m.N));
    // One quantization step of each quantized tensor (x, relu1, relu2, the u8 output y): the
    // fused epilogue quantizes the same f32 value the unfused plan stores and converts.
    INFO("steps: x " << m.qx.scale << ", relu1 " << m.q1.scale << ", relu2 " << m.q2.scale << ", y "
                     << m.qy.scale);
    CHECK(max_step_diff(yp, yq) <= 1);
    // 2 threads: bitwise the same as 1.
    const plan p2 = compile(g, {.threads = 2, .prec = precision::int8, .fork_join_ns = 0});
    CHECK(run_poisoned<std::uint8_t>(p2, {m.x}, yp.size()) == yp);
    // And the int8 plan tracks the f32 plan: dequantized y within a few steps of the f32 logits.
    graph gf = m.build(false);
    const auto yf = run_poisoned<float>(compile(gf, {.threads = 1}), {m.x}, yp.size());
    double worst = 0;
    for (std::size_t i = 0; i < yp.size(); ++i)
      worst = std::max(worst, std::fabs((double(yp[i]) - 128) * m.qy.scale - yf[i]) / m.qy.scale);
    INFO("int8 vs f32: " << worst << " steps of y");
    CHECK(worst <= 6);
  }
}

TEST_CASE("graph quant fusion: f32 logits of the fused int8 MLP match the unfused plan",
          "[graph][quant]") {
  if constexpr (have_int8) {
    const mlp8 m;
    graph g = m.build(false);
    m.set_quant(g);
    const plan p = compile(g, {.threads = 1, .prec = precision::int8});
    const plan q = compile(g, {.threads = 1, .prec = precision::int8, .fuse = false});
    CHECK(p.steps().size() == 3);
    CHECK(p.steps()[2].out_type == dtype::f32);
    const auto yp = run_poisoned<float>(p, {m.x}, std::size_t(m.M * m.N));
    const auto yq = run_poisoned<float>(q, {m.x}, yp.size());
    // A one-step change of an element of relu2 moves a logit by at most step(relu2) * |w3 row|
    // (dequantized weights: <= 1.01 |w|); of relu1, through fc2 as well.
    double w2max = 0, w3max = 0;
    for (index_t n = 0; n < m.H; ++n) {
      double s = 0;
      for (index_t k = 0; k < m.H; ++k) s += std::fabs(m.w2[std::size_t(n * m.H + k)]);
      w2max = std::max(w2max, s);
    }
    for (index_t n = 0; n < m.N; ++n) {
      double s = 0;
      for (index_t k = 0; k < m.H; ++k) s += std::fabs(m.w3[std::size_t(n * m.H + k)]);
      w3max = std::max(w3max, s);
    }
    const double bound =
        1.01 * w3max * (m.q2.scale + 1.01 * w2max * m.q1.scale / m.q2.scale * m.q2.scale);
    double worst = 0;
    for (std::size_t i = 0; i < yp.size(); ++i)
      worst = std::max(worst, double(std::fabs(yp[i] - yq[i])));
    INFO("max |fused - unfused| " << worst << ", one-step bound " << bound);
    CHECK(worst <= bound);
  }
}

TEST_CASE("graph quant fusion: no fusion into a tensor with a second use or a graph output",
          "[graph][quant]") {
  if constexpr (have_int8) {
    const mlp8 m;
    for (int variant = 0; variant < 2; ++variant) {
      graph g = m.build(false, variant == 0, variant == 1);
      m.set_quant(g);
      const plan p = compile(g, {.threads = 1, .prec = precision::int8});
      const plan q = compile(g, {.threads = 1, .prec = precision::int8, .fuse = false});
      INFO("variant " << variant << "\n" << p.report().text());
      CHECK_FALSE(reported(p, "fused quantize of fc2's input (u8) into fc1 (linear)"));
      CHECK(reported(p, "fused quantize of fc3's input (u8) into fc2 (linear)"));
      CHECK(tensor(p, "relu1").type == dtype::f32);
      CHECK(p.data().commands[1].size() == 2);  // fc2: convert relu1, then the gemm
      CHECK(p.steps()[1].name == "fc2");
      // Results: same as unfused for every output.
      std::vector<binding> in{bind(m.x)};
      const std::size_t n2 = variant == 0 ? std::size_t(m.M * m.H) : std::size_t(m.M * m.N);
      std::vector<float> a(std::size_t(m.M * m.N), std::nanf("")), a2(n2, std::nanf(""));
      std::vector<float> b(a.size(), std::nanf("")), b2(n2, std::nanf(""));
      p.record({bind(m.x)}, {bind(a), bind(a2)}).replay();
      q.record({bind(m.x)}, {bind(b), bind(b2)}).replay();
      CHECK(gt::bitwise_equal(a2, b2));  // relu1 itself, or fc2b (from relu1's convert)
      for (std::size_t i = 0; i < a.size(); ++i) REQUIRE(std::fabs(a[i] - b[i]) <= 1e-3);
    }
    // Invalid quant params are reported before anything is fused.
    graph g = m.build(false);
    m.set_quant(g);
    g.set_quant(g.find("relu1"), {0.1f, 300});
    CHECK_THROWS_WITH(compile(g, {.prec = precision::int8}),
                      "graph: tensor 'relu1': quant zero point 300 is outside [-128, 255]");
  }
}

TEST_CASE("graph quant fusion: explicit quantize nodes after a linear and an eltwise chain",
          "[graph][quant]") {
  const index_t M = 5, K = 37, N = 19;
  const auto w = gt::kaiming(N, K, 31), bv = gt::random_vec(std::size_t(N), 32, -0.1f, 0.1f);
  const auto xv = gt::random_vec(std::size_t(M * K), 33),
             ov = gt::random_vec(std::size_t(M * K), 34, 0.5f, 2.f);
  const tensor_quant qa{0.011f, 120}, qb{0.007f, -3}, qc{0.013f, 5};
  graph g;
  auto x = g.input("x", {M, K});
  auto other = g.input("other", {M, K});
  auto wt = g.constant("w", {N, K}, w.data());
  auto bt = g.constant("b", {N}, bv.data());
  // (1) f32 linear + bias + gelu -> quantize u8: fused into the gemm.
  g.output(g.quantize("qa", g.gelu("gelu", g.linear("fc", x, wt, bt)), dtype::u8, qa));
  // (2) eltwise chain x * other, clamp -> quantize i8: fused into the chain (one pass).
  g.output(g.quantize("qb", g.clamp("clamp", g.mul("mul", x, other), -0.8f, 0.9f), dtype::i8, qb));
  // (3) f32 linear -> quantize i8: no gemm with an i8 output is instantiated: stays a step.
  g.output(g.quantize("qc", g.linear("fc_i8", x, wt), dtype::i8, qc));
  const plan p = compile(g, {.threads = 1});
  const plan q = compile(g, {.threads = 1, .fuse = false});
  INFO(p.report().text());
  CHECK(reported(p, "fused qa (quantize u8) into fc (linear)"));
  CHECK(reported(p, "fused qb (quantize i8) into mul (eltwise)"));
  CHECK_FALSE(reported(p, "fused qc (quantize i8) into fc_i8 (linear)"));
  REQUIRE(p.steps().size() == 4);  // fc, mul, fc_i8, qc
  CHECK(q.steps().size() == 8);
  CHECK(command_count(p) == 4);
  CHECK(p.steps()[0].kernel.find("[bias, gelu_tanh, quantize u8]") != std::string::npos);
  CHECK(p.steps()[1].kernel == "eltwise [mul, clamp, quantize i8]");
  CHECK(p.steps()[3].kernel == "quantize");
  // fc and mul write into the output buffers: only fc_i8's f32 output is in the arena.
  CHECK(p.intermediate_bytes() == std::size_t(M * N * 4));
  CHECK(p.arena_bytes() < q.arena_bytes());

  const std::size_t na = std::size_t(M * N), nb = std::size_t(M * K);
  std::vector<std::uint8_t> ya(na, 0), za(na, 0);
  std::vector<std::int8_t> yb(nb, 0), zb(nb, 0), yc(na, 0), zc(na, 0);
  std::vector<std::uint8_t> ya2(na, 255);
  std::vector<std::int8_t> yb2(nb, 127), yc2(na, 127);
  p.record({bind(xv), bind(ov)}, {bind(ya), bind(yb), bind(yc)}).replay();
  p.record({bind(xv), bind(ov)}, {bind(ya2), bind(yb2), bind(yc2)}).replay();  // other poison
  q.record({bind(xv), bind(ov)}, {bind(za), bind(zb), bind(zc)}).replay();
  CHECK(ya == ya2);
  CHECK(yb == yb2);
  CHECK(yc == yc2);
  INFO("steps: qa " << qa.scale << ", qb " << qb.scale << ", qc " << qc.scale);
  CHECK(max_step_diff(ya, za) <= 1);
  CHECK(max_step_diff(yb, zb) <= 1);
  CHECK(yc == zc);
  // Against a double reference, quantized the same way: within one step.
  auto quant = [](double v, const tensor_quant& qq, double lo, double hi) {
    return std::clamp(std::nearbyint(v / double(qq.scale)) + qq.zero_point, lo, hi);
  };
  for (index_t i = 0; i < M; ++i)
    for (index_t n = 0; n < N; ++n) {
      double acc = bv[std::size_t(n)];
      for (index_t k = 0; k < K; ++k)
        acc += double(xv[std::size_t(i * K + k)]) * w[std::size_t(n * K + k)];
      const double gl =
          0.5 * acc * (1 + std::tanh(0.7978845608028654 * (acc + 0.044715 * acc * acc * acc)));
      REQUIRE(std::fabs(ya[std::size_t(i * N + n)] - quant(gl, qa, 0, 255)) <= 1);
    }
  for (std::size_t i = 0; i < nb; ++i) {
    const double v = std::clamp(double(xv[i]) * ov[i], -0.8, 0.9);
    REQUIRE(std::fabs(yb[i] - quant(v, qb, -128, 127)) <= 1);
  }
}

namespace {
// ---- conv chain: x -> dw 3x3 (f32 in int8 plans) -> relu0 -> conv1 3x3 int8 -> bn1 -> relu1 ->
//      conv2 1x1 int8 (+ bias) -> relu2 -> quantize u8 (graph output) ------------------------
struct conv8 {
  index_t N = 2, C = 8, K1 = 20, K2 = 24, H = 9, W = 7;  // K > 16: int8 (passes/narrow_int8)
  std::vector<float> wd, bd, w1, w2, b2, bn[4], x;
  tensor_quant q0, q1, q2;
  explicit conv8(tensor_layout L) {
    wd = gt::random_vec(std::size_t(C * 9), 41, -0.5f, 0.5f);
    bd = gt::random_vec(std::size_t(C), 42, -0.1f, 0.1f);
    w1 = gt::kaiming(K1, C * 9, 43);
    w2 = gt::kaiming(K2, K1, 44);
    b2 = gt::random_vec(std::size_t(K2), 45, -0.1f, 0.1f);
    bn[0] = gt::random_vec(std::size_t(K1), 46, -0.2f, 0.2f);
    bn[1] = gt::random_vec(std::size_t(K1), 47, 0.5f, 1.5f);
    bn[2] = gt::random_vec(std::size_t(K1), 48, 0.8f, 1.2f);
    bn[3] = gt::random_vec(std::size_t(K1), 49, -0.1f, 0.1f);
    x = gt::random_vec(std::size_t(N * C * H * W), 50);
    const auto r = ranges(build(L), {"relu0", "relu1", "relu2"}, {x});
    q0 = {r[0] / 255, 0};
    q1 = {r[1] / 255, 0};
    q2 = {r[2] / 255, 0};
  }
  graph build(tensor_layout L, bool quantized_out = false) const {
    graph g;
    auto xi = g.input("x", {N, C, H, W}, dtype::f32, L);
    conv2d_params dw, same, one;
    dw.pad_top = dw.pad_left = dw.pad_bottom = dw.pad_right = 1;
    dw.groups = int(C);
    same.pad_top = same.pad_left = same.pad_bottom = same.pad_right = 1;
    auto h0 = g.relu("relu0", g.conv2d("dw", xi, g.constant("wd", {C, 1, 3, 3}, wd.data()),
                                       g.constant("bd", {C}, bd.data()), dw));
    auto c1 = g.conv2d("conv1", h0, g.constant("w1", {K1, C, 3, 3}, w1.data()), {}, same);
    auto h1 = g.relu("relu1", g.batch_norm("bn1", c1, g.constant("m", {K1}, bn[0].data()),
                                           g.constant("v", {K1}, bn[1].data()),
                                           g.constant("g", {K1}, bn[2].data()),
                                           g.constant("b", {K1}, bn[3].data())));
    auto h2 = g.relu("relu2", g.conv2d("conv2", h1, g.constant("w2", {K2, K1, 1, 1}, w2.data()),
                                       g.constant("b2", {K2}, b2.data()), one));
    g.output(quantized_out ? g.quantize("q", h2, dtype::u8, q2) : h2);
    return g;
  }
};
}  // namespace

TEST_CASE("graph quant fusion: int8 conv chain (dense producers, nchw and nhwc)",
          "[graph][quant]") {
  if constexpr (have_int8) {
    for (tensor_layout L : {tensor_layout::nchw, tensor_layout::nhwc}) {
      INFO("layout " << layout_name(L));
      const conv8 c(L);
      graph g = c.build(L, true);
      g.set_quant(g.find("relu0"), c.q0);
      g.set_quant(g.find("relu1"), c.q1);
      // The declared layout (an nchw graph would otherwise run in nhwc: checked below).
      const plan p = compile(g, {.threads = 1, .prec = precision::int8, .choose_layout = false});
      const plan q = compile(
          g, {.threads = 1, .prec = precision::int8, .fuse = false, .choose_layout = false});
      INFO(p.report().text());
      // The depthwise conv (f32 in int8 plans) has no u8-output instantiation (compile time):
      // it writes f32 and conv1 converts its input; conv1 writes u8 for conv2; conv2 absorbs q.
      CHECK_FALSE(reported(p, "fused quantize of conv1's input (u8) into dw (conv2d)"));
      CHECK(reported(p, "folded bn1 (batch_norm) into conv1 (conv2d)"));
      CHECK(reported(p, "fused quantize of conv2's input (u8) into conv1 (conv2d)"));
      CHECK(reported(p, "fused q (quantize u8) into conv2 (conv2d)"));
      REQUIRE(p.steps().size() == 3);
      CHECK(q.steps().size() == 8);  // dw, relu0, conv1, bn1, relu1, conv2, relu2, q
      CHECK(command_count(p) == 4);  // dw, convert + conv1, conv2
      CHECK(command_count(q) == 10);
      CHECK(p.steps()[0].kernel.find("depthwise_conv2d f32") != std::string::npos);
      CHECK(p.steps()[0].out_type == dtype::f32);
      CHECK(p.steps()[1].kernel.find("conv2d int8") != std::string::npos);
      CHECK(p.steps()[1].kernel.find("relu, quantize u8]") != std::string::npos);
      CHECK(p.steps()[2].kernel.find("quantize u8]") != std::string::npos);
      const auto hw = std::size_t(c.H * c.W);
      CHECK(tensor(p, "relu0").bytes == std::size_t(c.N * c.C) * hw * 4);
      CHECK(tensor(p, "relu1").bytes == std::size_t(c.N * c.K1) * hw);
      // relu0 in f32, its u8 copy, relu1 in u8.
      CHECK(p.intermediate_bytes() == std::size_t(c.N) * hw * (4 * c.C + c.C + c.K1));
      CHECK(p.arena_bytes() < q.arena_bytes());
      const std::size_t n_out = std::size_t(c.N * c.K2 * c.H * c.W);
      const auto yp = run_poisoned<std::uint8_t>(p, {c.x}, n_out);
      const auto yq = run_poisoned<std::uint8_t>(q, {c.x}, n_out);
      INFO("steps: relu0 " << c.q0.scale << ", relu1 " << c.q1.scale << ", y " << c.q2.scale);
      CHECK(max_step_diff(yp, yq) <= 1);
      const plan p2 = compile(
          g, {.threads = 2, .prec = precision::int8, .fork_join_ns = 0, .choose_layout = false});
      CHECK(run_poisoned<std::uint8_t>(p2, {c.x}, n_out) == yp);
      if (L == tensor_layout::nchw) {
        // Run in nhwc by the plan: the quantize stays fused (a cast joins the nhwc region) and
        // the exit conversion moves the u8 output.
        const plan pn = compile(g, {.threads = 1, .prec = precision::int8});
        INFO(pn.report().text());
        CHECK(reported(pn, "fused q/nhwc (quantize u8) into conv2 (conv2d)"));
        CHECK(pn.steps().size() == 5);  // entry conversion, dw, conv1, conv2, exit conversion
        CHECK(max_step_diff(run_poisoned<std::uint8_t>(pn, {c.x}, n_out), yp) <= 1);
      }
      // Against the f32 plan: the int8 chain stays within a few steps of y.
      const auto yf = run_poisoned<float>(compile(c.build(L), {.threads = 1}), {c.x}, n_out);
      double worst = 0;
      for (std::size_t i = 0; i < n_out; ++i)
        worst = std::max(worst, std::fabs(double(yp[i]) * c.q2.scale - yf[i]) / c.q2.scale);
      INFO("int8 vs f32: " << worst << " steps of y");
      CHECK(worst <= 8);
    }
  }
}

TEST_CASE("graph quant fusion: the conv consumer keeps its convert when the input has two uses",
          "[graph][quant]") {
  if constexpr (have_int8) {
    const tensor_layout L = tensor_layout::nhwc;
    const conv8 c(L);
    graph g = c.build(L);
    g.set_quant(g.find("relu0"), c.q0);
    g.set_quant(g.find("relu1"), c.q1);
    g.output(g.find("relu1"));  // relu1 is also a graph output
    const plan p = compile(g, {.threads = 1, .prec = precision::int8});
    INFO(p.report().text());
    CHECK_FALSE(reported(p, "fused quantize of conv2's input (u8) into conv1 (conv2d)"));
    CHECK(p.report().fused.size() == 4);  // relu0, bn1 (folded), relu1, relu2: no quantize
    REQUIRE(p.steps().size() == 3);
    CHECK(p.data().commands[2].size() == 2);  // conv2: convert relu1, conv
    CHECK(tensor(p, "relu1").type == dtype::f32);
  }
}

namespace {
// ---- inverted residual body: x -> pw1 1x1 int8 -> relu_e -> dw 3x3 -> relu_d -> pw2 1x1 int8
//      (+ bias) -> y, nhwc (MobileNetV3's and EfficientNet's expand / depthwise / project) -----
struct expand8 {
  index_t N = 2, C = 12, E = 40, K = 24, H = 9, W = 11;  // E, K > 16: int8 (narrow_int8)
  std::vector<float> w1, wd, bd, w2, b2, x;
  tensor_quant qx{2.f / 255, 128}, qd;
  expand8() {
    w1 = gt::kaiming(E, C, 61);
    wd = gt::random_vec(std::size_t(E * 9), 62, -0.5f, 0.5f);
    bd = gt::random_vec(std::size_t(E), 63, -0.1f, 0.1f);
    w2 = gt::kaiming(K, E, 64);
    b2 = gt::random_vec(std::size_t(K), 65, -0.1f, 0.1f);
    x = gt::random_vec(std::size_t(N * C * H * W), 66);  // U(-1, 1): qx covers it
    qd = {ranges(build(), {"relu_d"}, {x})[0] / 255, 0};
  }
  graph build() const {
    graph g;
    auto xi = g.input("x", {N, C, H, W}, dtype::f32, tensor_layout::nhwc);
    conv2d_params dw, one;
    dw.pad_top = dw.pad_left = dw.pad_bottom = dw.pad_right = 1;
    dw.groups = int(E);
    auto e =
        g.relu("relu_e", g.conv2d("pw1", xi, g.constant("w1", {E, C, 1, 1}, w1.data()), {}, one));
    auto d = g.relu("relu_d", g.conv2d("dw", e, g.constant("wd", {E, 1, 3, 3}, wd.data()),
                                       g.constant("bd", {E}, bd.data()), dw));
    g.output(g.conv2d("pw2", d, g.constant("w2", {K, E, 1, 1}, w2.data()),
                      g.constant("b2", {K}, b2.data()), one));
    return g;
  }
};
}  // namespace

TEST_CASE("graph quant fusion: an int8 plan's depthwise between int8 convs runs in bf16",
          "[graph][quant]") {
  if constexpr (have_int8) {
    // Where int8 convs can write bf16 (graph_ops::int8_bf16_outputs: vcvtneps2bf16), pw1 writes
    // its output as bf16 for the depthwise, which runs as the bf16 depthwise; elsewhere the
    // depthwise runs in f32 as before.
    constexpr bool bf16_dw = graph_ops::int8_bf16_outputs<arch::native, backend::xsimd>();
    const expand8 c;
    graph g = c.build();
    g.set_quant(g.find("x"), c.qx);
    g.set_quant(g.find("relu_d"), c.qd);
    const plan p = compile(g, {.threads = 1, .prec = precision::int8});
    INFO(p.report().text());
    REQUIRE(p.steps().size() == 3);  // pw1 + relu_e, dw + relu_d, pw2
    CHECK(p.steps()[0].kernel.find("conv2d int8 nhwc") != std::string::npos);
    CHECK(p.steps()[2].kernel.find("conv2d int8 nhwc") != std::string::npos);
    const std::size_t ne = std::size_t(c.N * c.E * c.H * c.W);
    CHECK(reported(p, "bf16 output of pw1 (read as bf16 by dw)") == bf16_dw);
    CHECK(tensor(p, "relu_e").type == (bf16_dw ? dtype::bf16 : dtype::f32));
    CHECK(tensor(p, "relu_e").bytes == ne * (bf16_dw ? 2 : 4));
    CHECK(p.steps()[1].kernel.find(bf16_dw ? "depthwise_conv2d bf16" : "depthwise_conv2d f32") !=
          std::string::npos);
    // pw1's own convert of x, pw1, dw, pw2's convert of relu_d, pw2: no bf16 conversion pass.
    CHECK(command_count(p) == 5);
    const std::size_t n_out = std::size_t(c.N * c.K * c.H * c.W);
    const auto yp = run_poisoned<float>(p, {c.x}, n_out);
    const plan p2 = compile(g, {.threads = 2, .prec = precision::int8, .fork_join_ns = 0});
    CHECK(run_poisoned<float>(p2, {c.x}, n_out) == yp);
    // Against the f32 plan: x and relu_d quantized to u8 (steps of 1/128 and 1/255 of their
    // ranges) and, in bf16, relu_e and the depthwise weights rounded to 8 bits: within 3% of the
    // output's range (measured ~1%).
    const auto yf = run_poisoned<float>(compile(c.build(), {.threads = 1}), {c.x}, n_out);
    double worst = 0, range = 0;
    for (std::size_t i = 0; i < n_out; ++i) {
      worst = std::max(worst, std::fabs(double(yp[i]) - yf[i]));
      range = std::max(range, std::fabs(double(yf[i])));
    }
    INFO("int8 vs f32: " << worst / range << " of the output range " << range);
    CHECK(worst <= 0.03 * range);
  }
}
