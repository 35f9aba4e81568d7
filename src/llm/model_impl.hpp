#pragma once
// What a loaded model holds: the config, the repacked weights, the tokenizer, the kernel table.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels.hpp"
#include "kfuse/llm/gguf.hpp"
#include "kfuse/llm/model.hpp"
#include "panels.hpp"

namespace kfuse::llm {

struct layer_weights {
  std::vector<float> attn_norm, ffn_norm;
  std::vector<float> q_bias, k_bias, v_bias;  // empty without biases
  detail::panel_matrix wq, wk, wv, wo, w_gate, w_up, w_down;
};

struct model::impl {
  model_config config;
  tokenizer vocab;
  const detail::kernel_table* kernels = nullptr;
  std::string kernel_reason;
  std::vector<layer_weights> layers;
  std::vector<float> output_norm;
  detail::panel_matrix output;  // the head (token_embd's panels when tied)
  // The embedding table in its file format, read in place from the mapped file (rows are looked
  // up one token at a time: copying it would cost the load a pass over the whole table).
  std::optional<gguf_file> file;
  gguf_tensor embedding_info;
  double load_seconds = 0, repack_seconds = 0;

  impl(model_config c, tokenizer t) : config(std::move(c)), vocab(std::move(t)) {}
  /// Row `token` of the embedding as f32.
  void embed(std::int32_t token, float* out) const;
};

}  // namespace kfuse::llm
