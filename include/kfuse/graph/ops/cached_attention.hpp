#pragma once
// cached_attention as a graph op: one decoder step (or a prefill of several tokens) against KV
// caches the caller owns. The new keys and values [B, Sq, Hkv, d] are written into the caches
// [B, Smax, Hkv, d] at rows [pos, pos + Sq), where pos is read from the `position` input at
// replay (i32 / i64, one value), then Q [B, Sq, H, d] attends causally to the cache's first
// pos + Sq rows (query i sees keys up to pos + i). The caches are graph inputs that the plan
// writes (bind writable buffers; a const one is an error at record / run): a replay buffer
// records them once, and each step only sets the position and the new token's inputs, with no
// allocation and no copy of the cache. A position past the cache is a kfuse::error naming the
// node, raised before anything is written.
#include <cstring>
#include <string>

#include "kfuse/graph/ops/attention.hpp"

KFUSE_BEGIN_NAMESPACE

namespace graph_ops {

/// What the cache commands of one node know: the new rows' and the cache's extents, and the
/// node's name for errors.
struct kv_cache_shape {
  index_t batch = 0, new_rows = 0, max_rows = 0, row_bytes = 0;
  bool i64_position = false;
  std::string who;

  /// The position read at replay, checked against the cache before anything is written.
  index_t position(const void* p) const {
    const std::int64_t pos = i64_position ? *static_cast<const std::int64_t*>(p)
                                          : std::int64_t(*static_cast<const std::int32_t*>(p));
    if (pos < 0 || pos > max_rows - new_rows)
      detail::fail(who, "position " + std::to_string(pos) + " with " + std::to_string(new_rows) +
                            " new rows is outside the cache of " + std::to_string(max_rows) +
                            " rows (0 <= position <= " + std::to_string(max_rows - new_rows) + ")");
    return index_t(pos);
  }
};

/// in[0] = the new rows [B, Sq, Hkv, d], in[1] = the position; out = the cache [B, Smax, Hkv, d].
inline void kv_cache_write_cmd(const command& c) {
  const auto& s = *static_cast<const kv_cache_shape*>(c.params);
  const index_t pos = s.position(c.in[1]);
  const auto* src = static_cast<const unsigned char*>(c.in[0]);
  auto* dst = static_cast<unsigned char*>(c.out);
  const std::size_t rows = std::size_t(s.new_rows * s.row_bytes);
  for (index_t b = 0; b < s.batch; ++b)
    std::memcpy(dst + std::size_t((b * s.max_rows + pos) * s.row_bytes),
                src + std::size_t(b) * rows, rows);
}

template <class K>
struct cached_attention_params {
  attention_problem p;  // kv_len = the cache's rows (the workspace's size); set per replay
  kv_cache_shape cache;
};

/// in[0] = Q, in[1] = the K cache, in[2] = the V cache, in[3] = the position.
template <class K, class T>
void cached_attention_cmd(const command& c) {
  const auto& p = *static_cast<const cached_attention_params<K>*>(c.params);
  typename K::packed pk{p.p, true};
  pk.p.kv_len = p.cache.position(c.in[3]) + p.p.q_len;
  K::run(static_cast<const T*>(c.in[0]), static_cast<const T*>(c.in[1]),
         static_cast<const T*>(c.in[2]), static_cast<const float*>(nullptr), pk,
         static_cast<T*>(c.out), command_workspace(c), run_options{c.threads});
}

struct cached_attention_rule : op_rule {
  static constexpr op_kind kind = op_kind::cached_attention;
  using attributes = attention_params;

  // inputs: q, k_new, v_new, k_cache, v_cache, position.
  static void infer(detail::compile_context& cx, const node_desc& n) {
    const plan_tensor& q = cx.T(n.inputs[0]);
    const char* what[] = {"q", "k_new", "v_new", "k_cache", "v_cache"};
    for (int i = 0; i < 5; ++i) {
      const plan_tensor& t = cx.T(n.inputs[std::size_t(i)]);
      if ((t.type != dtype::f32 && t.type != dtype::bf16) || t.type != q.type)
        cx.fail_node(n, std::string(what[i]) + " '" + t.name + "' is " +
                            std::string(dtype_name(t.type)) +
                            "; Q, the new rows and the caches are all f32 or all bf16");
      if (t.shape.size() != 4 || t.layout == tensor_layout::nhwc)
        cx.fail_node(n, std::string(what[i]) + " '" + t.name + "' " + cx.shape_str(t.shape) +
                            " must be [batch, sequence, heads, head_dim]");
    }
    const plan_tensor& kn = cx.T(n.inputs[1]);
    const plan_tensor& vn = cx.T(n.inputs[2]);
    const plan_tensor& kc = cx.T(n.inputs[3]);
    const plan_tensor& vc = cx.T(n.inputs[4]);
    const plan_tensor& pos = cx.T(n.inputs[5]);
    if (kn.shape != vn.shape || kc.shape != vc.shape)
      cx.fail_node(n, "the new keys " + cx.shape_str(kn.shape) + " and values " +
                          cx.shape_str(vn.shape) + ", or the caches " + cx.shape_str(kc.shape) +
                          " and " + cx.shape_str(vc.shape) + ", differ");
    if (kn.shape[0] != q.shape[0] || kn.shape[1] != q.shape[1] || kn.shape[3] != q.shape[3])
      cx.fail_node(n, "the new keys " + cx.shape_str(kn.shape) + " do not match the queries " +
                          cx.shape_str(q.shape) + " in batch, sequence or head dimension");
    if (kc.shape[0] != kn.shape[0] || kc.shape[2] != kn.shape[2] || kc.shape[3] != kn.shape[3] ||
        kc.shape[1] < kn.shape[1])
      cx.fail_node(n, "the cache " + cx.shape_str(kc.shape) + " cannot hold the new rows " +
                          cx.shape_str(kn.shape) + " (same batch, heads and head dimension)");
    if (q.shape[2] % kn.shape[2] != 0)
      cx.fail_node(n, std::to_string(q.shape[2]) + " query heads do not group over " +
                          std::to_string(kn.shape[2]) + " key / value heads");
    if (q.shape[1] == 0) cx.fail_node(n, "no new rows (sequence of length 0)");
    if (!std::isfinite(n.attr<attention_params>().scale))
      cx.fail_node(n, "the scale is not finite");
    // The caches are written: caller buffers that no other node reads (its order against the
    // write would be unspecified).
    for (int i = 3; i < 5; ++i) {
      const tensor_id c = n.inputs[std::size_t(i)];
      const tensor_desc& t = cx.g.tensor(c);
      if (!t.is_input || t.is_constant)
        cx.fail_node(n,
                     std::string(what[i]) + " '" + t.name +
                         "' must be a graph input (a cache the caller owns and the plan writes)");
      for (const node_desc& other : cx.g.nodes())
        for (tensor_id in : other.inputs)
          if (in.index == c.index && &other != &n)
            cx.fail_node(n, std::string(what[i]) + " '" + t.name + "' is also read by node '" +
                                other.name + "': a cache is read only by the node that writes it");
    }
    if (n.inputs[3].index == n.inputs[4].index)
      cx.fail_node(n, "the key and value caches are the same tensor");
    if ((pos.type != dtype::i32 && pos.type != dtype::i64) || shape_numel(pos.shape) != 1)
      cx.fail_node(n, "the position '" + pos.name + "' " + cx.shape_str(pos.shape) + " (" +
                          std::string(dtype_name(pos.type)) + ") must be one i32 or i64 value");
    cx.set_out(n, q.shape, q.type, tensor_layout::plain);
  }

  template <class A, class B>
  static void lower(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                    step_info& info, std::vector<detail::plan_command>& cmds) {
    lower_attention<cached_attention_rule, A, B>(cx, s, n, info, cmds);
  }

  template <class K>
  static void lower_with(detail::compile_context& cx, const detail::step& s, const node_desc& n,
                         step_info& info, std::vector<detail::plan_command>& cmds) {
    // The step's inputs: x = Q, others = k_new, v_new, k_cache, v_cache, position.
    const plan_tensor& q = cx.T(s.x);
    const plan_tensor& kn = cx.T(s.others[0]);
    const plan_tensor& kc = cx.T(s.others[2]);
    const plan_tensor& pos = cx.T(s.others[4]);
    kv_cache_shape cache;
    cache.batch = kn.shape[0];
    cache.new_rows = kn.shape[1];
    cache.max_rows = kc.shape[1];
    cache.row_bytes = kn.shape[2] * kn.shape[3] * index_t(dtype_size(kn.type));
    cache.i64_position = pos.type == dtype::i64;
    cache.who = "graph: node '" + n.name + "' (cached_attention)";
    cx.T(s.others[2]).written = cx.T(s.others[3]).written = true;
    const kv_cache_shape* shape = cx.own(std::make_shared<kv_cache_shape>(cache));
    for (int i = 0; i < 2; ++i) {  // the new keys, then the new values, into their caches
      detail::plan_command w;
      w.in[0] = s.others[std::size_t(i)];
      w.in[1] = s.others[4];
      w.out = s.others[std::size_t(2 + i)];
      w.fn = &kv_cache_write_cmd;
      w.begin = 0;
      w.end = 1;
      w.threads = 1;
      w.params = shape;
      cmds.push_back(w);
    }
    auto p = std::make_shared<cached_attention_params<K>>();
    p->p = attention_problem::bshd(q.shape[0], q.shape[2], q.shape[1], kc.shape[1], q.shape[3],
                                   kc.shape[2]);
    p->p.scale = n.attr<attention_params>().scale;
    p->p.causal = true;  // a cache holds the past: query i sees keys up to pos + i
    p->cache = cache;
    K::initialize(p->p);  // checks the problem at its largest
    const double sq = double(p->p.q_len), sk = double(p->p.kv_len);
    info.flops = 4.0 * double(p->p.batch * p->p.heads) * sq * sk * double(p->p.head_dim);
    info.bytes = double(q.bytes) + 2.0 * double(kc.bytes) + double(cx.T(s.out).bytes);
    info.kernel = std::string(K::G == 2 ? "attention bf16 " : "attention f32 ") +
                  std::string(K::base::micro_kernel()) + " causal, KV cache of " +
                  std::to_string(kc.shape[1]) + " rows";
    detail::plan_command c;
    c.in[0] = s.x;
    c.in[1] = s.others[2];
    c.in[2] = s.others[3];
    c.in[3] = s.others[4];
    c.out = s.out;
    c.fn =
        q.type == dtype::bf16 ? &cached_attention_cmd<K, bf16_t> : &cached_attention_cmd<K, float>;
    c.begin = 0;
    c.end = 1;
    c.threads = cx.threads_for(info.bytes, info.flops);
    c.workspace_bytes = K::workspace_size(p->p, c.threads);
    c.params = cx.own(std::move(p));
    cmds.push_back(c);
  }
};

}  // namespace graph_ops

KFUSE_END_NAMESPACE
