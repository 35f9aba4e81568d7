#pragma once
// packed_weights: B (the weights of C = A . B) packed once into the micro-kernel's panel layout.
//
// Panels of NR columns; inside a panel, group kk of G consecutive k values holds, for each of the
// NR columns, its G values (zero-padded past N and past K), so the micro-kernel reads one
// contiguous stream per panel: panel p, k group kk at data[(p * Kp + kk * G) * NR], Kp = K
// rounded up to G (or to k_align, a multiple of G: the AMX tile depth, so a tile step never
// reads past the panel). G = 1 for f32 (row k holds NR values), 2 for bf16 pairs (vdpbf16ps),
// 4 for int8 quads (vpdpbusd).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "kfuse/detail/checks.hpp"
#include "kfuse/detail/prefetch.hpp"
#include "kfuse/simd/vec.hpp"
#include "kfuse/types/convert.hpp"

namespace kfuse {
/// How B is given: [K, N] row-major (math layout) or [N, K] row-major (PyTorch Linear weight).
enum class b_layout { kn, nk };
}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

namespace detail {
struct aligned_free {
  bool owns = true;  // false: a view of memory someone else owns (packed_weights::scaled_rows)
  void operator()(void* p) const noexcept {
    if (owns) std::free(p);
  }
};
}  // namespace detail

template <class T>
class packed_weights {
 public:
  packed_weights() = default;
  /// Packs B (element type of the source may differ: it is converted once here).
  template <class Src>
  packed_weights(const Src* b, index_t K, index_t N, b_layout layout, int nr, int k_group = 1,
                 int k_align = 1)
      : K_(K), N_(N), nr_(nr), k_group_(k_group) {
    k_align = std::max(k_align, k_group);
    constexpr std::string_view kernel = "gemm pack";
    if (K <= 0 || N <= 0)
      detail::fail(kernel, "K and N must be positive (K=" + std::to_string(K) +
                               ", N=" + std::to_string(N) + ")");
    detail::check_buffer(kernel, "B", b, detail::checked_mul(kernel, "K x N", K, N));
    // The padded panels (N up to a whole panel, K to a whole group) in bytes, checked before
    // anything is allocated; the rest of the arithmetic stays below this.
    detail::checked_bytes(kernel, "the packed weights",
                          detail::checked_mul(kernel, "the packed weights",
                                              detail::checked_add(kernel, "K", K, k_align),
                                              detail::checked_add(kernel, "N", N, nr)),
                          sizeof(T));
    const auto t0 = std::chrono::steady_clock::now();
    panels_ = (N + nr - 1) / nr;
    kp_ = (K + k_align - 1) / k_align * k_align;
    const std::size_t count = std::size_t(panels_ * kp_ * nr);
    void* mem = std::aligned_alloc(64, (count * sizeof(T) + 63) / 64 * 64);
    if (!mem) throw std::bad_alloc();
    data_.reset(static_cast<T*>(mem));
    T* out = data_.get();
    for (index_t p = 0; p < panels_; ++p)
      for (index_t k0 = 0; k0 < kp_; k0 += k_group)
        for (int j = 0; j < nr; ++j)
          for (int g = 0; g < k_group; ++g) {
            const index_t n = p * nr + j, k = k0 + g;
            float v = 0.f;
            if (n < N && k < K) v = to_float(layout == b_layout::kn ? b[k * N + n] : b[n * K + k]);
            *out++ = from_float<T>(v);
          }
    if constexpr (std::is_same_v<T, std::int8_t>) {
      // Column sums of the packed (padded) weights, for the activation zero-point correction.
      col_sums_.assign(std::size_t(panels_ * nr), 0);
      const T* q = data_.get();
      for (index_t p = 0; p < panels_; ++p)
        for (index_t k0 = 0; k0 < kp_; k0 += k_group)
          for (int j = 0; j < nr; ++j)
            for (int g = 0; g < k_group; ++g) col_sums_[std::size_t(p * nr + j)] += *q++;
    }
    pack_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  index_t K() const noexcept { return K_; }
  index_t N() const noexcept { return N_; }
  int nr() const noexcept { return nr_; }
  index_t panels() const noexcept { return panels_; }
  int k_group() const noexcept { return k_group_; }
  /// K padded with zero rows (a multiple of the k group; of the tile depth when packed for AMX).
  index_t kp() const noexcept { return kp_; }
  /// Per-column sums of int8 weights (padded to whole panels); empty for float weights.
  const std::int32_t* col_sums() const noexcept { return col_sums_.data(); }
  const T* panel(index_t p) const noexcept { return data_.get() + p * kp_ * nr_; }
  bool empty() const noexcept { return !data_; }
  /// Bytes of the packed panels (what scaled_rows writes).
  std::size_t bytes() const noexcept { return std::size_t(panels_ * kp_ * nr_) * sizeof(T); }
  /// Asks part `part` of `parts` of panel p into L2, for a GEMM to call while the tiles of the
  /// panel before it run: weights that come from memory (a plan's replay reads each layer's
  /// once) otherwise arrive only when the first row tile of their panel reads them, the stream
  /// and the arithmetic never overlapping (a 49 x 1152 x 320 f32 GEMM: ~200 us with its
  /// weights in cache, ~300 us from memory, ~270 us with this).
  void prefetch_part(index_t p, index_t part, index_t parts) const noexcept {
    detail::prefetch_part(panel(p), std::size_t(kp_ * nr_) * sizeof(T), std::size_t(part),
                          std::size_t(parts));
  }

  /// These weights with row k of B scaled by s[k], written to dst (bytes() bytes, 64-byte
  /// aligned) and returned as a view of dst (it does not own it): A diag(s) B without touching
  /// A. A per-input-channel gate (squeeze-excite) costs K x N multiplies here instead of M x K
  /// on the activations. f32 and bf16 weights (a bf16 product is rounded once, as the bf16
  /// recipe rounds a gated activation once when the gate is applied to A instead: store_dot's
  /// rounding, the panels being dot-product operands); not int8 (its column sums and scales
  /// would have to follow). V: the vector type of the caller's arch (the GEMM's).
  template <class V>
  packed_weights scaled_rows(
      const float* s, T* dst) const requires std::is_same_v<T, float> || std::is_same_v<T, bf16_t> {
    packed_weights v;
    v.K_ = K_, v.N_ = N_, v.panels_ = panels_, v.kp_ = kp_, v.nr_ = nr_, v.k_group_ = k_group_;
    v.data_ = std::unique_ptr<T, detail::aligned_free>(dst, detail::aligned_free{false});
    const T* src = data_.get();
    constexpr int L = V::lanes;
    const int g = k_group_, n = nr_ * g;  // a group: nr columns of g rows, row k0 + i at j g + i
    const auto scale_of = [&](index_t k) { return k < K_ ? s[k] : 0.f; };
    const bool lanes = L % g == 0 && n % L == 0;  // (not: the one-lane generic arch, pairs)
    alignas(64) float pattern[L];                 // per lane: the scale of its row in the group
    // Row groups outer, panels inner: a pair's pattern is written once for every panel (the
    // vector load after the scalar stores waits for them).
    for (index_t k0 = 0; k0 < kp_; k0 += g) {
      V gv(scale_of(k0));
      if (g > 1 && lanes) {
        for (int i = 0; i < L; ++i) pattern[i] = scale_of(k0 + i % g);
        gv = simd::load<V>(pattern);
      }
      for (index_t p = 0; p < panels_; ++p) {
        T* d = dst + std::size_t((p * kp_ + k0) * nr_);
        const T* a = src + std::size_t((p * kp_ + k0) * nr_);
        if (lanes)
          for (int j = 0; j < n; j += L) simd::store_dot(d + j, simd::load<V>(a + j) * gv);
        else
          for (int j = 0; j < n; ++j) d[j] = from_float<T>(to_float(a[j]) * scale_of(k0 + j % g));
      }
    }
    return v;
  }
  /// Time spent packing (reported separately from the GEMM itself).
  double pack_seconds() const noexcept { return pack_seconds_; }

 private:
  index_t K_ = 0, N_ = 0, panels_ = 0, kp_ = 0;
  int nr_ = 0, k_group_ = 1;
  double pack_seconds_ = 0;
  std::unique_ptr<T, detail::aligned_free> data_;
  std::vector<std::int32_t> col_sums_;
};

KFUSE_END_NAMESPACE
