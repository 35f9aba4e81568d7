#pragma once
// A session: one conversation's KV cache and position on a shared model. Its forward pass is a
// static plan built once (every step's weights, buffers and cache pointers bound), replayed for
// each batch of tokens on a persistent thread pool; the replay reads only the position and the
// token count, and allocates nothing.
//
//   kfuse::llm::session s(m, {.n_ctx = 2048, .threads = 2});
//   std::span<const float> logits = s.prefill(prompt_ids);   // the last token's logits
//   logits = s.decode(next_id);                               // one more token
//
// Several sessions may share one model from several threads (the weights are read-only); each
// session is used by one thread at a time.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kfuse/llm/model.hpp"

namespace kfuse::llm {

enum class cache_type { f32, bf16 };

struct session_options {
  int n_ctx = 0;  // context length; 0: the model's, capped at 4096
  cache_type cache = cache_type::f32;
  int threads = 0;  // 0: kfuse's default (the cores this process may use)
  int batch = 256;  // most tokens per prefill step
  // Prompts of 2+ tokens with one int8 level per activation block on quantized weights, as
  // llama.cpp computes (~1.3-1.5x faster prefill; logits cosine ~0.9998 against fp32 instead of
  // 1 - 1e-7). Decoding always keeps both levels: it is bound by memory, they cost nothing there.
  bool fast_prefill = false;
};

class session {
 public:
  explicit session(const model& m, const session_options& opt = {});
  session(session&&) noexcept;
  session& operator=(session&&) noexcept;
  ~session();

  /// Appends tokens (in steps of at most `batch`) and returns the logits of the last one.
  /// kfuse::error for an empty span, an id outside the vocabulary, or a context overflow
  /// (nothing is appended then).
  std::span<const float> prefill(std::span<const token_id> tokens);
  /// Appends one token and returns its logits.
  std::span<const float> decode(token_id token);
  /// Appends tokens and returns the logits after each of them: [tokens][n_vocab].
  std::vector<float> prefill_all_logits(std::span<const token_id> tokens);

  int position() const;  // tokens in the cache
  int context() const;   // n_ctx
  int threads() const;
  void reset();  // empties the cache
  /// Drops the cache rows from `pos` on (keeps a shared prompt prefix).
  void truncate(int pos);
  const model& owner() const;

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace kfuse::llm
