#pragma once
// Randomized differential test of the graph executor (graph_fuzz_test.cpp): a generator of random
// valid graphs that evaluates each node in double precision as it adds it, with a first-order
// bound of the error a correct plan may make on every element. The test also builds its invalid
// cases with it (random valid context, then one corruption).
//
// Reference values are kept in logical order (row-major over the shape; 4-D tensors as
// (N, C, H, W) whatever their layout) and integer tensors hold their quantized integers.
//
// Error model (docs/robustness.md, "Randomized differential test"). Each element carries a bound
// e for two plans: mode 0 is the reference plan (unfused, f32), mode 1 the plan under test. A
// node's bound is what its inputs' bounds become through it (its Lipschitz constant, or for
// sums the sum of |weight| * e) plus what the node itself may add ("own"):
//  - f32 dot products (linear, conv, average pool): any summation order (blocking, FMA,
//    threads) is within gamma(K) * sum|terms|, gamma(K) = (K + 8) * 2^-23 (twice Higham's
//    K * 2^-24 bound); batch norm folded into a conv's weights is one more rounding per weight;
//  - bf16 linear / conv: x and w each rounded to nearest bf16 (8 significant bits: 2^-8
//    relative each, reached just above a power of two), so 2^-7 * sum|x*w| on top of the f32
//    accumulation; a bf16 tensor's store adds 2^-8 * |y| (f16: 2^-10, twice its roundoff);
//  - int8 linear / dense conv: each activation is off by at most one quantization step s_x
//    (half a step of rounding, half a step where the zero point's rounding cut the range), each
//    weight by half of its channel's step max|w|/127: sum|w| * s_x + sum|x| * w_step / 2;
//  - quantize: one step (a value within its input's error of a rounding boundary may round
//    either way); integer average pooling: half a step of rounding plus the input error;
//  - transcendental stages (exp, tanh, erf): 2e-6 relative (xsimd's functions are within a few
//    ulp, kfuse's erf within 3e-7 absolute); softmax, layer / rms norm: the row length's
//    accumulation error plus the conditioning of the normalization (1 / sigma).
// A result is correct when |got - ref| <= 2 * e + 1e-6 (floats; the factor 2 is the margin of a
// first-order bound) or <= e (integers, whose e already counts whole steps).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "graph/compiler_instance.hpp"
#include "kfuse/tools/calibrate_graph.hpp"

namespace gfuzz {

using kfuse::dtype;
using kfuse::index_t;
using kfuse::op_kind;
using kfuse::precision;
using kfuse::stage_kind;
using kfuse::tensor_id;
using kfuse::tensor_layout;

inline constexpr double u32 = 5.9604644775390625e-08;  // 2^-24, f32 unit roundoff
inline constexpr double bf16_rel = 1.0 / 256;  // 2^-8: bf16 unit roundoff (8 significant bits)
inline constexpr double f16_rel = 1.0 / 1024;  // 2^-10: twice f16's unit roundoff
inline constexpr double tr_rel = 2e-6;         // exp / tanh / erf based stages
inline double gam(double k) { return (k + 8) * 2 * u32; }

inline constexpr bool has_int8 =
    kfuse::graph_ops::gemm_available<kfuse::i8, kfuse::arch::native, kfuse::backend::xsimd>();

/// Known bugs (docs/robustness.md, "Randomized differential test"), each kept out of CI's cases
/// until fixed; KFUSE_FUZZ_KNOWN_BUGS=<mask> generates them again.
namespace bug {
inline constexpr unsigned low_precision_input = 1;   // bf16 / f16 x of an f32 / int8 linear, conv
inline constexpr unsigned batch_norm_bf16 = 2;       // batch_norm of a bf16 / f16 input
inline constexpr unsigned bf16_bias = 4;             // a bf16 bias constant of linear / conv
inline constexpr unsigned calibrate_outputs = 8;     // calibrate_graph and the graph's outputs
inline constexpr unsigned no_data_operand = 16;      // a constant without data as a data input
inline constexpr unsigned accessor_exception = 32;   // plan::input(i), replay_buffer::step(i)
inline constexpr unsigned fused_operand_limit = 64;  // valid fused graph: "too many operands"
// A bias stage right after a batch norm folded into a conv without bias is taken for the conv's
// own bias.
inline constexpr unsigned bn_fold_bias = 128;
// set_quant on a reshape / flatten / convert_layout / pool2d output is replaced by its input's.
inline constexpr unsigned quant_override = 256;
// Fixed: generated in every run (CI included).
inline constexpr unsigned fixed = no_data_operand | accessor_exception | bn_fold_bias;
}  // namespace bug

inline bool is_int(dtype t) { return t == dtype::u8 || t == dtype::i8; }
inline bool is_float(dtype t) { return t == dtype::f32 || t == dtype::bf16 || t == dtype::f16; }

/// What the test plan is compiled with (the reference plan: f32, unfused, one thread).
struct config {
  precision prec = precision::f32;
  bool fuse = true;
  int threads = 1;
  double fork_join_ns = -1;
  /// Also generate the patterns of these known bugs (docs/robustness.md): none in CI.
  unsigned known_bugs = 0;
  std::string text() const {
    static constexpr const char* p[] = {"inherit", "f32", "bf16", "int8"};
    std::ostringstream s;
    s << "prec " << p[int(prec)] << ", fuse " << (fuse ? "on" : "off") << ", threads " << threads
      << ", fork_join_ns " << fork_join_ns;
    return s.str();
  }
};

/// A tensor's reference: values in logical order and per-mode error bounds.
struct rt {
  std::vector<index_t> shape;
  dtype type = dtype::f32;
  tensor_layout layout = tensor_layout::plain;
  bool has_quant = false;  // integer tensors: their params (dequantize, average pooling)
  kfuse::tensor_quant q{};
  bool calibrated = false;  // f32 input of an int8 linear / conv: params set on the graph
  kfuse::tensor_quant cq{};
  enum class kind { input, constant, node } k = kind::node;
  bool conv_no_bias = false;  // a conv2d output without bias
  bool bn_of_conv = false;    // a batch norm of such a conv (folded into it when fused)
  bool passes_quant = false;  // a reshape / convert_layout / pool2d output (takes its input's
                              // quant params in the plan, whatever set_quant says)
  std::vector<double> v;
  std::array<std::vector<double>, 2> e;
  index_t numel() const { return kfuse::shape_numel(shape); }
  bool four_d() const { return shape.size() == 4 && layout != tensor_layout::plain; }
  index_t channels() const {
    if (layout != tensor_layout::plain && shape.size() == 4) return shape[1];
    return shape.empty() ? 1 : shape.back();
  }
  void alloc() {
    v.assign(std::size_t(numel()), 0.0);
    e[0].assign(v.size(), 0.0);
    e[1].assign(v.size(), 0.0);
  }
};

inline double round_to(dtype t, double v) {
  switch (t) {
    case dtype::f32:
      return double(float(v));
    case dtype::bf16:
      return double(kfuse::to_float(kfuse::from_float<kfuse::bf16_t>(float(v))));
    case dtype::f16:
      return double(kfuse::to_float(kfuse::from_float<kfuse::f16_t>(float(v))));
    default:
      return v;
  }
}

/// Memory index of each logical index (nhwc 4-D tensors are stored channels last).
inline std::vector<std::size_t> memory_order(const std::vector<index_t>& s, tensor_layout l) {
  std::vector<std::size_t> m(std::size_t(kfuse::shape_numel(s)));
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = i;
  if (l != tensor_layout::nhwc || s.size() != 4) return m;
  const index_t N = s[0], C = s[1], H = s[2], W = s[3];
  for (index_t n = 0; n < N; ++n)
    for (index_t c = 0; c < C; ++c)
      for (index_t h = 0; h < H; ++h)
        for (index_t w = 0; w < W; ++w)
          m[std::size_t(((n * C + c) * H + h) * W + w)] =
              std::size_t(((n * H + h) * W + w) * C + c);
  return m;
}

/// An aligned byte buffer bound untyped (binding{data, bytes}).
struct raw {
  std::vector<std::uint64_t> words;
  std::size_t bytes = 0;
  void resize(std::size_t b, unsigned char fill = 0) {
    bytes = b;
    words.assign(b / 8 + 2, 0);
    std::memset(words.data(), fill, words.size() * 8);
  }
  unsigned char* data() { return reinterpret_cast<unsigned char*>(words.data()); }
  const unsigned char* data() const { return reinterpret_cast<const unsigned char*>(words.data()); }
  kfuse::binding bind() { return kfuse::binding{data(), bytes}; }
};

/// Values (logical order) encoded in memory order as `type`.
inline raw encode(const std::vector<index_t>& shape, dtype type, tensor_layout layout,
                  const std::vector<double>& v) {
  raw r;
  r.resize(v.size() * kfuse::dtype_size(type));
  const auto mo = memory_order(shape, layout);
  unsigned char* p = r.data();
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::size_t j = mo[i];
    switch (type) {
      case dtype::f32: {
        const float f = float(v[i]);
        std::memcpy(p + 4 * j, &f, 4);
        break;
      }
      case dtype::bf16: {
        const auto b = kfuse::from_float<kfuse::bf16_t>(float(v[i]));
        std::memcpy(p + 2 * j, &b, 2);
        break;
      }
      case dtype::f16: {
        const auto h = kfuse::from_float<kfuse::f16_t>(float(v[i]));
        std::memcpy(p + 2 * j, &h, 2);
        break;
      }
      case dtype::u8:
        p[j] = std::uint8_t(v[i]);
        break;
      case dtype::i8: {
        const auto s = std::int8_t(v[i]);
        std::memcpy(p + j, &s, 1);
        break;
      }
      case dtype::i32: {
        const auto s = std::int32_t(v[i]);
        std::memcpy(p + 4 * j, &s, 4);
        break;
      }
      case dtype::i64: {
        const auto s = std::int64_t(v[i]);
        std::memcpy(p + 8 * j, &s, 8);
        break;
      }
    }
  }
  return r;
}

/// A buffer of `type` read back into logical order.
inline std::vector<double> decode(const std::vector<index_t>& shape, dtype type,
                                  tensor_layout layout, const raw& r) {
  const auto mo = memory_order(shape, layout);
  std::vector<double> v(mo.size());
  const unsigned char* p = r.data();
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::size_t j = mo[i];
    switch (type) {
      case dtype::f32: {
        float f;
        std::memcpy(&f, p + 4 * j, 4);
        v[i] = f;
        break;
      }
      case dtype::bf16: {
        kfuse::bf16_t b;
        std::memcpy(&b, p + 2 * j, 2);
        v[i] = kfuse::to_float(b);
        break;
      }
      case dtype::f16: {
        kfuse::f16_t h;
        std::memcpy(&h, p + 2 * j, 2);
        v[i] = kfuse::to_float(h);
        break;
      }
      case dtype::u8:
        v[i] = p[j];
        break;
      case dtype::i8: {
        std::int8_t s;
        std::memcpy(&s, p + j, 1);
        v[i] = s;
        break;
      }
      case dtype::i32: {
        std::int32_t s;
        std::memcpy(&s, p + 4 * j, 4);
        v[i] = s;
        break;
      }
      case dtype::i64: {
        std::int64_t s;
        std::memcpy(&s, p + 8 * j, 8);
        v[i] = double(s);
        break;
      }
    }
  }
  return v;
}

/// Output poison: NaN for float types (an unwritten element fails any comparison), a byte
/// pattern for integers (two runs with different patterns must agree).
inline raw poisoned(std::size_t bytes, dtype type, bool second) {
  raw r;
  r.resize(bytes, second ? 0x5a : 0xa5);
  if (type == dtype::f32) {
    const std::uint32_t nan = second ? 0x7fc00123u : 0xffc00042u;
    for (std::size_t i = 0; i + 4 <= bytes; i += 4) std::memcpy(r.data() + i, &nan, 4);
  } else if (type == dtype::bf16 || type == dtype::f16) {
    const std::uint16_t nan = type == dtype::bf16 ? 0x7fc1 : 0x7e01;
    for (std::size_t i = 0; i + 2 <= bytes; i += 2) std::memcpy(r.data() + i, &nan, 2);
  }
  return r;
}

inline std::string shape_str(const std::vector<index_t>& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

/// The graph as text: every input, constant and node with its attributes (a reproducer).
inline std::string describe(const kfuse::graph& g) {
  std::ostringstream s;
  static constexpr const char* prec_names[] = {"inherit", "f32", "bf16", "int8"};
  static constexpr const char* pool_names[] = {"max", "average", "global max", "global average"};
  auto name = [&](tensor_id id) -> std::string {
    if (id.index < 0 || std::size_t(id.index) >= g.tensors().size())
      return "<id " + std::to_string(id.index) + ">";
    return g.tensors()[std::size_t(id.index)].name;
  };
  for (const kfuse::tensor_desc& t : g.tensors()) {
    if (!t.is_input && !t.is_constant) continue;
    s << (t.is_input ? "  input " : "  constant ") << t.name << " " << shape_str(t.shape) << " "
      << kfuse::dtype_name(t.type) << " " << kfuse::layout_name(t.layout);
    if (t.is_constant && !t.has_data) s << " (no data)";
    if (t.has_quant) s << " quant{" << t.quant.scale << ", " << t.quant.zero_point << "}";
    s << "\n";
  }
  for (const kfuse::node_desc& n : g.nodes()) {
    s << "  " << n.name << " = " << kfuse::op_name(n.op) << "(";
    for (std::size_t i = 0; i < n.inputs.size(); ++i) s << (i ? ", " : "") << name(n.inputs[i]);
    s << ")";
    switch (n.op) {
      case op_kind::eltwise: {
        s << " [";
        const auto& stages = n.attr<kfuse::eltwise_params>().stages;
        for (std::size_t i = 0; i < stages.size(); ++i) {
          const auto& st = stages[i];
          s << (i ? ", " : "") << kfuse::stage_name(st.kind);
          if (st.kind == stage_kind::leaky_relu || st.kind == stage_kind::scale)
            s << "(" << st.p0 << ")";
          if (st.kind == stage_kind::clamp) s << "(" << st.p0 << ", " << st.p1 << ")";
          if (kfuse::stage_reads_operand(st.kind))
            s << "(" << name(st.operand) << (st.per_channel ? ", per channel" : "") << ")";
        }
        s << "]";
        break;
      }
      case op_kind::linear:
        s << " prec " << prec_names[int(n.attr<kfuse::linear_params>().prec)];
        break;
      case op_kind::conv2d: {
        const auto& c = n.attr<kfuse::conv2d_params>();
        s << " stride " << c.stride_h << "x" << c.stride_w << " pad " << c.pad_top << ","
          << c.pad_left << "," << c.pad_bottom << "," << c.pad_right << " dilation " << c.dilation_h
          << "x" << c.dilation_w << " groups " << c.groups << " prec " << prec_names[int(c.prec)];
        break;
      }
      case op_kind::pool2d: {
        const auto& p = n.attr<kfuse::pool2d_params>();
        s << " " << pool_names[int(p.kind) + 2 * int(p.global)] << " " << p.r << "x" << p.s
          << " stride " << p.stride_h << "x" << p.stride_w << " pad " << p.pad_top << ","
          << p.pad_left << "," << p.pad_bottom << "," << p.pad_right << (p.ceil_mode ? " ceil" : "")
          << (p.count_include_pad ? " count_include_pad" : "");
        break;
      }
      case op_kind::softmax:
        s << " axis " << n.attr<kfuse::softmax_params>().axis;
        break;
      case op_kind::concat:
        s << " axis " << n.attr<kfuse::concat_params>().axis;
        break;
      case op_kind::layer_norm:
      case op_kind::rms_norm:
      case op_kind::batch_norm:
        s << " eps " << n.attr<kfuse::norm_params>().eps;
        break;
      case op_kind::reshape: {
        const auto& r = n.attr<kfuse::reshape_params>();
        if (r.flatten)
          s << " flatten axis " << r.axis;
        else
          s << " to " << shape_str(r.shape);
        break;
      }
      case op_kind::convert_layout:
        s << " to " << kfuse::layout_name(n.attr<kfuse::convert_layout_params>().to);
        break;
      case op_kind::cast: {
        const auto& c = n.attr<kfuse::cast_params>();
        s << " to " << kfuse::dtype_name(c.to);
        if (is_int(c.to)) s << " quant{" << c.quant.scale << ", " << c.quant.zero_point << "}";
        break;
      }
      case op_kind::custom:
        s << " out " << shape_str(n.attr<kfuse::custom_op>().out_shape);
        break;
      case op_kind::strided_view: {
        const auto& v = n.attr<kfuse::strided_view_params>();
        s << " " << shape_str(v.shape) << " strides " << shape_str(v.strides) << " + " << v.offset;
        break;
      }
      case op_kind::conv_transpose2d: {
        const auto& t = n.attr<kfuse::conv_transpose2d_params>();
        s << " out " << t.out_h << "x" << t.out_w;
        break;
      }
      case op_kind::resize: {
        const auto& r = n.attr<kfuse::resize_params>();
        s << " to " << r.out_h << "x" << r.out_w;
        break;
      }
      case op_kind::broadcast: {
        const auto& b = n.attr<kfuse::broadcast_params>();
        s << " to " << shape_str(b.shape) << " " << kfuse::layout_name(b.as);
        break;
      }
      case op_kind::matmul:
        s << " prec " << prec_names[int(n.attr<kfuse::matmul_params>().prec)];
        break;
      case op_kind::gather:
        s << " axis " << n.attr<kfuse::gather_params>().axis;
        break;
      case op_kind::attention: {
        const auto& a = n.attr<kfuse::attention_params>();
        s << " scale " << a.scale << (a.causal ? " causal" : "");
        break;
      }
      case op_kind::channel_shuffle: {
        const auto& c = n.attr<kfuse::channel_shuffle_params>();
        s << " groups " << c.groups << " channels " << c.first << "+" << c.count;
        break;
      }
    }
    const auto& o = g.tensors()[std::size_t(n.output.index)];
    if (o.has_quant) s << " -> quant{" << o.quant.scale << ", " << o.quant.zero_point << "}";
    s << "\n";
  }
  s << "  outputs:";
  for (tensor_id o : g.outputs()) s << " " << name(o);
  s << "\n";
  return s.str();
}

/// The generator: builds a random graph node by node, evaluating each node's reference.
class gen {
 public:
  kfuse::graph g;
  std::vector<rt> T;           // by tensor index (parallel to g.tensors())
  std::vector<char> consumed;  // read by some node
  std::vector<int> node_outs;  // node outputs in creation order
  std::vector<int> outputs;    // graph outputs (tensor indices)
  config cfg;
  std::mt19937_64 rng;
  int last = -1;  // the newest node output (chains are likelier to fuse)

  std::uint64_t seed;

  gen(std::uint64_t s, config c) : cfg(c), rng(s), seed(s) {}

  // ---- random helpers ----------------------------------------------------------------------
  int ri(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
  double rf(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); }
  bool coin(double p) { return rf(0, 1) < p; }
  template <class V>
  auto& any_of(V& v) {
    return v[std::size_t(ri(0, int(v.size()) - 1))];
  }
  std::string fresh(const char* p) { return std::string(p) + std::to_string(uid_++); }

  precision eff(int mode, precision node) const {
    if (node != precision::inherit) return node;
    return mode == 0 ? precision::f32 : cfg.prec;
  }

  // ---- tensors -------------------------------------------------------------------------------
  int add(tensor_id id, rt r) {
    if (std::size_t(id.index) != T.size()) throw std::logic_error("gfuzz: tensor ids out of step");
    T.push_back(std::move(r));
    consumed.push_back(0);
    return id.index;
  }
  std::vector<double> random_values(std::size_t n, dtype type, double lo, double hi) {
    std::vector<double> v(n);
    for (double& x : v) {
      if (type == dtype::u8)
        x = ri(0, 255);
      else if (type == dtype::i8)
        x = ri(-128, 127);
      else
        x = round_to(type, rf(lo, hi));
    }
    return v;
  }
  int new_input(std::vector<index_t> shape, dtype type, tensor_layout layout, double lo = -2,
                double hi = 2) {
    rt r;
    r.shape = shape;
    r.type = type;
    r.layout = layout;
    r.k = rt::kind::input;
    const tensor_id id = g.input(fresh("in"), shape, type, layout);
    r.alloc();
    r.v = random_values(r.v.size(), type, lo, hi);
    if (is_int(type)) {
      r.has_quant = true;
      r.q = {float(rf(0.01, 0.05)), type == dtype::u8 ? ri(100, 150) : ri(-20, 20)};
      g.set_quant(id, r.q);
    }
    return add(id, std::move(r));
  }
  int new_const(std::vector<index_t> shape, dtype type, tensor_layout layout,
                std::vector<double> v) {
    for (double& x : v) x = round_to(type, x);
    const raw bytes = encode(shape, type, layout, v);
    const tensor_id id = g.constant(fresh("c"), shape, type, bytes.data(), layout);
    rt r;
    r.shape = std::move(shape);
    r.type = type;
    r.layout = layout;
    r.k = rt::kind::constant;
    r.alloc();
    r.v = std::move(v);
    return add(id, std::move(r));
  }
  int new_const_random(std::vector<index_t> shape, dtype type, double lo, double hi,
                       tensor_layout layout = tensor_layout::plain) {
    const auto n = std::size_t(kfuse::shape_numel(shape));
    return new_const(std::move(shape), type, layout, random_values(n, type, lo, hi));
  }
  /// A random shape: 4-D nchw / nhwc / plain, or plain of rank 1 to 3; extents 1 and odd sizes.
  std::pair<std::vector<index_t>, tensor_layout> random_shape() {
    const double r = rf(0, 1);
    if (r < 0.45 || r > 0.85) {
      std::vector<index_t> s{ri(1, 2), ri(1, 8), ri(1, 9), ri(1, 9)};
      const tensor_layout l = r > 0.85    ? tensor_layout::plain
                              : coin(0.5) ? tensor_layout::nchw
                                          : tensor_layout::nhwc;
      return {s, l};
    }
    std::vector<index_t> s(std::size_t(ri(1, 3)));
    for (index_t& e : s) e = coin(0.2) ? 1 : ri(1, s.size() == 1 ? 64 : 19);
    return {s, tensor_layout::plain};
  }
  dtype random_input_type() {
    const double r = rf(0, 1);
    return r < 0.8 ? dtype::f32 : r < 0.92 ? dtype::bf16 : coin(0.5) ? dtype::u8 : dtype::i8;
  }
  int new_random_input() {
    auto [s, l] = random_shape();
    return new_input(s, random_input_type(), l);
  }

  /// A tensor (not a constant) satisfying pred: the newest node output most of the time.
  template <class P>
  int pick(P pred) {
    if (last >= 0 && pred(T[std::size_t(last)]) && coin(0.6)) return last;
    std::vector<int> c;
    for (std::size_t i = 0; i < T.size(); ++i)
      if (T[i].k != rt::kind::constant && pred(T[i])) c.push_back(int(i));
    if (c.empty()) return -1;
    return any_of(c);
  }
  /// Records a node's output and reference.
  int node(tensor_id id, rt r, std::initializer_list<int> ins) {
    return node(id, std::move(r), std::vector<int>(ins));
  }
  int node(tensor_id id, rt r, const std::vector<int>& ins) {
    for (int i : ins)
      if (i >= 0) consumed[std::size_t(i)] = 1;
    r.k = rt::kind::node;
    const int t = add(id, std::move(r));
    node_outs.push_back(t);
    last = t;
    return t;
  }
  rt like(const rt& x) {
    rt r;
    r.shape = x.shape;
    r.type = x.type;
    r.layout = x.layout;
    r.alloc();
    return r;
  }
  /// Own error of a bf16 / f16 store of |y|.
  static double store_err(dtype t, double y) {
    return t == dtype::bf16  ? bf16_rel * std::fabs(y)
           : t == dtype::f16 ? f16_rel * std::fabs(y) + 6e-8
                             : 0.0;
  }

  // ---- eltwise stages ------------------------------------------------------------------------
  kfuse::eltwise_stage random_unary_stage() {
    kfuse::eltwise_stage s;
    s.kind = stage_kind(ri(0, 10));  // relu .. scale
    if (s.kind == stage_kind::leaky_relu) s.p0 = float(rf(0, 0.3));
    if (s.kind == stage_kind::clamp) {
      s.p0 = float(rf(-1.5, 0.5));
      s.p1 = coin(0.1) ? s.p0 : float(s.p0 + rf(0, 2));
    }
    if (s.kind == stage_kind::scale) s.p0 = float(rf(-2, 2));
    return s;
  }
  /// y = stage(x); e[m] = L * e[m] + own (operands: their value and bounds).
  static double apply_stage(const kfuse::eltwise_stage& s, double x, double* e, double ov,
                            const double* oe) {
    double y = x, L = 1, own = 0, sq = 0;
    switch (s.kind) {
      case stage_kind::relu:
        y = std::max(x, 0.0);
        break;
      case stage_kind::leaky_relu:
        y = x > 0 ? x : double(s.p0) * x;
        L = std::max(1.0, std::fabs(double(s.p0)));
        own = u32 * std::fabs(y);
        break;
      case stage_kind::clamp:
        y = std::min(std::max(x, double(s.p0)), double(s.p1));
        break;
      case stage_kind::sigmoid:
        y = 1 / (1 + std::exp(-x));
        L = 0.25;
        own = tr_rel * y + 1e-30;
        break;
      case stage_kind::silu:
        y = x / (1 + std::exp(-x));
        L = 1.1;
        own = tr_rel * std::fabs(y) + 1e-30;
        break;
      case stage_kind::tanh:
        y = std::tanh(x);
        own = tr_rel * std::fabs(y) + 1e-12;
        break;
      case stage_kind::gelu_tanh:
        y = 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
        L = 1.13;
        own = tr_rel * std::fabs(y) + 1e-12;
        break;
      case stage_kind::gelu_erf:
        y = 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
        L = 1.13;
        own = tr_rel * std::fabs(y) + 3e-7 * std::fabs(x);
        break;
      case stage_kind::hardswish:
        y = x * std::min(std::max(x + 3, 0.0), 6.0) / 6;
        L = 1.5;  // slope (2x + 3) / 6 on [-3, 3], plus the curvature term below
        sq = 1.0 / 6;
        own = 4 * u32 * (std::fabs(y) + std::fabs(x));
        break;
      case stage_kind::hardsigmoid:
        y = std::min(std::max(x / 6 + 0.5, 0.0), 1.0);
        L = 1.0 / 6;
        own = 4 * u32;
        break;
      case stage_kind::scale:
        y = double(s.p0) * x;
        L = std::fabs(double(s.p0));
        own = u32 * std::fabs(y);
        break;
      case stage_kind::bias:
      case stage_kind::add:
        y = x + ov;
        for (int m = 0; m < 2; ++m) e[m] = e[m] + oe[m] + u32 * std::fabs(y);
        return y;
      case stage_kind::mul:
        y = x * ov;
        for (int m = 0; m < 2; ++m)
          e[m] = std::fabs(ov) * e[m] + std::fabs(x) * oe[m] + e[m] * oe[m] + u32 * std::fabs(y);
        return y;
      default:  // the math stages: not generated (tests/epilogue/math_test.cpp checks them)
        throw std::logic_error("graph fuzz: stage " + std::string(kfuse::stage_name(s.kind)) +
                               " has no error model");
    }
    for (int m = 0; m < 2; ++m) e[m] = L * e[m] + sq * e[m] * e[m] + own;
    return y;
  }

  /// Reference of an eltwise node x -> stages (operands in stage order).
  rt eval_eltwise(const rt& x, const std::vector<kfuse::eltwise_stage>& st,
                  const std::vector<int>& operands) {
    rt r = like(x);
    const index_t C = x.channels();
    const index_t n = x.numel();
    // Channel of logical element i: C of a 4-D nchw / nhwc tensor, else the last axis.
    auto channel = [&](index_t i) -> index_t {
      if (x.layout != tensor_layout::plain && x.shape.size() == 4)
        return (i / (x.shape[2] * x.shape[3])) % C;
      return i % C;
    };
    for (index_t i = 0; i < n; ++i) {
      double v = x.v[std::size_t(i)];
      double e[2] = {x.e[0][std::size_t(i)], x.e[1][std::size_t(i)]};
      std::size_t k = 0;
      for (const auto& s : st) {
        double ov = 0, oe[2] = {0, 0};
        if (s.kind == stage_kind::add || s.kind == stage_kind::mul || s.kind == stage_kind::bias) {
          const rt& o = T[std::size_t(operands[k++])];
          const bool pc = s.kind == stage_kind::bias || s.per_channel;
          const auto j = std::size_t(pc ? channel(i) : i);
          ov = o.v[j];
          oe[0] = o.e[0][j];
          oe[1] = o.e[1][j];
        }
        v = apply_stage(s, v, e, ov, oe);
      }
      r.v[std::size_t(i)] = v;
      for (int m = 0; m < 2; ++m) r.e[m][std::size_t(i)] = e[m] + store_err(x.type, v);
    }
    return r;
  }

  bool float_act(const rt& t) const { return t.type == dtype::f32 || t.type == dtype::bf16; }

  /// An f32 operand of x's shape and layout: an existing tensor (x itself now and then), a new
  /// input or a new constant.
  int same_shape_operand(int x) {
    const rt X = T[std::size_t(x)];
    if (X.type == dtype::f32 && coin(0.1)) return x;
    std::vector<int> c;
    for (std::size_t i = 0; i < T.size(); ++i)
      if (int(i) != x && T[i].type == dtype::f32 && T[i].shape == X.shape &&
          T[i].layout == X.layout)
        c.push_back(int(i));
    if (!c.empty() && coin(0.5)) return any_of(c);
    if (coin(0.5)) return new_input(X.shape, dtype::f32, X.layout);
    return new_const_random(X.shape, dtype::f32, -1.5, 1.5, X.layout);
  }
  int channel_operand(index_t C, bool constant_only = false) {
    if (!constant_only && coin(0.3)) return new_input({C}, dtype::f32, tensor_layout::plain);
    return new_const_random({C}, dtype::f32, -1, 1);
  }

  bool op_unary() {
    const int x = pick([&](const rt& t) { return float_act(t); });
    if (x < 0) return false;
    const auto s = random_unary_stage();
    const std::string nm = fresh("act");
    const tensor_id in{x};
    tensor_id id;
    switch (s.kind) {
      case stage_kind::relu:
        id = g.relu(nm, in);
        break;
      case stage_kind::leaky_relu:
        id = g.leaky_relu(nm, in, s.p0);
        break;
      case stage_kind::clamp:
        id = g.clamp(nm, in, s.p0, s.p1);
        break;
      case stage_kind::sigmoid:
        id = g.sigmoid(nm, in);
        break;
      case stage_kind::silu:
        id = g.silu(nm, in);
        break;
      case stage_kind::tanh:
        id = g.tanh(nm, in);
        break;
      case stage_kind::gelu_tanh:
        id = g.gelu(nm, in, false);
        break;
      case stage_kind::gelu_erf:
        id = g.gelu(nm, in, true);
        break;
      case stage_kind::hardswish:
        id = g.hardswish(nm, in);
        break;
      case stage_kind::hardsigmoid:
        id = g.hardsigmoid(nm, in);
        break;
      default:
        id = g.scale(nm, in, s.p0);
        break;
    }
    rt r = eval_eltwise(T[std::size_t(x)], {s}, {});
    node(id, std::move(r), {x});
    return true;
  }
  /// KNOWN BUG (bug::bn_fold_bias): batch norm folding takes the first bias stage fused into
  /// a conv without bias for the conv's own bias: after the batch norm it is folded through
  /// it (a wrong result; a null dereference when the bias is not a constant), before it a bias
  /// that is not a constant is read as constant data (a null dereference). So no bias stage on
  /// a batch norm of such a conv, and only constant ones on the conv's output.
  bool bias_ok(int x) const {
    return !T[std::size_t(x)].bn_of_conv || (cfg.known_bugs & bug::bn_fold_bias);
  }
  bool bias_const_only(int x) const {
    return T[std::size_t(x)].conv_no_bias && !(cfg.known_bugs & bug::bn_fold_bias);
  }
  bool op_binary() {
    const int x = pick([&](const rt& t) { return float_act(t); });
    if (x < 0) return false;
    const double r = rf(0, 1);
    kfuse::eltwise_stage s;
    int o;
    tensor_id id;
    if (r < 0.3 && bias_ok(x)) {
      o = channel_operand(T[std::size_t(x)].channels(), bias_const_only(x));
      s.kind = stage_kind::bias;
      s.operand = {o};
      id = g.bias_add(fresh("bias"), {x}, {o});
    } else {
      o = same_shape_operand(x);
      s.kind = r < 0.7 ? stage_kind::add : stage_kind::mul;
      s.operand = {o};
      id =
          s.kind == stage_kind::add ? g.add(fresh("add"), {x}, {o}) : g.mul(fresh("mul"), {x}, {o});
    }
    rt out = eval_eltwise(T[std::size_t(x)], {s}, {o});
    node(id, std::move(out), {x, o});
    return true;
  }
  bool op_chain() {
    const int x = pick([&](const rt& t) { return float_act(t); });
    if (x < 0) return false;
    std::vector<kfuse::eltwise_stage> st;
    std::vector<int> ops;
    const int n = ri(2, 6);
    for (int i = 0; i < n; ++i) {
      if (int(ops.size()) < 3 && coin(0.35)) {
        kfuse::eltwise_stage s;
        const double r = rf(0, 1);
        int o;
        if (r < 0.5) {
          o = same_shape_operand(x);
          s.kind = coin(0.6) ? stage_kind::add : stage_kind::mul;
        } else {
          o = channel_operand(T[std::size_t(x)].channels(), i == 0 && bias_const_only(x));
          s.kind = r < 0.7 && (i > 0 || bias_ok(x)) ? stage_kind::bias
                   : coin(0.5)                      ? stage_kind::add
                                                    : stage_kind::mul;
          s.per_channel = s.kind != stage_kind::bias;
        }
        s.operand = {o};
        ops.push_back(o);
        st.push_back(s);
      } else {
        st.push_back(random_unary_stage());
      }
    }
    const tensor_id id = g.eltwise(fresh("chain"), {x}, st);
    rt out = eval_eltwise(T[std::size_t(x)], st, ops);
    std::vector<int> ins{x};
    ins.insert(ins.end(), ops.begin(), ops.end());
    node(id, std::move(out), ins);
    return true;
  }

  // ---- linear / conv ---------------------------------------------------------------------------
  /// Calibrated u8 params of an f32 activation (min / max of its reference values, affine:
  /// what calibrate_graph's minmax observer gives), set on the graph once.
  kfuse::tensor_quant calibrate(int x) {
    rt& X = T[std::size_t(x)];
    if (X.calibrated) return X.cq;
    double lo = 0, hi = 0;
    for (double v : X.v) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    const auto q = kfuse::quant_params_for<kfuse::u8>(kfuse::value_range{float(lo), float(hi)},
                                                      kfuse::quant_scheme::affine);
    X.calibrated = true;
    X.cq = {q.scale, q.zero_point};
    g.set_quant({x}, X.cq);
    calibrated.push_back(x);
    return X.cq;
  }
  std::vector<int> calibrated;  // tensors given calibrated params

  /// Whether x can be the input of an int8 linear / conv: f32, and (KNOWN BUG,
  /// bug::quant_override) not the output of a reshape / convert_layout / pool2d, whose
  /// calibrated params the plan replaces with its input's (an upstream tensor calibrated for
  /// another int8 node): the int8 node then runs with a coarser step than calibrated.
  bool int8_input_ok(const rt& X) const {
    return X.type == dtype::f32 && (!X.passes_quant || (cfg.known_bugs & bug::quant_override));
  }
  /// The node precision of a linear / conv on x, or false when none is valid for x.
  bool node_precision(const rt& X, precision& np) {
    np = precision::inherit;
    if (X.type == dtype::bf16 || X.type == dtype::f16) {
      // KNOWN BUG (docs/robustness.md): a bf16 / f16 input of an f32 linear / conv is read as
      // f32. A bf16 node runs it correctly; the f32 and int8 recipes only with the bug's bit.
      if ((cfg.known_bugs & bug::low_precision_input) && coin(0.5)) return true;
      if (X.type == dtype::f16) return false;
      np = precision::bf16;
      return true;
    }
    if (coin(0.12)) {
      const int r = ri(0, has_int8 ? 2 : 1);
      np = r == 0 ? precision::f32 : r == 1 ? precision::bf16 : precision::int8;
    }
    return true;
  }
  /// A weight-like constant: f32 mostly, sometimes bf16 / f16 (compile converts float types).
  dtype weight_type() {
    const double r = rf(0, 1);
    return r < 0.8 ? dtype::f32 : r < 0.95 ? dtype::bf16 : dtype::f16;
  }
  /// Bias constant: f32 (a bf16 bias is the known bug of a chain operand read as f32).
  dtype bias_type() {
    return (cfg.known_bugs & bug::bf16_bias) && coin(0.3) ? dtype::bf16 : dtype::f32;
  }

  /// Own error of one dot product of the node in mode m (S = sum|x*w| + |b|, Sw = sum|w|,
  /// Sx = sum|x| over the taps, K taps, wstep = its int8 weight step, sx the activation step).
  static double dot_own(precision p, double S, double Sw, double Sx, double K, double wstep,
                        double sx) {
    switch (p) {
      case precision::bf16:  // x and w each rounded to nearest bf16: 2^-8 each
        return 2 * bf16_rel * S + gam(K) * S;
      case precision::int8:
        return Sw * sx + Sx * wstep / 2 + gam(K) * S;
      default:
        return gam(K) * S;
    }
  }

  bool op_linear() {
    const int x = pick([&](const rt& t) {
      return is_float(t.type) && t.layout == tensor_layout::plain && !t.shape.empty() &&
             t.shape.back() <= 96;
    });
    if (x < 0) return false;
    precision np;
    if (!node_precision(T[std::size_t(x)], np)) return false;
    bool int8_somewhere = false;
    for (int m = 0; m < 2; ++m) int8_somewhere |= eff(m, np) == precision::int8;
    if (int8_somewhere && !int8_input_ok(T[std::size_t(x)])) return false;
    const kfuse::tensor_quant q = int8_somewhere ? calibrate(x) : kfuse::tensor_quant{};
    const rt X = T[std::size_t(x)];
    const index_t K = X.shape.back(), N = ri(1, 24), M = X.numel() / K;
    const double a = std::sqrt(3.0 / double(K));
    const int w = new_const_random({N, K}, weight_type(), -a, a);
    const int b = coin(0.6) ? new_const_random({N}, bias_type(), -0.5, 0.5) : -1;
    const tensor_id id = g.linear(fresh("fc"), {x}, {w}, b >= 0 ? tensor_id{b} : tensor_id{}, np);
    rt r;
    r.shape = X.shape;
    r.shape.back() = N;
    r.alloc();
    const rt& W = T[std::size_t(w)];
    for (index_t n = 0; n < N; ++n) {
      double wmax = 0;
      for (index_t k = 0; k < K; ++k) wmax = std::max(wmax, std::fabs(W.v[std::size_t(n * K + k)]));
      const double wstep = wmax > 0 ? double(float(wmax) / 127.f) : 1.0;
      const double bv = b >= 0 ? T[std::size_t(b)].v[std::size_t(n)] : 0.0;
      for (index_t mm = 0; mm < M; ++mm) {
        double acc = bv, S = std::fabs(bv), Sw = 0, Sx = 0, P[2] = {0, 0}, SE[2] = {0, 0};
        for (index_t k = 0; k < K; ++k) {
          const auto xi = std::size_t(mm * K + k);
          const double xv = X.v[xi], wv = W.v[std::size_t(n * K + k)];
          acc += xv * wv;
          S += std::fabs(xv * wv);
          Sw += std::fabs(wv);
          Sx += std::fabs(xv);
          for (int m = 0; m < 2; ++m) {
            P[m] += std::fabs(wv) * X.e[m][xi];
            SE[m] += X.e[m][xi];
          }
        }
        const auto o = std::size_t(mm * N + n);
        r.v[o] = acc;
        // The input's error through the weights (bf16 rounding of the perturbed input adds
        // 2^-8 of it), then the node's own (|x~| <= |x| + e in the weight-step term).
        for (int m = 0; m < 2; ++m)
          r.e[m][o] = P[m] * (1 + bf16_rel) +
                      dot_own(eff(m, np), S, Sw, Sx + SE[m], double(K), wstep, double(q.scale));
      }
    }
    node(id, std::move(r), {x, w, b});
    return true;
  }

  bool op_conv() {
    const int x = pick([&](const rt& t) {
      return is_float(t.type) && t.four_d() && t.shape[1] <= 16 && t.numel() <= 2048;
    });
    if (x < 0) return false;
    const rt X0 = T[std::size_t(x)];
    const index_t N = X0.shape[0], C = X0.shape[1], H = X0.shape[2], Wd = X0.shape[3];
    kfuse::conv2d_params cp;
    const double kind = rf(0, 1);
    index_t K;
    if (kind < 0.3 && C > 1) {  // depthwise
      cp.groups = int(C);
      K = C;
    } else if (kind < 0.45 && C > 1) {  // grouped
      std::vector<int> divs;
      for (int d = 2; d <= int(C); ++d)
        if (C % d == 0) divs.push_back(d);
      cp.groups = any_of(divs);
      K = index_t(cp.groups) * ri(1, 3);
    } else {
      K = ri(1, 12);
    }
    const index_t R = ri(1, 3), S = ri(1, 3);
    cp.stride_h = ri(1, 2);
    cp.stride_w = ri(1, 2);
    if (coin(0.15)) {
      cp.dilation_h = ri(1, 2);
      cp.dilation_w = ri(1, 2);
    }
    cp.pad_top = ri(0, int(R) - 1);
    cp.pad_bottom = ri(0, int(R) - 1);
    cp.pad_left = ri(0, int(S) - 1);
    cp.pad_right = ri(0, int(S) - 1);
    if (H + cp.pad_top + cp.pad_bottom < cp.dilation_h * (R - 1) + 1 ||
        Wd + cp.pad_left + cp.pad_right < cp.dilation_w * (S - 1) + 1)
      return false;
    const bool dw = cp.groups == int(C) && K == C && cp.groups > 1;
    precision np;
    if (!node_precision(X0, np)) return false;
    bool int8_somewhere = false;
    for (int m = 0; m < 2; ++m) int8_somewhere |= eff(m, np) == precision::int8 && !dw;
    if (int8_somewhere && !int8_input_ok(X0)) return false;
    cp.prec = np;
    const kfuse::tensor_quant q = int8_somewhere ? calibrate(x) : kfuse::tensor_quant{};
    const rt X = T[std::size_t(x)];
    const index_t Cg = C / cp.groups, Kg = K / cp.groups;
    const double a = std::sqrt(3.0 / double(Cg * R * S));
    const int w = new_const_random({K, Cg, R, S}, weight_type(), -a, a);
    const int b = coin(0.5) ? new_const_random({K}, bias_type(), -0.5, 0.5) : -1;
    const tensor_id id = g.conv2d(fresh("conv"), {x}, {w}, b >= 0 ? tensor_id{b} : tensor_id{}, cp);
    const index_t OH =
                      (H + cp.pad_top + cp.pad_bottom - cp.dilation_h * (R - 1) - 1) / cp.stride_h +
                      1,
                  OW = (Wd + cp.pad_left + cp.pad_right - cp.dilation_w * (S - 1) - 1) /
                           cp.stride_w +
                       1;
    rt r;
    r.shape = {N, K, OH, OW};
    r.layout = X.layout;
    r.conv_no_bias = b < 0;
    r.alloc();
    const rt& Wt = T[std::size_t(w)];
    for (index_t k = 0; k < K; ++k) {
      const index_t grp = k / Kg;
      double wmax = 0;
      for (index_t i = 0; i < Cg * R * S; ++i)
        wmax = std::max(wmax, std::fabs(Wt.v[std::size_t(k * Cg * R * S + i)]));
      const double wstep = wmax > 0 ? double(float(wmax) / 127.f) : 1.0;
      const double bv = b >= 0 ? T[std::size_t(b)].v[std::size_t(k)] : 0.0;
      for (index_t n = 0; n < N; ++n)
        for (index_t oh = 0; oh < OH; ++oh)
          for (index_t ow = 0; ow < OW; ++ow) {
            double acc = bv, Sm = std::fabs(bv), Sw = 0, Sx = 0, P[2] = {0, 0}, SE[2] = {0, 0};
            for (index_t c = 0; c < Cg; ++c)
              for (index_t rr = 0; rr < R; ++rr)
                for (index_t ss = 0; ss < S; ++ss) {
                  const double wv = Wt.v[std::size_t(((k * Cg + c) * R + rr) * S + ss)];
                  Sw += std::fabs(wv);
                  const index_t ih = oh * cp.stride_h - cp.pad_top + rr * cp.dilation_h;
                  const index_t iw = ow * cp.stride_w - cp.pad_left + ss * cp.dilation_w;
                  if (ih < 0 || ih >= H || iw < 0 || iw >= Wd) continue;
                  const auto xi = std::size_t(((n * C + grp * Cg + c) * H + ih) * Wd + iw);
                  acc += X.v[xi] * wv;
                  Sm += std::fabs(X.v[xi] * wv);
                  Sx += std::fabs(X.v[xi]);
                  for (int m = 0; m < 2; ++m) {
                    P[m] += std::fabs(wv) * X.e[m][xi];
                    SE[m] += X.e[m][xi];
                  }
                }
            const auto o = std::size_t(((n * K + k) * OH + oh) * OW + ow);
            r.v[o] = acc;
            for (int m = 0; m < 2; ++m) {
              precision p = eff(m, np);
              if (dw && p == precision::int8) p = precision::f32;  // int8 plans run it in f32
              r.e[m][o] = P[m] * (1 + bf16_rel) + dot_own(p, Sm, Sw, Sx + SE[m], double(Cg * R * S),
                                                          wstep, double(q.scale));
            }
          }
    }
    node(id, std::move(r), {x, w, b});
    return true;
  }

  // ---- pooling ---------------------------------------------------------------------------------
  bool op_pool() {
    const int x = pick([&](const rt& t) {
      return t.four_d() &&
             (t.type == dtype::f32 || t.type == dtype::bf16 || (is_int(t.type) && t.has_quant));
    });
    if (x < 0) return false;
    const rt X = T[std::size_t(x)];
    const index_t N = X.shape[0], C = X.shape[1], H = X.shape[2], W = X.shape[3];
    kfuse::pool2d_params p;
    const int mode = ri(0, 3);  // max, average, global max, global average
    p.kind = mode % 2 == 0 ? kfuse::pool_kind::max : kfuse::pool_kind::avg;
    p.global = mode >= 2;
    const bool global = p.global;
    const bool is_max = p.kind == kfuse::pool_kind::max;
    if (!global) {
      p.r = ri(1, 3);
      p.s = ri(1, 3);
      p.stride_h = ri(1, 3);
      p.stride_w = ri(1, 3);
      p.pad_top = ri(0, p.r / 2);
      p.pad_bottom = ri(0, p.r / 2);
      p.pad_left = ri(0, p.s / 2);
      p.pad_right = ri(0, p.s / 2);
      p.ceil_mode = coin(0.4);
      p.count_include_pad = coin(0.5);
    }
    // The output extents as the plan compiler computes them (the pool rule's own shape).
    kfuse::plan_tensor xt;
    xt.shape = {N, C, H, W};
    const kfuse::pool_shape ps = kfuse::graph_ops::pool2d_rule::shape_of(xt, p);
    const index_t OH = ps.out_h(), OW = ps.out_w();
    if (OH < 1 || OW < 1) return false;
    const tensor_id id = g.pool2d(fresh("pool"), {x}, p);
    rt r;
    r.shape = {N, C, OH, OW};
    r.type = X.type;
    r.layout = X.layout;
    r.has_quant = X.has_quant;
    r.q = X.q;
    r.passes_quant = true;
    r.alloc();
    const double zp = is_int(X.type) ? double(X.q.zero_point) : 0.0;
    for (index_t n = 0; n < N; ++n)
      for (index_t c = 0; c < C; ++c)
        for (index_t oh = 0; oh < OH; ++oh)
          for (index_t ow = 0; ow < OW; ++ow) {
            index_t h0 = 0, h1 = H, w0 = 0, w1 = W, size = H * W;
            if (!global) {  // PyTorch's window and divisor
              h0 = oh * p.stride_h - p.pad_top;
              w0 = ow * p.stride_w - p.pad_left;
              h1 = std::min<index_t>(h0 + p.r, H + p.pad_bottom);
              w1 = std::min<index_t>(w0 + p.s, W + p.pad_right);
              size = (h1 - h0) * (w1 - w0);
              h0 = std::max<index_t>(h0, 0);
              w0 = std::max<index_t>(w0, 0);
              h1 = std::min(h1, H);
              w1 = std::min(w1, W);
              if (!p.count_include_pad) size = (h1 - h0) * (w1 - w0);
            }
            double acc = is_max ? -1e300 : 0.0, sabs = 0, em[2] = {0, 0};
            for (index_t ih = h0; ih < h1; ++ih)
              for (index_t iw = w0; iw < w1; ++iw) {
                const auto i = std::size_t(((n * C + c) * H + ih) * W + iw);
                const double v = X.v[i] - zp;
                if (is_max) {
                  acc = std::max(acc, X.v[i]);
                  for (int m = 0; m < 2; ++m) em[m] = std::max(em[m], X.e[m][i]);
                } else {
                  acc += v;
                  sabs += std::fabs(v);
                  for (int m = 0; m < 2; ++m) em[m] += X.e[m][i];
                }
              }
            const auto o = std::size_t(((n * C + c) * OH + oh) * OW + ow);
            if (is_max) {
              r.v[o] = acc;
              for (int m = 0; m < 2; ++m) r.e[m][o] = em[m];
              continue;
            }
            const double div = double(size);
            r.v[o] = acc / div + zp;
            for (int m = 0; m < 2; ++m) {
              r.e[m][o] = em[m] / div;
              if (is_int(X.type))
                r.e[m][o] += 0.5 + 1e-6;  // rounded to the integer grid
              else
                r.e[m][o] +=
                    gam(double((h1 - h0) * (w1 - w0))) * sabs / div + store_err(X.type, r.v[o]);
            }
          }
    node(id, std::move(r), {x});
    return true;
  }

  // ---- softmax and norms -----------------------------------------------------------------------
  bool op_softmax() {
    const int x = pick([&](const rt& t) { return float_act(t) && !t.shape.empty(); });
    if (x < 0) return false;
    const rt X = T[std::size_t(x)];
    const int rank = int(X.shape.size());
    const int axis = ri(-rank, rank - 1);
    const tensor_id id = g.softmax(fresh("softmax"), {x}, axis);
    rt r = like(X);
    const int a = axis < 0 ? axis + rank : axis;
    index_t outer = 1, inner = 1;
    for (int i = 0; i < a; ++i) outer *= X.shape[std::size_t(i)];
    for (int i = a + 1; i < rank; ++i) inner *= X.shape[std::size_t(i)];
    const index_t len = X.shape[std::size_t(a)];
    for (index_t o = 0; o < outer; ++o)
      for (index_t in = 0; in < inner; ++in) {
        auto at = [&](index_t i) { return std::size_t((o * len + i) * inner + in); };
        double mx = -1e300, sum = 0, E[2] = {0, 0};
        for (index_t i = 0; i < len; ++i) {
          mx = std::max(mx, X.v[at(i)]);
          for (int m = 0; m < 2; ++m) E[m] = std::max(E[m], X.e[m][at(i)]);
        }
        for (index_t i = 0; i < len; ++i) sum += std::exp(X.v[at(i)] - mx);
        for (index_t i = 0; i < len; ++i) {
          const double y = std::exp(X.v[at(i)] - mx) / sum;
          r.v[at(i)] = y;
          for (int m = 0; m < 2; ++m)  // y_i' / y_i lies in [exp(-2E), exp(2E)]
            r.e[m][at(i)] = y * std::expm1(2 * E[m]) + (32 + 2 * double(len)) * u32 * y + 1e-30 +
                            store_err(X.type, y);
        }
      }
    node(id, std::move(r), {x});
    return true;
  }

  bool op_norm(bool rms) {
    const int x = pick([&](const rt& t) {
      return float_act(t) && t.layout == tensor_layout::plain && !t.shape.empty();
    });
    if (x < 0) return false;
    const rt X = T[std::size_t(x)];
    const index_t n = X.shape.back(), rows = X.numel() / n;
    const int gm = coin(0.7) ? new_const_random({n}, weight_type(), 0.5, 1.5) : -1;
    const int bt = !rms && coin(0.5) ? new_const_random({n}, weight_type(), -0.5, 0.5) : -1;
    const float eps = float(any_of(eps_choices));
    const tensor_id gid = gm >= 0 ? tensor_id{gm} : tensor_id{};
    const tensor_id id =
        rms ? g.rms_norm(fresh("rms"), {x}, gid, eps)
            : g.layer_norm(fresh("ln"), {x}, gid, bt >= 0 ? tensor_id{bt} : tensor_id{}, eps);
    rt r = like(X);
    const double dn = double(n);
    for (index_t row = 0; row < rows; ++row) {
      auto at = [&](index_t j) { return std::size_t(row * n + j); };
      double mean = 0, ms = 0, mabs = 0, E[2] = {0, 0};
      for (index_t j = 0; j < n; ++j) {
        mean += X.v[at(j)];
        ms += X.v[at(j)] * X.v[at(j)];
        mabs += std::fabs(X.v[at(j)]);
        for (int m = 0; m < 2; ++m) E[m] = std::max(E[m], X.e[m][at(j)]);
      }
      mean /= dn;
      ms /= dn;
      mabs /= dn;
      double var = 0;
      for (index_t j = 0; j < n; ++j) var += (X.v[at(j)] - mean) * (X.v[at(j)] - mean);
      var /= dn;
      const double sigma = std::sqrt((rms ? ms : var) + double(eps));
      // Accumulation error of the statistics (mean, and the variance or mean square: either
      // formula is within (n + 8) u of sum x^2).
      const double d_mean = (dn + 4) * u32 * mabs;
      const double d_var = (dn + 8) * 2 * u32 * ms;
      for (index_t j = 0; j < n; ++j) {
        const double gv = gm >= 0 ? T[std::size_t(gm)].v[std::size_t(j)] : 1.0;
        const double bv = bt >= 0 ? T[std::size_t(bt)].v[std::size_t(j)] : 0.0;
        const double xh = ((rms ? X.v[at(j)] : X.v[at(j)] - mean)) / sigma;
        const double y = xh * gv + bv;
        r.v[at(j)] = y;
        const double own = std::fabs(gv) * ((rms ? 0.0 : d_mean / sigma) +
                                            std::fabs(xh) * d_var / (2 * sigma * sigma)) +
                           4 * u32 * (std::fabs(gv * xh) + std::fabs(bv)) + 1e-12;
        for (int m = 0; m < 2; ++m) {
          // Linearized sensitivity (x - mean: 2E, sigma: E, both over sigma), or when the
          // input error is not small against sigma, the range of xh itself (|xh| <= sqrt(n)).
          const double lin = E[m] <= 0.1 * sigma
                                 ? 1.25 * std::fabs(gv) / sigma *
                                       ((rms ? X.e[m][at(j)] : 2 * E[m]) + std::fabs(xh) * E[m])
                                 : 1e300;
          const double cap = std::fabs(gv) * 2 * std::sqrt(dn);
          r.e[m][at(j)] = std::min(lin, cap) + own + store_err(X.type, y);
        }
      }
    }
    node(id, std::move(r), {x, gm, bt});
    return true;
  }
  std::vector<double> eps_choices{1e-5, 1e-3, 0.1};

  bool op_batch_norm() {
    const int x = pick([&](const rt& t) {
      // KNOWN BUG: batch norm of a bf16 / f16 input (output f32) writes bf16 / reads f16 as f32.
      return (t.type == dtype::f32 ||
              ((cfg.known_bugs & bug::batch_norm_bf16) && is_float(t.type))) &&
             !t.shape.empty();
    });
    if (x < 0) return false;
    const rt X = T[std::size_t(x)];
    const index_t C = X.channels();
    const int mean = new_const_random({C}, weight_type(), -0.5, 0.5);
    const int var = new_const_random({C}, weight_type(), 0.3, 2.0);
    const int gamma = new_const_random({C}, weight_type(), 0.5, 1.5);
    const int beta = new_const_random({C}, weight_type(), -0.5, 0.5);
    const float eps = float(rf(1e-5, 1e-3));
    const tensor_id id = g.batch_norm(fresh("bn"), {x}, {mean}, {var}, {gamma}, {beta}, eps);
    rt r = like(X);
    r.type = dtype::f32;
    r.bn_of_conv = X.conv_no_bias;
    const index_t n = X.numel();
    for (index_t i = 0; i < n; ++i) {
      const index_t c = (X.layout != tensor_layout::plain && X.shape.size() == 4)
                            ? (i / (X.shape[2] * X.shape[3])) % C
                            : i % C;
      const auto ci = std::size_t(c);
      const double sc =
          T[std::size_t(gamma)].v[ci] / std::sqrt(T[std::size_t(var)].v[ci] + double(eps));
      const double mv = T[std::size_t(mean)].v[ci], bv = T[std::size_t(beta)].v[ci];
      const double xv = X.v[std::size_t(i)];
      const double y = (xv - mv) * sc + bv;
      r.v[std::size_t(i)] = y;
      for (int m = 0; m < 2; ++m)
        r.e[m][std::size_t(i)] =
            std::fabs(sc) * X.e[m][std::size_t(i)] +
            8 * u32 * (std::fabs(xv * sc) + std::fabs(bv) + std::fabs(mv * sc));
    }
    node(id, std::move(r), {x, mean, var, gamma, beta});
    return true;
  }

  // ---- shape and type ops ----------------------------------------------------------------------
  rt copy_of(const rt& x) {  // reshape, flatten, convert_layout, cast
    rt r = x;
    r.k = rt::kind::node;
    r.calibrated = false;
    r.passes_quant = true;
    return r;
  }
  bool op_reshape() {
    const int x = pick([](const rt&) { return true; });
    if (x < 0) return false;
    const rt X = T[std::size_t(x)];
    std::vector<index_t> target;
    index_t rest = X.numel();
    const int rank = ri(1, 4);
    for (int i = 0; i + 1 < rank; ++i) {
      std::vector<index_t> divs;
      for (index_t d = 1; d <= rest; ++d)
        if (rest % d == 0) divs.push_back(d);
      const index_t d = any_of(divs);
      target.push_back(d);
      rest /= d;
    }
    target.push_back(rest);
    std::vector<index_t> decl = target;
    if (coin(0.3)) decl[std::size_t(ri(0, rank - 1))] = -1;
    const tensor_id id = g.reshape(fresh("reshape"), {x}, decl);
    rt r = copy_of(X);
    r.shape = target;
    r.layout = tensor_layout::plain;
    node(id, std::move(r), {x});
    return true;
  }
  bool op_flatten() {
    const int x = pick([](const rt& t) { return !t.shape.empty(); });
    if (x < 0) return false;
    const rt X = T[std::size_t(x)];
    const int rank = int(X.shape.size());
    const int axis = ri(-rank, rank);
    const tensor_id id = g.flatten(fresh("flatten"), {x}, axis);
    const int a = axis < 0 ? axis + rank : axis;
    rt r = copy_of(X);
    r.shape.assign(X.shape.begin(), X.shape.begin() + a);
    index_t inner = 1;
    for (int i = a; i < rank; ++i) inner *= X.shape[std::size_t(i)];
    r.shape.push_back(inner);
    r.layout = tensor_layout::plain;
    node(id, std::move(r), {x});
    return true;
  }
  bool op_concat() {
    const int x = pick([](const rt& t) { return !t.shape.empty() && t.numel() <= 1024; });
    if (x < 0) return false;
    const rt X = T[std::size_t(x)];
    const int rank = int(X.shape.size());
    const int axis = ri(-rank, rank - 1);
    const int a = axis < 0 ? axis + rank : axis;
    std::vector<int> parts{x};
    const int extra = ri(1, 2);
    for (int k = 0; k < extra; ++k) {
      std::vector<int> c;  // existing tensors that fit
      for (std::size_t i = 0; i < T.size(); ++i) {
        const rt& t = T[i];
        if (t.type != X.type || t.layout != X.layout || t.shape.size() != X.shape.size()) continue;
        bool ok = true;
        for (int d = 0; d < rank; ++d)
          ok = ok && (d == a || t.shape[std::size_t(d)] == X.shape[std::size_t(d)]);
        if (ok) c.push_back(int(i));
      }
      if (!c.empty() && coin(0.5)) {
        parts.push_back(any_of(c));
        continue;
      }
      auto s = X.shape;
      s[std::size_t(a)] = ri(1, 4);
      parts.push_back(coin(0.6) ? new_input(s, X.type, X.layout)
                                : new_const_random(s, X.type, -2, 2, X.layout));
    }
    std::vector<tensor_id> ids;
    for (int p : parts) ids.push_back({p});
    const tensor_id id = g.concat(fresh("concat"), ids, axis);
    rt r;
    r.shape = X.shape;
    r.shape[std::size_t(a)] = 0;
    for (int p : parts) r.shape[std::size_t(a)] += T[std::size_t(p)].shape[std::size_t(a)];
    r.type = X.type;
    r.layout = X.layout;
    r.alloc();  // concat passes no quant params (the inputs' may differ)
    index_t outer = 1, inner = 1;
    for (int i = 0; i < a; ++i) outer *= X.shape[std::size_t(i)];
    for (int i = a + 1; i < rank; ++i) inner *= X.shape[std::size_t(i)];
    const index_t len = r.shape[std::size_t(a)];
    index_t off = 0;
    for (int p : parts) {
      const rt& P = T[std::size_t(p)];
      const index_t pl = P.shape[std::size_t(a)];
      for (index_t o = 0; o < outer; ++o)
        for (index_t i = 0; i < pl; ++i)
          for (index_t in = 0; in < inner; ++in) {
            const auto src = std::size_t((o * pl + i) * inner + in);
            const auto dst = std::size_t((o * len + off + i) * inner + in);
            r.v[dst] = P.v[src];
            for (int m = 0; m < 2; ++m) r.e[m][dst] = P.e[m][src];
          }
      off += pl;
    }
    node(id, std::move(r), parts);
    return true;
  }
  bool op_layout() {
    const int x = pick([](const rt& t) { return t.shape.size() == 4; });
    if (x < 0) return false;
    const tensor_layout to = coin(0.5) ? tensor_layout::nchw : tensor_layout::nhwc;
    const tensor_id id = g.convert_layout(fresh("layout"), {x}, to);
    rt r = copy_of(T[std::size_t(x)]);
    r.layout = to;
    node(id, std::move(r), {x});
    return true;
  }
  bool op_cast() {
    const int x = pick([](const rt& t) { return is_float(t.type); });
    if (x < 0) return false;
    static constexpr dtype to_types[] = {dtype::f32, dtype::bf16, dtype::f16};
    const dtype to = to_types[ri(0, 2)];
    const tensor_id id = g.cast(fresh("cast"), {x}, to);
    rt r = copy_of(T[std::size_t(x)]);
    r.passes_quant = false;  // a cast takes no params from its input
    r.type = to;
    if (to != T[std::size_t(x)].type)
      for (std::size_t i = 0; i < r.v.size(); ++i)
        for (int m = 0; m < 2; ++m) r.e[m][i] += store_err(to, std::fabs(r.v[i]) + r.e[m][i]);
    node(id, std::move(r), {x});
    return true;
  }
  bool op_quantize() {
    const int x = pick([](const rt& t) { return t.type == dtype::f32; });
    if (x < 0) return false;
    const rt X = T[std::size_t(x)];
    const dtype to = coin(0.6) ? dtype::u8 : dtype::i8;
    double lo = 0, hi = 0;
    for (double v : X.v) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    // Sometimes a narrower range than the data's: saturation is part of the semantics.
    const double span = std::max(hi - lo, 1e-3) * rf(0.6, 1.4);
    kfuse::tensor_quant q;
    q.scale = float(span / 255);
    const double qmin = to == dtype::u8 ? 0 : -128, qmax = to == dtype::u8 ? 255 : 127;
    q.zero_point =
        std::int32_t(std::clamp(std::nearbyint(qmin - lo / double(q.scale)), qmin, qmax));
    const tensor_id id = g.quantize(fresh("q"), {x}, to, q);
    rt r = like(X);
    r.type = to;
    r.has_quant = true;
    r.q = q;
    const double s = double(q.scale);
    for (std::size_t i = 0; i < r.v.size(); ++i) {
      // Half to even of the f32 quotient, as the kernel; one step of slack below in any case.
      const double t = double(float(X.v[i]) / q.scale);
      r.v[i] = std::clamp(std::nearbyint(t) + q.zero_point, qmin, qmax);
      for (int m = 0; m < 2; ++m) r.e[m][i] = X.e[m][i] / s + 1 + 1e-9;
    }
    node(id, std::move(r), {x});
    return true;
  }
  bool op_dequantize() {
    const int x = pick([](const rt& t) { return is_int(t.type) && t.has_quant; });
    if (x < 0) return false;
    const rt X = T[std::size_t(x)];
    const tensor_id id = g.dequantize(fresh("dq"), {x});
    rt r = like(X);
    r.type = dtype::f32;
    const double s = double(X.q.scale);
    for (std::size_t i = 0; i < r.v.size(); ++i) {
      r.v[i] = s * (X.v[i] - X.q.zero_point);
      for (int m = 0; m < 2; ++m) r.e[m][i] = s * X.e[m][i] + u32 * std::fabs(r.v[i]);
    }
    node(id, std::move(r), {x});
    return true;
  }
  bool op_custom() {
    const int x = pick([](const rt& t) { return t.type == dtype::f32; });
    if (x < 0) return false;
    const rt X = T[std::size_t(x)];
    const index_t n = X.numel();
    const tensor_id id = g.custom(fresh("custom"), {{x}},
                                  kfuse::make_custom_op(
                                      [n](const void* const* in, void* out) {
                                        const auto* a = static_cast<const float*>(in[0]);
                                        auto* o = static_cast<float*>(out);
                                        for (index_t i = 0; i < n; ++i) o[i] = 2 * a[i] + 1;
                                      },
                                      X.shape, dtype::f32, double(n), X.layout));
    rt r = like(X);
    for (std::size_t i = 0; i < r.v.size(); ++i) {
      r.v[i] = 2 * X.v[i] + 1;
      for (int m = 0; m < 2; ++m) r.e[m][i] = 2 * X.e[m][i] + u32 * std::fabs(r.v[i]);
    }
    node(id, std::move(r), {x});
    return true;
  }

  /// One random node (false when the drawn op found no valid input).
  bool random_node() {
    static constexpr int weights[] = {12, 6, 6, 8, 7, 5, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 1};
    int total = 0;
    for (int w : weights) total += w;
    int r = ri(0, total - 1), k = 0;
    while (r >= weights[k]) r -= weights[k++];
    switch (k) {
      case 0:
        return op_unary();
      case 1:
        return op_binary();
      case 2:
        return op_chain();
      case 3:
        return op_linear();
      case 4:
        return op_conv();
      case 5:
        return op_pool();
      case 6:
        return op_softmax();
      case 7:
        return op_norm(false);
      case 8:
        return op_norm(true);
      case 9:
        return op_batch_norm();
      case 10:
        return op_reshape();
      case 11:
        return op_flatten();
      case 12:
        return op_concat();
      case 13:
        return op_layout();
      case 14:
        return op_cast();
      case 15:
        return op_quantize();
      case 16:
        return op_dequantize();
      default:
        return op_custom();
    }
  }

  /// Inputs, then `nodes` random nodes (retrying ops that found no input).
  void build_body(int nodes) {
    const int n_in = ri(1, 2);
    for (int i = 0; i < n_in; ++i) new_random_input();
    int made = 0;
    for (int tries = 0; made < nodes && tries < nodes * 20; ++tries)
      if (random_node()) ++made;
  }
  /// Outputs: every node output nothing reads (now and then one left dead), and some of the
  /// others (an output that is also read keeps its producer from fusing).
  void choose_outputs() {
    outputs.clear();
    for (int t : node_outs) {
      const bool leaf = !consumed[std::size_t(t)];
      if ((leaf && !coin(0.1)) || (!leaf && coin(0.15))) outputs.push_back(t);
    }
    if (outputs.empty() && !node_outs.empty()) outputs.push_back(node_outs.back());
    for (int o : outputs) g.output({o});
  }

  /// A complete random valid graph.
  void build(int max_nodes) {
    build_body(ri(1, max_nodes));
    if (node_outs.empty() && !op_unary()) {  // only integer inputs, say
      const int x = new_input({ri(1, 9)}, dtype::f32, tensor_layout::plain);
      rt r = eval_eltwise(T[std::size_t(x)], {kfuse::eltwise_stage{}}, {});
      node(g.relu(fresh("act"), {x}), std::move(r), {x});
    }
    choose_outputs();
  }

 private:
  int uid_ = 0;
};

}  // namespace gfuzz
