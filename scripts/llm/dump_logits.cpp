// llama.cpp's logits for a token sequence, one token per llama_decode (the decode path), written
// as raw float32 [n_tokens x n_vocab] to OUT. Usage: dump_logits MODEL.gguf OUT.f32 id id id ...
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: dump_logits MODEL.gguf OUT.f32 ids...\n");
    return 2;
  }
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 512;
  cp.n_batch = 512;
  cp.n_threads = cp.n_threads_batch = 1;
  llama_context* ctx = llama_init_from_model(model, cp);
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  std::FILE* out = std::fopen(argv[2], "wb");
  for (int i = 3; i < argc; ++i) {
    llama_token t = std::atoi(argv[i]);
    if (llama_decode(ctx, llama_batch_get_one(&t, 1)) != 0) {
      std::fprintf(stderr, "decode failed at %d\n", i - 3);
      return 1;
    }
    std::fwrite(llama_get_logits_ith(ctx, -1), sizeof(float), n_vocab, out);
  }
  std::fclose(out);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
