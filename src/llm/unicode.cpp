// The splits mirror llama.cpp's unicode_regex_split (its custom gpt2 / llama3 / qwen2 splitters
// and, for the "default" pre-tokenizer, what its std::regex fallback matches on the category-
// collapsed text), quirks included: the goal is the same pieces, not a better regex engine.
#include "unicode.hpp"

#include <algorithm>
#include <array>

namespace kfuse::llm::unicode {

namespace {

struct category_range {
  std::uint32_t first;
  std::uint8_t cat;
};

#include "unicode_tables.inc"

constexpr std::uint32_t max_codepoint = 0x10FFFF;

// Per code point of the text: its category bits, plus this bit for white space. Positions
// outside the piece being split read as 0 ("no character"), which every class test rejects.
constexpr std::uint16_t prop_space = 0x100;

using lengths = std::vector<std::size_t>;

// Builds the pieces of one span [ini, end) while a splitter walks it.
struct piece_writer {
  lengths& out;
  std::size_t prev;
  void emit(std::size_t to) {
    if (to > prev) out.push_back(to - prev);
    prev = to;
  }
};

struct text_props {
  const std::vector<std::uint32_t>& cps;
  std::vector<std::uint16_t> props;
  explicit text_props(const std::vector<std::uint32_t>& c) : cps(c), props(c.size()) {
    for (std::size_t i = 0; i < c.size(); ++i) {
      props[i] = std::uint16_t(category(c[i]) | (is_whitespace(c[i]) ? prop_space : 0));
    }
  }
};

constexpr bool is_rn(std::uint32_t c) { return c == '\r' || c == '\n'; }

// 's|'t|'re|'ve|'m|'ll|'d at pos (case-insensitive when `fold`): its length or 0. Only ASCII
// letters lowercase to these, so ASCII folding is what llama.cpp's unicode_tolower does here.
std::size_t contraction(const std::vector<std::uint32_t>& cps, std::size_t pos, std::size_t end,
                        bool fold) {
  if (cps[pos] != '\'' || pos + 1 >= end) return 0;
  auto low = [&](std::uint32_t c) -> std::uint32_t {
    return fold && c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
  };
  const std::uint32_t a = low(cps[pos + 1]);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (pos + 2 >= end) return 0;
  const std::uint32_t b = low(cps[pos + 2]);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void split_gpt2(const text_props& t, std::size_t ini, std::size_t end, lengths& out) {
  const auto& cps = t.cps;
  auto pr = [&](std::size_t p) -> std::uint16_t { return p < end ? t.props[p] : 0; };
  constexpr std::uint16_t word_class = cat_letter | cat_number | prop_space;
  piece_writer w{out, ini};
  std::size_t pos = ini;
  while (pos < end) {
    const std::uint32_t c = cps[pos];
    if (const std::size_t n = contraction(cps, pos, end, false)) {
      pos += n;
      w.emit(pos);
      continue;
    }
    // The optional leading space belongs to the run of the class of the character after it.
    const std::uint16_t f2 = c == ' ' ? pr(pos + 1) : pr(pos);
    if (f2 & (cat_letter | cat_number)) {
      const std::uint16_t cls = f2 & cat_letter ? cat_letter : cat_number;
      pos += c == ' ';
      while (pr(pos) & cls) ++pos;
      w.emit(pos);
      continue;
    }
    if (!(f2 & word_class) && f2 != 0) {
      pos += c == ' ';
      while (!(pr(pos) & word_class) && pr(pos) != 0) ++pos;
      w.emit(pos);
      continue;
    }
    std::size_t n_space = 0;
    while (pr(pos + n_space) & prop_space) ++n_space;
    if (n_space > 1 && pos + n_space < end) {
      pos += n_space - 1;  // \s+(?!\S): the last space goes with what follows
    } else if (n_space > 0) {
      pos += n_space;
    } else {
      ++pos;
    }
    w.emit(pos);
  }
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
void split_llama3(const text_props& t, std::size_t ini, std::size_t end, std::size_t max_digits,
                  lengths& out) {
  const auto& cps = t.cps;
  auto pr = [&](std::size_t p) -> std::uint16_t { return p < end ? t.props[p] : 0; };
  constexpr std::uint16_t word_class = cat_letter | cat_number | prop_space;
  piece_writer w{out, ini};
  std::size_t pos = ini;
  while (pos < end) {
    const std::uint32_t c = cps[pos];
    const std::uint16_t f = t.props[pos];
    if (const std::size_t n = contraction(cps, pos, end, true)) {
      pos += n;
      w.emit(pos);
      continue;
    }
    if (!is_rn(c) && !(f & cat_number) && ((f & cat_letter) || (pr(pos + 1) & cat_letter))) {
      ++pos;  // a letter, or the one non-letter allowed before the letters
      while (pr(pos) & cat_letter) ++pos;
      w.emit(pos);
      continue;
    }
    if (f & cat_number) {
      std::size_t group = pos;
      while (pr(pos) & cat_number) {
        if (++pos - group >= max_digits) {
          w.emit(pos);
          group = pos;
        }
      }
      w.emit(pos);
      continue;
    }
    const std::uint16_t f2 = c == ' ' ? pr(pos + 1) : f;
    if (!(f2 & word_class)) {  // f is never 0 inside the span
      pos += c == ' ';
      while (!(pr(pos) & word_class) && pr(pos) != 0) ++pos;
      while (pos < end && is_rn(cps[pos])) ++pos;
      w.emit(pos);
      continue;
    }
    std::size_t n_space = 0;
    std::size_t after_last_rn = 0;
    while (pr(pos + n_space) & prop_space) {
      if (is_rn(cps[pos + n_space])) after_last_rn = pos + n_space + 1;
      ++n_space;
    }
    if (after_last_rn > 0) {
      pos = after_last_rn;  // \s*[\r\n]+
    } else if (n_space > 1 && pos + n_space < end) {
      pos += n_space - 1;
    } else if (n_space > 0) {
      pos += n_space;
    } else {
      ++pos;
    }
    w.emit(pos);
  }
}

// Splits [ini, end) into maximal runs of code points in a class and the gaps between them (the
// pieces a regex "[class]+" gives, matches and the text between them alike).
template <class InClass>
void split_runs(std::size_t ini, std::size_t end, InClass in_class, lengths& out) {
  piece_writer w{out, ini};
  std::size_t pos = ini;
  while (pos < end) {
    const bool in = in_class(pos);
    while (pos < end && in_class(pos) == in) ++pos;
    w.emit(pos);
  }
}

// [0-9][0-9][0-9]: each non-overlapping triple of ASCII digits, left to right, and the gaps.
void split_digit_triples(const text_props& t, std::size_t ini, std::size_t end, lengths& out) {
  auto digit = [&](std::size_t p) { return t.cps[p] >= '0' && t.cps[p] <= '9'; };
  piece_writer w{out, ini};
  std::size_t pos = ini;
  while (pos + 3 <= end) {
    if (digit(pos) && digit(pos + 1) && digit(pos + 2)) {
      w.emit(pos);
      pos += 3;
      w.emit(pos);
    } else {
      ++pos;
    }
  }
  w.emit(end);
}

// What llama.cpp's std::regex sees of a code point for "default": ASCII as itself, other code
// points collapsed to their class (white space to \v, then one byte per category).
bool default_punct(const text_props& t, std::size_t p) {
  const std::uint32_t c = t.cps[p];
  if (c < 128) {
    // [\p{P}\$\+<=>\^~\|] on ASCII: every punctuation or symbol character but '`'.
    return c > ' ' && c < 127 && c != '`' && !(c >= '0' && c <= '9') &&
           !((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
  }
  return !(t.props[p] & prop_space) && (t.props[p] & cat_punct);
}
bool default_number(const text_props& t, std::size_t p) {
  const std::uint32_t c = t.cps[p];
  if (c < 128) return c >= '0' && c <= '9';
  return !(t.props[p] & prop_space) && (t.props[p] & cat_number);
}

template <class Splitter>
lengths refine(const lengths& pieces, Splitter split_one) {
  lengths out;
  out.reserve(pieces.size() * 2);
  std::size_t start = 0;
  for (std::size_t n : pieces) {
    split_one(start, start + n, out);
    start += n;
  }
  return out;
}

}  // namespace

std::uint8_t category(std::uint32_t cp) {
  if (cp > max_codepoint) return cat_undefined;
  const auto* end = k_category_ranges + std::size(k_category_ranges);
  const auto* it =
      std::upper_bound(k_category_ranges, end, cp,
                       [](std::uint32_t v, const category_range& r) { return v < r.first; });
  return (it - 1)->cat;
}

bool is_whitespace(std::uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  switch (cp) {
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

std::uint32_t decode_utf8(std::string_view s, std::size_t& pos) {
  auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(s[i]); };
  auto cont = [&](std::size_t i) { return i < s.size() && (byte(i) & 0xC0) == 0x80; };
  const std::uint8_t b0 = byte(pos);
  std::uint32_t cp = replacement;
  std::size_t n = 1;
  if (!(b0 & 0x80)) {
    cp = b0;
  } else if (!(b0 & 0x40)) {
    // a stray continuation byte
  } else if (!(b0 & 0x20)) {
    if (cont(pos + 1)) cp = ((b0 & 0x1Fu) << 6) | (byte(pos + 1) & 0x3Fu), n = 2;
  } else if (!(b0 & 0x10)) {
    if (cont(pos + 1) && cont(pos + 2)) {
      cp = ((b0 & 0x0Fu) << 12) | ((byte(pos + 1) & 0x3Fu) << 6) | (byte(pos + 2) & 0x3Fu), n = 3;
    }
  } else if (!(b0 & 0x08)) {
    if (cont(pos + 1) && cont(pos + 2) && cont(pos + 3)) {
      const std::uint32_t v = ((b0 & 0x07u) << 18) | ((byte(pos + 1) & 0x3Fu) << 12) |
                              ((byte(pos + 2) & 0x3Fu) << 6) | (byte(pos + 3) & 0x3Fu);
      if (v <= max_codepoint) cp = v, n = 4;
    }
  }
  pos += n;
  return cp;
}

std::vector<std::uint32_t> to_codepoints(std::string_view s) {
  std::vector<std::uint32_t> out;
  out.reserve(s.size());
  for (std::size_t pos = 0; pos < s.size();) out.push_back(decode_utf8(s, pos));
  return out;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp > max_codepoint) cp = replacement;
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else if (cp < 0x800) {
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(char(0xE0 | (cp >> 12)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (cp >> 18)));
    out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
}

namespace {
constexpr bool printable_byte(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}
struct byte_maps {
  std::array<std::uint32_t, 256> to_cp{};
  std::array<std::int16_t, 68> from_extra{};  // U+0100 + i -> byte
  constexpr byte_maps() {
    unsigned extra = 0;
    for (unsigned b = 0; b < 256; ++b) {
      if (printable_byte(b)) {
        to_cp[b] = b;
      } else {
        from_extra[extra] = std::int16_t(b);
        to_cp[b] = 0x100 + extra++;
      }
    }
  }
};
constexpr byte_maps k_byte_maps;
}  // namespace

std::uint32_t byte_to_codepoint(std::uint8_t b) { return k_byte_maps.to_cp[b]; }

int codepoint_to_byte(std::uint32_t cp) {
  if (cp < 0x100) return printable_byte(cp) ? int(cp) : -1;
  if (cp < 0x100 + k_byte_maps.from_extra.size()) return k_byte_maps.from_extra[cp - 0x100];
  return -1;
}

std::vector<std::size_t> split(const std::vector<std::uint32_t>& cps, pre_split kind) {
  if (cps.empty()) return {};
  const text_props t(cps);
  const lengths whole{cps.size()};
  auto gpt2 = [&](std::size_t a, std::size_t b, lengths& out) { split_gpt2(t, a, b, out); };
  switch (kind) {
    case pre_split::gpt2:
      return refine(whole, gpt2);
    case pre_split::llama3:
      return refine(whole, [&](std::size_t a, std::size_t b, lengths& out) {
        split_llama3(t, a, b, 3, out);
      });
    case pre_split::qwen2:
      return refine(whole, [&](std::size_t a, std::size_t b, lengths& out) {
        split_llama3(t, a, b, 1, out);
      });
    case pre_split::bpe_default: {
      auto punct = refine(whole, [&](std::size_t a, std::size_t b, lengths& out) {
        split_runs(
            a, b, [&](std::size_t p) { return default_punct(t, p); }, out);
      });
      auto words = refine(punct, gpt2);
      auto numbers = refine(words, [&](std::size_t a, std::size_t b, lengths& out) {
        split_runs(
            a, b, [&](std::size_t p) { return default_number(t, p); }, out);
      });
      return refine(numbers, [&](std::size_t a, std::size_t b, lengths& out) {
        split_digit_triples(t, a, b, out);
      });
    }
  }
  return whole;
}

}  // namespace kfuse::llm::unicode
