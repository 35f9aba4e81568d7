#pragma once
// Unicode for the tokenizers: UTF-8 decoding as llama.cpp does it (invalid bytes become U+FFFD one
// at a time), general category classes, GPT-2's byte <-> unicode mapping, and the pre-tokenizer
// splits of the byte-level BPE vocabularies, hand-written for each regex (no std::regex).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kfuse::llm::unicode {

// General category classes (bits; every code point has exactly one).
inline constexpr std::uint8_t cat_undefined = 0x01;  // Cn: unassigned
inline constexpr std::uint8_t cat_number = 0x02;     // \p{N}
inline constexpr std::uint8_t cat_letter = 0x04;     // \p{L}
inline constexpr std::uint8_t cat_separator = 0x08;  // \p{Z}
inline constexpr std::uint8_t cat_mark = 0x10;       // \p{M}
inline constexpr std::uint8_t cat_punct = 0x20;      // \p{P}
inline constexpr std::uint8_t cat_symbol = 0x40;     // \p{S}
inline constexpr std::uint8_t cat_control = 0x80;    // \p{C} but Cn

inline constexpr std::uint32_t replacement = 0xFFFD;

/// The category class of a code point (cat_undefined beyond U+10FFFF).
std::uint8_t category(std::uint32_t cp);
/// Unicode's White_Space property (regex \s).
bool is_whitespace(std::uint32_t cp);

/// Length of the UTF-8 sequence a byte starts, judged from its high bits only (1 for stray
/// continuation bytes): how llama.cpp cuts text into symbols.
inline std::size_t utf8_len(char lead) {
  static constexpr std::uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return lookup[static_cast<std::uint8_t>(lead) >> 4];
}

/// Decodes the code point at `pos` and advances past it; an invalid or truncated sequence gives
/// U+FFFD and advances one byte.
std::uint32_t decode_utf8(std::string_view s, std::size_t& pos);
std::vector<std::uint32_t> to_codepoints(std::string_view s);
void append_utf8(std::string& out, std::uint32_t cp);

/// GPT-2's byte-level alphabet: every byte as a printable code point ('!'..'~', '¡'..'¬',
/// '®'..'ÿ' as themselves, the other 68 bytes as U+0100..U+0143).
std::uint32_t byte_to_codepoint(std::uint8_t b);
/// The inverse; -1 for a code point that is no byte's.
int codepoint_to_byte(std::uint32_t cp);

/// The pre-tokenizers (tokenizer.ggml.pre) of the byte-level BPE vocabularies kfuse supports.
enum class pre_split {
  gpt2,         // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  llama3,       // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
                // ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  qwen2,        // as llama3 with \p{N} (single digits)
  bpe_default,  // [\p{P}\$\+<=>\^~\|]+ then the gpt2 regex, then \p{N}+, then [0-9][0-9][0-9]
};

/// Splits `cps` into pre-tokens as llama.cpp's unicode_regex_split does for that pre-tokenizer:
/// the result is the length (in code points) of each consecutive piece.
std::vector<std::size_t> split(const std::vector<std::uint32_t>& cps, pre_split kind);

}  // namespace kfuse::llm::unicode
