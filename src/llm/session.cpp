// The forward pass as a static plan. Per layer:
//   norm+quantize (RMSNorm and the int8 blocks of the projections' input, one pass)
//   Q/K/V       one parallel job over the panels of the three matrices, biases in its epilogue
//   RoPE+cache  q and k rotated, k and v written to the cache, one pass
//   attention   causal, per (token, head)
//   O           residual add in its epilogue
//   norm+quantize
//   gate/up     one job over matching panel pairs, SwiGLU in its epilogue
//   down        residual add in its epilogue
// then the final norm and the head (the last token's logits, or every token's).
#include "kfuse/llm/session.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "half.hpp"
#include "kfuse/error.hpp"
#include "kfuse/threading/thread_pool.hpp"
#include "model_impl.hpp"
#include "pack.hpp"

namespace kfuse::llm {

using detail::activations;
using detail::panel_matrix;
using detail::panel_rows;
using detail::qblock;

namespace {

template <class T>
struct buffer {
  detail::aligned_bytes bytes;
  T* p = nullptr;
  void resize(std::size_t n) {
    bytes = detail::allocate_aligned(std::max<std::size_t>(n, 1) * sizeof(T));
    p = reinterpret_cast<T*>(bytes.get());
    std::memset(p, 0, n * sizeof(T));
  }
};

enum class epilogue { none, bias, residual };

struct product {
  const panel_matrix* w;
  float* y;
  std::int64_t ldy;
  epilogue ep = epilogue::none;
  const float* bias = nullptr;  // epilogue::bias
  float* residual = nullptr;    // epilogue::residual: residual[t][r] += y[t][r]
};

}  // namespace

struct session::impl {
  const model& owner;
  const model::impl& M;
  const detail::kernel_table& K;
  const model_config& c;
  int n_ctx, batch;
  cache_type cache;
  bool fast_prefill = false;
  thread_pool pool;

  // What a replay reads.
  int pos = 0;
  int tokens = 0;
  bool all_logits = false;

  std::int64_t E, Q, KV, F, V, max_k;
  buffer<float> x, xn, tmp, q, k, v, att, gate, up, logits, logits_all, scores, rope_cos, rope_sin;
  buffer<std::int8_t> xq;
  buffer<float> xq_scale;
  buffer<std::int32_t> xq_sum;
  buffer<std::int32_t> xq_half_sum;
  buffer<std::byte> k_cache, v_cache;
  std::vector<std::function<void()>> plan;

  // Validated before the pool starts any worker.
  static int checked_threads(int threads) {
    if (threads < 0)
      throw kfuse::error("session: threads = " + std::to_string(threads) +
                         " (0 uses the cores this process may use, N > 0 exactly N)");
    return threads;
  }

  impl(const model& m, const session_options& opt)
      : owner(m),
        M(m.internals()),
        K(*M.kernels),
        c(M.config),
        pool(checked_threads(opt.threads) > 0 ? thread_pool(opt.threads) : thread_pool()) {
    n_ctx = opt.n_ctx > 0 ? opt.n_ctx : std::min(c.n_ctx_train, 4096);
    if (opt.n_ctx < 0 || n_ctx > (1 << 20))
      throw kfuse::error("session: n_ctx " + std::to_string(opt.n_ctx) + " is out of range");
    batch = std::clamp(opt.batch, 1, 4096);
    cache = opt.cache;
    fast_prefill = opt.fast_prefill;
    E = c.n_embd, Q = std::int64_t(c.n_head) * c.head_dim,
    KV = std::int64_t(c.n_head_kv) * c.head_dim, F = c.n_ff, V = c.n_vocab;
    max_k = std::max({E, Q, F});
    const auto B = std::size_t(batch);
    for (auto* b : {&x, &xn, &tmp}) b->resize(B * std::size_t(E));
    q.resize(B * std::size_t(Q));
    att.resize(B * std::size_t(Q));
    k.resize(B * std::size_t(KV));
    v.resize(B * std::size_t(KV));
    gate.resize(B * std::size_t(F));
    up.resize(B * std::size_t(F));
    logits.resize(std::size_t(V));
    xq.resize(2 * B * std::size_t(max_k));
    xq_scale.resize(B * std::size_t(max_k / qblock));
    xq_sum.resize(B * std::size_t(max_k / qblock));
    xq_half_sum.resize(B * std::size_t(max_k / qblock));
    scores.resize(std::size_t(pool.size()) *
                  std::size_t(detail::attention_scratch_floats(n_ctx, c.head_dim)));
    const std::size_t es = cache == cache_type::bf16 ? 2 : 4;
    const std::size_t cache_bytes =
        std::size_t(c.n_layer) * std::size_t(KV) * std::size_t(n_ctx) * es;
    k_cache.resize(cache_bytes);
    v_cache.resize(cache_bytes);
    build_rope_tables();
    build_plan();
  }

  void build_rope_tables() {
    const int half = c.head_dim / 2;
    rope_cos.resize(std::size_t(n_ctx) * std::size_t(half));
    rope_sin.resize(std::size_t(n_ctx) * std::size_t(half));
    for (int p = 0; p < n_ctx; ++p)
      for (int i = 0; i < half; ++i) {
        const double theta = double(p) * std::pow(double(c.rope_base), -2.0 * i / c.head_dim);
        rope_cos.p[std::size_t(p) * half + i] = float(std::cos(theta));
        rope_sin.p[std::size_t(p) * half + i] = float(std::sin(theta));
      }
  }

  // Splits [0, n) over the pool; small or single-token work stays on the caller.
  template <class Fn>
  void parallel(std::int64_t n, std::int64_t grain, Fn&& fn) {
    if (n <= grain) {
      fn(std::int64_t(0), n);
      return;
    }
    pool.parallel_for(0, n, grain, [&](range r, int) { fn(r.begin, r.end); });
  }

  activations inputs(const float* src, std::int64_t cols) const {
    activations a;
    a.x = src;
    a.x_stride = cols;
    a.xq = {xq.p, xq_scale.p, xq_sum.p, xq_half_sum.p, 2 * cols, cols / qblock, cols, one_level()};
    a.tokens = tokens;
    return a;
  }
  bool one_level() const { return fast_prefill && tokens > 1; }

  // RMSNorm (when `weight`) and the int8 blocks of `cols`-wide rows, one pass per token.
  void prepare(const float* src, float* dst, const float* weight, std::int64_t cols,
               bool quantize) {
    parallel(tokens, 8, [&](std::int64_t t0, std::int64_t t1) {
      for (std::int64_t t = t0; t < t1; ++t) {
        const float* s = src + t * cols;
        float* d = dst + t * cols;
        if (weight) {
          double ss = 0;
          for (std::int64_t i = 0; i < cols; ++i) ss += double(s[i]) * s[i];
          const float inv = float(1.0 / std::sqrt(ss / double(cols) + double(c.rms_eps)));
          for (std::int64_t i = 0; i < cols; ++i) d[i] = s[i] * inv * weight[i];
        } else if (d != s) {
          std::memcpy(d, s, std::size_t(cols) * 4);
        }
        if (quantize)
          K.quantize_row(d, cols, xq.p + 2 * t * cols, xq_scale.p + t * (cols / qblock),
                         xq_sum.p + t * (cols / qblock), xq_half_sum.p + t * (cols / qblock),
                         one_level());
      }
    });
  }

  void epilogue_rows(const product& pr, std::int64_t r0, std::int64_t r1) {
    if (pr.ep == epilogue::none) return;
    for (int t = 0; t < tokens; ++t) {
      float* y = pr.y + t * pr.ldy;
      if (pr.ep == epilogue::bias)
        for (std::int64_t r = r0; r < r1; ++r) y[r] += pr.bias[r];
      else
        for (std::int64_t r = r0; r < r1; ++r) pr.residual[t * pr.ldy + r] += y[r];
    }
  }

  // One job over the panels of several products with the same input.
  void products(std::initializer_list<product> list, const activations& a) {
    std::int64_t total = 0;
    for (const auto& p : list) total += p.w->panels;
    const std::int64_t grain = std::max<std::int64_t>(1, total / (std::int64_t(pool.size()) * 8));
    parallel(total, tokens == 1 && pool.size() == 1 ? total : grain,
             [&](std::int64_t b, std::int64_t e) {
               std::int64_t base = 0;
               for (const auto& p : list) {
                 const std::int64_t lo = std::max(b, base), hi = std::min(e, base + p.w->panels);
                 if (lo < hi) {
                   K.matmul(*p.w, lo - base, hi - base, a, p.y, p.ldy);
                   epilogue_rows(p, (lo - base) * panel_rows,
                                 std::min((hi - base) * panel_rows, p.w->rows));
                 }
                 base += p.w->panels;
               }
             });
  }

  // gate and up over matching panels, h = silu(gate) * up written over gate.
  void swiglu_products(const panel_matrix& wg, const panel_matrix& wu, const activations& a) {
    const std::int64_t n = wg.panels;
    const std::int64_t grain = std::max<std::int64_t>(1, n / (std::int64_t(pool.size()) * 8));
    parallel(n, grain, [&](std::int64_t p0, std::int64_t p1) {
      K.matmul(wg, p0, p1, a, gate.p, F);
      K.matmul(wu, p0, p1, a, up.p, F);
      const std::int64_t r1 = std::min(p1 * panel_rows, F);
      for (int t = 0; t < tokens; ++t)
        K.swiglu(gate.p + t * F + p0 * panel_rows, up.p + t * F + p0 * panel_rows,
                 r1 - p0 * panel_rows);
    });
  }

  void rope_and_cache(int layer) {
    const int D = c.head_dim, half = D / 2;
    const bool neox = c.rope == rope_style::neox;
    auto rotate = [&](float* h, int p) {
      const float* cs = rope_cos.p + std::size_t(p) * half;
      const float* sn = rope_sin.p + std::size_t(p) * half;
      for (int i = 0; i < half; ++i) {
        const int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
        const float x0 = h[a], x1 = h[b];
        h[a] = x0 * cs[i] - x1 * sn[i];
        h[b] = x0 * sn[i] + x1 * cs[i];
      }
    };
    const std::size_t es = cache == cache_type::bf16 ? 2 : 4;
    parallel(tokens, 8, [&](std::int64_t t0, std::int64_t t1) {
      for (std::int64_t t = t0; t < t1; ++t) {
        const int p = pos + int(t);
        for (int h = 0; h < c.n_head; ++h) rotate(q.p + t * Q + h * D, p);
        for (int h = 0; h < c.n_head_kv; ++h) {
          float* kh = k.p + t * KV + h * D;
          const float* vh = v.p + t * KV + h * D;
          rotate(kh, p);
          const std::size_t row =
              ((std::size_t(layer) * c.n_head_kv + std::size_t(h)) * std::size_t(n_ctx) +
               std::size_t(p)) *
              std::size_t(D);
          if (es == 2) {
            auto* kc = reinterpret_cast<std::uint16_t*>(k_cache.p) + row;
            auto* vc = reinterpret_cast<std::uint16_t*>(v_cache.p) + row;
            for (int i = 0; i < D; ++i) {
              kc[i] = detail::f32_to_bf16(kh[i]);
              vc[i] = detail::f32_to_bf16(vh[i]);
            }
          } else {
            std::memcpy(reinterpret_cast<float*>(k_cache.p) + row, kh, std::size_t(D) * 4);
            std::memcpy(reinterpret_cast<float*>(v_cache.p) + row, vh, std::size_t(D) * 4);
          }
        }
      }
    });
  }

  void attention(int layer) {
    detail::attention_args a;
    const std::size_t es = cache == cache_type::bf16 ? 2 : 4;
    const std::size_t layer_bytes = std::size_t(KV) * std::size_t(n_ctx) * es;
    a.q = q.p;
    a.out = att.p;
    a.k = k_cache.p + std::size_t(layer) * layer_bytes;
    a.v = v_cache.p + std::size_t(layer) * layer_bytes;
    a.bf16_cache = cache == cache_type::bf16;
    a.tokens = tokens;
    a.pos0 = pos;
    a.n_head = c.n_head;
    a.n_head_kv = c.n_head_kv;
    a.head_dim = c.head_dim;
    a.n_ctx = n_ctx;
    // One token: an item per head. A prompt: an item per 16 tokens and KV head (the kernel
    // reorders the keys once for all of them).
    const int span = tokens == 1 ? 1 : 16;
    const int heads = tokens == 1 ? 1 : c.n_head / c.n_head_kv;
    const std::int64_t token_items = (tokens + span - 1) / span;
    const std::int64_t items = token_items * (c.n_head / heads);
    const std::size_t per_worker = std::size_t(detail::attention_scratch_floats(n_ctx, c.head_dim));
    pool.parallel_for(0, items, 1, [&](range r, int worker) {
      float* s = scores.p + std::size_t(worker) * per_worker;
      for (std::int64_t i = r.begin; i < r.end; ++i) {
        const int t0 = int(i % token_items) * span, h0 = int(i / token_items) * heads;
        K.attention(a, t0, std::min(t0 + span, tokens), h0, h0 + heads, s);
      }
    });
  }

  void build_plan() {
    for (int l = 0; l < c.n_layer; ++l) {
      const layer_weights& W = M.layers[std::size_t(l)];
      const bool qkv_q = detail::is_quantized(W.wq.format) || detail::is_quantized(W.wk.format) ||
                         detail::is_quantized(W.wv.format);
      plan.push_back([this, &W, qkv_q] { prepare(x.p, xn.p, W.attn_norm.data(), E, qkv_q); });
      plan.push_back([this, &W] {
        const bool b = !W.q_bias.empty();
        products(
            {{&W.wq, q.p, Q, b ? epilogue::bias : epilogue::none, b ? W.q_bias.data() : nullptr},
             {&W.wk, k.p, KV, b ? epilogue::bias : epilogue::none, b ? W.k_bias.data() : nullptr},
             {&W.wv, v.p, KV, b ? epilogue::bias : epilogue::none, b ? W.v_bias.data() : nullptr}},
            inputs(xn.p, E));
      });
      plan.push_back([this, l] { rope_and_cache(l); });
      plan.push_back([this, l] { attention(l); });
      plan.push_back([this, &W] {
        if (detail::is_quantized(W.wo.format)) prepare(att.p, att.p, nullptr, Q, true);
        products({{&W.wo, tmp.p, E, epilogue::residual, nullptr, x.p}}, inputs(att.p, Q));
      });
      const bool ffn_q =
          detail::is_quantized(W.w_gate.format) || detail::is_quantized(W.w_up.format);
      plan.push_back([this, &W, ffn_q] { prepare(x.p, xn.p, W.ffn_norm.data(), E, ffn_q); });
      plan.push_back([this, &W] { swiglu_products(W.w_gate, W.w_up, inputs(xn.p, E)); });
      plan.push_back([this, &W] {
        if (detail::is_quantized(W.w_down.format)) prepare(gate.p, gate.p, nullptr, F, true);
        products({{&W.w_down, tmp.p, E, epilogue::residual, nullptr, x.p}}, inputs(gate.p, F));
      });
    }
    plan.push_back([this] {
      // The head: every token's logits, or the last one's only.
      const bool hq = detail::is_quantized(M.output.format);
      if (all_logits) {
        prepare(x.p, xn.p, M.output_norm.data(), E, hq);
        products({{&M.output, logits_all.p, V}}, inputs(xn.p, E));
      } else {
        const int n = tokens;
        std::memmove(x.p, x.p + std::int64_t(n - 1) * E, std::size_t(E) * 4);
        tokens = 1;
        prepare(x.p, xn.p, M.output_norm.data(), E, hq);
        products({{&M.output, logits.p, V}}, inputs(xn.p, E));
        tokens = n;
      }
    });
  }

  void check(std::span<const token_id> ids) const {
    if (ids.empty()) throw kfuse::error("session: no tokens to append (an empty prompt)");
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (ids[i] < 0 || ids[i] >= c.n_vocab)
        throw kfuse::error("session: token " + std::to_string(i) + " has id " +
                           std::to_string(ids[i]) + ", outside the vocabulary [0, " +
                           std::to_string(c.n_vocab) + ")");
    if (std::int64_t(pos) + std::int64_t(ids.size()) > n_ctx)
      throw kfuse::error("session: context overflow: " + std::to_string(pos) +
                         " tokens in the cache + " + std::to_string(ids.size()) + " new > n_ctx " +
                         std::to_string(n_ctx));
  }

  // One replay of the plan for up to `batch` tokens.
  void run(const token_id* ids, int n) {
    tokens = n;
    for (int t = 0; t < n; ++t) M.embed(ids[t], x.p + std::int64_t(t) * E);
    for (auto& step : plan) step();
    pos += n;
  }
};

session::session(const model& m, const session_options& opt)
    : impl_(std::make_unique<impl>(m, opt)) {}
session::session(session&&) noexcept = default;
session& session::operator=(session&&) noexcept = default;
session::~session() = default;

std::span<const float> session::prefill(std::span<const token_id> ids) {
  impl& I = *impl_;
  I.check(ids);
  I.all_logits = false;
  for (std::size_t at = 0; at < ids.size(); at += std::size_t(I.batch))
    I.run(ids.data() + at, int(std::min<std::size_t>(std::size_t(I.batch), ids.size() - at)));
  return {I.logits.p, std::size_t(I.V)};
}

std::span<const float> session::decode(token_id token) {
  return prefill(std::span<const token_id>(&token, 1));
}

std::vector<float> session::prefill_all_logits(std::span<const token_id> ids) {
  impl& I = *impl_;
  I.check(ids);
  if (!I.logits_all.p) I.logits_all.resize(std::size_t(I.batch) * std::size_t(I.V));
  std::vector<float> out;
  out.reserve(ids.size() * std::size_t(I.V));
  I.all_logits = true;
  for (std::size_t at = 0; at < ids.size(); at += std::size_t(I.batch)) {
    const int n = int(std::min<std::size_t>(std::size_t(I.batch), ids.size() - at));
    I.run(ids.data() + at, n);
    out.insert(out.end(), I.logits_all.p, I.logits_all.p + std::int64_t(n) * I.V);
  }
  I.all_logits = false;
  return out;
}

int session::position() const { return impl_->pos; }
int session::context() const { return impl_->n_ctx; }
int session::threads() const { return impl_->pool.size(); }
void session::reset() { impl_->pos = 0; }
void session::truncate(int pos) {
  if (pos < 0 || pos > impl_->pos)
    throw kfuse::error("session: truncate(" + std::to_string(pos) + ") outside [0, " +
                       std::to_string(impl_->pos) + "]");
  impl_->pos = pos;
}
const model& session::owner() const { return impl_->owner; }

}  // namespace kfuse::llm
