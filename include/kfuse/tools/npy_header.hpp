#pragma once
// The .npy preamble (magic, version, header length) and header dictionary (descr, fortran_order,
// shape), parsed from untrusted bytes: every malformed one throws kfuse::error ("npy: 'x.npy':
// ...") naming what is wrong, before anything is allocated for the data.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/tools/npy_dtype.hpp"

KFUSE_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::size_t npy_max_rank = 64;  // numpy 2's NPY_MAXDIMS

/// "'name': " for error messages ("" without a name).
inline std::string npy_where(std::string_view name) {
  return name.empty() ? std::string() : "'" + std::string(name) + "': ";
}

[[noreturn]] inline void npy_fail(std::string_view name, const std::string& what) {
  fail("npy", npy_where(name) + what);
}

/// Bytes of a hostile file shown in a message: printable ASCII as is, the rest as \xNN, cut.
inline std::string npy_quote(std::string_view s, std::size_t max = 40) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += char(c);
    } else {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (s.size() > max) out += "...";
  return out;
}

inline std::string npy_shape_text(std::span<const index_t> shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

/// What the preamble says: where the header starts and how long it is.
struct npy_preamble {
  int major = 1;
  std::size_t header_offset = 0;
  std::size_t header_bytes = 0;
};

/// The magic string, the version and the header length, from the first bytes of a file of
/// `total` bytes (`head` holds at least min(total, 12) of them).
inline npy_preamble parse_npy_preamble(std::span<const std::byte> head, std::size_t total,
                                       std::string_view name) {
  static constexpr unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(head[i]); };
  const std::size_t seen = std::min<std::size_t>(head.size(), 6);
  for (std::size_t i = 0; i < seen; ++i)
    if (byte(i) != magic[i])
      npy_fail(name, "not a .npy file (it does not start with \"\\x93NUMPY\")");
  if (total < 8)
    npy_fail(name, "truncated: " + std::to_string(total) +
                       " bytes, shorter than the .npy preamble (magic string and version)");
  npy_preamble p;
  p.major = byte(6);
  const int minor = byte(7);
  if ((p.major < 1 || p.major > 3) || minor != 0)
    npy_fail(name, "unsupported .npy format version " + std::to_string(p.major) + "." +
                       std::to_string(minor) + " (kfuse reads 1.0, 2.0 and 3.0)");
  const std::size_t len_bytes = p.major == 1 ? 2 : 4;
  if (total < 8 + len_bytes)
    npy_fail(name, "truncated: " + std::to_string(total) + " bytes, the preamble of version " +
                       std::to_string(p.major) + ".0 takes " + std::to_string(8 + len_bytes));
  std::size_t len = 0;
  for (std::size_t i = 0; i < len_bytes; ++i) len |= std::size_t(byte(8 + i)) << (8 * i);
  p.header_offset = 8 + len_bytes;
  p.header_bytes = len;
  if (len > total - p.header_offset)
    npy_fail(name, "the header length (" + std::to_string(len) + " bytes) runs past the end of " +
                       "the file (" + std::to_string(total - p.header_offset) +
                       " bytes after the preamble)");
  return p;
}

/// What the header's dictionary says.
struct npy_header {
  npy_dtype dtype = npy_dtype::f32;
  bool swap = false;  // big-endian data of a multi-byte type
  bool fortran_order = false;
  std::vector<index_t> shape;
  index_t count = 0;      // elements
  std::size_t bytes = 0;  // data bytes
};

/// Parses the Python literal numpy writes: {'descr': '<f4', 'fortran_order': False, 'shape':
/// (2, 3), } followed by padding. Only that grammar: three keys, each once; strings in ' or ";
/// True / False; a tuple of non-negative integers (a trailing L of Python 2 allowed).
class npy_dict_parser {
 public:
  npy_dict_parser(std::string_view text, std::string_view name) : s_(text), name_(name) {}

  npy_header parse() {
    npy_header h;
    bool have_descr = false, have_order = false, have_shape = false;
    ws();
    expect('{', "the header must be a dictionary starting with '{'");
    for (;;) {
      ws();
      if (peek() == '}') {
        ++i_;
        break;
      }
      const std::string key = string_literal("a key");
      ws();
      expect(':', "expected ':' after the key '" + npy_quote(key) + "'");
      ws();
      if (key == "descr") {
        if (have_descr) bad("the key 'descr' appears twice");
        have_descr = true;
        if (peek() == '[')
          bad("structured dtypes (a descr that is a list of fields) are not supported");
        descr(string_literal("the descr"), h);
      } else if (key == "fortran_order") {
        if (have_order) bad("the key 'fortran_order' appears twice");
        have_order = true;
        h.fortran_order = boolean();
      } else if (key == "shape") {
        if (have_shape) bad("the key 'shape' appears twice");
        have_shape = true;
        h.shape = tuple();
      } else {
        bad("unknown key '" + npy_quote(key) +
            "' (a .npy header has 'descr', 'fortran_order' and 'shape')");
      }
      ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      ws();
      expect('}', "expected ',' or '}' after the value of '" + key + "'");
      break;
    }
    // numpy pads with spaces and ends the header with '\n'; older writers padded with NULs.
    for (; i_ < s_.size(); ++i_)
      if (!is_ws(s_[i_]) && s_[i_] != '\0') {
        std::string_view rest = s_.substr(i_);
        while (!rest.empty() && (is_ws(rest.back()) || rest.back() == '\0')) rest.remove_suffix(1);
        bad("unexpected characters after the header's dictionary: '" + npy_quote(rest) + "'");
      }
    if (!have_descr || !have_order || !have_shape)
      bad(std::string("the header lacks the key '") +
          (!have_descr   ? "descr"
           : !have_order ? "fortran_order"
                         : "shape") +
          "'");
    return h;
  }

 private:
  [[noreturn]] void bad(const std::string& what) const { npy_fail(name_, "bad header: " + what); }
  static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  bool at_end() const { return i_ >= s_.size(); }
  void ws() {
    while (i_ < s_.size() && is_ws(s_[i_])) ++i_;
  }
  void expect(char c, const std::string& what) {
    if (at_end()) bad(what + " (the header ends)");
    if (s_[i_] != c) bad(what + ", found '" + npy_quote(s_.substr(i_, 1)) + "'");
    ++i_;
  }
  std::string string_literal(const std::string& what) {
    if (at_end()) bad("expected " + what + " (a quoted string), the header ends");
    const char q = s_[i_];
    if (q != '\'' && q != '"')
      bad("expected " + what + " (a quoted string), found '" + npy_quote(s_.substr(i_, 8)) + "'");
    const std::size_t start = ++i_;
    while (i_ < s_.size() && s_[i_] != q) {
      if (s_[i_] == '\\') bad("escape sequences in strings are not supported");
      ++i_;
    }
    if (at_end()) bad(what + " is an unterminated string");
    return std::string(s_.substr(start, i_++ - start));
  }
  bool boolean() {
    if (s_.substr(i_, 4) == "True") {
      i_ += 4;
      return true;
    }
    if (s_.substr(i_, 5) == "False") {
      i_ += 5;
      return false;
    }
    bad("'fortran_order' must be True or False, found '" + npy_quote(s_.substr(i_, 8)) + "'");
  }
  std::vector<index_t> tuple() {
    expect('(', "'shape' must be a tuple");
    std::vector<index_t> shape;
    for (;;) {
      ws();
      if (peek() == ')') {
        ++i_;
        return shape;
      }
      if (shape.size() == npy_max_rank)
        bad("the shape has more than " + std::to_string(npy_max_rank) + " dimensions");
      shape.push_back(extent(shape.size()));
      ws();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      expect(')', "expected ',' or ')' in the shape");
      if (shape.size() == 1)  // Python's (3) is the number 3; numpy writes (3,)
        bad("'shape' is (" + std::to_string(shape[0]) +
            "), a number, not a tuple (a 1-D shape is "
            "written (" +
            std::to_string(shape[0]) + ",))");
      return shape;
    }
  }
  index_t extent(std::size_t axis) {
    const std::string at = "extent " + std::to_string(axis) + " of the shape";
    if (peek() == '-') bad(at + " is negative");
    if (peek() < '0' || peek() > '9')
      bad(at + " is not a whole number: '" + npy_quote(s_.substr(i_, 8)) + "'");
    index_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      if (__builtin_mul_overflow(v, index_t(10), &v) ||
          __builtin_add_overflow(v, index_t(s_[i_] - '0'), &v))
        bad(at + " is too large for a 64-bit size");
      ++i_;
    }
    if (peek() == 'L') ++i_;  // Python 2's long
    return v;
  }
  void descr(const std::string& d, npy_header& h) {
    const std::string shown = "'" + npy_quote(d) + "'";
    static constexpr struct {
      std::string_view code;
      npy_dtype type;
    } table[] = {{"f4", npy_dtype::f32}, {"f8", npy_dtype::f64},    {"f2", npy_dtype::f16},
                 {"i8", npy_dtype::i64}, {"i4", npy_dtype::i32},    {"i1", npy_dtype::i8},
                 {"u1", npy_dtype::u8},  {"b1", npy_dtype::boolean}};
    const auto unsupported = [&] {
      bad("unsupported descr " + shown +
          " (kfuse reads '<f4', '<f8', '<f2', '<i8', '<i4', '|i1', '|u1', '|b1', and their "
          "big-endian '>' forms)");
    };
    if (d.size() != 3) unsupported();
    const char order = d[0];
    if (order != '<' && order != '>' && order != '|' && order != '=') unsupported();
    const std::string_view code = std::string_view(d).substr(1);
    const auto* it = std::find_if(std::begin(table), std::end(table),
                                  [&](const auto& e) { return e.code == code; });
    if (it == std::end(table)) unsupported();
    h.dtype = it->type;
    const bool multi = npy_dtype_size(h.dtype) > 1;
    if (order == '|' && multi)
      bad("descr " + shown + ": a multi-byte type needs a byte order ('<' or '>'), not '|'");
    const bool file_big = order == '>' || (order == '=' && std::endian::native == std::endian::big);
    h.swap = multi && (file_big != (std::endian::native == std::endian::big));
  }

  std::string_view s_;
  std::string_view name_;
  std::size_t i_ = 0;
};

/// The header's dictionary, and the element count and data size it implies (checked).
inline npy_header parse_npy_header(std::string_view text, std::string_view name) {
  npy_header h = npy_dict_parser(text, name).parse();
  index_t n = 1;
  for (const index_t e : h.shape)
    if (__builtin_mul_overflow(n, e, &n))
      npy_fail(name, "the shape " + npy_shape_text(h.shape) +
                         " has too many elements (the count overflows 64 bits)");
  h.count = n;
  const std::size_t es = npy_dtype_size(h.dtype);
  if (__builtin_mul_overflow(std::size_t(n), es, &h.bytes) ||
      h.bytes > std::size_t(std::numeric_limits<index_t>::max()))
    npy_fail(name, "the shape " + npy_shape_text(h.shape) + " of " +
                       std::string(npy_dtype_name(h.dtype)) + " is too large to address");
  return h;
}

/// The data size the header implies against what the file holds after the header.
inline void check_npy_data_size(const npy_header& h, std::size_t available, std::string_view name) {
  if (available == h.bytes) return;
  const std::string says = "the header says " + npy_shape_text(h.shape) + " " +
                           std::string(npy_dtype_name(h.dtype)) + " = " + std::to_string(h.bytes) +
                           " bytes";
  if (available < h.bytes)
    npy_fail(name, "truncated data: " + says + ", the file has " + std::to_string(available) +
                       " after the header");
  npy_fail(name, std::to_string(available - h.bytes) + " bytes of trailing data: " + says +
                     ", the file has " + std::to_string(available) + " after the header");
}

}  // namespace detail
KFUSE_END_NAMESPACE
