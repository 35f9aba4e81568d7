// kfuse::llm from C++: load a GGUF model once, tokenize, and generate in two sessions that share
// the weights (each session has its own KV cache and position), streaming tokens to a callback.
//
//   ex05_llm MODEL.gguf ["prompt"] [n_predict]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "kfuse/error.hpp"
#include "kfuse/llm/generate.hpp"
#include "kfuse/llm/model.hpp"
#include "kfuse/llm/session.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.gguf [\"prompt\"] [n_predict]\n", argv[0]);
    return 2;
  }
  const std::string prompt = argc > 2 ? argv[2] : "Once upon a time";
  const int n_predict = argc > 3 ? std::atoi(argv[3]) : 32;
  try {
    const kfuse::llm::model m = kfuse::llm::model::load(argv[1]);
    const auto& c = m.config();
    std::printf("%s: %d layers, %d heads (%d kv), vocab %d, load %.2f s, kernels %s\n",
                c.arch.c_str(), c.n_layer, c.n_head, c.n_head_kv, c.n_vocab, m.load_seconds(),
                m.kernel_tier().c_str());

    const auto ids =
        m.vocab().encode(prompt, {.add_bos = m.vocab().add_bos_default(), .parse_special = true});
    std::printf("prompt: %zu tokens\n", ids.size());

    // Two conversations at once on one model: greedy and sampled, each on its own thread.
    std::string text[2];
    kfuse::llm::generate_stats stats[2];
    auto run = [&](int i) {
      kfuse::llm::session s(m, {.n_ctx = 256, .threads = 1});
      kfuse::llm::generate_options opt;
      opt.n_predict = n_predict;
      opt.sample = {.temperature = i == 0 ? 0.f : 0.8f, .seed = 1};
      stats[i] = kfuse::llm::generate(s, ids, opt, [&](kfuse::llm::token_id t) {
        text[i] += m.vocab().piece(t);
        return true;  // false would stop the generation here
      });
    };
    std::thread other(run, 1);
    run(0);
    other.join();
    for (int i = 0; i < 2; ++i)
      std::printf("session %d (%s): %d tokens, %.1f tokens/s: %s\n", i,
                  i == 0 ? "greedy" : "sampled", stats[i].generated,
                  stats[i].decode_tokens_per_second(), (prompt + text[i]).c_str());
    std::printf("result: ok\n");
    return 0;
  } catch (const kfuse::error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
