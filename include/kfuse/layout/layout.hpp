#pragma once
// Layouts nchw / nhwc: the memory order of a logical (N, C, H, W) tensor.
#include <array>
#include <string_view>

#include "kfuse/config/macros.hpp"
#include "kfuse/types/elem.hpp"

namespace kfuse {

/// Logical 4-D extent, always named in (N, C, H, W) order whatever the memory layout.
struct dims4 {
  index_t n = 1, c = 1, h = 1, w = 1;
  friend constexpr bool operator==(const dims4&, const dims4&) = default;
};

/// Channels-first: memory order N, C, H, W. Each channel is a contiguous run of H*W values.
struct nchw {
  static constexpr std::string_view name{"nchw"};
  static constexpr int channel_axis = 1;  // position of C in memory order
};
/// Channels-last: memory order N, H, W, C. Each pixel is a contiguous run of C values.
struct nhwc {
  static constexpr std::string_view name{"nhwc"};
  static constexpr int channel_axis = 3;
};

template <class L>
concept layout_tag = std::is_same_v<L, nchw> || std::is_same_v<L, nhwc>;

/// Element strides of a dense tensor, in logical (N, C, H, W) order.
struct strides4 {
  index_t n, c, h, w;
};

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

constexpr index_t numel(const dims4& d) noexcept { return d.n * d.c * d.h * d.w; }

template <layout_tag L>
constexpr strides4 strides_of(const dims4& d) noexcept {
  if constexpr (std::is_same_v<L, nchw>)
    return {d.c * d.h * d.w, d.h * d.w, d.w, 1};
  else
    return {d.h * d.w * d.c, 1, d.w * d.c, d.c};
}

/// Offset of logical element (n, c, h, w).
template <layout_tag L>
constexpr index_t offset_of(const dims4& d, index_t n, index_t c, index_t h, index_t w) noexcept {
  const strides4 s = strides_of<L>(d);
  return n * s.n + c * s.c + h * s.h + w * s.w;
}

KFUSE_END_NAMESPACE
