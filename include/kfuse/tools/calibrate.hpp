#pragma once
// int8 activation calibration: an observer sees the values a tensor takes on sample inputs and
// chooses its quantization range (min/max, or a percentile that clips rare outliers), from which
// quant_params_for<u8|i8>() makes the scale and zero point the int8 plan uses.
//
//   kfuse::activation_observer obs({kfuse::observer_method::percentile, 99.99});
//   for (auto& batch : samples) obs.observe(activations_of(batch));
//   kfuse::quant_params q = obs.params<kfuse::u8>(kfuse::quant_scheme::affine);
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/types/elem.hpp"
#include "kfuse/types/quant_params.hpp"

namespace kfuse {

/// symmetric: zero maps to the integer zero point of the type's centre (0 for i8, 128 for u8)
/// and the range is [-t, t]; affine: the range [lo, hi] (widened to contain 0) maps onto the
/// whole integer range.
enum class quant_scheme { symmetric, affine };

/// minmax: the observed extremes. percentile: the extremes after clipping the (100 - p)% most
/// extreme values (affine: (100 - p)/2 % on each side; symmetric: of |x|).
enum class observer_method { minmax, percentile };

struct observer_options {
  observer_method method = observer_method::minmax;
  double percentile = 99.99;  // in percent, (50, 100]
};

/// A calibrated real range.
struct value_range {
  float lo = 0;
  float hi = 0;
};

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

/// Scale and zero point that map [lo, hi] onto the integer type E (u8 or i8) with `scheme`.
/// The range is widened to contain 0 so that zero (padding, ReLU's output) is exact. An empty
/// or all-zero range gives scale 1.
template <class E>
quant_params quant_params_for(value_range r, quant_scheme scheme) {
  static_assert(std::is_same_v<E, u8> || std::is_same_v<E, i8>,
                "kfuse::quant_params_for: E must be kfuse::u8 or kfuse::i8");
  if (!(std::isfinite(r.lo) && std::isfinite(r.hi)) || r.lo > r.hi)
    detail::fail("calibrate", "range [" + std::to_string(r.lo) + ", " + std::to_string(r.hi) +
                                  "] is not a finite, ordered range");
  constexpr int qmin = elem_traits<E>::min, qmax = elem_traits<E>::max;
  const double lo = std::min(double(r.lo), 0.0), hi = std::max(double(r.hi), 0.0);
  quant_params q;
  if (scheme == quant_scheme::symmetric) {
    // 127 steps each side; u8 puts zero at 128 (q - 128 in [-128, 127]).
    const double t = std::max(-lo, hi);
    q.scale = t > 0 ? float(t / 127.0) : 1.0f;
    q.zero_point = std::is_same_v<E, u8> ? 128 : 0;
    return q;
  }
  const double span = hi - lo;
  if (!(span > 0)) {
    q.scale = 1.0f;
    q.zero_point = 0;
    return q;
  }
  q.scale = float(span / double(qmax - qmin));
  // real 0 must land on an integer: zp = qmin - lo/scale, rounded, inside [qmin, qmax].
  const double zp = std::nearbyint(double(qmin) - lo / double(q.scale));
  q.zero_point = std::int32_t(std::clamp(zp, double(qmin), double(qmax)));
  return q;
}

/// Watches the values of one tensor over calibration batches and proposes its range.
///
/// The percentile method keeps a histogram of |x| per sign with bins of 1/128 octave (the float's
/// exponent and its top 7 mantissa bits), from 2^-32 to 2^32: resolution within 0.8% of the value
/// everywhere, so a single huge outlier does not coarsen the bins of the bulk (as re-binning a
/// linear histogram would). |x| < 2^-32 counts as zero.
class activation_observer {
 public:
  explicit activation_observer(observer_options opt = {}) : opt_(opt) {
    if (opt_.method == observer_method::percentile) {
      if (!(opt_.percentile > 50.0 && opt_.percentile <= 100.0))
        detail::fail("calibrate",
                     "percentile " + std::to_string(opt_.percentile) + " is outside (50, 100]");
      pos_.assign(std::size_t(bins), 0);
      neg_.assign(std::size_t(bins), 0);
    }
  }

  const observer_options& options() const noexcept { return opt_; }
  std::int64_t count() const noexcept { return count_; }
  float min() const noexcept { return min_; }
  float max() const noexcept { return max_; }

  /// Adds values; NaN and infinities are an error (they would make every scale meaningless).
  void observe(std::span<const float> x) {
    if (x.empty()) return;
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    for (const float v : x) {
      if (!std::isfinite(v))
        detail::fail("calibrate", "observed a non-finite value (" + std::to_string(v) + ")");
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    min_ = count_ == 0 ? lo : std::min(min_, lo);
    max_ = count_ == 0 ? hi : std::max(max_, hi);
    count_ += std::int64_t(x.size());
    if (opt_.method != observer_method::percentile) return;
    for (const float v : x) {
      const int b = bin_of(v);
      if (b < 0)
        ++zeros_;
      else
        ++(v < 0 ? neg_ : pos_)[std::size_t(b)];
    }
  }

  /// The range the observer proposes.
  value_range range(quant_scheme scheme) const {
    if (count_ == 0) detail::fail("calibrate", "the observer saw no values");
    const float amax = std::max(-min_, max_);
    if (opt_.method == observer_method::minmax) {
      if (scheme == quant_scheme::symmetric) return {-amax, amax};
      return {min_, max_};
    }
    const double clip = 1.0 - opt_.percentile / 100.0;
    if (scheme == quant_scheme::symmetric) {
      const float t = std::min(float(magnitude_quantile(1.0 - clip)), amax);
      return {-t, t};
    }
    // Interpolation inside a bin can step past the observed extremes: clamp to them.
    const float lo = std::clamp(float(signed_quantile(clip / 2)), min_, max_);
    const float hi = std::clamp(float(signed_quantile(1.0 - clip / 2)), lo, max_);
    return {lo, hi};
  }

  template <class E>
  quant_params params(quant_scheme scheme) const {
    return quant_params_for<E>(range(scheme), scheme);
  }

 private:
  static constexpr int min_exp = -32, max_exp = 32, per_octave_bits = 7;
  static constexpr int per_octave = 1 << per_octave_bits;
  static constexpr int bins = (max_exp - min_exp) * per_octave;

  // Bin of |v| (-1: counts as zero); magnitudes above 2^32 land in the last bin.
  static int bin_of(float v) {
    std::uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    const int e = int((u >> 23) & 0xffu) - 127;
    if (e < min_exp) return -1;
    if (e >= max_exp) return bins - 1;
    return (e - min_exp) * per_octave + int((u >> (23 - per_octave_bits)) & (per_octave - 1));
  }
  // Lower edge and width of bin b (linear inside one octave).
  static double bin_lo(int b) {
    const int e = b / per_octave + min_exp, m = b % per_octave;
    return std::ldexp(1.0 + double(m) / per_octave, e);
  }
  static double bin_width(int b) { return std::ldexp(1.0 / per_octave, b / per_octave + min_exp); }

  // Value below which a fraction q of |x| lies (linear inside a bin).
  double magnitude_quantile(double q) const {
    const double target = q * double(count_);
    double seen = double(zeros_);
    if (seen >= target) return 0;
    for (int b = 0; b < bins; ++b) {
      const double c = double(pos_[std::size_t(b)] + neg_[std::size_t(b)]);
      if (c > 0 && seen + c >= target) return bin_lo(b) + bin_width(b) * (target - seen) / c;
      seen += c;
    }
    return std::numeric_limits<double>::max();
  }

  // Value below which a fraction q of x lies: negatives from the most negative up, the zeros,
  // then the positives.
  double signed_quantile(double q) const {
    const double target = q * double(count_);
    double seen = 0;
    for (int b = bins; b-- > 0;) {  // bin b of the negatives covers -(lo + width) .. -lo
      const double c = double(neg_[std::size_t(b)]);
      if (c > 0 && seen + c >= target)
        return -(bin_lo(b) + bin_width(b) * (1.0 - (target - seen) / c));
      seen += c;
    }
    seen += double(zeros_);
    if (seen >= target) return 0;
    for (int b = 0; b < bins; ++b) {
      const double c = double(pos_[std::size_t(b)]);
      if (c > 0 && seen + c >= target) return bin_lo(b) + bin_width(b) * (target - seen) / c;
      seen += c;
    }
    return std::numeric_limits<double>::max();
  }

  observer_options opt_;
  std::int64_t count_ = 0;
  float min_ = 0, max_ = 0;
  std::int64_t zeros_ = 0;
  std::vector<std::int64_t> pos_, neg_;
};

KFUSE_END_NAMESPACE
