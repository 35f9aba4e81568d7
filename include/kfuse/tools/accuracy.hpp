#pragma once
// Accuracy of a reduced-precision output against its fp32 reference: max abs error, max and mean
// relative error, cosine similarity and top-1 agreement (argmax per row), printable.
//
//   auto r = kfuse::compare_outputs(ref_f32, out_bf16, rows);   // rows of a [rows, classes] output
//   std::printf("%s\n", kfuse::to_string(r).c_str());
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <limits>
#include <span>
#include <string>
#include <type_traits>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/types/convert.hpp"
#include "kfuse/types/elem.hpp"

namespace kfuse {

struct accuracy_options {
  /// Relative errors divide by max(|ref|, rel_floor * rms(ref)), so that reference values near
  /// zero (a ReLU's zeros, a softmax's far tail) do not turn a tiny absolute error into a huge
  /// relative one.
  double rel_floor = 1e-3;
};

struct accuracy_report {
  index_t count = 0;
  index_t rows = 0;       // 0: no top-1 figure (rows not given)
  index_t nonfinite = 0;  // NaN / Inf values in the tested output
  double ref_rms = 0;     // RMS of the reference (scale of the errors)
  double max_abs = 0;
  index_t max_abs_at = -1;  // flat index of the largest absolute error
  double max_rel = 0;
  double mean_rel = 0;
  double cosine = 1;       // of the two outputs as flat vectors
  index_t top1_agree = 0;  // rows whose argmax matches
  double top1 = 1;         // top1_agree / rows
};

/// Thresholds a report can be checked against (a field at its default does not constrain).
struct accuracy_limits {
  double max_abs = std::numeric_limits<double>::infinity();
  double max_rel = std::numeric_limits<double>::infinity();
  double mean_rel = std::numeric_limits<double>::infinity();
  double min_cosine = -1;
  double min_top1 = 0;
};

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

/// Compares `got` (f32, bf16, f16 storage) with the fp32 reference `ref`, elementwise; with
/// rows > 0 the output is read as [rows, count / rows] for top-1 agreement.
template <class T>
accuracy_report compare_outputs(std::span<const float> ref, std::span<const T> got,
                                index_t rows = 0, accuracy_options opt = {}) {
  if (ref.size() != got.size())
    detail::fail("accuracy", "reference has " + std::to_string(ref.size()) +
                                 " values, the output " + std::to_string(got.size()));
  const auto n = index_t(ref.size());
  if (rows < 0 || (rows > 0 && n % rows != 0))
    detail::fail("accuracy",
                 std::to_string(n) + " values do not form " + std::to_string(rows) + " rows");
  accuracy_report r;
  r.count = n;
  r.rows = rows;
  if (n == 0) return r;
  double ss = 0;
  for (const float v : ref) ss += double(v) * double(v);
  r.ref_rms = std::sqrt(ss / double(n));
  const double floor = std::max(opt.rel_floor * r.ref_rms, std::numeric_limits<double>::min());
  double dot = 0, gg = 0, rel_sum = 0;
  for (index_t i = 0; i < n; ++i) {
    const double a = ref[std::size_t(i)], b = to_float(got[std::size_t(i)]);
    if (!std::isfinite(b)) {
      ++r.nonfinite;
      r.max_abs = r.max_rel = std::numeric_limits<double>::infinity();
      r.max_abs_at = i;
      continue;
    }
    const double d = std::fabs(a - b), rel = d / std::max(std::fabs(a), floor);
    if (d > r.max_abs) {
      r.max_abs = d;
      r.max_abs_at = i;
    }
    r.max_rel = std::max(r.max_rel, rel);
    rel_sum += rel;
    dot += a * b;
    gg += b * b;
  }
  r.mean_rel = r.nonfinite ? std::numeric_limits<double>::infinity() : rel_sum / double(n);
  const double norms = std::sqrt(ss) * std::sqrt(gg);
  r.cosine = r.nonfinite ? std::numeric_limits<double>::quiet_NaN()
             : norms > 0 ? dot / norms
                         : (ss == gg ? 1.0 : 0.0);  // both zero: identical
  if (rows > 0) {
    const index_t cols = n / rows;
    for (index_t row = 0; row < rows; ++row) {
      index_t ia = 0, ib = 0;
      for (index_t c = 1; c < cols; ++c) {
        if (ref[std::size_t(row * cols + c)] > ref[std::size_t(row * cols + ia)]) ia = c;
        if (to_float(got[std::size_t(row * cols + c)]) >
            to_float(got[std::size_t(row * cols + ib)]))
          ib = c;
      }
      r.top1_agree += ia == ib;
    }
    r.top1 = double(r.top1_agree) / double(rows);
  }
  return r;
}

/// Overload for contiguous containers (std::vector<float>, std::vector<bf16_t> ...).
template <class R, class G>
accuracy_report compare_outputs(const R& ref, const G& got, index_t rows = 0,
                                accuracy_options opt = {}) {
  using T = std::remove_cv_t<std::remove_reference_t<decltype(*std::data(got))>>;
  return compare_outputs<T>(std::span<const float>(std::data(ref), std::size(ref)),
                            std::span<const T>(std::data(got), std::size(got)), rows, opt);
}

/// True when every limit holds (and the output has no NaN / Inf).
inline bool meets(const accuracy_report& r, const accuracy_limits& l) {
  return r.nonfinite == 0 && r.max_abs <= l.max_abs && r.max_rel <= l.max_rel &&
         r.mean_rel <= l.mean_rel && r.cosine >= l.min_cosine && r.top1 >= l.min_top1;
}

/// One line: "max abs 1.2e-03  max rel 3.4e-02  mean rel 1.1e-03  cosine 0.999998  top-1 63/64".
inline std::string to_string(const accuracy_report& r) {
  char buf[256];
  int len = std::snprintf(buf, sizeof buf, "max abs %.3e  max rel %.3e  mean rel %.3e  cosine %.6f",
                          r.max_abs, r.max_rel, r.mean_rel, r.cosine);
  if (r.rows > 0 && len > 0 && std::size_t(len) < sizeof buf)
    len += std::snprintf(buf + len, sizeof buf - std::size_t(len), "  top-1 %lld/%lld (%.1f%%)",
                         (long long)r.top1_agree, (long long)r.rows, 100.0 * r.top1);
  if (r.nonfinite > 0 && len > 0 && std::size_t(len) < sizeof buf)
    std::snprintf(buf + len, sizeof buf - std::size_t(len), "  NON-FINITE %lld",
                  (long long)r.nonfinite);
  return buf;
}

KFUSE_END_NAMESPACE
