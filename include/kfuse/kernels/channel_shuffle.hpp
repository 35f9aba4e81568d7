#pragma once
// channel_shuffle: an image's channels permuted as ShuffleNet's channel shuffle permutes them (a
// reshape to [N, groups, C / groups, H, W], the two channel axes swapped, a reshape back), of
// which a run of `count` channels from `first` is written (the chunk or split that follows a
// shuffle; groups = 1: a plain channel slice):
//
//   out channel j = in channel source(first + j),  source(c) = (c % groups) * (C / groups)
//                                                               + c / groups
//
//   const auto s = kfuse::channel_shuffle_shape::of(1, 232, 28 * 28, true,
//                                                    {.groups = 2, .first = 0, .count = 116});
//   kfuse::channel_shuffle(x, y, s);  // y: NHWC [1, 28, 28, 116]
//
// NHWC: each pixel's channels are gathered (groups = 2, ShuffleNet's: two runs interleaved, a
// loop GCC vectorizes with permutes; groups = 1: one copy). NCHW: one plane copy per channel.
// Elements are moved as bits: any 1-, 2- or 4-byte type.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/detail/copy_short.hpp"
#include "kfuse/kernels/run_info.hpp"
#include "kfuse/threading/parallel_for.hpp"
#include "kfuse/types/shuffle_selection.hpp"

KFUSE_BEGIN_NAMESPACE

/// The problem: an image of n x c channels x hw pixels (channels_last: NHWC, [n, hw, c] in
/// memory; else NCHW, [n, c, hw]) and what of its shuffle the output keeps (shuffle_selection:
/// `count` channels from `first` of the shuffled order, -1: to the last; in the same layout).
struct channel_shuffle_shape : shuffle_selection {
  index_t n = 1, c = 1, hw = 1;
  bool channels_last = false;

  static constexpr channel_shuffle_shape of(index_t n, index_t c, index_t hw, bool channels_last,
                                            const shuffle_selection& keep) noexcept {
    channel_shuffle_shape s;
    static_cast<shuffle_selection&>(s) = keep;
    s.n = n;
    s.c = c;
    s.hw = hw;
    s.channels_last = channels_last;
    return s;
  }
  /// The output's channels (count, or to the last channel when count is -1).
  constexpr index_t kept() const noexcept { return count == -1 ? c - first : count; }

  /// The input channel of shuffled channel ch.
  index_t source(index_t ch) const {
    const index_t per = c / groups;
    return (ch % groups) * per + ch / groups;
  }
  index_t in_count() const { return n * c * hw; }
  index_t out_count() const { return n * kept() * hw; }
};

namespace detail {

inline void check_channel_shuffle(std::string_view k, const channel_shuffle_shape& s) {
  if (s.n < 1 || s.c < 1 || s.hw < 1)
    fail(k, "extents n " + std::to_string(s.n) + ", c " + std::to_string(s.c) + ", hw " +
                std::to_string(s.hw) + " (each at least 1)");
  if (s.groups < 1 || s.c % s.groups != 0)
    fail(k, "groups " + std::to_string(s.groups) + " do not divide " + std::to_string(s.c) +
                " channels");
  if (s.first < 0 || s.kept() < 1 || s.first > s.c - s.kept())
    fail(k, "channels " + std::to_string(s.first) + " to " + std::to_string(s.first + s.kept()) +
                " are not within the " + std::to_string(s.c) + " channels");
}

/// Pixels [p0, p1) of an NHWC shuffle.
template <class T>
void channel_shuffle_pixels(const T* KFUSE_RESTRICT in, T* KFUSE_RESTRICT out,
                            const channel_shuffle_shape& s, index_t p0, index_t p1) {
  const index_t C = s.c, cnt = s.kept();
  if (s.groups == 1) {
    for (index_t p = p0; p < p1; ++p)
      copy_short(out + p * cnt, in + p * C + s.first, std::size_t(cnt) * sizeof(T));
    return;
  }
  if (s.groups == 2 && s.first % 2 == 0 && cnt % 2 == 0) {
    // Shuffled channels first + 2i and first + 2i + 1 are input channels first / 2 + i of each
    // half: two runs interleaved.
    const index_t half = C / 2, m = cnt / 2, from = s.first / 2;
    for (index_t p = p0; p < p1; ++p) {
      const T* KFUSE_RESTRICT a = in + p * C + from;
      const T* KFUSE_RESTRICT b = a + half;
      T* KFUSE_RESTRICT y = out + p * cnt;
      for (index_t i = 0; i < m; ++i) {
        y[2 * i] = a[i];
        y[2 * i + 1] = b[i];
      }
    }
    return;
  }
  for (index_t p = p0; p < p1; ++p) {
    const T* x = in + p * C;
    T* y = out + p * cnt;
    for (index_t j = 0; j < cnt; ++j) y[j] = x[s.source(s.first + j)];
  }
}

/// Planes [q0, q1) (of n * count) of an NCHW shuffle.
template <class T>
void channel_shuffle_planes(const T* in, T* out, const channel_shuffle_shape& s, index_t q0,
                            index_t q1) {
  const index_t cnt = s.kept();
  for (index_t q = q0; q < q1; ++q) {
    const index_t b = q / cnt, j = q % cnt;
    std::memcpy(out + q * s.hw, in + (b * s.c + s.source(s.first + j)) * s.hw,
                std::size_t(s.hw) * sizeof(T));
  }
}

template <class T>
run_info channel_shuffle_impl(const T* in, T* out, const channel_shuffle_shape& s,
                              const run_options& opt) {
  constexpr std::string_view k = "channel_shuffle";
  check_channel_shuffle(k, s);
  check_buffer(k, "input", in, s.in_count());
  check_buffer(k, "output", out, s.out_count());
  check_disjoint(k, "input", in, s.in_count(), out, s.out_count());
  const bool nhwc = s.channels_last;
  const index_t cnt = s.kept();
  const index_t items = nhwc ? s.n * s.hw : s.n * cnt;
  const index_t per_item = nhwc ? cnt : s.hw;  // elements written per item
  const index_t grain = std::max<index_t>(1, (index_t(1) << 14) / per_item);
  parallel_for(
      0, items, grain,
      [&](range r, int) {
        if (nhwc)
          channel_shuffle_pixels(in, out, s, r.begin, r.end);
        else
          channel_shuffle_planes(in, out, s, r.begin, r.end);
      },
      opt.threads);
  const int used = int(
      std::min<index_t>(pool_threads(opt.threads, "channel_shuffle"), (items + grain - 1) / grain));
  return run_info{k, "any", "scalar", nhwc ? "pixels" : "planes", used};
}

/// The bit-copy type of an element of `bytes` bytes.
template <std::size_t Bytes>
using bits_of = std::conditional_t<
    Bytes == 1, std::uint8_t,
    std::conditional_t<Bytes == 2, std::uint16_t,
                       std::conditional_t<Bytes == 4, std::uint32_t, std::uint64_t>>>;

}  // namespace detail

/// out = the channels [first, first + count) of in's channel shuffle (see the file comment). T:
/// any trivially copyable element of 1, 2, 4 or 8 bytes.
template <class T>
run_info channel_shuffle(const T* in, T* out, const channel_shuffle_shape& s,
                         const run_options& opt = {}) {
  static_assert(sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8,
                "kfuse::channel_shuffle: elements of 1, 2, 4 or 8 bytes");
  using U = detail::bits_of<sizeof(T)>;
  return detail::channel_shuffle_impl(reinterpret_cast<const U*>(in), reinterpret_cast<U*>(out), s,
                                      opt);
}

KFUSE_END_NAMESPACE
