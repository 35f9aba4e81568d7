#pragma once
// pool2d<Elem, Layout, Arch, Epilogue, Backend>: max, average (count_include_pad either way,
// ceil mode) and global max / average pooling, with optional epilogue stages fused before the
// store.
//
//   const auto ps = kfuse::pool_shape::of(
//       {1, 64, 56, 56}, {.kind = kfuse::pool_kind::max, .r = 3, .s = 3, .stride_h = 2,
//                         .stride_w = 2, .pad_top = 1, .pad_left = 1, .pad_bottom = 1, .pad_right =
//                         1});
//   kfuse::pool2d<kfuse::f32, kfuse::nhwc>::run(kfuse::view<kfuse::nhwc>(x, ps.in_dims()), ps,
//                                               kfuse::view<kfuse::nhwc>(y, ps.out_dims()));
//
// Elem is the storage tag: f32, bf16 (f32 compute), i8 / u8 (the same quantization in and out,
// zero point given to run()): max is exact; the average is the mean of the real values (padding
// counts as real zero when count_include_pad) rounded half to even, exact for windows of up to
// 16384 elements (global pooling: any size, summed in double). Max propagates NaN like PyTorch.
// NHWC: lanes are channels, each output pixel reads its valid window taps (loop bounds, no
// per-tap branch). NCHW (kernels/pool2d_nchw.hpp): lanes are output pixels of a row; f32 rows of
// stride 1 or 2 reduced along W by masked loads in registers, the rest through a padded f32
// scratch split into stride phases.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/epilogue/epilogue.hpp"
#include "kfuse/kernels/kernel_contract.hpp"
#include "kfuse/kernels/pool2d_nchw.hpp"
#include "kfuse/kernels/pool_geom.hpp"
#include "kfuse/kernels/pool_shape.hpp"
#include "kfuse/kernels/run_info.hpp"
#include "kfuse/layout/tensor_view.hpp"
#include "kfuse/threading/parallel_for.hpp"
#include "kfuse/types/convert.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

// ------------------------------------------------------------------------------------ NHWC
/// One output pixel, NV channel vectors from c0 (one vector of cn lanes when Partial).
template <class V, bool IsMax, int NV, bool Partial, class T, class Out, class Ep>
KFUSE_INLINE void pool_nhwc_px(const T* img, const pool_geom& g, index_t r0, index_t r1, index_t s0,
                               index_t s1, index_t ih0, index_t iw0, index_t c0, int cn,
                               float count, Out* out, index_t flat, const Ep& ep) {
  constexpr int L = V::lanes;
  V acc[NV];
  const V init(IsMax ? -std::numeric_limits<float>::infinity() : 0.f);
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) acc[v] = init;
  for (index_t r = r0; r < r1; ++r) {
    const T* row = img + ((ih0 + r) * g.w) * g.c + c0;
    for (index_t s = s0; s < s1; ++s) {
      const T* px = row + (iw0 + s) * g.c;
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) {
        const V x = pool_load<V, Partial>(px + v * L, cn, g);
        acc[v] = IsMax ? simd::max_keep_nan(acc[v], x) : acc[v] + x;
      }
    }
  }
#pragma GCC unroll 8
  for (int v = 0; v < NV; ++v) {
    V y = acc[v];
    if constexpr (!IsMax) y = y / V(count) + V(g.zp);
    const lane_ctx<V, true> ctx{flat + v * L, c0 + v * L, Partial ? cn : L};
    y = apply(ep, y, ctx);
    if constexpr (Partial)
      simd::store_partial(out + flat + v * L, y, cn);
    else
      simd::store(out + flat + v * L, y);
  }
}

template <class V, bool IsMax, class T, class Out, class Ep>
KFUSE_INLINE void pool_nhwc_row(const T* in, const pool_geom& g, index_t n, index_t oh, Out* out,
                                const Ep& ep) {
  constexpr int L = V::lanes, CV = 4;
  const index_t C = g.c;
  const T* img = in + n * g.h * g.w * C;
  const index_t ih0 = oh * g.sh - g.pt;
  index_t r0, r1;
  pool_valid_taps(ih0, g.r, g.h, r0, r1);
  for (index_t ow = 0; ow < g.ow; ++ow) {
    const index_t iw0 = ow * g.sw - g.pl;
    index_t s0, s1;
    pool_valid_taps(iw0, g.s, g.w, s0, s1);
    const float count = IsMax ? 1.f : g.hcnt[oh] * g.wcnt[ow];
    const index_t flat = ((n * g.oh + oh) * g.ow + ow) * C;
    index_t c0 = 0;
    for (; c0 + CV * L <= C; c0 += CV * L)
      pool_nhwc_px<V, IsMax, CV, false>(img, g, r0, r1, s0, s1, ih0, iw0, c0, L, count, out,
                                        flat + c0, ep);
    for (; c0 + L <= C; c0 += L)
      pool_nhwc_px<V, IsMax, 1, false>(img, g, r0, r1, s0, s1, ih0, iw0, c0, L, count, out,
                                       flat + c0, ep);
    if (c0 < C) {
      if (C >= L)  // the last vector ends at C, overlapping the one before (same values)
        pool_nhwc_px<V, IsMax, 1, false>(img, g, r0, r1, s0, s1, ih0, iw0, C - L, L, count, out,
                                         flat + C - L, ep);
      else
        pool_nhwc_px<V, IsMax, 1, true>(img, g, r0, r1, s0, s1, ih0, iw0, c0, int(C - c0), count,
                                        out, flat + c0, ep);
    }
  }
}

// ---------------------------------------------------------------------------------- global
/// Channels [c_lo, c_hi) of image n: each channel's max or mean (sums in f32 chunks of at most
/// 32768 values, exact for integers, added up in double), then the epilogue over channel
/// vectors and the store (the 1x1 output is N x C in either layout).
template <class V, class L, class T, class Out, class Ep>
KFUSE_INLINE void pool_global(const T* in, const pool_geom& g, index_t n, index_t c_lo,
                              index_t c_hi, bool integer_round, Out* out, const Ep& ep) {
  constexpr int Lanes = V::lanes;
  constexpr index_t chunk = 32768;
  const index_t hw = g.h * g.w;
  alignas(64) float res[64];
  alignas(64) float lanes[Lanes];
  const double count = double(hw);
  auto finish = [&](double v) {
    if (g.is_max) return float(v);
    const double mean = v / count;
    return float(integer_round ? std::nearbyint(mean) : mean);
  };
  if constexpr (std::is_same_v<L, nchw>) {
    for (index_t c = c_lo; c < c_hi; ++c) {
      const T* p = in + (n * g.c + c) * hw;
      const float init = g.is_max ? -std::numeric_limits<float>::infinity() : 0.f;
      double total = init;
      bool nan = false;
      for (index_t b = 0; b < hw; b += chunk * Lanes) {
        const index_t e = std::min(hw, b + chunk * Lanes);
        V acc(init);
        index_t i = b;
        for (; i + Lanes <= e; i += Lanes) {
          const V x = simd::load<V>(p + i);
          acc = g.is_max ? simd::max_keep_nan(acc, x) : acc + x;
        }
        if (i < e) {  // the tail: only its first e - i lanes are values
          const V x = simd::load_partial<V>(p + i, int(e - i));
          if (g.is_max) {
            simd::store(lanes, x);
            for (index_t k = 0; k < e - i; ++k) {
              nan = nan || lanes[k] != lanes[k];
              total = std::max(total, double(lanes[k]));
            }
          } else {
            acc = acc + x;  // the zero fill adds nothing
          }
        }
        simd::store(lanes, acc);
        for (int k = 0; k < Lanes; ++k) {
          if (g.is_max) {
            nan = nan || lanes[k] != lanes[k];
            total = std::max(total, double(lanes[k]));
          } else {
            total += double(lanes[k]);
          }
        }
      }
      res[c - c_lo] = nan ? std::numeric_limits<float>::quiet_NaN() : finish(total);
    }
  } else {
    // NHWC: channel vectors over the pixels.
    for (index_t c0 = c_lo; c0 < c_hi; c0 += Lanes) {
      const int nc = int(std::min<index_t>(Lanes, c_hi - c0));
      const T* p = in + n * hw * g.c + c0;
      const float init = g.is_max ? -std::numeric_limits<float>::infinity() : 0.f;
      double total[Lanes];
      for (int k = 0; k < Lanes; ++k) total[k] = init;
      for (index_t b = 0; b < hw; b += chunk) {
        const index_t e = std::min(hw, b + chunk);
        V acc(init);
        for (index_t i = b; i < e; ++i) {
          V x;
          if (Lanes == 1 || nc == Lanes)
            x = simd::load<V>(p + i * g.c);
          else if constexpr (Lanes > 1)
            x = simd::load_partial<V>(p + i * g.c, nc);
          acc = g.is_max ? simd::max_keep_nan(acc, x) : acc + x;
        }
        simd::store(lanes, acc);
        for (int k = 0; k < Lanes; ++k) {
          if (!g.is_max)
            total[k] += double(lanes[k]);
          else if (lanes[k] != lanes[k] || total[k] != total[k])
            total[k] = std::numeric_limits<double>::quiet_NaN();
          else
            total[k] = std::max(total[k], double(lanes[k]));
        }
      }
      for (int k = 0; k < nc; ++k)
        res[c0 - c_lo + k] =
            total[k] != total[k] ? std::numeric_limits<float>::quiet_NaN() : finish(total[k]);
    }
  }
  for (index_t c0 = c_lo; c0 < c_hi; c0 += Lanes) {
    const int nc = int(std::min<index_t>(Lanes, c_hi - c0));
    const index_t flat = n * g.c + c0;
    const lane_ctx<V, true> ctx{flat, c0, nc};
    if (Lanes == 1 || nc == Lanes) {
      simd::store(out + flat, apply(ep, simd::load<V>(res + (c0 - c_lo)), ctx));
    } else if constexpr (Lanes > 1) {
      const V x = simd::load_partial<V>(res + (c0 - c_lo), nc);
      simd::store_partial(out + flat, apply(ep, x, ctx), nc);
    }
  }
}

}  // namespace detail

template <class Elem, layout_tag Layout, class A = arch::native, class Ep = epilogue<>,
          class B = backend::xsimd>
struct pool2d : image_kernel_types<Layout, Ep> {
  static_assert(std::is_same_v<Elem, f32> || std::is_same_v<Elem, bf16> ||
                    std::is_same_v<Elem, i8> || std::is_same_v<Elem, u8>,
                "kfuse::pool2d: element type must be f32, bf16, i8 or u8");
  using vec = simd::vec_for<A, B>;
  using storage = storage_t<Elem>;
  static constexpr bool integer = elem_traits<Elem>::is_quantized;
  /// Integer averages are exact for windows of at most this many elements (global: any size).
  static constexpr index_t max_int_window = 16384;
  static constexpr std::string_view name = "pool2d";

  // ---- the kernel contract (kernels/kernel_contract.hpp) -------------------------------------
  using problem = pool_shape;
  /// The shape and the average divisors, separable: count(oh, ow) = hcnt[oh] * wcnt[ow].
  struct packed {
    pool_shape shape{};
    std::vector<float> hcnt, wcnt;
    bool ready = false;
    bool empty() const noexcept { return !ready; }
  };

  static kernel_status can_implement(const pool_shape& s) {
    return detail::status_of(name, [&] {
      detail::check_pool_shape(name, s);
      if (integer && s.kind == pool_kind::avg && !s.global && s.r * s.s > max_int_window)
        detail::fail(name, "integer average pooling windows are limited to " +
                               std::to_string(max_int_window) +
                               " elements (exact rounding); use global pooling for whole planes");
    });
  }
  /// NCHW windowed pooling off the rows path copies the rows a block reads into padded f32 rows:
  /// one slot per thread. The rows path, NHWC and global pooling need none.
  static std::size_t workspace_size(const pool_shape& s, int threads) {
    detail::require(name, can_implement(s));
    return workspace_slots_bytes(threads, slot_bytes(s));
  }
  static packed initialize(const pool_shape& s) {
    detail::require(name, can_implement(s));
    packed p;
    p.shape = s;
    if (s.kind == pool_kind::avg && !s.global) {
      p.hcnt =
          counts(s.h, s.r, s.stride_h, s.pad_top, s.pad_bottom, s.out_h(), s.count_include_pad);
      p.wcnt =
          counts(s.w, s.s, s.stride_w, s.pad_left, s.pad_right, s.out_w(), s.count_include_pad);
    }
    p.ready = true;
    return p;
  }

  /// The convenience form for direct callers: initialize() and a workspace per call.
  template <class In, class Out>
  static run_info run(tensor_view<In, Layout> in, const pool_shape& s, tensor_view<Out, Layout> out,
                      const Ep& ep = {}, const run_options& opt = {}, std::int32_t zero_point = 0) {
    const packed p = initialize(s);
    const workspace_buffer ws =
        detail::own_workspace<pool2d>(s, pool_threads(opt.threads, "pool2d"));
    return run(in, p, out, ep, ws.view(), opt, zero_point);
  }

  /// out = epilogue(pool(in)). In: Elem's storage type; integers with zero point `zero_point`
  /// (the output uses the same quantization). Out: In's type, a float type, or what the
  /// epilogue produces. Scratch from `ws` (workspace_size()); allocates nothing.
  template <class In, class Out>
  static run_info run(tensor_view<In, Layout> in, const packed& pk, tensor_view<Out, Layout> out,
                      const Ep& ep, workspace ws, const run_options& opt = {},
                      std::int32_t zero_point = 0) {
    using T = std::remove_const_t<In>;
    constexpr std::string_view k = name;
    static_assert(std::is_same_v<T, storage>,
                  "kfuse::pool2d: the input's storage type does not match the element tag");
    using produced = typename epilogue_traits<Ep>::output_elem;
    static_assert(std::is_same_v<elem_of<Out>,
                                 std::conditional_t<std::is_void_v<produced>, Elem, produced>> ||
                      (std::is_void_v<produced> && elem_traits<elem_of<Out>>::is_float),
                  "kfuse::pool2d: the output type must be the input's, a float type, or what "
                  "the epilogue produces");
    if (pk.empty()) detail::fail(k, "the pooling is not initialized (initialize(shape))");
    const pool_shape& s = pk.shape;
    if constexpr (integer) {
      if (zero_point < elem_traits<Elem>::min || zero_point > elem_traits<Elem>::max)
        detail::fail(k,
                     "zero point " + std::to_string(zero_point) + " is outside the element range");
    } else if (zero_point != 0) {
      detail::fail(k, "a zero point is only meaningful for integer elements");
    }
    if (!(in.dims == s.in_dims()))
      detail::fail(k, "input dims " + dims_text(in.dims) + " do not match the shape's " +
                          dims_text(s.in_dims()));
    const dims4 od = s.out_dims();
    if (!(out.dims == od))
      detail::fail(
          k, "output dims " + dims_text(out.dims) + " do not match the pooling's " + dims_text(od));
    const index_t n_in = numel(s.in_dims()), n_out = numel(od);
    detail::check_buffer(k, "input", in.data, n_in);
    detail::check_buffer(k, "output", out.data, n_out);
    detail::check_disjoint(k, "input", in.data, n_in, out.data, n_out);
    validate(ep, k, n_out, s.c, out.data, sizeof(Out) * std::size_t(n_out), sizeof(Out));
    if (n_out == 0) return run_info{k, A::name, simd::impl_name<A, B>(), "none", 0};

    const bool is_max = s.kind == pool_kind::max;
    const index_t ohn = od.h, own = od.w;
    const detail::pool_geom g{{s.n, s.c, s.h, s.w, ohn, own, s.global ? s.h : s.r,
                               s.global ? s.w : s.s, s.stride_h, s.stride_w, s.pad_top, s.pad_left},
                              is_max,
                              float(integer ? zero_point : 0),
                              pk.hcnt.data(),
                              pk.wcnt.data()};
    const T* x = in.data;
    Out* y = out.data;
    const std::size_t slot = slot_bytes(s);
    const int threads = detail::workspace_threads(k, ws, slot, pool_threads(opt.threads, "pool2d"));
    run_info info{k, A::name, simd::impl_name<A, B>(), "", 1};
    if (s.global) {
      info.micro_kernel = is_max ? "global max" : "global avg";
      constexpr index_t group = 64;  // channels per work item (the result buffer)
      // An integer mean stored as it is gets rounded half to even in double (exact for any
      // plane size); with epilogue stages it enters them unrounded, as in windowed pooling.
      const bool round_mean =
          integer && !is_max && epilogue_traits<Ep>::size == 0 && std::is_integral_v<Out>;
      const index_t groups = (s.c + group - 1) / group, units = s.n * groups;
      info.threads = int(std::min<index_t>(threads, units));
      parallel_for(
          0, units, 1,
          [&](range rg, int) {
            for (index_t u = rg.begin; u < rg.end; ++u) {
              const index_t n = u / groups, c_lo = (u % groups) * group;
              detail::pool_global<vec, Layout>(x, g, n, c_lo, std::min(s.c, c_lo + group),
                                               round_mean, y, ep);
            }
          },
          threads);
      return info;
    }
    info.micro_kernel = is_max ? (std::is_same_v<Layout, nhwc> ? "nhwc max" : "nchw max")
                               : (std::is_same_v<Layout, nhwc> ? "nhwc avg" : "nchw avg");
    if constexpr (std::is_same_v<Layout, nhwc>) {
      const index_t rows = s.n * ohn;
      const index_t grain = std::max<index_t>(1, rows / (4 * threads));
      info.threads = int(std::min<index_t>(threads, (rows + grain - 1) / grain));
      parallel_for(
          0, rows, grain,
          [&](range rg, int) {
            for (index_t row = rg.begin; row < rg.end; ++row)
              if (is_max)
                detail::pool_nhwc_row<vec, true>(x, g, row / ohn, row % ohn, y, ep);
              else
                detail::pool_nhwc_row<vec, false>(x, g, row / ohn, row % ohn, y, ep);
          },
          threads);
    } else {
      detail::pool_row_plan plan;  // the same for every row and plane: planned once
      const detail::pool_row_plan* rows =
          detail::pool_row_plan_of<vec, T>(g, plan) ? &plan : nullptr;
      info.micro_kernel = is_max ? (rows ? "nchw max rows" : "nchw max phases")
                                 : (rows ? "nchw avg rows" : "nchw avg phases");
      const index_t planes = s.n * s.c;
      const index_t want = (4 * threads + planes - 1) / planes;
      const index_t blocks = std::min(want, ohn), rows_per = (ohn + blocks - 1) / blocks;
      const index_t units = planes * blocks;
      // Ranges of several planes: their padding cells are written once per range.
      const index_t grain = std::max<index_t>(1, units / (4 * threads));
      info.threads = int(std::min<index_t>(threads, (units + grain - 1) / grain));
      parallel_for(
          0, units, grain,
          [&](range rg, int worker) {
            if constexpr (detail::pool_has_rows<vec, T>) {
              if (rows) {
                if (is_max)
                  detail::pool_nchw_rows<vec, true>(x, g, *rows, rg.begin, rg.end, blocks, rows_per,
                                                    y, ep);
                else
                  detail::pool_nchw_rows<vec, false>(x, g, *rows, rg.begin, rg.end, blocks,
                                                     rows_per, y, ep);
                return;
              }
            }
            float* sc = ws.slot<float>(worker, slot);  // the phases path only
            // With one block per plane every unit reads the same rows (the same padding cells).
            bool fill_pads = true;
            for (index_t u = rg.begin; u < rg.end; ++u) {
              const detail::pool_unit un(g, u, blocks, rows_per);
              if (!un) continue;
              const index_t n = un.plane / s.c, c = un.plane % s.c;
              if (is_max)
                detail::pool_nchw_block<vec, true>(x, g, n, c, un.oh_a, un.oh_b, sc, fill_pads, y,
                                                   ep);
              else
                detail::pool_nchw_block<vec, false>(x, g, n, c, un.oh_a, un.oh_b, sc, fill_pads, y,
                                                    ep);
              fill_pads = blocks > 1;
            }
          },
          threads);
    }
    return info;
  }

 private:
  /// One thread's scratch: NCHW windowed pooling only.
  static std::size_t slot_bytes(const pool_shape& s) {
    if (!std::is_same_v<Layout, nchw> || s.global || s.n <= 0 || s.c <= 0 || s.out_h() <= 0 ||
        s.out_w() <= 0 || detail::pool_takes_rows<vec, storage>(s.out_w(), s.s, s.stride_w))
      return 0;
    return workspace_round(sizeof(float) * detail::pool_nchw_scratch_floats<vec::lanes>(s));
  }
  /// Divisor factor of each output position along one axis (PyTorch's avg_pool2d rule).
  static std::vector<float> counts(index_t in, index_t k, index_t stride, index_t lo, index_t hi,
                                   index_t outs, bool include_pad) {
    std::vector<float> v(static_cast<std::size_t>(outs));
    for (index_t o = 0; o < outs; ++o) {
      const index_t start = o * stride - lo, end = std::min(start + k, in + hi);
      const index_t n = include_pad ? end - start : std::min(end, in) - std::max<index_t>(start, 0);
      v[std::size_t(o)] = float(n);
    }
    return v;
  }
  static std::string dims_text(const dims4& d) {
    return "(N " + std::to_string(d.n) + ", C " + std::to_string(d.c) + ", H " +
           std::to_string(d.h) + ", W " + std::to_string(d.w) + ")";
  }
};

KFUSE_END_NAMESPACE
