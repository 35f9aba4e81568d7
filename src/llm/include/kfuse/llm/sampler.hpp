#pragma once
// Picking the next token from logits: repetition penalty, top-k, top-p, temperature, then a
// draw from a seeded generator (greedy when temperature <= 0), in llama.cpp's order.
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "kfuse/llm/tokenizer.hpp"

namespace kfuse::llm {

struct sampling {
  float temperature = 0.8f;     // <= 0: greedy (the largest logit)
  int top_k = 40;               // <= 0: all tokens
  float top_p = 0.95f;          // >= 1: no nucleus cut
  float repeat_penalty = 1.0f;  // 1: off; > 1 divides positive logits of recent tokens
  int repeat_last_n = 64;       // how many recent tokens the penalty looks at
  std::uint64_t seed = 0;
};

class sampler {
 public:
  explicit sampler(const sampling& s = {});
  /// Chooses a token; `history` is the context so far (for the penalty).
  token_id sample(std::span<const float> logits, std::span<const token_id> history);
  const sampling& params() const { return s_; }

 private:
  sampling s_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, token_id>> candidates_;
};

}  // namespace kfuse::llm
