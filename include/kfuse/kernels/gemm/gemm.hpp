#pragma once
// gemm<Recipe, Arch, Epilogue, Backend>: C = epilogue(A . B).
//
//   using linear = kfuse::gemm<kfuse::f32, kfuse::arch::native, kfuse::epilogue<kfuse::bias,
//   kfuse::gelu_tanh>>; const auto w = linear::pack(weight, K, N, kfuse::b_layout::nk);   // once
//   linear::run(x, M, K, w, y, N, {{bias}, {}});                       // every call
//
// A is row-major [M, K] (lda >= K); C row-major [M, N] (ldc >= N). Each MR x NR tile of C is
// accumulated in registers over the whole of K, then every epilogue stage runs on the registers
// and the tile is stored once. K is never split across threads, so results are bitwise identical
// for any thread count.
#include <cstring>
#include <limits>
#include <type_traits>

#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/kernels/gemm/amx.hpp"
#include "kfuse/kernels/gemm/config.hpp"
#include "kfuse/kernels/gemm/gemm_tiles.hpp"
#include "kfuse/kernels/gemm/microkernels.hpp"
#include "kfuse/kernels/gemm/packed_weights.hpp"
#include "kfuse/kernels/kernel_contract.hpp"
#include "kfuse/kernels/register_tile.hpp"
#include "kfuse/kernels/run_info.hpp"
#include "kfuse/threading/parallel_for.hpp"

namespace kfuse {

/// C as rows of a bigger output (gemm::run): the epilogue's flat index of C[0, 0], and the
/// whole output's element count (-1: C is the whole output).
struct output_slice {
  index_t flat_base = 0;
  index_t whole = -1;
};

/// What a gemm computes: C[m, n] = A[m, k] . B[k, n] (plain data: shared by every arch's TUs).
struct gemm_problem {
  index_t m = 0, k = 0, n = 0;
};

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// A's zero point: within A's element range for an integer micro-kernel, 0 otherwise.
template <bool Integer, class TA>
void check_zero_point(std::string_view kernel, std::int32_t a_zero_point) {
  if constexpr (Integer) {
    if (a_zero_point < std::numeric_limits<TA>::min() ||
        a_zero_point > std::numeric_limits<TA>::max())
      fail(kernel,
           "A's zero point " + std::to_string(a_zero_point) + " is outside its element range");
  } else if (a_zero_point != 0) {
    fail(kernel, "a zero point is only meaningful for the i8 recipe");
  }
}

/// Whether the i8 recipe has a micro-kernel on arch A with vectors V: vpdpbusd on an arch with
/// a native int8 dot product, vpmaddubsw (7-bit weights) on the avx2 and avx512 tiers without
/// it, or the exact scalar kernel of arch::generic.
template <class A, class V>
constexpr bool int8_kernel_available() {
#if KFUSE_X86_INT8_DOT
  // zmm on the AVX-512 VNNI tiers, ymm on avx2_vnni: the native vector width of the tier.
  return (A::native_int8_dot && V::lanes * 4 == A::vector_bytes) || V::lanes == 1;
#elif KFUSE_X86_INT8_MADD
  // The TU's own tier (its registers: vnni_regs), at its native vector width.
  return (A::tier == KFUSE_TIER && V::lanes * 4 == A::vector_bytes) || V::lanes == 1;
#else
  return V::lanes == 1;
#endif
}

/// Packing checks int8 weights against the micro-kernel's limit (a vpmaddubsw kernel would
/// saturate its 16-bit pair sums on wider weights and return wrong sums).
template <class Int8>
void check_int8_weights(std::string_view kernel, std::string_view arch, const Int8* w,
                        index_t count, int limit) {
  if (limit >= 128) return;
  for (index_t i = 0; i < count; ++i)
    if (w[i] > limit || w[i] < -limit)
      fail(kernel, "weight " + std::to_string(int(w[i])) + " (element " + std::to_string(i) +
                       ") is outside [-" + std::to_string(limit) + ", " + std::to_string(limit) +
                       "]: arch " + std::string(arch) +
                       " has no vpdpbusd, and its vpmaddubsw kernel takes 7-bit weights "
                       "(quantize_weights_per_row(w, rows, " +
                       std::to_string(limit) + "), as compile() does on this arch)");
}

/// The micro-kernel a recipe uses on arch A with vectors V.
template <class Recipe, class A, class V>
struct select_microkernel {
  static_assert(sizeof(Recipe) == 0, "kfuse::gemm: unknown recipe (f32, bf16, f16w, i8)");
};
template <class A, class V>
struct select_microkernel<f32, A, V> {
  using type = mk_fma<float>;
  using a_storage = float;
};
template <class A, class V>
struct select_microkernel<f16w, A, V> {
  using type = mk_fma<float, f16_t>;
  using a_storage = float;
};
template <class A, class V>
struct select_microkernel<i8, A, V> {
  static constexpr bool vnni = V::lanes > 1;
  static_assert(int8_kernel_available<A, V>(),
                "kfuse::gemm<i8>: no int8 micro-kernel for this arch: it needs vpdpbusd "
                "(avx512_vnni, avx512_bf16 or avx2_vnni) or vpmaddubsw (avx2, avx512), built "
                "for that arch's tier; arch::generic runs the exact scalar kernel");
#if KFUSE_X86_INT8_DOT || KFUSE_X86_INT8_MADD
  using type = std::conditional_t<vnni, mk_int8_vnni, mk_int8_scalar>;
#else
  using type = mk_int8_scalar;
#endif
  using a_storage = std::uint8_t;  // or std::int8_t: run() takes both
};
template <class A, class V>
struct select_microkernel<bf16, A, V> {
  // Every arch rounds the weights to bf16 and adds the exact products in the same order: the
  // emulation equals vdpbf16ps except for denormals (microkernels.hpp, mk_bf16_pairs).
#if KFUSE_X86 && KFUSE_TIER >= KFUSE_TIER_AVX512_BF16
  using type = std::conditional_t<A::native_bf16_dot && V::lanes == 16, mk_bf16_dp, mk_bf16_pairs>;
#else
  using type = mk_bf16_pairs;
#endif
  using a_storage = bf16_t;
};

/// The largest |weight| the i8 micro-kernel of arch A takes (128: any s8; 63 for vpmaddubsw).
template <class A, class V>
constexpr int int8_weight_limit() {
  if constexpr (int8_kernel_available<A, V>())
    return select_microkernel<i8, A, V>::type::weight_limit;
  else
    return 128;
}

}  // namespace detail

template <class Recipe, class A = arch::native, class Ep = epilogue<>, class B = backend::xsimd>
struct gemm {
  using vec = simd::vec_for<A, B>;
  using config = default_config<Recipe, A, vec::lanes>;
  using microkernel = typename detail::select_microkernel<Recipe, A, vec>::type;
  /// A's storage type: float for f32, bf16_t for bf16.
  using a_type = typename detail::select_microkernel<Recipe, A, vec>::a_storage;
  using weights = packed_weights<typename microkernel::storage>;
  /// i8: the largest |weight| pack() takes (128: any s8; 63 on archs without vpdpbusd).
  static constexpr int int8_weight_limit = detail::int8_weight_limit<A, vec>();
  /// Whether this recipe and arch have the AMX tile path (used where amx_enabled()).
  static constexpr bool has_amx = detail::amx_kernel<microkernel, vec>;
  /// Whether pack() pads for, and run() may take, the tile path now.
  static bool amx_active() { return has_amx && amx_enabled(); }
  /// Rows from which run() takes the tile path (below: the vector kernels, which stream each
  /// weight once for M <= 8 and need no tile configuration).
  static constexpr index_t amx_min_rows = 16;
  /// Whether run() takes the tile path for M rows of A with these packed weights: K of one
  /// whole tile step or more, or of at least half a step (32 bytes) in whole 4-byte groups (one
  /// narrow step). Below that the GEMM is the output's bytes: M 12544, N 64, K 16 on one core
  /// (Xeon) ran 186 us on tiles, 146 on vpdpbusd; bf16 K 16 192 on tiles, 226 on vdpbf16ps.
  static bool uses_amx(index_t M, const weights& w) {
    if constexpr (has_amx) {
      return M >= amx_min_rows && detail::amx_takes_k<a_type>(w.K()) &&
             w.kp() % detail::amx_depth<a_type> == 0 && amx_enabled();
    } else {
      return false;
    }
  }

  // ---- the kernel contract (kernels/kernel_contract.hpp) -------------------------------------
  static constexpr std::string_view name = "gemm";
  using problem = gemm_problem;
  using packed = weights;
  using epilogue_type = Ep;
  using extents = matrix_extents;
  template <class T>
  using view = matrix_view<T>;

  static kernel_status can_implement(const gemm_problem& p) {
    return detail::status_of(name, [&] {
      if (p.m < 0 || p.k < 0 || p.n < 0)
        detail::fail(name, "negative size (M " + std::to_string(p.m) + ", K " +
                               std::to_string(p.k) + ", N " + std::to_string(p.n) + ")");
      detail::checked_mul(name, "K x N", p.k, p.n);
      detail::checked_mul(name, "M x N", p.m, p.n);
      detail::checked_mul(name, "M x K", p.m, p.k);
    });
  }
  /// The register tiles and their partial sums live on the stack: no workspace.
  static std::size_t workspace_size(const gemm_problem& p, int) {
    return detail::no_workspace<gemm>(p);
  }
  /// initialize = pack: B given [K, N] or [N, K] row-major.
  template <class Src>
  static weights initialize(const gemm_problem& p, const Src* b, b_layout layout) {
    detail::require(name, can_implement(p));
    return pack(b, p.k, p.n, layout);
  }
  /// The contract's form of run(): A [M, K] and C [M, N] as matrix views.
  template <class TA, class Out>
  static run_info run(matrix_view<const TA> a, const weights& w, matrix_view<Out> c, const Ep& ep,
                      workspace, const run_options& opt = {}, std::int32_t a_zero_point = 0) {
    if (!w.empty() && (a.dims.cols != w.K() || c.dims.cols != w.N() || c.dims.rows != a.dims.rows))
      detail::fail(name, "A is " + std::to_string(a.dims.rows) + " x " +
                             std::to_string(a.dims.cols) + " and C " + std::to_string(c.dims.rows) +
                             " x " + std::to_string(c.dims.cols) + "; the packed weights are K " +
                             std::to_string(w.K()) + " x N " + std::to_string(w.N()));
    return run(a.data, a.dims.rows, a.dims.stride(), w, c.data, c.dims.stride(), ep, opt,
               a_zero_point);
  }

  /// Packs B once ([K, N] or [N, K] row-major) into the micro-kernel's panels.
  template <class Src>
  static weights pack(const Src* b, index_t K, index_t N, b_layout layout) {
    if constexpr (std::is_same_v<Recipe, i8>) {
      detail::check_buffer("gemm pack", "B", b, detail::checked_mul("gemm pack", "K x N", K, N));
      detail::check_int8_weights("gemm pack", A::name, b, K * N, int8_weight_limit);
    }
    // The tile path reads whole tile depths of B: pad K to one with zero rows.
    const int k_align = amx_active() ? int(detail::amx_depth<a_type>) : 1;
    return weights(b, K, N, layout, config::nr, microkernel::k_group, k_align);
  }

  /// "f32 fma 6x4v", "bf16 vdpbf16ps 6x4v", ...: the micro-kernel and its register tile.
  static const char* micro_kernel(bool amx = false) {
    if (amx) return std::is_same_v<Recipe, bf16> ? "bf16 amx 32x32" : "i8 amx 32x32";
    static const std::string name = std::string(microkernel::name) + " " +
                                    std::to_string(config::mr) + "x" + std::to_string(config::nv) +
                                    (vec::lanes == 1 ? "" : "v");
    return name.c_str();
  }

  /// C[M, N] = epilogue(A[M, K] . B). Out is float, or what the epilogue's last stage produces.
  /// For the i8 recipe A may be u8 or s8, with zero point `a_zero_point`; an int32 output
  /// receives the exact accumulators (no epilogue). `slice`: C is rows of a bigger output whose
  /// tensors the epilogue reads (conv2d's per-sample gated path).
  template <class TA, class Out>
  static run_info run(const TA* a, index_t M, index_t lda, const weights& w, Out* c, index_t ldc,
                      const Ep& ep = {}, const run_options& opt = {}, std::int32_t a_zero_point = 0,
                      const output_slice& slice = {}) {
    constexpr std::string_view k = "gemm";
    static_assert(
        std::is_same_v<TA, a_type> || (microkernel::integer && std::is_same_v<TA, std::int8_t>),
        "kfuse::gemm: A's element type does not match the recipe (f32: float, bf16: "
        "bf16_t, f16w: float, i8: uint8_t or int8_t)");
    using produced = typename epilogue_traits<Ep>::output_elem;
    constexpr bool raw_int32 = microkernel::integer && std::is_same_v<Out, std::int32_t>;
    static_assert(!raw_int32 || epilogue_traits<Ep>::size == 0,
                  "kfuse::gemm<i8>: an int32 output receives the raw accumulators and takes no "
                  "epilogue stages (dequantize with a float output instead)");
    static_assert(raw_int32 ||
                      std::is_same_v<elem_of<Out>,
                                     std::conditional_t<std::is_void_v<produced>, f32, produced>> ||
                      (std::is_void_v<produced> && elem_traits<elem_of<Out>>::is_float),
                  "kfuse::gemm: the output type does not match what the epilogue produces");
    detail::check_zero_point<microkernel::integer, TA>(k, a_zero_point);
    if (w.empty()) detail::fail(k, "packed weights are empty");
    if (w.nr() != config::nr)
      detail::fail(k, "weights were packed for another micro-kernel (NR " + std::to_string(w.nr()) +
                          " != " + std::to_string(config::nr) + ")");
    const index_t K = w.K(), N = w.N();
    if (M < 0) detail::fail(k, "M is negative");
    if (lda < K)
      detail::fail(k, "lda (" + std::to_string(lda) + ") is less than K of the packed weights (" +
                          std::to_string(K) + ")");
    if (ldc < N)
      detail::fail(k,
                   "ldc (" + std::to_string(ldc) + ") is less than N (" + std::to_string(N) + ")");
    // Extents of A and C in elements ((M - 1) rows of ld plus one row), checked for overflow.
    const index_t a_len =
        M == 0 ? 0
               : detail::checked_add(k, "A's extent",
                                     detail::checked_mul(k, "A's extent", M - 1, lda), K);
    const index_t c_len =
        M == 0 ? 0
               : detail::checked_add(k, "C's extent",
                                     detail::checked_mul(k, "C's extent", M - 1, ldc), N);
    detail::check_buffer(k, "A", a, a_len);
    detail::check_buffer(k, "C", c, c_len);
    detail::check_disjoint(k, "A", a, a_len, c, c_len);
    const index_t flat_base = slice.flat_base;
    if (slice.whole < 0) {
      validate(ep, k, detail::checked_mul(k, "M x N", M, N), N, c, sizeof(Out) * std::size_t(c_len),
               sizeof(Out));
    } else {
      // The epilogue sees the whole output, C the rows [flat_base / N, + M) of it.
      if (ldc != N || flat_base < 0 || flat_base % N != 0 ||
          detail::checked_add(k, "the slice's end", flat_base, M * N) > slice.whole)
        detail::fail(k, "C (" + std::to_string(M) + " rows of " + std::to_string(N) +
                            ") is not a row slice of the " + std::to_string(slice.whole) +
                            "-element output at " + std::to_string(flat_base));
      validate(ep, k, slice.whole, N, c - flat_base, sizeof(Out) * std::size_t(slice.whole),
               sizeof(Out));
    }
    run_info info{k, A::name, simd::impl_name<A, B>(), micro_kernel(), 1};
    if (M == 0) return info;

    const int threads = pool_threads(opt.threads, "gemm");
#if KFUSE_AMX
    if constexpr (has_amx) {
      if (uses_amx(M, w)) {
        // tdpbssd takes s8 activations as they are: no flip to u8, no zero-point shift.
        const detail::int_args ia{microkernel::integer ? w.col_sums() : nullptr, a_zero_point};
        info.micro_kernel = micro_kernel(true);
        info.threads = detail::amx_gemm(
            a, M, lda, w, threads, [&](index_t row0, index_t rows, index_t col0, const auto* acc) {
              detail::store_amx_block<microkernel, vec>(acc, rows, c, ldc, row0, col0, N, ep, ia,
                                                        flat_base);
            });
        return info;
      }
    }
#endif
    constexpr int MR = config::mr, NV = config::nv;
    detail::int_args ia{};
    if constexpr (microkernel::integer)
      ia = {w.col_sums(), a_zero_point + microkernel::template zero_point_shift<TA>};
    // Small M (<= 8) is one row tile, so every weight is streamed exactly once.
    constexpr int small_m = vec::lanes == 1 ? MR : 8;
    const index_t tile_rows = M <= small_m ? M : MR;
    const index_t row_tiles = (M + tile_rows - 1) / tile_rows, panels = w.panels();
    auto tile = [&](index_t rt, index_t p) {
      const index_t row0 = rt * tile_rows;
      const int rows = int(std::min<index_t>(tile_rows, M - row0));
      detail::gemm_panel<microkernel, vec, MR, NV, small_m>(rows, a + row0 * lda, lda, w.panel(p),
                                                            K, c, ldc, row0, p * config::nr, N, ep,
                                                            ia, flat_base);
    };
    // Weights that fit in L2 stay there while A streams through once, a row tile at a time
    // (that tile's A in L1 for every panel): a 1x1 conv 16 -> 64 at 112x112 x 8 read its 26 MB
    // A once per panel, 4 times. Larger weights: split over column panels (each thread keeps
    // its own B panels in its L2) unless there are fewer panels than threads; then over row
    // tiles. K is never split, so every order gives the same bits.
    const bool rows_outer = w.bytes() <= (std::size_t(256) << 10) && row_tiles >= threads;
    if (!rows_outer && (panels >= threads || row_tiles == 1)) {
      info.threads = int(std::min<index_t>(threads, panels));
      parallel_for(
          0, panels, (panels + threads - 1) / threads,
          [&](range r, int) {
            for (index_t p = r.begin; p < r.end; ++p)
              for (index_t rt = 0; rt < row_tiles; ++rt) {
                if (row_tiles > 1 && p + 1 < r.end) w.prefetch_part(p + 1, rt, row_tiles);
                tile(rt, p);
              }
          },
          threads);
    } else {
      info.threads = int(std::min<index_t>(threads, row_tiles));
      parallel_for(
          0, row_tiles, (row_tiles + threads - 1) / threads,
          [&](range r, int) {
            if (rows_outer) {
              for (index_t rt = r.begin; rt < r.end; ++rt)
                for (index_t p = 0; p < panels; ++p) tile(rt, p);
            } else {
              for (index_t p = 0; p < panels; ++p)
                for (index_t rt = r.begin; rt < r.end; ++rt) tile(rt, p);
            }
          },
          threads);
    }
    return info;
  }
};

KFUSE_END_NAMESPACE
