#include "kfuse/llm/sampler.hpp"

#include <algorithm>
#include <cmath>

#include "kfuse/error.hpp"

namespace kfuse::llm {

sampler::sampler(const sampling& s) : s_(s), rng_(s.seed) {}

token_id sampler::sample(std::span<const float> logits, std::span<const token_id> history) {
  if (logits.empty()) throw kfuse::error("sampler: no logits");
  candidates_.resize(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) candidates_[i] = {logits[i], token_id(i)};
  if (s_.repeat_penalty != 1.f && s_.repeat_last_n != 0) {
    const std::size_t n = s_.repeat_last_n < 0
                              ? history.size()
                              : std::min(history.size(), std::size_t(s_.repeat_last_n));
    std::vector<token_id> recent(history.end() - std::ptrdiff_t(n), history.end());
    std::sort(recent.begin(), recent.end());
    recent.erase(std::unique(recent.begin(), recent.end()), recent.end());
    for (token_id t : recent) {
      if (t < 0 || std::size_t(t) >= logits.size()) continue;
      float& l = candidates_[std::size_t(t)].first;
      l = l > 0 ? l / s_.repeat_penalty : l * s_.repeat_penalty;
    }
  }
  auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  if (s_.temperature <= 0)
    return std::min_element(candidates_.begin(), candidates_.end(), by_logit)->second;

  std::size_t n = candidates_.size();
  if (s_.top_k > 0 && std::size_t(s_.top_k) < n) {
    std::partial_sort(candidates_.begin(), candidates_.begin() + s_.top_k, candidates_.end(),
                      by_logit);
    n = std::size_t(s_.top_k);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  // Softmax of the survivors, then the smallest prefix holding top_p of the mass.
  const float best = candidates_[0].first;
  std::vector<double> p(n);
  double total = 0;
  for (std::size_t i = 0; i < n; ++i) total += p[i] = std::exp(double(candidates_[i].first - best));
  if (s_.top_p < 1.f) {
    double mass = 0;
    std::size_t keep = n;
    for (std::size_t i = 0; i < n; ++i) {
      mass += p[i] / total;
      if (mass >= s_.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = std::max<std::size_t>(keep, 1);
  }
  // Temperature on the survivors' logits.
  std::vector<double> w(n);
  for (std::size_t i = 0; i < n; ++i)
    w[i] = std::exp(double(candidates_[i].first - best) / s_.temperature);
  std::discrete_distribution<std::size_t> pick(w.begin(), w.end());
  return candidates_[pick(rng_)].second;
}

}  // namespace kfuse::llm
