#pragma once
// Tokenizers read from a GGUF vocabulary (tokenizer.ggml.*): SentencePiece-style (model "llama")
// and byte-level BPE (model "gpt2") with the llama-bpe (Llama 3), qwen2 and gpt2 pre-tokenizers.
// Encoding equals llama.cpp's (llama-tokenize --ids) on its vocabulary test files.
//
//   auto f = kfuse::llm::gguf_file::open("model.gguf");
//   kfuse::llm::tokenizer tok(f);
//   std::vector<std::int32_t> ids = tok.encode("Hello world", {.add_bos = true, .parse_special =
//   true}); std::string text = tok.decode(ids);
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kfuse/llm/gguf.hpp"

namespace kfuse::llm {

using token_id = std::int32_t;

struct encode_options {
  bool add_bos = true;         // as the vocabulary says (tokenizer.ggml.add_bos_token), if set
  bool parse_special = false;  // "<|im_start|>" in the text becomes one control token
};

class tokenizer {
 public:
  /// Reads the vocabulary of a GGUF file. Throws kfuse::error naming the key for a missing or
  /// unsupported model / pre-tokenizer.
  explicit tokenizer(const gguf_file& file);
  tokenizer(tokenizer&&) noexcept;
  tokenizer& operator=(tokenizer&&) noexcept;
  ~tokenizer();

  std::vector<token_id> encode(std::string_view text, encode_options opt = {}) const;
  /// The bytes of one token (a partial UTF-8 sequence for byte tokens); control tokens give ""
  /// unless `special`.
  std::string piece(token_id id, bool special = false) const;
  std::string decode(const std::vector<token_id>& ids, bool special = false) const;

  std::int32_t size() const;  // number of tokens
  token_id bos() const;       // -1 when the vocabulary has none
  token_id eos() const;
  bool is_end_of_generation(token_id id) const;  // eos, eot, <|im_end|>, <|eot_id|>, ...
  bool add_bos_default() const;
  const std::string& model() const;  // "llama" or "gpt2"
  const std::string& pre() const;    // "default", "llama-bpe", "qwen2", "gpt-2", ...

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace kfuse::llm
