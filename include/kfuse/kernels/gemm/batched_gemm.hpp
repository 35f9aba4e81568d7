#pragma once
// batched_gemm<Recipe, Arch, Epilogue, Backend>: C[b] = epilogue(A[b] . B[b]) for every index b
// of up to four batch dimensions, both operands given at run time (attention's Q.K^T and P.V,
// ONNX MatMul of two activations).
//
//   kfuse::batched_gemm_problem p;            // M, K, N, the batch dims and every stride
//   p = kfuse::batched_gemm_problem::dense({2, 12}, 128, 64, 128, /*b_transposed=*/true);
//   kfuse::batched_gemm<kfuse::f32>::run(a, b, c, p);      // allocates its workspace per call
//
// Recipes: f32 (FMA), bf16 (vdpbf16ps: the operands rounded to bf16 as they are packed) and i8
// (vpdpbusd): A u8 or s8 with a zero point, B s8 (symmetric), exact int32 sums; C is either those
// int32 sums (no epilogue) or floats through the epilogue, whose first stage usually scales by
// A's scale x B's scale:
//   kfuse::batched_gemm<kfuse::i8, A, kfuse::epilogue<kfuse::scale>>::run(a_u8, b_s8, c_f32, p,
//       {{sa * sb}}, {}, /*a_zero_point=*/128);
//
// Every operand is addressed through strides (elements), so a transpose or a broadcast batch
// dimension (stride 0) costs no copy: A[b][m][k] at a[sum b_i a_batch_i + m a_row + k a_col],
// B[b][k][n] at b[... + k b_row + n b_col], C[b][m][n] at c[... + m c_row + n] (C's columns are
// contiguous). The work is split into (batch, group of NR-column panels) items. Each item packs
// its panels of B into its thread's workspace slot in gemm's panel layout (packed_weights.hpp)
// and runs gemm's register tiles on them (gemm.hpp: same micro-kernels, same epilogue on the
// registers); A is read in place when its rows are contiguous in the recipe's storage type,
// packed into the slot otherwise (a transposed A, f32 A for the bf16 recipe). The epilogue's
// flat index is that of the dense output [batch..., M, N], its channel the column n.
#include <algorithm>
#include <initializer_list>
#include <string>

#include "kfuse/detail/prefetch.hpp"
#include "kfuse/kernels/gemm/batched_gemm_problem.hpp"
#include "kfuse/kernels/gemm/gemm.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// The largest element offset an operand with these strides reaches (+1: its extent), or 0 when
/// it is empty. Strides are non-negative (checked by can_implement).
inline index_t strided_extent(std::string_view k, const char* what, const batched_gemm_problem& p,
                              const std::array<index_t, batched_gemm_problem::max_batch_rank>& st,
                              std::initializer_list<std::pair<index_t, index_t>> inner) {
  index_t last = 0;
  for (int i = 0; i < p.batch_rank; ++i) {
    const std::size_t d = std::size_t(i);
    if (p.batch[d] == 0) return 0;
    last = checked_add(k, what, last, checked_mul(k, what, p.batch[d] - 1, st[d]));
  }
  for (const auto& [count, stride] : inner) {
    if (count == 0) return 0;
    last = checked_add(k, what, last, checked_mul(k, what, count - 1, stride));
  }
  return checked_add(k, what, last, index_t(1));
}

/// A float panel from B's rows when they are contiguous (sn == 1: a plain B, attention's V):
/// a vector of each row at a time, k pairs interleaved as they are stored (G = 2).
template <class V, class T, class Src>
KFUSE_INLINE void pack_b_rows(const Src* b, index_t sk, index_t K, index_t N, index_t p, int nr,
                              int G, T* out) {
  constexpr int L = V::lanes;
  const index_t n0 = p * nr;
  const int valid = int(std::clamp<index_t>(N - n0, 0, nr));
  const auto row = [&](index_t k, int j) {
    if (k >= K || j >= valid) return V(0.f);
    const Src* s = b + k * sk + n0 + j;
    return j + L <= valid ? simd::load<V>(s) : simd::load_partial<V>(s, valid - j);
  };
  const index_t kp = (K + G - 1) / G * G;
  for (index_t k = 0; k < kp; k += G, out += G * nr) {
    for (index_t ahead = k + 8; ahead < std::min(k + 8 + G, K); ++ahead)
      prefetch_lines(b + ahead * sk + n0, std::size_t(valid) * sizeof(Src));
    for (int j = 0; j < nr; j += L) {
      if (G == 1)
        simd::store_dot(out + j, row(k, j));
      else
        simd::store_dot_pairs(out + 2 * j, row(k, j), row(k + 1, j));
    }
  }
}

/// A float panel from B's columns when they are contiguous (sk == 1: attention's K^T): each
/// column converted a vector at a time, then written down its panel column (G = 2: a k pair is
/// adjacent in the column, so it moves as one 32-bit word).
template <class V, class T, class Src>
KFUSE_INLINE void pack_b_columns(const Src* b, index_t sn, index_t K, index_t N, index_t p, int nr,
                                 int G, T* out) {
  constexpr int L = V::lanes;
  const index_t n0 = p * nr, kp = (K + G - 1) / G * G;
  for (int j = 0; j < nr; ++j) {
    const Src* s = b + (n0 + j) * sn;
    if (n0 + j + 8 < N)  // (the start of the column: attention's heads are <= 512 bytes)
      prefetch_lines(s + 8 * sn, std::min<std::size_t>(std::size_t(K) * sizeof(Src), 512));
    if (n0 + j >= N) {  // group k / G starts at k * nr; column j at G * j in it
      for (index_t k = 0; k < kp; k += G) std::fill_n(out + k * nr + G * j, G, T{});
      continue;
    }
    if (G == 1) {
      for (index_t k = 0; k < K; ++k) out[k * nr + j] = from_float<T>(to_float(s[k]));
      continue;
    }
    constexpr int C = L % 2 == 0 ? L : 2 * L;  // values per chunk: whole k pairs
    for (index_t k0 = 0; k0 < kp; k0 += C) {
      alignas(64) T t[C];
      for (int h = 0; h < C; h += L) {
        const index_t n = std::min<index_t>(L, K - (k0 + h));
        const V x = n == L  ? simd::load<V>(s + k0 + h)
                    : n > 0 ? simd::load_partial<V>(s + k0 + h, int(n))
                            : V(0.f);
        simd::store_dot(t + h, x);
      }
      for (index_t i = 0; i < std::min<index_t>(C, kp - k0); i += 2)
        std::memcpy(out + ((k0 + i) * nr + 2 * j), t + i, 2 * sizeof(T));
    }
  }
}

/// Packs columns [p * nr, p * nr + nr) of B (k stride sk, n stride sn) into one panel of gemm's
/// layout: k groups of G values per column, zero past N and past K. int8 panels are copied as
/// they are, and their per-column sums (the zero-point correction) written to col_sums[0, nr).
/// Float panels with contiguous rows or columns go a vector at a time (pack_b_rows /
/// pack_b_columns): element by element, packing K and V was 30% of a MiniLM attention (12 heads
/// x 128 keys x 32, bf16 products).
template <class V, class T, class Src>
KFUSE_INLINE void pack_b_panel(const Src* b, index_t sk, index_t sn, index_t K, index_t N,
                               index_t p, int nr, int G, T* out, std::int32_t* col_sums = nullptr) {
  constexpr bool integer = std::is_same_v<T, std::int8_t>;
  static_assert(!integer || std::is_same_v<Src, std::int8_t>, "int8 panels are packed from s8");
  if constexpr (!integer) {
    if (sn == 1 && nr % V::lanes == 0) return pack_b_rows<V>(b, sk, K, N, p, nr, G, out);
    if (sk == 1) return pack_b_columns<V>(b, sn, K, N, p, nr, G, out);
  }
  if constexpr (integer) std::fill(col_sums, col_sums + nr, 0);
  const index_t kp = (K + G - 1) / G * G;
  for (index_t k0 = 0; k0 < kp; k0 += G)
    for (int j = 0; j < nr; ++j) {
      const index_t n = p * nr + j;
      for (int g = 0; g < G; ++g) {
        const index_t k = k0 + g;
        const bool inside = n < N && k < K;
        if constexpr (integer) {
          const std::int8_t v = inside ? b[k * sk + n * sn] : std::int8_t(0);
          *out++ = v;
          col_sums[j] += v;
        } else {
          *out++ = from_float<T>(inside ? to_float(b[k * sk + n * sn]) : 0.f);
        }
      }
    }
}

}  // namespace detail

template <class Recipe, class A = arch::native, class Ep = epilogue<>, class B = backend::xsimd>
struct batched_gemm {
  using base = gemm<Recipe, A, Ep, B>;
  using vec = typename base::vec;
  using config = typename base::config;
  using microkernel = typename base::microkernel;
  using a_type = typename base::a_type;
  using b_storage = typename microkernel::storage;
  static constexpr bool integer = microkernel::integer;

  // ---- the kernel contract (kernels/kernel_contract.hpp) -------------------------------------
  static constexpr std::string_view name = "batched_gemm";
  using problem = batched_gemm_problem;
  struct packed {
    problem p{};
    bool ready = false;
    bool empty() const noexcept { return !ready; }
  };
  using epilogue_type = Ep;

  static kernel_status can_implement(const problem& p) {
    return detail::status_of(name, [&] {
      if (p.m < 0 || p.k < 0 || p.n < 0)
        detail::fail(name, "negative size (M " + std::to_string(p.m) + ", K " +
                               std::to_string(p.k) + ", N " + std::to_string(p.n) + ")");
      if (p.batch_rank < 0 || p.batch_rank > problem::max_batch_rank)
        detail::fail(name, "batch rank " + std::to_string(p.batch_rank) + " (0 to " +
                               std::to_string(problem::max_batch_rank) + ")");
      index_t count = 1;
      for (int i = 0; i < p.batch_rank; ++i) {
        const std::size_t d = std::size_t(i);
        if (p.batch[d] < 0) detail::fail(name, "negative batch dimension " + std::to_string(i));
        if (p.a_batch[d] < 0 || p.b_batch[d] < 0 || p.c_batch[d] < 0)
          detail::fail(name, "negative batch stride (dimension " + std::to_string(i) + ")");
        count = detail::checked_mul(name, "the batch", count, p.batch[d]);
      }
      if (p.a_row < 0 || p.a_col < 0 || p.b_row < 0 || p.b_col < 0 || p.c_row < p.n)
        detail::fail(name, "strides must be non-negative and C's row stride at least N (" +
                               std::to_string(p.c_row) + " < " + std::to_string(p.n) + ")");
      detail::checked_mul(name, "K x N", p.k, p.n);
      detail::checked_mul(name, "the output", detail::checked_mul(name, "the output", count, p.m),
                          p.n);
      detail::checked_mul(name, "M x K", p.m, p.k);
    });
  }

  /// One slot per worker: one packed panel of B, plus A of one matrix when it is packed.
  static std::size_t workspace_size(const problem& p, int threads) {
    detail::require(name, can_implement(p));
    return workspace_slots_bytes(threads, slot_bytes(p));
  }
  static packed initialize(const problem& p) {
    detail::require(name, can_implement(p));
    return {p, true};
  }

  /// The contract's run(): for f32 and bf16, a and b may be any element type convertible to
  /// float (f32, bf16) and C is float or what the epilogue produces; for i8, a is u8 or s8 with
  /// zero point `a_zero_point`, b is s8, and C is int32 (the exact sums, no epilogue) or float
  /// (or what the epilogue produces) from the sums.
  template <class TA, class TB, class Out>
  static run_info run(const TA* a, const TB* b, const packed& k, Out* c, const Ep& ep, workspace ws,
                      const run_options& opt = {}, std::int32_t a_zero_point = 0) {
    constexpr std::string_view kn = name;
    check_types<TA, TB, Out>();
    detail::check_zero_point<integer, TA>(kn, a_zero_point);
    if (k.empty()) detail::fail(kn, "not initialized (initialize(problem))");
    const problem& p = k.p;
    const index_t batches = p.batches(), M = p.m, K = p.k, N = p.n;
    run_info info{kn, A::name, simd::impl_name<A, B>(), base::micro_kernel(), 1};
    const index_t a_len =
        detail::strided_extent(kn, "A's extent", p, p.a_batch, {{M, p.a_row}, {K, p.a_col}});
    const index_t b_len =
        detail::strided_extent(kn, "B's extent", p, p.b_batch, {{K, p.b_row}, {N, p.b_col}});
    const index_t c_len =
        detail::strided_extent(kn, "C's extent", p, p.c_batch, {{M, p.c_row}, {N, 1}});
    detail::check_buffer(kn, "A", a, a_len);
    detail::check_buffer(kn, "B", b, b_len);
    detail::check_buffer(kn, "C", c, c_len);
    detail::check_disjoint(kn, "A", a, a_len, c, c_len);
    detail::check_disjoint(kn, "B", b, b_len, c, c_len);
    const index_t total = batches * M * N;
    validate(ep, kn, total, N, c, sizeof(Out) * std::size_t(c_len), sizeof(Out));
    if (total == 0) return info;
    if (K == 0) detail::fail(kn, "K is 0 (an empty sum): nothing defines the output");

    const std::size_t each = slot_bytes(p);
    const int threads =
        detail::workspace_threads(kn, ws, each, pool_threads(opt.threads, "batched_gemm"));
    constexpr int NR = config::nr;
    const index_t panels = (N + NR - 1) / NR;
    // Enough items for every thread; each item keeps whole panels so B is packed once per item.
    const index_t groups =
        batches >= threads ? 1 : std::min<index_t>(panels, (threads + batches - 1) / batches);
    const index_t per_group = (panels + groups - 1) / groups;
    const index_t items = batches * groups;
    info.threads = int(std::min<index_t>(threads, items));
    parallel_for(
        0, items, (items + threads - 1) / threads,
        [&](range r, int worker) {
          detail::slot_cursor cur(ws.slot<std::byte>(worker, each));
          const slot_arrays slot = carve(p, cur);
          for (index_t it = r.begin; it < r.end; ++it) {
            const index_t bi = it / groups, g = it % groups;
            const index_t p0 = g * per_group, p1 = std::min(panels, p0 + per_group);
            if (p0 >= p1) continue;
            run_item(a + p.batch_offset(p.a_batch, bi), b + p.batch_offset(p.b_batch, bi),
                     c + p.batch_offset(p.c_batch, bi), p, bi * M * N, p0, p1, slot, ep,
                     a_zero_point);
          }
        },
        threads);
    return info;
  }

  /// Convenience form: allocates the workspace for this call.
  template <class TA, class TB, class Out>
  static run_info run(const TA* a, const TB* b, Out* c, const problem& p, const Ep& ep = {},
                      const run_options& opt = {}, std::int32_t a_zero_point = 0) {
    const int threads = pool_threads(opt.threads, "batched_gemm");
    const workspace_buffer ws(workspace_size(p, threads));
    return run(a, b, initialize(p), c, ep, ws, opt, a_zero_point);
  }

 private:
  template <class TA, class TB, class Out>
  static constexpr void check_types() {
    using produced = typename epilogue_traits<Ep>::output_elem;
    if constexpr (integer) {
      static_assert(base::int8_weight_limit >= 128,
                    "kfuse::batched_gemm<i8>: this arch has no vpdpbusd, and its vpmaddubsw "
                    "kernel takes 7-bit weights only: B is data here (use f32 / bf16, or an arch "
                    "with vpdpbusd: avx2_vnni, avx512_vnni)");
      static_assert(std::is_same_v<TA, std::uint8_t> || std::is_same_v<TA, std::int8_t>,
                    "kfuse::batched_gemm<i8>: A is uint8_t or int8_t");
      static_assert(std::is_same_v<TB, std::int8_t>,
                    "kfuse::batched_gemm<i8>: B is int8_t (symmetric: zero point 0)");
      static_assert(!std::is_same_v<Out, std::int32_t> || epilogue_traits<Ep>::size == 0,
                    "kfuse::batched_gemm<i8>: an int32 output receives the exact sums and takes "
                    "no epilogue stages (use a float output with scale / dequantize stages)");
    }
    static_assert((integer && std::is_same_v<Out, std::int32_t>) ||
                      std::is_same_v<elem_of<Out>,
                                     std::conditional_t<std::is_void_v<produced>, f32, produced>> ||
                      (std::is_void_v<produced> && elem_traits<elem_of<Out>>::is_float),
                  "kfuse::batched_gemm: the output type does not match what the epilogue produces");
  }

  struct slot_arrays {
    b_storage* panel = nullptr;        // one panel of B
    std::int32_t* col_sums = nullptr;  // i8: B's column sums, indexed by column (whole panels)
    a_type* a = nullptr;               // one row tile of A, when A is packed
  };
  static constexpr int small_m = vec::lanes == 1 ? config::mr : 8;
  static index_t k_padded(index_t K) {
    return (K + microkernel::k_group - 1) / microkernel::k_group * microkernel::k_group;
  }
  /// A worker's slot (measured when the cursor has no base): one panel of B, and one row tile
  /// of A in case A is packed (its type is known only at run()).
  static slot_arrays carve(const problem& p, detail::slot_cursor& c) {
    slot_arrays s;
    s.panel = c.template take<b_storage>(std::size_t(k_padded(p.k) * config::nr));
    if constexpr (integer)
      s.col_sums = c.template take<std::int32_t>(
          std::size_t((p.n + config::nr - 1) / config::nr * config::nr));
    s.a = c.template take<a_type>(std::size_t(std::max<int>(small_m, config::mr)) *
                                  std::size_t(k_padded(p.k)));
    return s;
  }
  static std::size_t slot_bytes(const problem& p) {
    detail::slot_cursor measure;
    carve(p, measure);
    return measure.used();
  }

  template <class TA, class TB, class Out>
  static void run_item(const TA* a, const TB* b, Out* c, const problem& p, index_t flat_base,
                       index_t p0, index_t p1, const slot_arrays& slot, const Ep& ep,
                       std::int32_t a_zero_point) {
    constexpr int MR = config::mr, NV = config::nv, NR = config::nr;
    const index_t M = p.m, K = p.k, N = p.n, kp = k_padded(K);
    // A is read in place when its rows are contiguous runs of the recipe's type (i8: u8 or s8,
    // the micro-kernel flips s8); otherwise each row tile is packed (transposed A, f32 A for the
    // bf16 recipe) next to the panel it meets.
    using a_elem = std::conditional_t<integer, TA, a_type>;
    bool packed_a = p.a_col != 1;
    if constexpr (!std::is_same_v<TA, a_elem>) packed_a = true;
    // (u8 storage read as s8 for a packed s8 A: the signed variant of a type may alias it.)
    a_elem* a_buf = reinterpret_cast<a_elem*>(slot.a);
    const index_t tile_rows = M <= small_m ? M : MR;
    detail::int_args ia{};
    if constexpr (integer)
      ia = {slot.col_sums, a_zero_point + microkernel::template zero_point_shift<TA>};
    for (index_t pn = p0; pn < p1; ++pn) {
      detail::pack_b_panel<vec>(b, p.b_row, p.b_col, K, N, pn, NR, microkernel::k_group, slot.panel,
                                integer ? slot.col_sums + pn * NR : nullptr);
      for (index_t row0 = 0; row0 < M; row0 += tile_rows) {
        const int rows = int(std::min<index_t>(tile_rows, M - row0));
        const a_elem* ap = a_buf;
        index_t lda = kp;
        if (packed_a) {
          for (int r = 0; r < rows; ++r)
            for (index_t k = 0; k < kp; ++k) {
              const bool inside = k < K;
              if constexpr (integer)
                a_buf[r * kp + k] = inside ? a[(row0 + r) * p.a_row + k * p.a_col] : a_elem(0);
              else
                a_buf[r * kp + k] = from_float<a_type>(
                    inside ? to_float(a[(row0 + r) * p.a_row + k * p.a_col]) : 0.f);
            }
        } else if constexpr (std::is_same_v<TA, a_elem>) {
          ap = a + row0 * p.a_row;
          lda = p.a_row;
        }
        detail::gemm_panel<microkernel, vec, MR, NV, small_m>(
            rows, ap, lda, slot.panel, K, c, p.c_row, row0, pn * NR, N, ep, ia, flat_base);
      }
    }
  }
};

KFUSE_END_NAMESPACE
