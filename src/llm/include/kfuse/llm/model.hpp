#pragma once
// A decoder LLM loaded from a GGUF file: llama (Llama 2/3, TinyLlama, SmolLM) and qwen2
// architectures, F32 / F16 / BF16 / Q8_0 / Q6_K / Q5_0 / Q4_0 / Q4_1 / Q4_K weights (the Q4_K_M
// mix). Weights are repacked once at load into
// the kernels' 16-row panels (dequantization stays fused into the dot products); the file stays
// mapped for the token embedding, whose rows are read in place. One model serves any number of
// sessions (kfuse/llm/session.hpp).
//
//   kfuse::llm::model m = kfuse::llm::model::load("qwen2.5-0.5b-q8_0.gguf");
//   std::printf("%s, %d layers, load %.2f s\n", m.config().arch.c_str(), m.config().n_layer,
//               m.load_seconds());
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kfuse/llm/tokenizer.hpp"

namespace kfuse::llm {

/// How a RoPE pair is formed: llama.cpp's "norm" (adjacent elements: llama, whose GGUF
/// converter permutes Q and K) or "neox" (element i with i + head_dim / 2: qwen2).
enum class rope_style { norm, neox };

struct model_config {
  std::string arch;  // "llama" or "qwen2"
  std::string name;  // general.name, if any
  int n_vocab = 0;
  int n_embd = 0;
  int n_layer = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int n_ff = 0;
  int n_ctx_train = 0;
  float rope_base = 10000.f;
  rope_style rope = rope_style::norm;
  float rms_eps = 1e-5f;
  bool tied_output = false;  // the head reuses token_embd
  bool qkv_bias = false;     // qwen2
  std::string weight_type;   // the most common type of the layer weights, "q8_0", ...
};

struct load_options {
  /// Refuse files larger than this (bytes); 0: no limit.
  std::uint64_t max_file_bytes = 0;
  /// The panels in 2 MiB transparent huge pages: decoding reads them 5-14% faster. On virtual
  /// machines that hand freed memory back to the host, the first touch of fresh huge pages can
  /// stall a load for seconds (the host faults them in); false keeps 4 KiB pages.
  bool huge_pages = true;
};

class model {
 public:
  /// Reads and repacks a GGUF file. Throws kfuse::error naming the key or tensor for an
  /// unsupported architecture or type, a missing tensor, a wrong shape, a truncated file.
  static model load(const std::string& path, const load_options& opt = {});

  model(model&&) noexcept;
  model& operator=(model&&) noexcept;
  ~model();

  const model_config& config() const;
  const tokenizer& vocab() const;
  double load_seconds() const;    // mapping, parsing and repacking
  double repack_seconds() const;  // of which repacking
  /// Bytes of weights one decoded token reads (every layer matrix, the head, one embedding row).
  std::uint64_t bytes_per_token() const;
  /// The kernel tier in use ("avx512_vnni", "avx2", "scalar") and why.
  std::string kernel_tier() const;

  struct impl;
  const impl& internals() const { return *impl_; }

 private:
  model() = default;
  std::unique_ptr<impl> impl_;
};

}  // namespace kfuse::llm
