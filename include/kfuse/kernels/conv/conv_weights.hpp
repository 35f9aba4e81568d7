#pragma once
// conv_weights: one convolution's weights as conv2d packed them (kernels/conv/conv2d.hpp), for
// the path its shape takes: NHWC tiles, NCHW channel rows, a GEMM's panels (1x1 and few-channel
// patches) or the depthwise kernel's own packing.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string_view>
#include <vector>

#include "kfuse/kernels/conv/conv_shape.hpp"
#include "kfuse/kernels/gemm/packed_weights.hpp"

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// 64-byte aligned array that owns its memory.
template <class T>
class aligned_array {
 public:
  aligned_array() = default;
  explicit aligned_array(std::size_t n) : n_(n) {
    if (n == 0) return;
    void* mem = std::aligned_alloc(64, (n * sizeof(T) + 63) / 64 * 64);
    if (!mem) throw std::bad_alloc();
    data_.reset(static_cast<T*>(mem));
  }
  T* data() noexcept { return data_.get(); }
  const T* data() const noexcept { return data_.get(); }
  std::size_t size() const noexcept { return n_; }

 private:
  std::size_t n_ = 0;
  std::unique_ptr<T, aligned_free> data_;
};

/// The layouts' packing of one convolution's weights.
enum class conv_path { gemm_1x1, nhwc_implicit, nchw_rows, depthwise, nhwc_patches, winograd };

}  // namespace detail

/// Weights of one convolution packed once for conv2d<...> (owns aligned memory).
/// TW: what the packed tiles hold; TG: what the 1x1 gemm path's panels hold; DW: the depthwise
/// kernel's packed weights (depthwise shapes).
template <class TW, class TG, class DW>
class conv_weights {
 public:
  conv_weights() = default;
  const conv_shape& shape() const noexcept { return shape_; }
  bool empty() const noexcept { return data_.size() == 0 && gemm_.empty() && dw_.empty(); }
  /// Time spent packing (reported separately from the convolution itself).
  double pack_seconds() const noexcept { return pack_seconds_; }

  // Read by conv2d.
  detail::conv_path path_ = detail::conv_path::nhwc_implicit;
  conv_shape shape_{};
  std::string_view layout_{};
  int block_ = 0;        // NR (nhwc tiles) or MR (nchw rows): the micro-kernel it was packed for
  index_t kblocks_ = 0;  // nhwc, winograd: NR-channel blocks per group
  index_t cgp_ = 0;      // nhwc: channels per group rounded up to the k group
  index_t crsp_ = 0;     // nchw, patches: C/groups * R * S rounded up to the k group
  detail::aligned_array<TW> data_;
  std::vector<std::int32_t> sums_;  // int8: per (padded) output channel weight sums
  packed_weights<TG> gemm_;
  DW dw_;
  double pack_seconds_ = 0;
};

KFUSE_END_NAMESPACE
