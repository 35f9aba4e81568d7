#pragma once
// Text generation on a session: prefill the prompt, then decode and sample one token at a time,
// handing each to a callback (which may stop it), until n_predict tokens or an end-of-generation
// token.
//
//   kfuse::llm::model m = kfuse::llm::model::load("model.gguf");
//   kfuse::llm::session s(m, {.threads = 2});
//   auto ids = m.vocab().encode("The capital of France is", {.add_bos =
//   m.vocab().add_bos_default()}); auto stats = kfuse::llm::generate(s, ids, {.n_predict = 32},
//   [&](kfuse::llm::token_id t) {
//     std::fputs(m.vocab().piece(t).c_str(), stdout);
//     return true;  // false stops
//   });
#include <functional>
#include <span>

#include "kfuse/llm/sampler.hpp"
#include "kfuse/llm/session.hpp"

namespace kfuse::llm {

struct generate_options {
  int n_predict = 128;
  sampling sample{};
  bool stop_at_end = true;  // stop at an end-of-generation token (eos, eot, <|im_end|>, ...)
};

struct generate_stats {
  int prompt_tokens = 0;
  int generated = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;  // the decode steps after the first token
  double prefill_tokens_per_second() const {
    return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0;
  }
  double decode_tokens_per_second() const {
    return decode_seconds > 0 && generated > 1 ? (generated - 1) / decode_seconds : 0;
  }
};

/// Appends `prompt` to the session and generates. kfuse::error for an empty prompt, ids outside
/// the vocabulary, or a prompt longer than the context; generation stops at the context's end.
generate_stats generate(session& s, std::span<const token_id> prompt, const generate_options& opt,
                        const std::function<bool(token_id)>& on_token);

}  // namespace kfuse::llm
