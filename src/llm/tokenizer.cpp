// The vocabulary is read and its special tokens derived as llama.cpp's llama_vocab::load does
// (defaults, auto-detected end-of-turn tokens, attribute fix-ups), since those decide which
// strings become control tokens; the encoders then follow llm_tokenizer_spm / llm_tokenizer_bpe
// step for step, including their tie-breaks, so the ids are the same.
#include "kfuse/llm/tokenizer.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>

#include "kfuse/error.hpp"
#include "unicode.hpp"

namespace kfuse::llm {

namespace {

// llama.cpp's token attributes (llama_token_attr) that matter here.
enum : std::uint32_t {
  attr_unknown = 1u << 0,
  attr_unused = 1u << 1,
  attr_normal = 1u << 2,
  attr_control = 1u << 3,
  attr_user_defined = 1u << 4,
  attr_byte = 1u << 5,
  attr_lstrip = 1u << 7,
  attr_rstrip = 1u << 8,
};

// tokenizer.ggml.token_type values.
std::uint32_t attr_of_type(std::int64_t type) {
  switch (type) {
    case 1:
      return attr_normal;
    case 2:
      return attr_unknown;
    case 3:
      return attr_control;
    case 4:
      return attr_user_defined;
    case 5:
      return attr_unused;
    case 6:
      return attr_byte;
    default:
      return 0;  // undefined
  }
}

[[noreturn]] void fail(const std::string& what) { throw kfuse::error("tokenizer: " + what); }

enum class vocab_kind { spm, bpe };

struct pre_info {
  const char* name;
  unicode::pre_split split;
  bool llama3;  // add_bos and ignore_merges, as llama.cpp sets for LLAMA_VOCAB_PRE_TYPE_LLAMA3
};
// The tokenizer.ggml.pre names kfuse accepts for model "gpt2": llama.cpp treats each group alike.
constexpr pre_info k_pre[] = {
    {"default", unicode::pre_split::bpe_default, false},
    {"llama-bpe", unicode::pre_split::llama3, true},
    {"llama3", unicode::pre_split::llama3, true},
    {"llama-v3", unicode::pre_split::llama3, true},
    {"qwen2", unicode::pre_split::qwen2, false},
    {"deepseek-r1-qwen", unicode::pre_split::qwen2, false},
    {"gpt-2", unicode::pre_split::gpt2, false},
    {"phi-2", unicode::pre_split::gpt2, false},
};

constexpr token_id no_token = -1;

// The token texts llama.cpp takes as ending generation whatever the metadata says.
// clang-format off
constexpr std::string_view k_end_of_generation_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<｜end▁of▁sentence｜>", "[e~["};
// clang-format on

bool is_ascii_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

// "<0xAB>" -> 0xAB, or -1.
int parse_byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// A piece of the input during special-token partitioning: raw text [off, off + len) or a token.
struct fragment {
  token_id token;
  std::size_t off;
  std::size_t len;
};

// Token text -> id: open addressing over (hash, id) slots, the text compared on a hash match
// only. Several times faster to build and probe than std::unordered_map for 150k tokens.
class text_index {
 public:
  /// Indexes `texts` (kept by reference); returns the first id whose text repeats an earlier one,
  /// or no_token.
  token_id build(const std::vector<std::string>& texts) {
    texts_ = &texts;
    std::size_t cap = 16;
    while (cap < texts.size() * 2) cap *= 2;
    slots_.assign(cap, {0, no_token});
    mask_ = cap - 1;
    for (std::size_t id = 0; id < texts.size(); ++id) {
      const std::size_t h = std::hash<std::string_view>{}(texts[id]);
      std::size_t i = h & mask_;
      for (; slots_[i].id != no_token; i = (i + 1) & mask_) {
        if (slots_[i].hash == std::uint32_t(h) && texts[slots_[i].id] == texts[id])
          return token_id(id);
      }
      slots_[i] = {std::uint32_t(h), token_id(id)};
    }
    return no_token;
  }
  token_id find(std::string_view s) const {
    const std::size_t h = std::hash<std::string_view>{}(s);
    for (std::size_t i = h & mask_; slots_[i].id != no_token; i = (i + 1) & mask_) {
      if (slots_[i].hash == std::uint32_t(h) && (*texts_)[slots_[i].id] == s) return slots_[i].id;
    }
    return no_token;
  }

 private:
  struct slot {
    std::uint32_t hash;
    token_id id;
  };
  std::vector<slot> slots_{{0, no_token}};
  std::size_t mask_ = 0;
  const std::vector<std::string>* texts_ = nullptr;
};

// BPE merge of a pair of token ids -> its rank and result, open addressing on the packed pair.
class merge_table {
 public:
  struct merge {
    std::int32_t rank;
    token_id result;  // the id of the concatenation, or no_token
  };
  static std::uint64_t key(token_id a, token_id b) {
    return (std::uint64_t(std::uint32_t(a)) << 32) | std::uint32_t(b);
  }
  void reserve(std::size_t n) {
    std::size_t cap = 16;
    while (cap < n * 2) cap *= 2;
    slots_.assign(cap, {empty, {0, no_token}});
    mask_ = cap - 1;
  }
  /// Keeps the first merge of a pair, as llama.cpp's map emplace does.
  void insert(std::uint64_t k, merge m) {
    std::size_t i = slot_of(k);
    for (; slots_[i].key != empty; i = (i + 1) & mask_) {
      if (slots_[i].key == k) return;
    }
    slots_[i] = {k, m};
  }
  const merge* find(std::uint64_t k) const {
    for (std::size_t i = slot_of(k); slots_[i].key != empty; i = (i + 1) & mask_) {
      if (slots_[i].key == k) return &slots_[i].value;
    }
    return nullptr;
  }

 private:
  static constexpr std::uint64_t empty = ~std::uint64_t(0);  // ids are below 2^31
  std::size_t slot_of(std::uint64_t k) const {
    return std::size_t((k * 0x9E3779B97F4A7C15ull) >> 17) & mask_;
  }
  struct slot {
    std::uint64_t key;
    merge value;
  };
  std::vector<slot> slots_{{empty, {0, no_token}}};
  std::size_t mask_ = 0;
};

}  // namespace

struct tokenizer::impl {
  vocab_kind kind = vocab_kind::spm;
  std::string model;
  std::string pre;
  unicode::pre_split split = unicode::pre_split::gpt2;
  bool ignore_merges = false;
  bool add_space_prefix = false;
  bool add_bos = false;
  bool add_eos = false;

  std::vector<std::string> text;  // id -> token text
  std::vector<float> score;
  std::vector<std::uint32_t> attr;
  text_index index;

  // BPE merges, rank by pair: by token ids (every merge of a sane vocabulary), and by text for
  // merges whose halves are not tokens themselves.
  using merge = merge_table::merge;
  merge_table merges_by_id;
  std::unordered_map<std::string, merge> merges_by_text;
  std::array<token_id, 256> byte_token{};  // BPE: the byte's alphabet character; SPM: <0xXX>

  token_id bos_id = no_token, eos_id = no_token, eot_id = no_token, eom_id = no_token;
  token_id fim_pre = no_token, fim_suf = no_token, fim_mid = no_token;
  token_id fim_pad = no_token, fim_rep = no_token, fim_sep = no_token;
  std::vector<token_id> eog;             // sorted
  std::vector<token_id> special_tokens;  // control / user-defined / unknown, longest first

  token_id find(std::string_view s) const { return index.find(s); }

  void load(const gguf_file& f);
  void load_merges(const gguf_file& f);
  void load_special_ids(const gguf_file& f);
  void detect_special_tokens();
  void build_caches(const gguf_file& f);
  std::string make_piece(token_id id) const;

  std::vector<fragment> partition(std::string_view s, bool parse_special) const;
  void encode_spm(std::string_view s, std::vector<token_id>& out) const;
  void encode_bpe(std::string_view s, std::vector<token_id>& out) const;
  void encode_bpe_word(const std::string& word, std::vector<token_id>& out) const;
};

void tokenizer::impl::load(const gguf_file& f) {
  model = f.get_string("tokenizer.ggml.model");
  pre = f.get_string_or("tokenizer.ggml.pre", "");
  if (model == "llama") {
    kind = vocab_kind::spm;
    bos_id = 1, eos_id = 2;
    add_space_prefix = true;
    add_bos = true;
    if (pre.empty()) pre = "default";  // SentencePiece has no pre-tokenizer: the key is ignored
  } else if (model == "gpt2") {
    kind = vocab_kind::bpe;
    bos_id = 11, eos_id = 11;  // llama.cpp's defaults for BPE when the keys are missing
    if (pre.empty()) pre = "default";
    const pre_info* info = nullptr;
    for (const auto& p : k_pre) {
      if (pre == p.name) info = &p;
    }
    if (!info) {
      std::string names;
      for (const auto& p : k_pre) names += std::string(names.empty() ? "" : ", ") + p.name;
      fail("key 'tokenizer.ggml.pre' = '" + pre + "' is not supported (supported: " + names + ")");
    }
    split = info->split;
    ignore_merges = info->llama3;
    add_bos = info->llama3;
  } else {
    fail("key 'tokenizer.ggml.model' = '" + model + "' is not supported (supported: llama, gpt2)");
  }
  if (f.has("tokenizer.ggml.add_space_prefix")) {
    add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix");
  }

  const auto& tokens = f.get_strings("tokenizer.ggml.tokens");
  const std::size_t n = tokens.size();
  if (n == 0) fail("key 'tokenizer.ggml.tokens' is empty");
  if (n > std::size_t(std::numeric_limits<token_id>::max()))
    fail("key 'tokenizer.ggml.tokens' is too long");
  score.assign(n, 0.0f);
  if (const gguf_value* v = f.find("tokenizer.ggml.scores")) {
    if (v->type != value_type::array || (v->floats.size() < n && v->ints.size() < n)) {
      fail("key 'tokenizer.ggml.scores' must be an array of " + std::to_string(n) + " numbers");
    }
    for (std::size_t i = 0; i < n; ++i) {
      score[i] = v->floats.size() >= n ? float(v->floats[i]) : float(v->ints[i]);
    }
  }
  attr.assign(n, attr_normal);
  if (f.has("tokenizer.ggml.token_type")) {
    const auto& types = f.get_ints("tokenizer.ggml.token_type");
    if (types.size() < n) {
      fail("key 'tokenizer.ggml.token_type' has " + std::to_string(types.size()) + " entries for " +
           std::to_string(n) + " tokens");
    }
    for (std::size_t i = 0; i < n; ++i) attr[i] = attr_of_type(types[i]);
  }
  text.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    text[i] = tokens[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : tokens[i];
  }
  if (const token_id dup = index.build(text); dup != no_token) {
    fail("key 'tokenizer.ggml.tokens': token " + std::to_string(dup) + " '" + text[dup] +
         "' appears twice");
  }

  byte_token.fill(no_token);
  for (int b = 0; b < 256; ++b) {
    if (kind == vocab_kind::bpe) {
      std::string s;
      unicode::append_utf8(s, unicode::byte_to_codepoint(std::uint8_t(b)));
      byte_token[b] = find(s);
    } else {
      static constexpr char hex[] = "0123456789ABCDEF";
      const char name[6] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>'};
      byte_token[b] = find(std::string_view(name, 6));
      if (byte_token[b] == no_token && b != 0) {
        const char c = char(b);
        byte_token[b] = find(std::string_view(&c, 1));
      }
    }
  }

  if (kind == vocab_kind::bpe) load_merges(f);
  load_special_ids(f);
  if (f.has("tokenizer.ggml.add_bos_token")) add_bos = f.get_bool("tokenizer.ggml.add_bos_token");
  if (f.has("tokenizer.ggml.add_eos_token")) add_eos = f.get_bool("tokenizer.ggml.add_eos_token");
  detect_special_tokens();
  build_caches(f);
}

void tokenizer::impl::load_merges(const gguf_file& f) {
  if (!f.has("tokenizer.ggml.merges"))
    fail("missing key 'tokenizer.ggml.merges' (needed by model 'gpt2')");
  const auto& merges = f.get_strings("tokenizer.ggml.merges");
  merges_by_id.reserve(merges.size());
  std::string joined;
  for (std::size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    const std::size_t space = m.find(' ', 1);
    if (space == std::string::npos) continue;  // matches no pair of non-empty symbols
    const std::string_view first(m.data(), space);
    const std::string_view second(m.data() + space + 1, m.size() - space - 1);
    joined.assign(first).append(second);
    const merge value{std::int32_t(i), find(joined)};
    const token_id a = find(first), b = find(second);
    if (a != no_token && b != no_token) {
      merges_by_id.insert(merge_table::key(a, b), value);
    } else {
      merges_by_text.try_emplace(
          std::to_string(first.size()) + ':' + std::string(first) + std::string(second), value);
    }
  }
}

void tokenizer::impl::load_special_ids(const gguf_file& f) {
  const std::pair<const char*, token_id*> keys[] = {
      {"tokenizer.ggml.bos_token_id", &bos_id},
      {"tokenizer.ggml.eos_token_id", &eos_id},
      {"tokenizer.ggml.eot_token_id", &eot_id},
      {"tokenizer.ggml.eom_token_id", &eom_id},
      {"tokenizer.ggml.fim_pre_token_id", &fim_pre},
      {"tokenizer.ggml.fim_suf_token_id", &fim_suf},
      {"tokenizer.ggml.fim_mid_token_id", &fim_mid},
      {"tokenizer.ggml.fim_pad_token_id", &fim_pad},
      {"tokenizer.ggml.fim_rep_token_id", &fim_rep},
      {"tokenizer.ggml.fim_sep_token_id", &fim_sep},
      // older names of the first three FIM tokens
      {"tokenizer.ggml.prefix_token_id", &fim_pre},
      {"tokenizer.ggml.suffix_token_id", &fim_suf},
      {"tokenizer.ggml.middle_token_id", &fim_mid},
  };
  const auto n = token_id(text.size());
  for (const auto& [key, id] : keys) {
    if (*id >= n) *id = no_token;  // a default beyond this vocabulary
    if (!f.has(key)) continue;
    const std::uint32_t v = f.get_u32(key);
    if (v < std::uint32_t(n)) *id = token_id(v);  // llama.cpp keeps the default for a bad id
  }
}

// Which tokens end generation and which tokens count as control: llama.cpp decides both from the
// token texts as well as the metadata (many converted models mark "<|im_end|>" & co. as normal).
void tokenizer::impl::detect_special_tokens() {
  auto force_control = [&](token_id id) { attr[id] |= attr_control; };
  // FIM roles the metadata leaves open are filled from the token texts. llama.cpp also guesses
  // the EOT / EOM tokens so, but each text it looks for is an end-of-generation text below: that
  // guess changes nothing here.
  struct detector {
    token_id* id;
    std::initializer_list<std::string_view> names;
  };
  const detector detectors[] = {
      {&fim_pre,
       {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
        "<|code_prefix|>", "<|prefix|>"}},
      {&fim_suf,
       {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
        "<|code_suffix|>", "<|suffix|>"}},
      {&fim_mid,
       {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
        "<|code_middle|>", "<|middle|>"}},
      {&fim_pad, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"}},
      {&fim_rep, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"}},
      {&fim_sep, {"<|file_sep|>"}},
  };
  // llama.cpp takes the first match in the iteration order of its unordered_map<string, id>,
  // filled in id order. That order matters only when a role has two candidates; then the same map
  // is built (the same libstdc++ hash and growth give the same order) to find the first.
  std::unique_ptr<std::unordered_map<std::string_view, token_id>> in_map_order;
  for (const auto& d : detectors) {
    if (*d.id != no_token) continue;
    std::vector<token_id> found;
    for (std::string_view name : d.names) {
      if (const token_id id = find(name); id != no_token) found.push_back(id);
    }
    if (found.empty()) continue;
    token_id pick = found[0];
    if (found.size() > 1) {
      if (!in_map_order) {
        in_map_order = std::make_unique<std::unordered_map<std::string_view, token_id>>();
        for (std::size_t i = 0; i < text.size(); ++i) (*in_map_order)[text[i]] = token_id(i);
      }
      for (const auto& entry : *in_map_order) {
        if (std::find(found.begin(), found.end(), entry.second) != found.end()) {
          pick = entry.second;
          break;
        }
      }
    }
    *d.id = pick;
    force_control(pick);
  }

  std::vector<token_id> ends;
  for (token_id id : {fim_pad, fim_rep, fim_sep}) {
    if (id != no_token) ends.push_back(id);
  }
  for (std::string_view s : k_end_of_generation_texts) {
    if (const token_id id = find(s); id != no_token) {
      ends.push_back(id);
      force_control(id);
    }
  }
  // gpt-oss: these are shown in the output, not treated as control
  for (std::string_view s : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    if (const token_id id = find(s); id != no_token) attr[id] = attr_user_defined;
  }
  for (token_id id : {eos_id, eot_id, eom_id}) {
    if (id != no_token) ends.push_back(id);
  }
  std::sort(ends.begin(), ends.end());
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());
  auto has_end = [&](std::string_view s) {
    return std::any_of(ends.begin(), ends.end(), [&](token_id id) { return text[id] == s; });
  };
  auto drop_end = [&](std::string_view s, std::uint32_t new_attr) {
    const auto it =
        std::find_if(ends.begin(), ends.end(), [&](token_id id) { return text[id] == s; });
    if (it == ends.end()) return;
    attr[*it] = new_attr;
    ends.erase(it);
  };
  // o200k_harmony and solar-open end a turn with <|return|> / <|call|> / <|flush|>, not <|end|>
  const bool call = has_end("<|call|>") || has_end("<|calls|>");
  if (has_end("<|end|>") && call && (has_end("<|return|>") || has_end("<|flush|>"))) {
    drop_end("<|end|>", attr_user_defined);
  }
  // gemma 4: </s> is an ordinary token there
  if (has_end("<|tool_response>") && has_end("</s>")) drop_end("</s>", attr_normal);
  eog = std::move(ends);
}

void tokenizer::impl::build_caches(const gguf_file& f) {
  const auto n = token_id(text.size());
  for (token_id id = 0; id < n; ++id) {
    if (attr[id] & (attr_control | attr_user_defined | attr_unknown)) special_tokens.push_back(id);
  }
  // std::sort, not stable_sort: among tokens of equal length the order is then libstdc++'s, the
  // one llama.cpp's partitioning sees.
  std::sort(special_tokens.begin(), special_tokens.end(),
            [&](token_id a, token_id b) { return text[a].size() > text[b].size(); });

  // Phi-3's special tokens swallow the white space after them (llama.cpp keys this on the name).
  std::string name = f.get_string_or("general.name", "");
  for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
    for (token_id id : special_tokens) attr[id] |= attr_rstrip;
    if (const token_id id = find("</s>"); id != no_token) attr[id] |= attr_rstrip;
    for (std::string_view s : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (const token_id id = find(s); id != no_token) attr[id] &= ~std::uint32_t(attr_rstrip);
    }
  }
}

std::string tokenizer::impl::make_piece(token_id id) const {
  const std::string& t = text[id];
  const std::uint32_t a = attr[id];
  if (a & (attr_unknown | attr_control | attr_user_defined)) return t;
  if (a & attr_normal) {
    std::string out;
    if (kind == vocab_kind::spm) {
      for (std::size_t i = 0; i < t.size(); ++i) {
        if (t.compare(i, 3, "\xE2\x96\x81") == 0) {  // U+2581 "▁" stands for a space
          out += ' ';
          i += 2;
        } else {
          out += t[i];
        }
      }
      return out;
    }
    for (std::size_t pos = 0; pos < t.size();) {
      const std::size_t at = pos;
      const int b = unicode::codepoint_to_byte(unicode::decode_utf8(t, pos));
      if (b >= 0) {
        out += char(b);
      } else {  // not GPT-2's alphabet: shown as llama.cpp shows it
        static constexpr char hex[] = "0123456789abcdef";
        out += "[UNK_BYTE_0x";
        for (std::size_t i = at; i < pos; ++i) {
          out += hex[std::uint8_t(t[i]) >> 4];
          out += hex[std::uint8_t(t[i]) & 15];
        }
        out += t + "]";
      }
    }
    return out;
  }
  if (a & attr_byte) {
    const int b = parse_byte_token(t);
    return b < 0 ? std::string() : std::string(1, char(b));
  }
  return {};
}

std::vector<fragment> tokenizer::impl::partition(std::string_view s, bool parse_special) const {
  std::vector<fragment> frags;
  if (s.empty()) return frags;
  frags.push_back({no_token, 0, s.size()});
  std::vector<fragment> next;
  for (token_id id : special_tokens) {
    const std::uint32_t a = attr[id];
    // Control and unknown tokens only when asked; user-defined ones always (as HF tokenizers do).
    if (!parse_special && (a & (attr_control | attr_unknown))) continue;
    const std::string& t = text[id];
    if (s.find(t) == std::string_view::npos) continue;
    next.clear();
    for (const fragment& fr : frags) {
      if (fr.token != no_token) {
        next.push_back(fr);
        continue;
      }
      std::size_t off = fr.off, len = fr.len;
      while (len > 0) {
        const std::size_t m = s.substr(0, off + len).find(t, off);
        if (m == std::string_view::npos) {
          next.push_back({no_token, off, len});
          break;
        }
        std::size_t left = m - off;
        if (a & attr_lstrip) {
          while (left > 0 && is_ascii_space(s[off + left - 1])) --left;
        }
        if (left > 0) next.push_back({no_token, off, left});
        next.push_back({id, 0, 0});
        std::size_t right_off = m + t.size();
        std::size_t right_len = off + len - right_off;
        if (a & attr_rstrip) {
          while (right_len > 0 && is_ascii_space(s[right_off])) ++right_off, --right_len;
        }
        off = right_off;
        len = right_len;
      }
    }
    frags.swap(next);
  }
  return frags;
}

void tokenizer::impl::encode_spm(std::string_view s, std::vector<token_id>& out) const {
  struct symbol {
    int prev, next;
    std::size_t start, n;
  };
  struct bigram {
    float score;
    int left, right;
    std::size_t size;
  };
  // Highest score first; among equal scores the leftmost pair.
  auto lower = [](const bigram& a, const bigram& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::vector<symbol> syms;
  syms.reserve(s.size());
  for (std::size_t off = 0; off < s.size();) {
    const std::size_t n = std::min(unicode::utf8_len(s[off]), s.size() - off);
    const int index = int(syms.size());
    syms.push_back({index - 1, off + n == s.size() ? -1 : index + 1, off, n});
    off += n;
  }
  if (syms.empty()) return;
  std::vector<bigram> storage;
  storage.reserve(syms.size());
  std::priority_queue<bigram, std::vector<bigram>, decltype(lower)> queue(lower,
                                                                          std::move(storage));
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::size_t size = syms[left].n + syms[right].n;
    const token_id id = find(s.substr(syms[left].start, size));
    if (id == no_token) return;
    queue.push({score[id], left, right, size});
  };
  for (int i = 1; i < int(syms.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const bigram b = queue.top();
    queue.pop();
    symbol& l = syms[b.left];
    symbol& r = syms[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // outdated by an earlier merge
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  for (int i = 0; i != -1; i = syms[i].next) {
    const std::string_view piece = s.substr(syms[i].start, syms[i].n);
    if (const token_id id = find(piece); id != no_token) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {  // byte fallback
      const token_id id = byte_token[std::uint8_t(c)];
      if (id == no_token)
        fail("the vocabulary has no token for byte " + std::to_string(std::uint8_t(c)));
      out.push_back(id);
    }
  }
}

void tokenizer::impl::encode_bpe(std::string_view s, std::vector<token_id>& out) const {
  const std::vector<std::uint32_t> cps = unicode::to_codepoints(s);
  std::size_t start = 0;
  std::string word;
  for (std::size_t len : unicode::split(cps, split)) {
    // Each byte of the piece's UTF-8 as its character of GPT-2's alphabet.
    std::string utf8;
    for (std::size_t i = start; i < start + len; ++i) unicode::append_utf8(utf8, cps[i]);
    start += len;
    word.clear();
    for (char c : utf8) unicode::append_utf8(word, unicode::byte_to_codepoint(std::uint8_t(c)));
    encode_bpe_word(word, out);
  }
}

void tokenizer::impl::encode_bpe_word(const std::string& word, std::vector<token_id>& out) const {
  if (ignore_merges) {
    if (const token_id id = find(word); id != no_token) {
      out.push_back(id);
      return;
    }
  }
  struct symbol {
    int prev, next;
    std::size_t start, n;  // bytes of `word`
    token_id id;           // of the symbol's text, or no_token
  };
  struct bigram {
    std::int32_t rank;
    int left, right;
    std::size_t size;
    token_id result;
  };
  // Lowest rank first; among equal ranks the leftmost pair.
  auto later = [](const bigram& a, const bigram& b) {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  };
  std::vector<symbol> syms;
  for (std::size_t off = 0; off < word.size();) {
    const std::size_t n = std::min(unicode::utf8_len(word[off]), word.size() - off);
    const int index = int(syms.size());
    syms.push_back({index - 1, off + n == word.size() ? -1 : index + 1, off, n,
                    find(std::string_view(word).substr(off, n))});
    off += n;
  }
  std::priority_queue<bigram, std::vector<bigram>, decltype(later)> queue(later);
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const symbol& l = syms[left];
    const symbol& r = syms[right];
    const merge* m = nullptr;
    if (l.id != no_token && r.id != no_token) {
      m = merges_by_id.find(merge_table::key(l.id, r.id));
    } else if (!merges_by_text.empty()) {
      const auto it =
          merges_by_text.find(std::to_string(l.n) + ':' + word.substr(l.start, l.n + r.n));
      if (it != merges_by_text.end()) m = &it->second;
    }
    if (m) queue.push({m->rank, left, right, l.n + r.n, m->result});
  };
  for (int i = 1; i < int(syms.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const bigram b = queue.top();
    queue.pop();
    symbol& l = syms[b.left];
    symbol& r = syms[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;  // outdated by an earlier merge
    l.n += r.n;
    l.id = b.result;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  for (const symbol& sym : syms) {
    if (sym.n == 0) continue;
    if (sym.id != no_token) {
      out.push_back(sym.id);
      continue;
    }
    // Not a token (a merge whose result is missing): llama.cpp looks each byte up on its own.
    for (std::size_t i = sym.start; i < sym.start + sym.n; ++i) {
      if (const token_id id = find(std::string_view(word).substr(i, 1)); id != no_token)
        out.push_back(id);
    }
  }
}

tokenizer::tokenizer(const gguf_file& file) : impl_(std::make_unique<impl>()) { impl_->load(file); }
tokenizer::tokenizer(tokenizer&&) noexcept = default;
tokenizer& tokenizer::operator=(tokenizer&&) noexcept = default;
tokenizer::~tokenizer() = default;

std::vector<token_id> tokenizer::encode(std::string_view text, encode_options opt) const {
  const impl& v = *impl_;
  std::vector<token_id> out;
  const bool add_bos = opt.add_bos && v.add_bos && v.bos_id != no_token;
  const bool add_eos = opt.add_bos && v.add_eos && v.eos_id != no_token;
  if (add_bos) out.push_back(v.bos_id);
  const std::vector<fragment> frags = v.partition(text, opt.parse_special);
  if (v.kind == vocab_kind::spm) {
    bool after_special = true;  // SentencePiece's leading space, again after each special token
    std::string piece;
    for (const fragment& fr : frags) {
      if (fr.token != no_token) {
        out.push_back(fr.token);
        after_special = true;
        continue;
      }
      piece.clear();
      if (v.add_space_prefix && after_special) piece += "\xE2\x96\x81";
      for (char c : text.substr(fr.off, fr.len)) {
        if (c == ' ') {
          piece += "\xE2\x96\x81";
        } else {
          piece += c;
        }
      }
      v.encode_spm(piece, out);
      after_special = false;
    }
  } else {
    for (const fragment& fr : frags) {
      if (fr.token != no_token) {
        out.push_back(fr.token);
      } else {
        v.encode_bpe(text.substr(fr.off, fr.len), out);
      }
    }
  }
  if (add_eos) out.push_back(v.eos_id);
  return out;
}

std::string tokenizer::piece(token_id id, bool special) const {
  const impl& v = *impl_;
  if (id < 0 || id >= size())
    fail("token id " + std::to_string(id) + " is out of range (vocabulary of " +
         std::to_string(size()) + ")");
  if (!special && (v.attr[id] & (attr_unknown | attr_control))) return {};
  return v.make_piece(id);
}

std::string tokenizer::decode(const std::vector<token_id>& ids, bool special) const {
  std::string out;
  for (token_id id : ids) out += piece(id, special);
  return out;
}

std::int32_t tokenizer::size() const { return std::int32_t(impl_->text.size()); }
token_id tokenizer::bos() const { return impl_->bos_id; }
token_id tokenizer::eos() const { return impl_->eos_id; }
bool tokenizer::is_end_of_generation(token_id id) const {
  return std::binary_search(impl_->eog.begin(), impl_->eog.end(), id);
}
bool tokenizer::add_bos_default() const { return impl_->add_bos; }
const std::string& tokenizer::model() const { return impl_->model; }
const std::string& tokenizer::pre() const { return impl_->pre; }

}  // namespace kfuse::llm
