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
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include "kfuse/config/macros.hpp"
#include "kfuse/detail/checks.hpp"
#include "kfuse/tools/npy_dtype.hpp"
#include "kfuse/tools/npy_header.hpp"
#include "kfuse/types/convert.hpp"
#include "kfuse/types/elem.hpp"

namespace kfuse {

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

namespace detail {

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
