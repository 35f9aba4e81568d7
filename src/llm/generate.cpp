#include "kfuse/llm/generate.hpp"

#include <chrono>
#include <vector>

#include "kfuse/error.hpp"

namespace kfuse::llm {

generate_stats generate(session& s, std::span<const token_id> prompt, const generate_options& opt,
                        const std::function<bool(token_id)>& on_token) {
  using clock = std::chrono::steady_clock;
  generate_stats st;
  if (prompt.empty())
    throw kfuse::error("generate: empty prompt (nothing to condition on; add a BOS token)");
  const tokenizer& vocab = s.owner().vocab();
  std::vector<token_id> history(prompt.begin(), prompt.end());
  sampler pick(opt.sample);
  const auto t0 = clock::now();
  std::span<const float> logits = s.prefill(prompt);
  st.prompt_tokens = int(prompt.size());
  st.prefill_seconds = std::chrono::duration<double>(clock::now() - t0).count();
  const auto t1 = clock::now();
  for (int i = 0; i < opt.n_predict; ++i) {
    const token_id next = pick.sample(logits, history);
    history.push_back(next);
    ++st.generated;
    if (on_token && !on_token(next)) break;
    if (opt.stop_at_end && vocab.is_end_of_generation(next)) break;
    if (i + 1 == opt.n_predict || s.position() >= s.context()) break;
    logits = s.decode(next);
  }
  st.decode_seconds = std::chrono::duration<double>(clock::now() - t1).count();
  return st;
}

}  // namespace kfuse::llm
