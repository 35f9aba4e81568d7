#pragma once
// attention: fused scaled-dot-product attention, out = softmax(Q.K^T * scale + bias) . V per
// (batch, head), without ever writing the Sq x Sk scores to memory.
//
//   kfuse::attention_problem p = kfuse::attention_problem::bshd(batch, heads, seq, seq, 64);
//   kfuse::attention_kernel<>::run(q, k, v, nullptr, out, p);   // [B, S, H, d] in and out
//
// Every operand is addressed through strides (elements) over (batch, head, position) with the
// head dimension contiguous, so the [B, S, H, d] layout of a linear's output is read as it is:
// the head split and merge of an exported model cost no copy. Grouped-query attention: kv_heads
// divides heads and query head h reads K / V head h / (heads / kv_heads). An optional additive
// bias (a key-padding mask, a relative-position bias) is read through strides over
// (batch, head, query, key), 0 where it broadcasts; `causal` masks key j > i + (Sk - Sq) (the
// last query row sees the whole cache: one new token against a KV cache is Sq = 1).
//
// Per (batch, head) a worker packs K^T and V once into gemm's panel layout in its workspace slot
// (O(S d) bytes), then for each tile of MR query rows walks the keys in blocks of `block` columns:
// the gemm micro-kernel computes the scores of the block into an MR x block tile that stays in
// L1, an online softmax rescales the running row maxima and sums (FlashAttention's update), and
// the micro-kernel multiplies the tile's probabilities by the block's rows of V into the row
// accumulators. Memory traffic is Q, K, V, the bias and the output: O(S d), not O(S^2).
// Q, K, V and the output are f32, or all bf16 (half the bytes: a decoder step streaming a bf16
// KV cache reads half as much). The two products run in f32 (Math = f32: bf16 values converted as
// they are packed or loaded), or on bf16 values with f32 accumulation (Math = bf16: vdpbf16ps
// where the arch has it; Q, K, V and each block's probabilities rounded to bf16 once, as
// FlashAttention's bf16 path does); the softmax statistics are f32 either way, and the output is
// rounded once. A row whose keys are all masked with -inf gives zeros (PyTorch's SDPA has given
// NaN or zeros depending on the version); NaN in Q, K or V propagates.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "kfuse/detail/prefetch.hpp"
#include "kfuse/kernels/attention_problem.hpp"
#include "kfuse/kernels/gemm/batched_gemm.hpp"
#include "kfuse/kernels/softmax.hpp"

KFUSE_BEGIN_NAMESPACE

template <class A = arch::native, class B = backend::xsimd, class Math = f32>
struct attention_kernel {
  static_assert(std::is_same_v<Math, f32> || std::is_same_v<Math, bf16>,
                "kfuse::attention_kernel: the products run in f32 or bf16 (Math = f32 or bf16)");
  using base = gemm<Math, A, epilogue<>, B>;
  using vec = typename base::vec;
  using config = typename base::config;
  using microkernel = typename base::microkernel;
  using st = typename microkernel::storage;  // the products' operands: float or bf16_t
  static constexpr int MR = config::mr, NV = config::nv, NR = config::nr;
  static constexpr int G = microkernel::k_group;  // k values per packed group (bf16 pairs: 2)
  /// Keys per block: a whole number of panels, at least 128 (the score tile, MR x block floats,
  /// stays in L1). Each block pays a softmax rescale of the accumulators and two small GEMM
  /// calls: 128 keys instead of 64 made 12 heads x 384 x 32 10% faster (bf16 2.43 -> 2.18 ms,
  /// f32 3.1 -> 2.8 ms on Zen 4); 256 helped 384 keys no more and slowed 128 keys by 15%.
  static constexpr index_t block = (128 + NR - 1) / NR * NR;

  // ---- the kernel contract (kernels/kernel_contract.hpp) -------------------------------------
  static constexpr std::string_view name = "attention";
  using problem = attention_problem;
  struct packed {
    problem p{};
    bool ready = false;
    bool empty() const noexcept { return !ready; }
  };
  using epilogue_type = epilogue<>;

  static kernel_status can_implement(const problem& p) {
    return detail::status_of(name, [&] {
      if (p.batch < 0 || p.q_len < 0 || p.kv_len < 0)
        detail::fail(name, "negative batch or sequence length");
      if (p.heads < 1 || p.kv_heads < 1 || p.head_dim < 1)
        detail::fail(name, "heads, kv heads and the head dimension must be positive");
      if (p.heads % p.kv_heads != 0)
        detail::fail(name, std::to_string(p.heads) + " query heads do not group over " +
                               std::to_string(p.kv_heads) + " key / value heads");
      for (const auto* s : {&p.q_strides, &p.k_strides, &p.v_strides, &p.out_strides})
        for (index_t x : *s)
          if (x < 0) detail::fail(name, "negative stride");
      for (index_t x : p.bias_strides)
        if (x < 0) detail::fail(name, "negative bias stride");
      if (!(std::isfinite(p.scale))) detail::fail(name, "the scale is not finite");
      detail::checked_mul(name, "the scores", p.q_len, p.kv_len);
      detail::checked_mul(name, "K", p.kv_len, p.head_dim);
    });
  }
  /// One slot per worker: K^T and V of one head packed, the score tile and the accumulators.
  static std::size_t workspace_size(const problem& p, int threads) {
    detail::require(name, can_implement(p));
    detail::slot_cursor c;
    carve(p, c);
    return workspace_slots_bytes(threads, c.used());
  }
  static packed initialize(const problem& p) {
    detail::require(name, can_implement(p));
    return {p, true};
  }

  /// out = attention(q, k, v [+ bias]); bias may be null. T: float or bf16_t (one type for
  /// Q, K, V and the output; the bias is f32).
  template <class T>
  static run_info run(const T* q, const T* k, const T* v, const float* bias, const packed& pk,
                      T* out, workspace ws, const run_options& opt = {}) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, bf16_t>,
                  "kfuse::attention_kernel: Q, K, V and the output are float or bf16_t");
    if (pk.empty()) detail::fail(name, "not initialized (initialize(problem))");
    const problem& p = pk.p;
    run_info info{name, A::name, simd::impl_name<A, B>(), base::micro_kernel(), 1};
    if constexpr (G == 1 && std::is_same_v<T, bf16_t>)
      info.micro_kernel = "bf16 in, f32 arithmetic";
    const index_t d = p.head_dim;
    auto extent = [&](const std::array<index_t, 3>& s, index_t heads, index_t len) {
      if (p.batch == 0 || len == 0) return index_t(0);
      return (p.batch - 1) * s[0] + (heads - 1) * s[1] + (len - 1) * s[2] + d;
    };
    const index_t q_n = extent(p.q_strides, p.heads, p.q_len);
    const index_t o_n = extent(p.out_strides, p.heads, p.q_len);
    const index_t k_n = extent(p.k_strides, p.kv_heads, p.kv_len);
    const index_t v_n = extent(p.v_strides, p.kv_heads, p.kv_len);
    detail::check_buffer(name, "Q", q, q_n);
    detail::check_buffer(name, "K", k, k_n);
    detail::check_buffer(name, "V", v, v_n);
    detail::check_buffer(name, "the output", out, o_n);
    detail::check_disjoint(name, "Q", q, q_n, out, o_n);
    detail::check_disjoint(name, "K", k, k_n, out, o_n);
    detail::check_disjoint(name, "V", v, v_n, out, o_n);
    if (bias) {
      const auto& s = p.bias_strides;
      const index_t b_n = p.batch == 0 || p.q_len == 0 || p.kv_len == 0
                              ? 0
                              : (p.batch - 1) * s[0] + (p.heads - 1) * s[1] + (p.q_len - 1) * s[2] +
                                    (p.kv_len - 1) * s[3] + 1;
      detail::check_buffer(name, "the bias", bias, b_n);
      detail::check_disjoint(name, "the bias", bias, b_n, out, o_n);
    }
    const index_t items = p.batch * p.heads;
    if (items == 0 || p.q_len == 0) return info;
    if (p.kv_len == 0) detail::fail(name, "no keys (kv_len 0): the softmax has nothing to weigh");
    detail::slot_cursor measure;
    carve(p, measure);
    const std::size_t each = measure.used();
    const int threads =
        detail::workspace_threads(name, ws, each, pool_threads(opt.threads, "attention"));
    info.threads = int(std::min<index_t>(threads, items));
    parallel_for(
        0, items, 1,
        [&](range r, int worker) {
          detail::slot_cursor cur(ws.slot<std::byte>(worker, each));
          const slot_arrays s = carve(p, cur);
          for (index_t it = r.begin; it < r.end; ++it) head(p, q, k, v, bias, out, it, s);
        },
        threads);
    return info;
  }

  /// Convenience form: allocates the workspace for this call.
  template <class T>
  static run_info run(const T* q, const T* k, const T* v, const float* bias, T* out,
                      const problem& p, const run_options& opt = {}) {
    const workspace_buffer ws(workspace_size(p, pool_threads(opt.threads, "attention")));
    return run(q, k, v, bias, initialize(p), out, ws, opt);
  }

 private:
  struct slot_arrays {
    st* kt = nullptr;         // K^T: panels of NR keys, head_dim rows each (in groups of G)
    st* vp = nullptr;         // V: panels of head-dim columns, kv_len rows each (groups of G)
    float* scores = nullptr;  // MR x block
    st* probs = nullptr;      // P.V's operand: the scores (f32), or their probabilities in bf16
    float* acc = nullptr;     // MR x head_dim running output
    float* part = nullptr;    // MR x head_dim product of one block
    float* stats = nullptr;   // running max and sum per row (2 x MR)
    st* qrows = nullptr;      // Q in another type than st: the tile's rows converted (MR x d)
  };
  static index_t panels(index_t n) { return (n + NR - 1) / NR; }
  static index_t grouped(index_t k) { return (k + G - 1) / G * G; }  // rows of a packed panel
  // V's panels are as narrow as the head allows (head dim 32 on 16 lanes: 2 vectors, not NR =
  // 4): P.V then computes no padded columns (half of its work at d = 32 with NR-wide panels).
  static int v_vectors(index_t d) {
    return int(std::min<index_t>(NV, (d + vec::lanes - 1) / vec::lanes));
  }
  static index_t v_width(index_t d) { return index_t(v_vectors(d)) * vec::lanes; }
  static index_t v_panels(index_t d) { return (d + v_width(d) - 1) / v_width(d); }
  static index_t v_cols(index_t d) { return v_panels(d) * v_width(d); }
  static slot_arrays carve(const problem& p, detail::slot_cursor& c) {
    slot_arrays s;
    const index_t d = p.head_dim;
    s.kt = c.take<st>(std::size_t(panels(p.kv_len) * NR * grouped(d)));
    s.vp = c.take<st>(std::size_t(v_cols(d) * grouped(p.kv_len)));
    s.scores = c.take<float>(std::size_t(MR * block));
    if constexpr (G == 2)
      s.probs = c.take<st>(std::size_t(MR * block));
    else
      s.probs = s.scores;  // the softmax leaves the probabilities in place
    s.acc = c.take<float>(std::size_t(MR * v_cols(d)));
    s.part = c.take<float>(std::size_t(MR * v_cols(d)));
    s.stats = c.take<float>(std::size_t(2 * MR));
    s.qrows = c.take<st>(std::size_t(MR * d));
    return s;
  }

  /// One (batch, query head): pack its K / V head, then every tile of query rows.
  template <class T>
  static void head(const problem& p, const T* q, const T* k, const T* v, const float* bias, T* out,
                   index_t item, const slot_arrays& s) {
    const index_t b = item / p.heads, h = item % p.heads, kvh = h / (p.heads / p.kv_heads);
    const index_t d = p.head_dim, S = p.kv_len;
    const T* kb = k + b * p.k_strides[0] + kvh * p.k_strides[1];
    const T* vb = v + b * p.v_strides[0] + kvh * p.v_strides[1];
    if (p.q_len == 1) {  // a decoder step: K and V streamed once in place, nothing packed
      const float* bb = bias ? bias + b * p.bias_strides[0] + h * p.bias_strides[1] : nullptr;
      return one_query(p, q + b * p.q_strides[0] + h * p.q_strides[1], kb, vb, bb,
                       out + b * p.out_strides[0] + h * p.out_strides[1], s);
    }
    const T* qb = q + b * p.q_strides[0] + h * p.q_strides[1];
    for (index_t r = 0; r < std::min<index_t>(MR, p.q_len); ++r)  // arriving while K, V pack
      detail::prefetch_lines(qb + r * p.q_strides[2], std::size_t(d) * sizeof(T));
    // K^T [d, S] and V [S, d] as gemm's B operands (row group kk of panel pn at kk * G * NR).
    for (index_t pn = 0; pn < panels(S); ++pn)
      detail::pack_b_panel<vec>(kb, index_t(1), p.k_strides[2], d, S, pn, NR, G,
                                s.kt + pn * grouped(d) * NR);
    const index_t w = v_width(d);
    for (index_t pn = 0; pn < v_panels(d); ++pn)
      detail::pack_b_panel<vec>(vb, p.v_strides[2], index_t(1), S, d, pn, int(w), G,
                                s.vp + pn * grouped(S) * w);
    T* ob = out + b * p.out_strides[0] + h * p.out_strides[1];
    const float* bb = bias ? bias + b * p.bias_strides[0] + h * p.bias_strides[1] : nullptr;
    for (index_t r0 = 0; r0 < p.q_len; r0 += MR)
      rows(p, qb + r0 * p.q_strides[2], bb ? bb + r0 * p.bias_strides[2] : nullptr,
           ob + r0 * p.out_strides[2], r0, int(std::min<index_t>(MR, p.q_len - r0)), s);
  }

  /// One query row (a decoder step against a KV cache): per block of keys the dot products
  /// read K's rows where they are, the online softmax updates the running max and sum, and the
  /// accumulator adds p_j * V_j read in place: K and V cross memory once, the floor of a step.
  template <class T>
  static void one_query(const problem& p, const T* qr, const T* kb, const T* vb, const float* br,
                        T* outr, const slot_arrays& s) {
    using V = vec;
    constexpr int L = V::lanes;
    const index_t d = p.head_dim, S = p.kv_len, dv = d / L * L;
    const float scale = p.scale_or_default();
    const float ninf = -std::numeric_limits<float>::infinity();
    float* acc = s.acc;
    std::fill(acc, acc + d, 0.f);
    float m = ninf, l = 0.f;
    // Causal with one query: it is the last position and sees every key.
    for (index_t k0 = 0; k0 < S; k0 += block) {
      const index_t nk = std::min(block, S - k0);
      float* sc = s.scores;
      for (index_t j = 0; j < nk; ++j) {
        const T* kr = kb + (k0 + j) * p.k_strides[2];
        V a0(0.f), a1(0.f);
        index_t x = 0;
        for (; x + 2 * L <= dv; x += 2 * L) {
          a0 = simd::fma(simd::load<V>(qr + x), simd::load<V>(kr + x), a0);
          a1 = simd::fma(simd::load<V>(qr + x + L), simd::load<V>(kr + x + L), a1);
        }
        for (; x < dv; x += L) a0 = simd::fma(simd::load<V>(qr + x), simd::load<V>(kr + x), a0);
        float dot = detail::lane_sum(a0 + a1);
        for (; x < d; ++x) dot += to_float(qr[x]) * to_float(kr[x]);
        sc[j] = dot * scale + (br ? br[(k0 + j) * p.bias_strides[3]] : 0.f);
      }
      const float m_new = std::max(m, detail::row_max<V>(sc, nk));
      if (m_new == ninf) continue;  // every key so far masked: no weight
      const float alpha = std::exp(m - m_new);
      l = l * alpha + detail::row_exp_sum<V, true>(sc, sc, nk, m_new);
      m = m_new;
      for (index_t x = 0; x < d; ++x) acc[x] *= alpha;
      for (index_t j = 0; j < nk; ++j) {
        const T* vr = vb + (k0 + j) * p.v_strides[2];
        const V pj(sc[j]);
        index_t x = 0;
        for (; x < dv; x += L)
          simd::store(acc + x, simd::fma(pj, simd::load<V>(vr + x), simd::load<V>(acc + x)));
        for (; x < d; ++x) acc[x] += sc[j] * to_float(vr[x]);
      }
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;
    for (index_t x = 0; x < d; ++x) outr[x] = from_float<T>(acc[x] * inv);
  }

  /// x[j] = x[j] * scale + bias[j * bias_stride] (no bias: null) for j < n, in one vector pass
  /// that also returns the new values' maximum (-inf for n = 0). Store = false: x stays as it
  /// is, only the maximum of the scaled values is found (no bias: the exp pass scales).
  static float scale_bias_max(float* x, const float* bias, index_t bias_stride, index_t n,
                              float scale, bool store = true) {
    using V = vec;
    constexpr int L = V::lanes;
    const V vs(scale);
    V m(-std::numeric_limits<float>::infinity());
    index_t j = 0;
    if (!bias || bias_stride == 1)
      for (; j + L <= n; j += L) {
        const V y = bias ? simd::fma(simd::load<V>(x + j), vs, simd::load<V>(bias + j))
                         : simd::load<V>(x + j) * vs;
        if (store) simd::store(x + j, y);
        m = simd::max(m, y);
      }
    float mt = detail::lane_max(m);
    for (; j < n; ++j) {
      const float y = bias ? x[j] * scale + bias[j * bias_stride] : x[j] * scale;
      if (store) x[j] = y;
      mt = std::max(mt, y);
    }
    return mt;
  }

  /// part = probabilities (nr x nk) . V's rows k0 .. k0 + nk, in panels of VN vectors (k0 is a
  /// multiple of the block, so of G: its row group starts at k0 * w).
  template <int VN>
  static void block_times_v(const problem& p, int nr, index_t k0, index_t nk,
                            const slot_arrays& s) {
    const index_t w = index_t(VN) * vec::lanes, S = grouped(p.kv_len), dp = v_cols(p.head_dim);
    for (index_t pn = 0; pn < v_panels(p.head_dim); ++pn)
      detail::gemm_panel_rows<microkernel, vec, MR, VN, MR>(
          nr, s.probs, block, s.vp + pn * S * w + k0 * w, nk, s.part + pn * w, dp, 0, 0, w,
          epilogue<>{}, detail::int_args{});
  }

  /// Query rows r0 .. r0 + nr of one head against every key block.
  template <class T>
  static void rows(const problem& p, const T* qt, const float* br, T* outr, index_t r0, int nr,
                   const slot_arrays& s) {
    using V = vec;
    constexpr int L = V::lanes;
    const index_t d = p.head_dim, S = p.kv_len, dp = v_cols(d);
    const float scale = p.scale_or_default();
    const float ninf = -std::numeric_limits<float>::infinity();
    // The next tile's query rows, asked for now: strided slices of rows, which the hardware
    // prefetchers leave to a stall on the first load when the Q buffer is past L2.
    for (index_t r = r0 + MR; r < std::min<index_t>(r0 + 2 * MR, p.q_len); ++r)
      detail::prefetch_lines(qt + (r - r0) * p.q_strides[2], std::size_t(d) * sizeof(T));
    // The micro-kernel reads rows of st: queries of another type are converted once per tile.
    const st* qr = nullptr;
    index_t q_stride = p.q_strides[2];
    if constexpr (std::is_same_v<T, st>) {
      qr = qt;
    } else {
      for (int r = 0; r < nr; ++r) {
        const T* from = qt + r * p.q_strides[2];
        st* to = s.qrows + r * d;
        index_t j = 0;
        for (; j + L <= d; j += L) simd::store_dot(to + j, simd::load<V>(from + j));
        for (; j < d; ++j) to[j] = from_float<st>(to_float(from[j]));
      }
      qr = s.qrows;
      q_stride = d;
    }
    float* m = s.stats;
    float* l = s.stats + MR;
    for (int r = 0; r < nr; ++r) {
      m[r] = ninf;
      l[r] = 0.f;
    }
    std::fill(s.acc, s.acc + MR * dp, 0.f);
    const detail::int_args ia{};
    const epilogue<> none{};
    // Causal: query row i (absolute r0 + i) sees keys j <= i + (S - Sq).
    const index_t shift = S - p.q_len;
    const index_t key_end = p.causal ? std::min(S, r0 + nr + shift) : S;
    for (index_t k0 = 0; k0 < key_end; k0 += block) {
      const index_t nk = std::min(block, key_end - k0);
      // Scores of the block: MR x nk, panel by panel of K^T.
      for (index_t pn = k0 / NR; pn * NR < k0 + nk; ++pn) {
        const index_t c0 = pn * NR - k0;
        detail::gemm_panel_rows<microkernel, V, MR, NV, MR>(
            nr, qr, q_stride, s.kt + pn * grouped(d) * NR, d, s.scores + c0, block, 0, 0,
            std::min<index_t>(NR, nk - c0), none, ia);
      }
      for (int r = 0; r < nr; ++r) {
        float* srow = s.scores + r * block;
        const float* brow = br ? br + r * p.bias_strides[2] + k0 * p.bias_strides[3] : nullptr;
        index_t valid = nk;
        if (p.causal) valid = std::clamp<index_t>(r0 + r + shift - k0 + 1, 0, nk);
        // No bias and a positive scale: the scores stay raw and the exp pass scales them.
        const bool raw = !brow && scale > 0.f;
        const float bm = scale_bias_max(srow, brow, p.bias_strides[3], valid, scale, !raw);
        for (index_t j = valid; j < nk; ++j) srow[j] = ninf;
        // Online softmax: the new max, the old terms rescaled, this block's exp stored as P.V's
        // operand (in place for f32 products, rounded once into probs for bf16 ones).
        st* prow = s.probs + r * block;
        const float m_new = std::max(m[r], bm);
        if (m_new == ninf) {  // every key so far masked: no weight (exact zeros on every arch)
          std::fill(prow, prow + nk, from_float<st>(0.f));
          continue;
        }
        const float alpha = std::exp(m[r] - m_new);  // m[r] = -inf: 0 (nothing accumulated)
        // exp(y - m) as 2^(y log2(e) - m log2(e)): scale, max and base in one FMA (coarse
        // polynomial for bf16 probabilities).
        constexpr float log2e = 1.4426950408889634f;
        const float sum = detail::row_exp2_sum<V, std::is_same_v<st, bf16_t>>(
            srow, prow, nk, (raw ? scale : 1.f) * log2e, -m_new * log2e);
        l[r] = l[r] * alpha + sum;
        m[r] = m_new;
        if (alpha != 1.f) {
          float* a = s.acc + r * dp;
          for (index_t j = 0; j < dp; j += L) simd::store(a + j, simd::load<V>(a + j) * V(alpha));
        }
      }
      // The block's probabilities times its rows of V, added to the accumulators.
      switch (v_vectors(d)) {
        case 1:
          block_times_v<1>(p, nr, k0, nk, s);
          break;
        case 2:
          if constexpr (NV >= 2) block_times_v<2>(p, nr, k0, nk, s);
          break;
        case 3:
          if constexpr (NV >= 3) block_times_v<3>(p, nr, k0, nk, s);
          break;
        default:
          block_times_v<NV>(p, nr, k0, nk, s);
      }
      for (int r = 0; r < nr; ++r) {
        float* a = s.acc + r * dp;
        const float* t = s.part + r * dp;
        for (index_t j = 0; j < dp; j += L)
          simd::store(a + j, simd::load<V>(a + j) + simd::load<V>(t + j));
      }
    }
    for (int r = 0; r < nr; ++r) {
      const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;  // a fully masked row gives zeros
      T* o = outr + r * p.out_strides[2];
      const float* a = s.acc + r * dp;
      for (index_t j = 0; j < d; ++j) o[j] = from_float<T>(a[j] * inv);
    }
  }
};

KFUSE_END_NAMESPACE
