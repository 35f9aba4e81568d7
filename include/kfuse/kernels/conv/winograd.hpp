#pragma once
// Winograd F(4x4, 3x3) for 3x3, stride-1, dilation-1, one-group f32 NHWC convolutions (Lavin &
// Gray, "Fast Algorithms for Convolutional Neural Networks", 2015, with the points 0, +-1, +-2):
// each 4x4 block of outputs comes from a 6x6 input tile with 36 multiply-adds per (input,
// output channel) pair instead of 144. Per block of T tiles:
//   input transform   V[36][T][C] = B^T d B of every tile, every channel
//   36 GEMMs          M[xi][T][NR] = V[xi] x U[xi]   (U = G g G^T, packed once per NR channels
//                                                     of K; the f32 GEMM micro-kernel)
//   output transform  y = A^T M A, then the epilogue on 4 output pixels at a time, stored once.
// ~4x fewer multiply-adds than the direct conv on large maps (3x on 7x7 / 14x14: padded tiles);
// the transforms add rounding, so outputs differ from the direct conv by ~1e-6 of the output's
// magnitude (tests/kernels/conv/winograd_test.cpp states the bound). conv2d takes this path when
// winograd_pays() (below) and its caller allows it (conv_algorithm).
#include <algorithm>
#include <cstddef>

#include "kfuse/detail/checks.hpp"
#include "kfuse/detail/prefetch.hpp"
#include "kfuse/kernels/conv/conv_shape.hpp"
#include "kfuse/kernels/gemm/microkernels.hpp"
#include "kfuse/kernels/register_tile.hpp"
#include "kfuse/kernels/workspace.hpp"
#include "kfuse/threading/parallel_for.hpp"

KFUSE_BEGIN_NAMESPACE

/// How conv2d may compute a convolution: its cost model's choice, always the direct (im2col-free
/// GEMM) form, or Winograd F(4x4, 3x3) where the shape allows it (else kfuse::error).
enum class conv_algorithm { automatic, direct, winograd };

namespace detail {

/// Shapes Winograd F(4x4, 3x3) computes: 3x3, stride 1, dilation 1, one group.
constexpr bool winograd_shape(const conv_shape& s) {
  return s.r == 3 && s.s == 3 && s.stride_h == 1 && s.stride_w == 1 && s.dilation_h == 1 &&
         s.dilation_w == 1 && s.groups == 1 && s.diagonal == 1 && s.out_h() > 0 && s.out_w() > 0;
}

/// The 4x4 output tiles of a shape: th x tw per image; tile g's image and first output pixel.
struct winograd_tiles {
  index_t th, tw;
  explicit constexpr winograd_tiles(const conv_shape& s)
      : th((s.out_h() + 3) / 4), tw((s.out_w() + 3) / 4) {}
  constexpr index_t count(index_t n) const { return n * th * tw; }
  struct origin {
    index_t n, oh0, ow0;
  };
  constexpr origin at(index_t g) const { return {g / (th * tw), g / tw % th * 4, g % tw * 4}; }
};

/// Where it pays (Zen 4 measurements in docs/benchmarks/small_cnns.md): at least 16 channels in
/// and out (the transforms cost per channel what ~16 multiply-adds of the GEMM do), and at least
/// 16 tiles per call, so that each transformed weight (36/9 = 4x the direct weights' bytes) is
/// used by enough tiles to keep the GEMM compute-bound (ResNet-18's 7x7 x 512 layers at batch 1
/// have 4 tiles and stay direct).
constexpr bool winograd_pays(const conv_shape& s) {
  if (!winograd_shape(s) || s.c < 16 || s.k < 16) return false;
  return winograd_tiles(s).count(s.n) >= 16;
}

/// Whether conv2d packs shape s for Winograd under `algo` (`supported`: its recipe and layout have
/// the path); a forced Winograd that cannot be is an error naming `kernel`.
inline bool winograd_chosen(const conv_shape& s, conv_algorithm algo, bool supported,
                            std::string_view kernel) {
  if (algo == conv_algorithm::winograd && !(supported && winograd_shape(s)))
    fail(kernel,
         "Winograd needs the f32 recipe, NHWC and a 3x3, stride-1, undilated, one-group "
         "shape");
  return supported && (algo == conv_algorithm::winograd ||
                       (algo == conv_algorithm::automatic && winograd_pays(s)));
}

/// The 1-D input transform B^T d of six values (a row or a column of a tile).
template <class V>
KFUSE_INLINE void winograd_in_1d(const V (&d)[6], V (&o)[6]) {
  const V a = simd::fma(V(-4.f), d[2], d[4]), b = simd::fma(V(-4.f), d[1], d[3]);
  const V c = d[4] - d[2], e = V(2.f) * (d[3] - d[1]);
  o[0] = simd::fma(V(4.f), d[0], simd::fma(V(-5.f), d[2], d[4]));
  o[1] = a + b;
  o[2] = a - b;
  o[3] = c + e;
  o[4] = c - e;
  o[5] = simd::fma(V(4.f), d[1], simd::fma(V(-5.f), d[3], d[5]));
}

/// A separable 2-D transform F d F^T of a 6x6 tile, by a 1-D transform `f` (6 -> N values) of
/// its columns, then of the rows of the result.
template <int N, class V, class F>
KFUSE_INLINE void winograd_2d(const V (&d)[6][6], V (&o)[N][N], F f) {
  V tr[N][6];
#pragma GCC unroll 6
  for (int j = 0; j < 6; ++j) {  // the columns
    const V col[6] = {d[0][j], d[1][j], d[2][j], d[3][j], d[4][j], d[5][j]};
    V t[N];
    f(col, t);
#pragma GCC unroll 6
    for (int i = 0; i < N; ++i) tr[i][j] = t[i];
  }
#pragma GCC unroll 6
  for (int i = 0; i < N; ++i) f(tr[i], o[i]);  // the rows
}

/// The 1-D output transform A^T m of six values.
template <class V>
KFUSE_INLINE void winograd_out_1d(const V (&m)[6], V (&o)[4]) {
  const V s1 = m[1] + m[2], d1 = m[1] - m[2], s2 = m[3] + m[4], d2 = m[3] - m[4];
  o[0] = m[0] + s1 + s2;
  o[1] = simd::fma(V(2.f), d2, d1);
  o[2] = simd::fma(V(4.f), s2, s1);
  o[3] = simd::fma(V(8.f), d2, d1) + m[5];
}

/// The kernel behind conv2d's Winograd path, on vector type V with the f32 micro-kernel MK and
/// its MR x NV register tile (NR = NV * lanes output channels per packed block).
template <class V, class MK, int MR, int NV>
struct winograd_f43 {
  static constexpr int L = V::lanes, NR = NV * L, XI = 36;

  /// Vectors of output channels per packed panel: NV, or 1 where NV would waste more than a
  /// quarter of the multiply-adds on K's padding (K = 16 or 32 on AVX-512: a U-Net's layers).
  static constexpr int panel_vectors(index_t K) {
    return (K + NR - 1) / NR * NR - K <= NR / 4 ? NV : 1;
  }

  /// Packed panels of output channels.
  static constexpr index_t panels(index_t K) {
    return (K + panel_vectors(K) * L - 1) / (panel_vectors(K) * L);
  }

  /// G g G^T of every (output, input channel) pair, in panels of P = panel_vectors(K) * L
  /// output channels: panel kb of position xi is a C x P block (the micro-kernel's B), zero past
  /// K. Computed in double.
  template <class Src>
  static aligned_array<float> pack(const Src* oihw, const conv_shape& s) {
    static constexpr double G[6][3] = {{1 / 4., 0, 0},
                                       {-1 / 6., -1 / 6., -1 / 6.},
                                       {-1 / 6., 1 / 6., -1 / 6.},
                                       {1 / 24., 1 / 12., 1 / 6.},
                                       {1 / 24., -1 / 12., 1 / 6.},
                                       {0, 0, 1}};
    const index_t C = s.c, K = s.k, P = panel_vectors(K) * L, KB = panels(K);
    aligned_array<float> u(std::size_t(XI * KB * C * P));
    std::fill(u.data(), u.data() + u.size(), 0.f);
    for (index_t k = 0; k < K; ++k)
      for (index_t c = 0; c < C; ++c) {
        const Src* g = oihw + (k * C + c) * 9;
        double gt[6][3];  // G g
        for (int i = 0; i < 6; ++i)
          for (int j = 0; j < 3; ++j)
            gt[i][j] = G[i][0] * double(to_float(g[j])) + G[i][1] * double(to_float(g[3 + j])) +
                       G[i][2] * double(to_float(g[6 + j]));
        for (int i = 0; i < 6; ++i)
          for (int j = 0; j < 6; ++j) {
            const double v = gt[i][0] * G[j][0] + gt[i][1] * G[j][1] + gt[i][2] * G[j][2];
            u.data()[((index_t(i * 6 + j) * KB + k / P) * C + c) * P + k % P] = float(v);
          }
      }
    return u;
  }

  /// Tiles per block: V[36][T][C] within ~384 KiB of L2, but at least 24 tiles (each
  /// transformed weight panel is streamed once per block) and at most 96; then evened out over
  /// the blocks that needs (49 tiles: 3 blocks of 18, not 24 + 24 + 1, which left one of two
  /// threads a third of the work).
  static index_t block_tiles(const conv_shape& s) {
    const index_t fit = index_t(384 * 1024) / (XI * s.c * index_t(sizeof(float)));
    const index_t t = std::clamp<index_t>(fit, 24, 96) / MR * MR;
    const index_t tiles = winograd_tiles(s).count(s.n);
    const index_t blocks = std::max<index_t>(1, (tiles + t - 1) / t);
    return ((tiles + blocks - 1) / blocks + MR - 1) / MR * MR;
  }
  /// One thread's slot: V, M and the 4x4 outputs of one tile.
  static std::size_t slot_bytes(const conv_shape& s) {
    if (s.n <= 0 || !winograd_shape(s)) return 0;
    const index_t T = block_tiles(s);
    slot_cursor m;
    (void)m.take<float>(std::size_t(XI * T * s.c));
    (void)m.take<float>(std::size_t(XI * T * NR));
    (void)m.take<float>(std::size_t(16 * NR));
    return m.used();
  }

  template <class Out, class Ep>
  static int run(const float* x, const float* u, Out* y, const conv_shape& s, const Ep& ep,
                 int pool, const workspace& ws, std::size_t slot) {
    if constexpr (NV > 1)
      if (panel_vectors(s.k) == 1) return run_panels<1>(x, u, y, s, ep, pool, ws, slot);
    return run_panels<NV>(x, u, y, s, ep, pool, ws, slot);
  }

 private:
  /// run with panels of PV vectors.
  template <int PV, class Out, class Ep>
  static int run_panels(const float* x, const float* u, Out* y, const conv_shape& s, const Ep& ep,
                        int pool, const workspace& ws, std::size_t slot) {
    constexpr int P = PV * L;
    const index_t C = s.c, KB = panels(s.k), tiles = winograd_tiles(s).count(s.n);
    const index_t T = block_tiles(s), blocks = (tiles + T - 1) / T;
    // Few blocks (small maps at batch 1): the threads split K instead, each transforming the
    // block's input itself (a few percent of the GEMM's work).
    const index_t kparts =
        std::min<index_t>(KB, std::max<index_t>(1, (2 * pool + blocks - 1) / blocks));
    const index_t items = blocks * kparts, kb_per = (KB + kparts - 1) / kparts;
    const bool prefetch = std::size_t(XI * C * KB * P) * sizeof(float) > (std::size_t(4) << 20);
    const int threads = int(std::min<index_t>(pool, items));
    auto body = [&](range rg, int worker) {
      slot_cursor cur(ws.slot<std::byte>(worker, slot));
      float* const v = cur.take<float>(std::size_t(XI * T * C));
      float* const m = cur.take<float>(std::size_t(XI * T * P));
      float* const yb = cur.take<float>(std::size_t(16 * P));
      index_t have = -1;  // the block whose transformed input v holds
      for (index_t it = rg.begin; it < rg.end; ++it) {
        const index_t b = it / kparts, kp = it % kparts;
        const index_t kb0 = kp * kb_per, kb1 = std::min(KB, kb0 + kb_per);
        if (kb0 >= kb1) continue;
        const index_t t0 = b * T, nt = std::min(T, tiles - t0);
        if (have != b) transform_input(x, s, t0, nt, T, v), have = b;
        for (index_t kb = kb0; kb < kb1; ++kb) {
          for (int xi = 0; xi < XI; ++xi) {
            const float* bp = u + (index_t(xi) * KB + kb) * C * P;
            // The next panel asked into L2 a part per row tile where the transformed weights
            // (4x the 3x3 weights) are well past L2 and come from L3 or memory: they were read
            // only when the first row tile of their panel reached them (ResNet-18's 256
            // channels at 14x14, 9.4 MB: 890-912 us with them in cache, 1280-1317 us from
            // memory, 1053-1101 us with this; its 2.4 MB 128-channel layers gained nothing and
            // ran 6-12% slower with the weights in cache).
            const float* next = !prefetch      ? nullptr
                                : xi + 1 < XI  ? bp + KB * C * P
                                : kb + 1 < kb1 ? u + (kb + 1) * C * P
                                               : nullptr;
            const std::size_t panel_bytes = std::size_t(C * P) * sizeof(float),
                              parts = std::size_t((nt + MR - 1) / MR);
            for (index_t r0 = 0; r0 < nt; r0 += MR) {
              if (next && parts > 1) prefetch_part(next, panel_bytes, std::size_t(r0 / MR), parts);
              V acc[MR][PV];
              start_tile(acc, nullptr, true);
              MK::template accumulate<V, MR, PV, P>(
                  acc, strided_rows<float>{v + (xi * T + r0) * C, C}, bp, 0, C);
              save_tile(acc, m + (xi * T + r0) * P);
            }
          }
          for (index_t t = 0; t < nt; ++t)
            transform_output<PV>(m + t * P, T * P, s, t0 + t, kb, y, yb, ep);
        }
      }
    };
    parallel_for(0, items, (items + threads - 1) / threads, body, threads);
    return threads;
  }

  /// V[xi][t][c] for tiles t0 .. t0 + nt (rows nt .. T rounded up to MR: zero).
  static void transform_input(const float* x, const conv_shape& s, index_t t0, index_t nt,
                              index_t T, float* v) {
    const index_t C = s.c, H = s.h, W = s.w;
    const winograd_tiles grid(s);
    for (index_t t = 0; t < nt; ++t) {
      const auto [n, oh0, ow0] = grid.at(t0 + t);
      const index_t ih0 = oh0 - s.pad_top, iw0 = ow0 - s.pad_left;
      const bool inside = ih0 >= 0 && iw0 >= 0 && ih0 + 6 <= H && iw0 + 6 <= W;
      const float* xn = x + n * H * W * C;
      for (index_t c0 = 0; c0 < C; c0 += L) {
        const int cn = int(std::min<index_t>(L, C - c0));
        V d[6][6];
#pragma GCC unroll 6
        for (int i = 0; i < 6; ++i)
#pragma GCC unroll 6
          for (int j = 0; j < 6; ++j) {
            const index_t ih = ih0 + i, iw = iw0 + j;
            const float* p = xn + (ih * W + iw) * C + c0;
            if (inside || (ih >= 0 && ih < H && iw >= 0 && iw < W))
              d[i][j] = cn == L ? simd::load<V>(p) : simd::load_partial<V>(p, cn);
            else
              d[i][j] = V(0.f);
          }
        V o[6][6];
        winograd_2d(d, o, [](const V(&a)[6], V(&b)[6]) { winograd_in_1d(a, b); });
#pragma GCC unroll 6
        for (int i = 0; i < 6; ++i)
#pragma GCC unroll 6
          for (int j = 0; j < 6; ++j) {
            float* q = v + ((i * 6 + j) * T + t) * C + c0;
            if (cn == L)
              simd::store(q, o[i][j]);
            else
              simd::store_partial(q, o[i][j], cn);
          }
      }
    }
    for (int xi = 0; xi < XI; ++xi)  // the padding rows of the last register tile
      std::fill(v + (xi * T + nt) * C, v + (xi * T + (nt + MR - 1) / MR * MR) * C, 0.f);
  }

  /// y = epilogue(A^T M A) of tile g, channels kb * P .. + P (P = PV lanes): M of position xi
  /// at m + xi * ld; the 4x4 x P outputs staged in yb, then stored a row of pixels at a time.
  template <int PV, class Out, class Ep>
  static void transform_output(const float* m, index_t ld, const conv_shape& s, index_t g,
                               index_t kb, Out* y, float* yb, const Ep& ep) {
    const index_t OH = s.out_h(), OW = s.out_w(), K = s.k;
    const auto [n, oh0, ow0] = winograd_tiles(s).at(g);
    constexpr int P = PV * L;
    const index_t ch0 = kb * P, valid = std::min<index_t>(P, K - ch0);
    const int nv = int((valid + L - 1) / L);
    for (int j = 0; j < nv; ++j) {
      V d[6][6], o[4][4];
#pragma GCC unroll 6
      for (int r = 0; r < 6; ++r)
#pragma GCC unroll 6
        for (int c = 0; c < 6; ++c) d[r][c] = simd::load<V>(m + (r * 6 + c) * ld + j * L);
      winograd_2d(d, o, [](const V(&a)[6], V(&b)[4]) { winograd_out_1d(a, b); });
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r)
#pragma GCC unroll 4
        for (int c = 0; c < 4; ++c) simd::store(yb + (r * 4 + c) * P + j * L, o[r][c]);
    }
    const int rows = int(std::min<index_t>(4, OH - oh0)),
              cols = int(std::min<index_t>(4, OW - ow0));
    for (int r = 0; r < rows; ++r) {
      const index_t flat = ((n * OH + oh0 + r) * OW + ow0) * K + ch0;
      const float* src = yb + r * 4 * P;
      switch (cols) {
        case 4:
          store_pixels<4, PV>(src, nv, y + flat, flat, K, ch0, valid, ep);
          break;
        case 3:
          store_pixels<3, PV>(src, nv, y + flat, flat, K, ch0, valid, ep);
          break;
        case 2:
          store_pixels<2, PV>(src, nv, y + flat, flat, K, ch0, valid, ep);
          break;
        default:
          store_pixels<1, PV>(src, nv, y + flat, flat, K, ch0, valid, ep);
          break;
      }
    }
  }

  /// Pixels consecutive output pixels (K apart) x PV vectors of channels through the epilogue.
  template <int Pixels, int PV, class Out, class Ep>
  static void store_pixels(const float* src, int nv, Out* out, index_t flat, index_t K, index_t ch0,
                           index_t valid, const Ep& ep) {
    V acc[Pixels][PV];
#pragma GCC unroll 4
    for (int p = 0; p < Pixels; ++p)
#pragma GCC unroll 4
      for (int j = 0; j < PV; ++j)
        acc[p][j] = j < nv ? simd::load<V>(src + p * PV * L + j * L) : V(0.f);
    store_tile<true>(acc, out, K, flat, K, ch0, valid, ep);
  }
};

}  // namespace detail

KFUSE_END_NAMESPACE
