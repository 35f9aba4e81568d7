#pragma once
// NumPy .npy files: read format versions 1.0, 2.0 and 3.0, write 1.0.
//
//   kfuse::npy_array a = kfuse::read_npy("x.npy");          // any supported dtype, row-major
//   std::vector<float> x = kfuse::npy_to_f32(a);              // converted when it is not f32
//   std::span<const float> v = kfuse::npy_data<float>(a);     // no copy; throws unless f32
//   kfuse::write_npy("y.npy", y.data(), {2, 10});             // float32, shape (2, 10)
//
// Element types: f32, f64, f16, i64, i32, i8, u8 and bool, little- or big-endian (big-endian
// data is byte-swapped on reading). Fortran-order files are transposed to row-major on reading
// (`fortran_order` says what the file held). The reader is for untrusted bytes: every malformed
// file (bad magic or version, truncated preamble or header, header length past the end, bad
// dictionary syntax, unknown keys, unsupported or structured descr, negative or overflowing
// extents, data shorter or longer than the shape says) throws kfuse::error ("npy: 'x.npy': ...")
// and nothing is allocated beyond the size of the file.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/types/convert.hpp"
#include "kfuse/types/elem.hpp"

namespace kfuse {

/// The element types of .npy files kfuse reads and writes (numpy's float32, float64, float16,
/// int64, int32, int8, uint8, bool_).
enum class npy_dtype : std::uint8_t { f32, f64, f16, i64, i32, i8, u8, boolean };

/// A .npy array in memory: `data` holds the elements row-major (C order) in the machine's byte
/// order, whatever order and endianness the file had; `shape` is empty for a scalar.
struct npy_array {
  npy_dtype dtype = npy_dtype::f32;
  std::vector<index_t> shape;
  bool fortran_order = false;  // the file stored the array column-major (transposed on reading)
  std::vector<std::byte> data;
};

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

/// Bytes of one element.
constexpr std::size_t npy_dtype_size(npy_dtype t) noexcept {
  switch (t) {
    case npy_dtype::f64:
    case npy_dtype::i64:
      return 8;
    case npy_dtype::f32:
    case npy_dtype::i32:
      return 4;
    case npy_dtype::f16:
      return 2;
    case npy_dtype::i8:
    case npy_dtype::u8:
    case npy_dtype::boolean:
      return 1;
  }
  return 0;
}

/// "f32", "f64", "f16", "i64", "i32", "i8", "u8", "bool".
constexpr std::string_view npy_dtype_name(npy_dtype t) noexcept {
  switch (t) {
    case npy_dtype::f32:
      return "f32";
    case npy_dtype::f64:
      return "f64";
    case npy_dtype::f16:
      return "f16";
    case npy_dtype::i64:
      return "i64";
    case npy_dtype::i32:
      return "i32";
    case npy_dtype::i8:
      return "i8";
    case npy_dtype::u8:
      return "u8";
    case npy_dtype::boolean:
      return "bool";
  }
  return "?";
}

/// numpy's descr of the type in the machine's byte order ("<f4" on little-endian machines).
constexpr std::string_view npy_descr(npy_dtype t) noexcept {
  constexpr bool le = std::endian::native == std::endian::little;
  switch (t) {
    case npy_dtype::f32:
      return le ? "<f4" : ">f4";
    case npy_dtype::f64:
      return le ? "<f8" : ">f8";
    case npy_dtype::f16:
      return le ? "<f2" : ">f2";
    case npy_dtype::i64:
      return le ? "<i8" : ">i8";
    case npy_dtype::i32:
      return le ? "<i4" : ">i4";
    case npy_dtype::i8:
      return "|i1";
    case npy_dtype::u8:
      return "|u1";
    case npy_dtype::boolean:
      return "|b1";
  }
  return "?";
}

/// The npy_dtype of a C++ element type (float, double, f16_t, int64_t, int32_t, int8_t, uint8_t,
/// bool).
template <class T>
constexpr npy_dtype npy_dtype_of() noexcept {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, float>)
    return npy_dtype::f32;
  else if constexpr (std::is_same_v<U, double>)
    return npy_dtype::f64;
  else if constexpr (std::is_same_v<U, f16_t>)
    return npy_dtype::f16;
  else if constexpr (std::is_same_v<U, std::int64_t>)
    return npy_dtype::i64;
  else if constexpr (std::is_same_v<U, std::int32_t>)
    return npy_dtype::i32;
  else if constexpr (std::is_same_v<U, std::int8_t>)
    return npy_dtype::i8;
  else if constexpr (std::is_same_v<U, std::uint8_t>)
    return npy_dtype::u8;
  else if constexpr (std::is_same_v<U, bool>)
    return npy_dtype::boolean;
  else
    static_assert(sizeof(U) == 0,
                  "npy: element type must be float, double, f16_t, int64_t, int32_t, int8_t, "
                  "uint8_t or bool");
}

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

/// Puts the raw data of the file into the array's form: the machine's byte order, bools as 0 / 1,
/// row-major.
inline void finish_npy(npy_array& a, const npy_header& h) {
  const std::size_t es = npy_dtype_size(h.dtype);
  if (h.swap)
    for (std::size_t i = 0; i + es <= a.data.size(); i += es)
      std::reverse(a.data.begin() + std::ptrdiff_t(i), a.data.begin() + std::ptrdiff_t(i + es));
  if (h.dtype == npy_dtype::boolean)
    for (std::byte& b : a.data) b = b != std::byte{0} ? std::byte{1} : std::byte{0};
  if (h.fortran_order && h.shape.size() > 1 && h.count > 0) {
    // Element (i0, ..., ir-1) sits at sum(ik * sk) with s0 = 1, sk = sk-1 * shape[k-1].
    const std::size_t r = h.shape.size();
    std::vector<std::size_t> stride(r), idx(r, 0);
    stride[0] = 1;
    for (std::size_t k = 1; k < r; ++k) stride[k] = stride[k - 1] * std::size_t(h.shape[k - 1]);
    std::vector<std::byte> c(a.data.size());
    std::size_t src = 0;
    for (std::size_t o = 0; o < std::size_t(h.count); ++o) {
      std::memcpy(c.data() + o * es, a.data.data() + src * es, es);
      for (std::size_t k = r; k-- > 0;) {  // next row-major index
        src += stride[k];
        if (++idx[k] < std::size_t(h.shape[k])) break;
        src -= stride[k] * idx[k];
        idx[k] = 0;
      }
    }
    a.data = std::move(c);
  }
  a.dtype = h.dtype;
  a.shape = h.shape;
  a.fortran_order = h.fortran_order;
}

}  // namespace detail

/// Parses the bytes of a .npy file. `name` (a file name) goes into the error messages.
inline npy_array parse_npy(std::span<const std::byte> bytes, std::string_view name = {}) {
  const detail::npy_preamble p = detail::parse_npy_preamble(bytes, bytes.size(), name);
  const auto* text = reinterpret_cast<const char*>(bytes.data()) + p.header_offset;
  const detail::npy_header h =
      detail::parse_npy_header(std::string_view(text, p.header_bytes), name);
  const std::size_t data_offset = p.header_offset + p.header_bytes;
  detail::check_npy_data_size(h, bytes.size() - data_offset, name);
  npy_array a;
  a.data.assign(bytes.begin() + std::ptrdiff_t(data_offset), bytes.end());
  detail::finish_npy(a, h);
  return a;
}

/// read_npy's default limit on the file size.
inline constexpr std::size_t npy_default_max_bytes = std::size_t(4) << 30;

/// Reads a .npy file; files larger than max_bytes are refused before anything is read.
inline npy_array read_npy(const std::filesystem::path& path,
                          std::size_t max_bytes = npy_default_max_bytes) {
  const std::string name = path.string();
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) detail::npy_fail(name, "cannot open: no such file");
  if (!std::filesystem::is_regular_file(status)) detail::npy_fail(name, "not a regular file");
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) detail::npy_fail(name, "cannot read its size: " + ec.message());
  if (size > max_bytes)
    detail::npy_fail(name, "the file has " + std::to_string(size) +
                               " bytes, more than the limit of " + std::to_string(max_bytes));
  std::ifstream f(path, std::ios::binary);
  if (!f) detail::npy_fail(name, "cannot open for reading");
  const auto read = [&](std::byte* dst, std::size_t n, const char* what) {
    f.read(reinterpret_cast<char*>(dst), std::streamsize(n));
    if (std::size_t(f.gcount()) != n)
      detail::npy_fail(name, std::string("read error in the ") + what +
                                 " (the file changed while it was read?)");
  };
  const auto total = std::size_t(size);
  std::byte head[12];
  const std::size_t head_n = std::min<std::size_t>(total, sizeof head);
  read(head, head_n, "preamble");
  const detail::npy_preamble p =
      detail::parse_npy_preamble(std::span<const std::byte>(head, head_n), total, name);
  std::string text(p.header_bytes, '\0');
  const std::size_t in_head = head_n - p.header_offset;  // header bytes already read (0 to 2)
  const std::size_t first = std::min(in_head, p.header_bytes);
  std::memcpy(text.data(), head + p.header_offset, first);
  read(reinterpret_cast<std::byte*>(text.data()) + first, p.header_bytes - first, "header");
  const detail::npy_header h = detail::parse_npy_header(text, name);
  const std::size_t data_offset = p.header_offset + p.header_bytes;
  detail::check_npy_data_size(h, total - data_offset, name);
  npy_array a;
  a.data.resize(h.bytes);
  const std::size_t pre = head_n > data_offset ? head_n - data_offset : 0;  // data in `head`
  if (pre > 0 && h.bytes > 0)
    std::memcpy(a.data.data(), head + data_offset, std::min(pre, h.bytes));
  if (h.bytes > pre) read(a.data.data() + pre, h.bytes - pre, "data");
  detail::finish_npy(a, h);
  return a;
}

/// Elements of the array.
inline index_t npy_count(const npy_array& a) {
  return detail::checked_count("npy", "the array's shape", a.shape);
}

/// The array's elements as T, without a copy; throws unless T is the array's type.
template <class T>
std::span<const T> npy_data(const npy_array& a) {
  if (a.dtype != npy_dtype_of<T>())
    detail::fail("npy", "the array holds " + std::string(npy_dtype_name(a.dtype)) + ", not " +
                            std::string(npy_dtype_name(npy_dtype_of<T>())));
  const index_t n = npy_count(a);
  if (a.data.size() != std::size_t(n) * sizeof(T))
    detail::fail("npy", "the array has " + std::to_string(a.data.size()) + " bytes of data, its " +
                            "shape " + detail::npy_shape_text(a.shape) + " takes " +
                            std::to_string(std::size_t(n) * sizeof(T)));
  return {reinterpret_cast<const T*>(a.data.data()), std::size_t(n)};
}

/// The array's elements as float: f32 as is, f64 rounded, f16 exact, integers converted (exact
/// up to 2^24), bool as 0 / 1.
inline std::vector<float> npy_to_f32(const npy_array& a) {
  const auto n = std::size_t(npy_count(a));
  const std::size_t es = npy_dtype_size(a.dtype);
  if (a.data.size() != n * es)
    detail::fail("npy", "the array has " + std::to_string(a.data.size()) + " bytes of data, its " +
                            "shape " + detail::npy_shape_text(a.shape) + " takes " +
                            std::to_string(n * es));
  std::vector<float> out(n);
  const std::byte* p = a.data.data();
  const auto each = [&]<class T>(auto convert) {
    for (std::size_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, p + i * sizeof(T), sizeof(T));
      out[i] = convert(v);
    }
  };
  const auto cast = [](auto v) { return static_cast<float>(v); };
  switch (a.dtype) {
    case npy_dtype::f32:
      if (n) std::memcpy(out.data(), p, n * sizeof(float));
      break;
    case npy_dtype::f64:
      each.template operator()<double>(cast);
      break;
    case npy_dtype::f16:
      each.template operator()<f16_t>([](f16_t h) { return to_float(h); });
      break;
    case npy_dtype::i64:
      each.template operator()<std::int64_t>(cast);
      break;
    case npy_dtype::i32:
      each.template operator()<std::int32_t>(cast);
      break;
    case npy_dtype::i8:
      each.template operator()<std::int8_t>(cast);
      break;
    case npy_dtype::u8:
      each.template operator()<std::uint8_t>(cast);
      break;
    case npy_dtype::boolean:
      each.template operator()<std::uint8_t>([](std::uint8_t b) { return b ? 1.f : 0.f; });
      break;
  }
  return out;
}

/// The bytes of a .npy file (format 1.0, or 2.0 if the header would not fit) holding `bytes`
/// bytes of `type` elements of `shape`, row-major, in the machine's byte order.
inline std::vector<std::byte> encode_npy(npy_dtype type, std::span<const index_t> shape,
                                         const void* data, std::size_t bytes) {
  if (shape.size() > detail::npy_max_rank)
    detail::fail("npy", "cannot write " + std::to_string(shape.size()) + " dimensions (at most " +
                            std::to_string(detail::npy_max_rank) + ")");
  const index_t n =
      detail::checked_count("npy", "the shape " + detail::npy_shape_text(shape), shape);
  const std::size_t need = detail::checked_bytes("npy", "the array", n, npy_dtype_size(type));
  if (bytes != need)
    detail::fail("npy", "the data has " + std::to_string(bytes) + " bytes, the shape " +
                            detail::npy_shape_text(shape) + " of " +
                            std::string(npy_dtype_name(type)) + " takes " + std::to_string(need));
  if (need > 0 && data == nullptr) detail::fail("npy", "the data pointer is null");
  std::string dict = "{'descr': '" + std::string(npy_descr(type)) +
                     "', 'fortran_order': False, 'shape': " + detail::npy_shape_text(shape) + ", }";
  // numpy's layout: preamble + dictionary + spaces + '\n', a multiple of 64 bytes in all.
  const bool v2 = dict.size() + 64 > 65535;
  const std::size_t pre = v2 ? 12 : 10;
  const std::size_t pad = 64 - (pre + dict.size() + 1) % 64;
  dict.append(pad == 64 ? 0 : pad, ' ');
  dict += '\n';
  std::vector<std::byte> out(pre + dict.size() + need);
  const unsigned char magic[8] = {
      0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<unsigned char>(v2 ? 2 : 1), 0};
  std::memcpy(out.data(), magic, 8);
  for (std::size_t i = 0; i < pre - 8; ++i) out[8 + i] = std::byte((dict.size() >> (8 * i)) & 0xff);
  std::memcpy(out.data() + pre, dict.data(), dict.size());
  if (need > 0) std::memcpy(out.data() + pre + dict.size(), data, need);
  return out;
}

/// Writes a .npy file (format 1.0) of `type` elements (checked: `bytes` must match the shape).
inline void write_npy(const std::filesystem::path& path, npy_dtype type,
                      std::span<const index_t> shape, const void* data, std::size_t bytes) {
  const std::vector<std::byte> file = encode_npy(type, shape, data, bytes);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) detail::npy_fail(path.string(), "cannot open for writing");
  f.write(reinterpret_cast<const char*>(file.data()), std::streamsize(file.size()));
  f.close();
  if (!f) detail::npy_fail(path.string(), "write error (disk full?)");
}

/// Writes `data` (as many elements as `shape` holds) as a .npy file of T's type.
template <class T>
void write_npy(const std::filesystem::path& path, const T* data,
               const std::vector<index_t>& shape) {
  const index_t n =
      detail::checked_count("npy", "the shape " + detail::npy_shape_text(shape), shape);
  write_npy(path, npy_dtype_of<T>(), shape, data,
            detail::checked_bytes("npy", "the array", n, sizeof(T)));
}

/// Writes a vector whose size must be the shape's element count.
template <class T>
void write_npy(const std::filesystem::path& path, const std::vector<T>& data,
               const std::vector<index_t>& shape) {
  static_assert(!std::is_same_v<T, bool>, "npy: std::vector<bool> is packed; use uint8_t");
  write_npy(path, npy_dtype_of<T>(), shape, data.data(), data.size() * sizeof(T));
}

KFUSE_END_NAMESPACE
