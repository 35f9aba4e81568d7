// Load-time pattern fusion on the ONNX nodes, before they are imported: the decomposed forms
// exporters write for GELU, HardSwish and SiLU become one node each (one eltwise stage, which the
// plan then fuses into the producer's epilogue); decomposed LayerNorm and attention become the
// fused ops; a zero Pad before a Conv becomes the Conv's padding.
#include "patterns.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <map>
#include <set>

namespace kfuse::onnx::detail {

namespace {

class matcher {
 public:
  matcher(std::vector<node_proto>& nodes, const std::unordered_map<std::string, value>& values,
          const std::set<std::string>& outputs)
      : nodes_(nodes), values_(values), outputs_(outputs) {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      for (const auto& o : nodes[i].output()) producer_[o] = int(i);
      for (const auto& in : nodes[i].input()) ++uses_[in];
    }
  }

  /// The node producing `v` if it has op type `type` and is still live (else -1).
  int producer(const std::string& v, const char* type) const {
    const auto it = producer_.find(v);
    if (it == producer_.end() || dead_.count(it->second)) return -1;
    const node_proto& n = nodes_[std::size_t(it->second)];
    return n.op_type() == type && (n.domain().empty() || n.domain() == "ai.onnx") && arity_ok(n)
               ? it->second
               : -1;
  }
  /// The node has the inputs and output the patterns read (a damaged file may lack them).
  static bool arity_ok(const node_proto& n) {
    if (n.output_size() < 1) return false;
    const std::string& t = n.op_type();
    if (t == "Add" || t == "Mul" || t == "Div" || t == "Pow" || t == "Sub" || t == "MatMul")
      return n.input_size() == 2;
    if (t == "Clip") return n.input_size() >= 1;
    if (t == "Constant") return n.input_size() == 0;
    if (t == "Pad") return n.input_size() >= 1 && n.input_size() <= 3;
    if (t == "Conv") return n.input_size() == 2 || n.input_size() == 3;
    return n.input_size() == 1;
  }
  /// How many node inputs read `v` (model outputs not counted).
  int uses(const std::string& v) const {
    const auto it = uses_.find(v);
    return it == uses_.end() ? 0 : it->second;
  }
  bool is_output(const std::string& v) const { return outputs_.count(v) != 0; }
  /// The live consumers of v.
  std::vector<int> consumers(const std::string& v) const {
    std::vector<int> out;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (dead_.count(int(i))) continue;
      for (const auto& in : nodes_[i].input())
        if (in == v) {
          out.push_back(int(i));
          break;
        }
    }
    return out;
  }
  /// The constant tensor v (an initializer), or nullptr.
  const const_value* constant(const std::string& v) const {
    const auto it = values_.find(v);
    return it != values_.end() && it->second.is_const ? &it->second.c : nullptr;
  }
  /// Replaces `gone` by node `fused` at the place of the last of them.
  void replace_with(const std::vector<int>& gone, node_proto fused) {
    int last = 0;
    for (int i : gone) last = std::max(last, i);
    for (int i : gone) dead_.insert(i);
    dead_.erase(last);
    producer_[fused.output(0)] = last;
    nodes_[std::size_t(last)] = std::move(fused);
  }
  /// `v` feeds exactly one input and is no model output: an intermediate a rewrite may drop.
  bool private_value(const std::string& v) const {
    const auto it = uses_.find(v);
    return it != uses_.end() && it->second == 1 && !outputs_.count(v);
  }
  /// A scalar constant (initializer or Constant node) close to `want`.
  bool scalar(const std::string& v, double want) const {
    double got = 0;
    return scalar_value(v, got) && std::fabs(got - want) <= 1e-4 * std::fabs(want) + 1e-6;
  }
  bool scalar_value(const std::string& v, double& out) const {
    const auto it = values_.find(v);  // an initializer
    if (it != values_.end()) {
      if (!it->second.is_const || it->second.c.numel() != 1) return false;
      out = it->second.c.at(0);
      return true;
    }
    const int p = producer(v, "Constant");
    if (p < 0) return false;
    const node_proto& c = nodes_[std::size_t(p)];
    if (c.attribute_size() != 1) return false;
    const auto& a = c.attribute(0);
    if (a.name() == "value_float") {
      out = a.f();
      return true;
    }
    if (a.name() != "value") return false;
    const auto& t = a.t();
    if (t.data_type() != 1) return false;
    std::int64_t n = 1;
    for (auto d : t.dims()) n *= d;
    if (n != 1) return false;
    if (t.float_data_size() == 1) {
      out = t.float_data(0);
      return true;
    }
    if (t.raw_data().size() == 4) {
      float f;
      std::memcpy(&f, t.raw_data().data(), 4);
      out = f;
      return true;
    }
    return false;
  }
  /// The int64 values of v: an integer initializer or a Constant node's int64 tensor.
  bool ints_value(const std::string& v, std::vector<std::int64_t>& out) const {
    if (const const_value* c = constant(v)) {
      if (c->is_float()) return false;
      out.assign(c->i.begin(), c->i.end());
      return true;
    }
    const int p = producer(v, "Constant");
    if (p < 0) return false;
    const node_proto& c = nodes_[std::size_t(p)];
    if (c.attribute_size() != 1 || c.attribute(0).name() != "value") return false;
    const auto& t = c.attribute(0).t();
    if (t.data_type() != 7) return false;  // INT64
    out.assign(t.int64_data().begin(), t.int64_data().end());
    if (out.empty() && t.raw_data().size() % 8 == 0 && t.raw_data().size() <= 8 * 16) {
      out.resize(t.raw_data().size() / 8);
      std::memcpy(out.data(), t.raw_data().data(), t.raw_data().size());
    }
    return true;
  }
  /// The other input of a two-input node, given one of them.
  static const std::string* other(const node_proto& n, const std::string& one) {
    if (n.input_size() != 2) return nullptr;
    if (n.input(0) == one) return &n.input(1);
    if (n.input(1) == one) return &n.input(0);
    return nullptr;
  }
  /// The single live consumer of v with op type `type` (-1 if v has another use).
  int sole_consumer(const std::string& v, const char* type) const {
    if (!private_value(v)) return -1;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (dead_.count(int(i))) continue;
      const node_proto& n = nodes_[i];
      for (const auto& in : n.input())
        if (in == v) return n.op_type() == type && arity_ok(n) ? int(i) : -1;
    }
    return -1;
  }
  node_proto& at(int i) { return nodes_[std::size_t(i)]; }
  /// Replaces the nodes `gone` by one node `type`(x) -> y at the place of the last of them.
  void replace(std::vector<int> gone, const char* type, const std::string& x,
               const std::string& y) {
    int last = 0;
    for (int i : gone) last = std::max(last, i);
    node_proto fused;
    fused.set_op_type(type);
    fused.set_domain("kfuse");
    fused.set_name(y);
    fused.add_input(x);
    fused.add_output(y);
    for (int i : gone) dead_.insert(i);
    dead_.erase(last);
    nodes_[std::size_t(last)] = fused;
    producer_[y] = last;
  }
  void compact() {
    std::vector<node_proto> live;
    for (std::size_t i = 0; i < nodes_.size(); ++i)
      if (!dead_.count(int(i))) live.push_back(std::move(nodes_[i]));
    nodes_.swap(live);
  }
  bool dead(int i) const { return dead_.count(i) != 0; }
  int index_of(const std::string& v) const { return producer_.at(v); }

 private:
  std::vector<node_proto>& nodes_;
  const std::unordered_map<std::string, value>& values_;
  const std::set<std::string>& outputs_;
  std::map<std::string, int> producer_;
  std::map<std::string, int> uses_;
  std::set<int> dead_;
};

::onnx::AttributeProto approximate_tanh() {
  ::onnx::AttributeProto a;
  a.set_name("approximate");
  a.set_type(::onnx::AttributeProto::STRING);
  a.set_s("tanh");
  return a;
}

// The common tail of both GELU forms: 0.5 * x * (1 + f), f the output of node `fn` (erf or
// tanh), in the orders exporters write it. Adds the tail's nodes to `gone`, sets the output y.
bool gelu_tail(matcher& m, int fn, const std::string& x, std::vector<int>& gone, std::string& y) {
  const std::string& f = m.at(fn).output(0);
  const int add = m.sole_consumer(f, "Add");
  if (add < 0) return false;
  const std::string* one = matcher::other(m.at(add), f);
  if (!one || !m.scalar(*one, 1.0)) return false;
  const int mul1 = m.sole_consumer(m.at(add).output(0), "Mul");
  if (mul1 < 0) return false;
  const std::string* lhs = matcher::other(m.at(mul1), m.at(add).output(0));
  if (!lhs) return false;
  gone.insert(gone.end(), {fn, add, mul1});
  if (*lhs == x) {  // (x * (1 + f)) * 0.5
    const int mul2 = m.sole_consumer(m.at(mul1).output(0), "Mul");
    if (mul2 < 0) return false;
    const std::string* half = matcher::other(m.at(mul2), m.at(mul1).output(0));
    if (!half || !m.scalar(*half, 0.5)) return false;
    gone.push_back(mul2);
    y = m.at(mul2).output(0);
    return true;
  }
  // (x * 0.5) * (1 + f)
  const int h = m.producer(*lhs, "Mul");
  if (h < 0 || !m.private_value(*lhs)) return false;
  const std::string* half = matcher::other(m.at(h), x);
  if (!half || !m.scalar(*half, 0.5)) return false;
  gone.push_back(h);
  y = m.at(mul1).output(0);
  return true;
}

// Erf GELU: 0.5 * x * (1 + erf(x / sqrt(2))) (or x * (1 / sqrt(2))).
bool match_gelu_erf(matcher& m, int erf, std::vector<std::string>& report) {
  const std::string& d = m.at(erf).input(0);
  int scale = m.producer(d, "Div");
  std::string x;
  if (scale >= 0 && m.scalar(m.at(scale).input(1), std::sqrt(2.0))) {
    x = m.at(scale).input(0);
  } else {
    scale = m.producer(d, "Mul");
    if (scale < 0) return false;
    const node_proto& s = m.at(scale);
    if (m.scalar(s.input(1), std::sqrt(0.5)))
      x = s.input(0);
    else if (m.scalar(s.input(0), std::sqrt(0.5)))
      x = s.input(1);
    else
      return false;
  }
  if (!m.private_value(d)) return false;
  std::vector<int> gone = {scale};
  std::string y;
  if (!gelu_tail(m, erf, x, gone, y)) return false;
  report.push_back("gelu: the erf form (" + std::to_string(gone.size()) + " nodes) -> Gelu '" + y +
                   "'");
  m.replace(gone, "Gelu", x, y);
  return true;
}

// Tanh GELU: 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))), x^3 as x * (x * x)
// or Pow(x, 3).
bool match_gelu_tanh(matcher& m, int tanh, std::vector<std::string>& report) {
  const std::string& t_in = m.at(tanh).input(0);
  const int scale = m.producer(t_in, "Mul");
  if (scale < 0 || !m.private_value(t_in)) return false;
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  const std::string* inner = nullptr;
  if (m.scalar(m.at(scale).input(0), k))
    inner = &m.at(scale).input(1);
  else if (m.scalar(m.at(scale).input(1), k))
    inner = &m.at(scale).input(0);
  if (!inner || !m.private_value(*inner)) return false;
  const int add = m.producer(*inner, "Add");
  if (add < 0) return false;
  for (int side = 0; side < 2; ++side) {
    const std::string& x = m.at(add).input(side);
    const std::string& c = m.at(add).input(1 - side);
    const int mc = m.producer(c, "Mul");  // 0.044715 * x^3
    if (mc < 0 || !m.private_value(c)) continue;
    const std::string* cube = nullptr;
    if (m.scalar(m.at(mc).input(0), 0.044715))
      cube = &m.at(mc).input(1);
    else if (m.scalar(m.at(mc).input(1), 0.044715))
      cube = &m.at(mc).input(0);
    if (!cube || !m.private_value(*cube)) continue;
    std::vector<int> gone = {scale, add, mc};
    if (const int pw = m.producer(*cube, "Pow"); pw >= 0) {
      if (m.at(pw).input(0) != x || !m.scalar(m.at(pw).input(1), 3.0)) continue;
      gone.push_back(pw);
    } else if (const int m3 = m.producer(*cube, "Mul"); m3 >= 0) {
      const std::string* sq = matcher::other(m.at(m3), x);
      if (!sq || !m.private_value(*sq)) continue;
      const int m2 = m.producer(*sq, "Mul");
      if (m2 < 0 || m.at(m2).input(0) != x || m.at(m2).input(1) != x) continue;
      gone.insert(gone.end(), {m3, m2});
    } else {
      continue;
    }
    std::string y;
    if (!gelu_tail(m, tanh, x, gone, y)) return false;
    report.push_back("gelu: the tanh form (" + std::to_string(gone.size()) + " nodes) -> Gelu '" +
                     y + "'");
    m.replace(gone, "Gelu", x, y);
    m.at(m.index_of(y)).add_attribute()->CopyFrom(approximate_tanh());
    return true;
  }
  return false;
}

// HardSwish: x * clip(x + 3, 0, 6) / 6 (or * 1/6), and x * HardSigmoid(x) with alpha 1/6.
bool match_hardswish(matcher& m, int mul, std::vector<std::string>& report) {
  const node_proto& mn = m.at(mul);
  for (int side = 0; side < 2; ++side) {
    const std::string& x = mn.input(side);
    const std::string& g = mn.input(1 - side);
    if (!m.private_value(g)) continue;
    const int hs = m.producer(g, "HardSigmoid");
    if (hs >= 0 && m.at(hs).input(0) == x) {
      double a = 0.2, b = 0.5;
      for (const auto& at : m.at(hs).attribute()) {
        if (at.name() == "alpha") a = at.f();
        if (at.name() == "beta") b = at.f();
      }
      if (std::fabs(a - 1.0 / 6) > 1e-6 || b != 0.5) continue;
      report.push_back("hardswish: x * HardSigmoid(x) -> HardSwish '" + mn.output(0) + "'");
      m.replace({hs, mul}, "HardSwish", x, mn.output(0));
      return true;
    }
    const int sig = m.producer(g, "Sigmoid");
    if (sig >= 0 && m.at(sig).input(0) == x) {
      report.push_back("silu: x * Sigmoid(x) -> SiLU '" + mn.output(0) + "'");
      m.replace({sig, mul}, "kfuse.Silu", x, mn.output(0));
      return true;
    }
    const int clip = m.producer(g, "Clip");
    if (clip < 0) continue;
    const node_proto& c = m.at(clip);
    if (c.input_size() < 3 || !m.scalar(c.input(1), 0.0) || !m.scalar(c.input(2), 6.0)) continue;
    // Add(x, 3) -> [Relu ->] Clip(0, 6): relu6 is exported with and without the Relu.
    std::string clip_in = c.input(0);
    const int relu = m.producer(clip_in, "Relu");
    if (relu >= 0) {
      if (!m.private_value(clip_in)) continue;
      clip_in = m.at(relu).input(0);
    }
    const int add = m.producer(clip_in, "Add");
    if (add < 0 || !m.private_value(clip_in)) continue;
    const std::string* three = matcher::other(m.at(add), x);
    if (!three || !m.scalar(*three, 3.0)) continue;
    // The / 6 after the product.
    int div = m.sole_consumer(mn.output(0), "Div");
    bool ok = div >= 0 && m.at(div).input(0) == mn.output(0) && m.scalar(m.at(div).input(1), 6.0);
    if (!ok) {
      div = m.sole_consumer(mn.output(0), "Mul");
      const std::string* sixth = div >= 0 ? matcher::other(m.at(div), mn.output(0)) : nullptr;
      ok = sixth && m.scalar(*sixth, 1.0 / 6);
    }
    if (!ok) continue;
    const std::string y = m.at(div).output(0);
    report.push_back("hardswish: x * clip(x + 3, 0, 6) / 6 -> HardSwish '" + y + "'");
    std::vector<int> gone = {add, clip, mul, div};
    if (relu >= 0) gone.push_back(relu);
    m.replace(gone, "HardSwish", x, y);
    return true;
  }
  return false;
}

// The axes attribute of a ReduceMean is exactly {-1} (or {rank - 1}: not known here, so -1).
bool last_axis_mean(const node_proto& r) {
  bool keep = true, axes_ok = false;
  for (const auto& a : r.attribute()) {
    if (a.name() == "keepdims") keep = a.i() != 0;
    if (a.name() == "axes") axes_ok = a.ints_size() == 1 && a.ints(0) == -1;
  }
  return keep && axes_ok;
}

// LayerNorm as exporters before opset 17 write it: d = x - mean(x); d / sqrt(mean(d^2) + eps)
// * gamma + beta over the last axis -> LayerNormalization(x, gamma, beta, epsilon).
bool match_layer_norm(matcher& m, int mean1, std::vector<std::string>& report) {
  const node_proto& r1 = m.at(mean1);
  if (!last_axis_mean(r1) || m.is_output(r1.output(0))) return false;
  const std::string& x = r1.input(0);
  const int sub = m.sole_consumer(r1.output(0), "Sub");
  if (sub < 0 || m.at(sub).input(0) != x || m.at(sub).input(1) != r1.output(0)) return false;
  const std::string& d = m.at(sub).output(0);
  // d feeds the square and the division, nothing else.
  const std::vector<int> users = m.consumers(d);
  if (users.size() != 2 || m.is_output(d)) return false;
  int sq = -1, div = -1;
  for (int u : users) {
    const node_proto& un = m.at(u);
    if (!matcher::arity_ok(un)) return false;
    if (un.op_type() == "Pow" && un.input(0) == d && m.scalar(un.input(1), 2.0))
      sq = u;
    else if (un.op_type() == "Mul" && un.input(0) == d && un.input(1) == d)
      sq = u;
    else if (un.op_type() == "Div" && un.input(0) == d)
      div = u;
  }
  // d is read by the square (once by Pow, twice by Mul(d, d)) and the division only.
  if (sq < 0 || div < 0 || m.uses(d) != (m.at(sq).op_type() == "Pow" ? 2 : 3)) return false;
  const int mean2 = m.sole_consumer(m.at(sq).output(0), "ReduceMean");
  if (mean2 < 0 || !last_axis_mean(m.at(mean2))) return false;
  const int add = m.sole_consumer(m.at(mean2).output(0), "Add");
  if (add < 0) return false;
  const std::string* eps = matcher::other(m.at(add), m.at(mean2).output(0));
  double eps_v = 0;
  if (!eps || !m.scalar_value(*eps, eps_v) || !(eps_v >= 0)) return false;
  const int sqrt = m.sole_consumer(m.at(add).output(0), "Sqrt");
  if (sqrt < 0 || m.at(div).input(1) != m.at(sqrt).output(0) ||
      !m.private_value(m.at(sqrt).output(0)))
    return false;
  // * gamma, + beta: constant vectors over the last axis.
  const int mul = m.sole_consumer(m.at(div).output(0), "Mul");
  if (mul < 0) return false;
  const std::string* gamma = matcher::other(m.at(mul), m.at(div).output(0));
  if (!gamma || !m.constant(*gamma) || m.constant(*gamma)->shape.size() != 1) return false;
  const int addb = m.sole_consumer(m.at(mul).output(0), "Add");
  if (addb < 0) return false;
  const std::string* beta = matcher::other(m.at(addb), m.at(mul).output(0));
  if (!beta || !m.constant(*beta) || m.constant(*beta)->shape.size() != 1) return false;
  node_proto ln;
  ln.set_op_type("LayerNormalization");
  ln.set_domain("kfuse");
  const std::string y = m.at(addb).output(0);
  ln.set_name(y);
  ln.add_input(x);
  ln.add_input(*gamma);
  ln.add_input(*beta);
  ln.add_output(y);
  auto* a = ln.add_attribute();
  a->set_name("epsilon");
  a->set_type(::onnx::AttributeProto::FLOAT);
  a->set_f(float(eps_v));
  auto* ax = ln.add_attribute();
  ax->set_name("axis");
  ax->set_type(::onnx::AttributeProto::INT);
  ax->set_i(-1);
  report.push_back("layer_norm: the decomposed form (9 nodes) -> LayerNormalization '" + y + "'");
  m.replace_with({mean1, sub, sq, mean2, add, sqrt, div, mul, addb}, std::move(ln));
  return true;
}

// The perm attribute of a Transpose is exactly `want`.
bool has_perm(const node_proto& t, std::initializer_list<std::int64_t> want) {
  for (const auto& a : t.attribute())
    if (a.name() == "perm")
      return std::equal(a.ints().begin(), a.ints().end(), want.begin(), want.end());
  return false;
}

// The node producing v if it is a Transpose with permutation `perm` whose output only v's
// consumer reads (-1 otherwise).
int private_transpose(matcher& m, const std::string& v, std::initializer_list<std::int64_t> perm) {
  const int t = m.producer(v, "Transpose");
  return t >= 0 && has_perm(m.at(t), perm) && m.private_value(v) ? t : -1;
}

// Attention as PyTorch exports it from [B, S, H, d] views of the Q / K / V linears:
//   Transpose(q, 0213) . Transpose(k, 0231) -> [Div / Mul by a scalar] -> [Add mask]
//   -> Softmax(-1) -> . Transpose(v, 0213) -> Transpose(0213)
// becomes kfuse.Attention(q, k, v[, mask]) with the scale: the scores never reach memory and the
// four transposes disappear (the op reads and writes [B, S, H, d]).
bool match_attention(matcher& m, int sm, std::vector<std::string>& report) {
  const node_proto& s = m.at(sm);
  bool last_axis = false;
  for (const auto& a : s.attribute())
    if (a.name() == "axis") last_axis = a.i() == -1 || a.i() == 3;
  if (!last_axis || !m.private_value(s.input(0))) return false;
  std::vector<int> gone = {sm};
  std::string scores = s.input(0), mask;
  if (const int add = m.producer(scores, "Add"); add >= 0) {
    const node_proto& a = m.at(add);
    int side = -1;
    for (int k = 0; k < 2 && side < 0; ++k)
      if (m.producer(a.input(k), "Div") >= 0 || m.producer(a.input(k), "Mul") >= 0 ||
          m.producer(a.input(k), "MatMul") >= 0)
        side = k;
    if (side < 0 || !m.private_value(a.input(side))) return false;
    scores = a.input(side);
    mask = a.input(1 - side);
    gone.push_back(add);
  }
  double scale = 1.0, c = 0;
  const std::size_t before_scale = gone.size();
  if (const int dv = m.producer(scores, "Div"); dv >= 0) {
    if (!m.scalar_value(m.at(dv).input(1), c) || c == 0 || !m.private_value(m.at(dv).input(0)))
      return false;
    scale = 1.0 / c;
    scores = m.at(dv).input(0);
    gone.push_back(dv);
  } else if (const int ml = m.producer(scores, "Mul"); ml >= 0) {
    const node_proto& mn = m.at(ml);
    const int side = m.scalar_value(mn.input(1), c) ? 0 : m.scalar_value(mn.input(0), c) ? 1 : -1;
    if (side < 0 || !m.private_value(mn.input(side))) return false;
    scale = c;
    scores = mn.input(side);
    gone.push_back(ml);
  }
  const int mm1 = m.producer(scores, "MatMul");
  if (mm1 < 0) return false;
  const int tq = private_transpose(m, m.at(mm1).input(0), {0, 2, 1, 3});
  const int tk = private_transpose(m, m.at(mm1).input(1), {0, 2, 3, 1});
  const int mm2 = m.sole_consumer(s.output(0), "MatMul");
  if (tq < 0 || tk < 0 || mm2 < 0 || m.at(mm2).input(0) != s.output(0)) return false;
  const int tv = private_transpose(m, m.at(mm2).input(1), {0, 2, 1, 3});
  const int to = m.sole_consumer(m.at(mm2).output(0), "Transpose");
  if (tv < 0 || to < 0 || !has_perm(m.at(to), {0, 2, 1, 3})) return false;
  gone.insert(gone.end(), {mm1, tq, tk, mm2, tv, to});
  node_proto att;
  att.set_op_type("kfuse.Attention");
  att.set_domain("kfuse");
  const std::string y = m.at(to).output(0);
  att.set_name(y);
  att.add_input(m.at(tq).input(0));
  att.add_input(m.at(tk).input(0));
  att.add_input(m.at(tv).input(0));
  if (!mask.empty()) att.add_input(mask);
  att.add_output(y);
  auto* a = att.add_attribute();
  a->set_name("scale");
  a->set_type(::onnx::AttributeProto::FLOAT);
  a->set_f(float(scale));
  const bool scaled = gone.size() > before_scale + 6;
  report.push_back("attention: Transpose, MatMul, " + std::string(scaled ? "scale, " : "") +
                   (mask.empty() ? "" : "mask Add, ") + "Softmax, MatMul, Transpose (" +
                   std::to_string(gone.size()) + " nodes) -> Attention '" + y + "'");
  m.replace_with(gone, std::move(att));
  return true;
}

// A zero constant Pad of the spatial axes feeding only a Conv (nn.ZeroPad2d, TensorFlow's
// explicit padding): its pads move into the Conv's, which pads inside its loads instead of a
// copy of the whole map.
bool match_pad_conv(matcher& m, int pad, std::vector<std::string>& report) {
  const node_proto& pn = m.at(pad);
  std::string mode = "constant";
  std::vector<std::int64_t> pads;
  double value = 0;
  for (const auto& a : pn.attribute()) {
    if (a.name() == "mode") mode = a.s();
    if (a.name() == "pads" || a.name() == "paddings") pads.assign(a.ints().begin(), a.ints().end());
    if (a.name() == "value") value = a.f();
  }
  if (mode != "constant") return false;
  if (pn.input_size() >= 2) {  // opset 11: pads (and the value) are inputs
    if (!m.ints_value(pn.input(1), pads)) return false;
    if (pn.input_size() == 3 && !pn.input(2).empty() && !m.scalar_value(pn.input(2), value))
      return false;
  }
  if (value != 0 || (pads.size() != 6 && pads.size() != 8)) return false;
  const std::size_t r = pads.size() / 2;
  if (pads[0] != 0 || pads[1] != 0 || pads[r] != 0 || pads[r + 1] != 0) return false;
  for (std::int64_t p : pads)
    if (p < 0 || p > (1 << 20)) return false;
  const int conv = m.sole_consumer(pn.output(0), "Conv");
  if (conv < 0 || m.at(conv).input(0) != pn.output(0)) return false;
  node_proto fused = m.at(conv);
  std::vector<std::int64_t> cp(2 * (r - 2), 0);
  for (const auto& a : fused.attribute()) {
    if (a.name() == "auto_pad" && a.s() != "NOTSET") return false;
    if (a.name() == "pads") {
      if (a.ints_size() != int(cp.size())) return false;
      cp.assign(a.ints().begin(), a.ints().end());
    }
  }
  for (std::size_t d = 0; d + 2 < r; ++d) {
    cp[d] += pads[2 + d];
    cp[d + r - 2] += pads[r + 2 + d];
  }
  auto* attrs = fused.mutable_attribute();
  attrs->erase(std::remove_if(attrs->begin(), attrs->end(),
                              [](const ::onnx::AttributeProto& a) { return a.name() == "pads"; }),
               attrs->end());
  auto* a = fused.add_attribute();
  a->set_name("pads");
  a->set_type(::onnx::AttributeProto::INTS);
  for (std::int64_t v : cp) a->add_ints(v);
  fused.set_input(0, pn.input(0));
  report.push_back("pad: the zero Pad '" + pn.output(0) + "' -> the pads of Conv '" +
                   fused.output(0) + "'");
  m.replace_with({pad, conv}, std::move(fused));
  return true;
}

}  // namespace

void fuse_patterns(std::vector<node_proto>& nodes,
                   const std::unordered_map<std::string, value>& values,
                   const std::set<std::string>& outputs, std::vector<std::string>& report) {
  matcher m(nodes, values, outputs);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (m.dead(int(i))) continue;
    const node_proto& n = nodes[i];
    if ((!n.domain().empty() && n.domain() != "ai.onnx") || !matcher::arity_ok(n)) continue;
    if (n.op_type() == "Erf")
      match_gelu_erf(m, int(i), report);
    else if (n.op_type() == "ReduceMean")
      match_layer_norm(m, int(i), report);
    else if (n.op_type() == "Tanh")
      match_gelu_tanh(m, int(i), report);
    else if (n.op_type() == "Mul")
      match_hardswish(m, int(i), report);
    else if (n.op_type() == "Softmax")
      match_attention(m, int(i), report);
    else if (n.op_type() == "Pad")
      match_pad_conv(m, int(i), report);
  }
  m.compact();
}

}  // namespace kfuse::onnx::detail
