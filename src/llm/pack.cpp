#include "pack.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "half.hpp"
#include "kfuse/error.hpp"

namespace kfuse::llm::detail {

void aligned_free::operator()(std::byte* p) const noexcept { std::free(p); }

aligned_bytes allocate_aligned(std::size_t bytes, bool huge_pages) {
  // Weights of a few MiB and up: 2 MiB-aligned and marked for huge pages, so the repack faults in
  // 2 MiB at a time and decoding's streaming reads miss the TLB less.
  constexpr std::size_t huge = std::size_t(2) << 20;
  const std::size_t align = bytes >= huge ? huge : 64;
  const std::size_t size = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, size);
  if (!p) throw std::bad_alloc();
  if (align == huge && huge_pages) ::madvise(p, size, MADV_HUGEPAGE);
  return aligned_bytes(static_cast<std::byte*>(p));
}

bool panel_format_of(std::uint32_t type, panel_format& out) {
  switch (tensor_type(type)) {
    case tensor_type::f32:
      out = panel_format::f32;
      return true;
    case tensor_type::f16:
      out = panel_format::f16;
      return true;
    case tensor_type::bf16:
      out = panel_format::bf16;
      return true;
    case tensor_type::q8_0:
      out = panel_format::q8;
      return true;
    case tensor_type::q4_0:
      out = panel_format::q4;
      return true;
    case tensor_type::q4_1:  // exact: min = -m
    case tensor_type::q4_k:
      out = panel_format::q4m;
      return true;
    case tensor_type::q5_0:
      out = panel_format::q5;
      return true;
    case tensor_type::q6_k:
      out = panel_format::q6;
      return true;
    default:
      return false;
  }
}

void throw_unsupported(const gguf_tensor& t) {
  throw kfuse::error(
      "tensor '" + t.name + "': type " + tensor_type_name(t.type) +
      " is not supported (kfuse::llm reads f32, f16, bf16, q8_0, q5_0, q4_0, q4_1, q4_k and q6_k)");
}

namespace {
// Sub-block j's 6-bit scale and min of a Q4_K super-block's 12 packed bytes `sc`.
void q4_k_scale_min(const std::uint8_t* sc, int j, int& s, int& m) {
  if (j < 4) {
    s = sc[j] & 63;
    m = sc[j + 4] & 63;
  } else {
    s = (sc[j + 4] & 0xf) | ((sc[j - 4] >> 6) << 4);
    m = (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
  }
}

// Q4_K: 256 values as 8 sub-blocks of 32, each with a 6-bit scale and min (12 packed bytes) of
// the super-block's f16 d and dmin: value = d sc q - dmin m, q a nibble.
void dequantize_q4_k(const std::uint8_t* b, float* y) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const std::uint8_t* sc = b + 4;
  const std::uint8_t* q = b + 16;
  for (int chunk = 0; chunk < 4; ++chunk, q += 32) {
    int s1, m1, s2, m2;
    q4_k_scale_min(sc, 2 * chunk, s1, m1);
    q4_k_scale_min(sc, 2 * chunk + 1, s2, m2);
    for (int l = 0; l < 32; ++l) {
      y[chunk * 64 + l] = d * float(s1) * float(q[l] & 0xf) - dmin * float(m1);
      y[chunk * 64 + 32 + l] = d * float(s2) * float(q[l] >> 4) - dmin * float(m2);
    }
  }
}

// One Q4_K super-block as 8 q4m blocks of 20 bytes: f16 scale d sc, f16 min dmin m, then 16
// bytes holding value i in the low nibble and value 16 + i in the high one of byte i.
void q4_k_to_q4m(const std::uint8_t* b, std::uint8_t* out) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  const std::uint8_t* sc = b + 4;
  const std::uint8_t* q = b + 16;
  for (int j = 0; j < 8; ++j, out += 20) {
    int s, m;
    q4_k_scale_min(sc, j, s, m);
    const std::uint16_t hs = f32_to_f16(d * float(s)), hm = f32_to_f16(dmin * float(m));
    std::memcpy(out, &hs, 2);
    std::memcpy(out + 2, &hm, 2);
    const std::uint8_t* src = q + (j / 2) * 32;  // sub-block j: nibble (j % 2) of its chunk
    auto nib = [&](int i) { return j % 2 == 0 ? src[i] & 0xf : src[i] >> 4; };
    for (int i = 0; i < 16; ++i) out[4 + i] = std::uint8_t(nib(i) | (nib(16 + i) << 4));
  }
}

// One Q6_K super-block as 8 blocks of 36 bytes: its f16 d, the int8 scales of the block's two
// 16-value halves, then the 32 values as bytes 0..63 (offset 32).
void q6_k_to_blocks(const std::uint8_t* b, std::uint8_t* out) {
  const std::uint8_t* ql = b;
  const std::uint8_t* qh = b + 128;
  const std::uint8_t* sc = b + 192;
  std::uint8_t q[256];
  for (int half = 0; half < 2; ++half, ql += 64, qh += 32)
    for (int l = 0; l < 32; ++l) {
      std::uint8_t* v = q + 128 * half + l;
      v[0] = std::uint8_t((ql[l] & 0xf) | ((qh[l] >> 0) & 3) << 4);
      v[32] = std::uint8_t((ql[l + 32] & 0xf) | ((qh[l] >> 2) & 3) << 4);
      v[64] = std::uint8_t((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4);
      v[96] = std::uint8_t((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4);
    }
  for (int j = 0; j < 8; ++j, out += 36) {
    std::memcpy(out, b + 208, 2);
    out[2] = sc[2 * j];
    out[3] = sc[2 * j + 1];
    std::memcpy(out + 4, q + 32 * j, 32);
  }
}

// Q6_K: 256 values as 16 sub-blocks of 16 with int8 scales of an f16 d; 6-bit values offset by
// 32 (through the blocks q6_k_to_blocks makes of them).
void dequantize_q6_k(const std::uint8_t* b, float* y) {
  std::uint8_t blocks[8 * 36];
  q6_k_to_blocks(b, blocks);
  const float d = f16_at(b + 208);
  for (int j = 0; j < 8; ++j, y += 32) {
    const std::uint8_t* s = blocks + 36 * j;
    for (int i = 0; i < 32; ++i)
      y[i] = d * float(std::int8_t(s[2 + i / 16])) * float(int(s[4 + i]) - 32);
  }
}

// One q5 or q6 panel block (panels.hpp) from the converted blocks of the panel's `valid` rows:
// [f16 d, (q6: two int8 scales,) 32 value bytes].
void pack_wide_block(panel_format f, const std::uint8_t* const* rows, int valid, std::int64_t b,
                     std::uint8_t* dst) {
  const bool q6 = f == panel_format::q6;
  const int in_header = q6 ? 4 : 2;
  std::uint8_t* ql = dst + quant_header_bytes(f);
  std::uint8_t* qh = ql + qblock / 2 * panel_rows;
  for (int r = 0; r < valid; ++r) {
    const std::uint8_t* s = rows[r] + b * (in_header + qblock);
    std::memcpy(dst + 2 * r, s, 2);
    if (q6) {
      dst[2 * panel_rows + r] = s[2];
      dst[3 * panel_rows + r] = s[3];
    }
    const std::uint8_t* q = s + in_header;
    for (int g = 0; g < 4; ++g)
      for (int t = 0; t < 4; ++t)
        ql[(g * panel_rows + r) * 4 + t] =
            std::uint8_t((q[4 * g + t] & 15) | (q[16 + 4 * g + t] & 15) << 4);
    for (int t = 0; t < 4; ++t) {
      if (q6) {  // two bits per value, one byte array per half
        for (int h = 0; h < 2; ++h) {
          int bits = 0;
          for (int g = 0; g < 4; ++g) bits |= (q[16 * h + 4 * g + t] >> 4) << (2 * g);
          qh[(h * panel_rows + r) * 4 + t] = std::uint8_t(bits);
        }
      } else {  // one bit per value: bit g for the first half, 4 + g for the second
        int bits = 0;
        for (int g = 0; g < 4; ++g)
          bits |= (q[4 * g + t] >> 4) << g | (q[16 + 4 * g + t] >> 4) << (4 + g);
        qh[r * 4 + t] = std::uint8_t(bits);
      }
    }
  }
}

// dst[c][r] = rows[row0 + r][c] for the `valid` rows of a panel.
template <class T>
void transpose_rows(const std::uint8_t* src, std::int64_t cols, std::int64_t row0, int valid,
                    std::uint8_t* dst) {
  const T* rows[panel_rows];
  for (int r = 0; r < valid; ++r) rows[r] = reinterpret_cast<const T*>(src) + (row0 + r) * cols;
  T* out = reinterpret_cast<T*>(dst);
  for (std::int64_t c = 0; c < cols; ++c)
    for (int r = 0; r < valid; ++r) out[c * panel_rows + r] = rows[r][c];
}

// Types whose blocks the panels do not hold as they are: their rows are converted first.
bool needs_conversion(std::uint32_t type) {
  switch (tensor_type(type)) {
    case tensor_type::q4_1:
    case tensor_type::q5_0:
    case tensor_type::q4_k:
    case tensor_type::q6_k:
      return true;
    default:
      return false;
  }
}

// One row of a converted type as blocks the panel packer reads: q4m blocks of 20 bytes (f16
// scale, f16 min, 16 nibble bytes) from q4_1 and q4_k; blocks of an f16 d, (q6_k: two int8
// scales,) and 32 value bytes from q5_0 and q6_k (q6_k_to_blocks). All exact.
void convert_row(const gguf_tensor& t, std::int64_t row, std::uint8_t* out) {
  const std::int64_t cols = t.dims[0];
  const auto* src = reinterpret_cast<const std::uint8_t*>(t.data);
  switch (tensor_type(t.type)) {
    case tensor_type::q4_k:
      for (std::int64_t sb = 0; sb < cols / 256; ++sb)
        q4_k_to_q4m(src + (row * (cols / 256) + sb) * 144, out + sb * 8 * 20);
      return;
    case tensor_type::q4_1:  // value = d q + m: the same nibbles, min = -m
      for (std::int64_t b = 0; b < cols / qblock; ++b, out += 20) {
        const std::uint8_t* s = src + (row * (cols / qblock) + b) * 20;
        std::memcpy(out, s, 20);
        out[3] ^= 0x80;  // negate the f16 m
      }
      return;
    case tensor_type::q5_0:  // value = d (q - 16), q 5 bits: low nibbles in qs, high bits in qh
      for (std::int64_t b = 0; b < cols / qblock; ++b, out += 34) {
        const std::uint8_t* s = src + (row * (cols / qblock) + b) * 22;
        std::uint32_t qh;
        std::memcpy(&qh, s + 2, 4);
        std::memcpy(out, s, 2);
        for (int j = 0; j < qblock; ++j) {
          const int nib = j < 16 ? s[6 + j] & 0xf : s[6 + j - 16] >> 4;
          out[2 + j] = std::uint8_t(nib | int((qh >> j) & 1) << 4);
        }
      }
      return;
    default:  // q6_k
      for (std::int64_t sb = 0; sb < cols / 256; ++sb)
        q6_k_to_blocks(src + (row * (cols / 256) + sb) * 210, out + sb * 8 * 36);
  }
}
}  // namespace

panel_matrix allocate_panels(const gguf_tensor& t, panel_format f, bool huge_pages) {
  if (t.dims.size() != 2)
    throw kfuse::error("tensor '" + t.name + "': expected 2 dimensions, has " +
                       std::to_string(t.dims.size()));
  panel_matrix m;
  m.format = f;
  m.cols = t.dims[0];
  m.rows = t.dims[1];
  if (is_quantized(f) && m.cols % qblock != 0)
    throw kfuse::error("tensor '" + t.name + "': " + std::to_string(m.cols) +
                       " columns is not a multiple of 32");
  m.panels = (m.rows + panel_rows - 1) / panel_rows;
  m.panel_bytes =
      is_quantized(f) ? m.cols / qblock * panel_step_bytes(f) : m.cols * panel_step_bytes(f);
  m.data = allocate_aligned(std::size_t(m.panels * m.panel_bytes), huge_pages);
  return m;
}

void pack_panels(const gguf_tensor& t, const panel_matrix& m, std::int64_t p0, std::int64_t p1) {
  const auto* src = reinterpret_cast<const std::uint8_t*>(t.data);
  const bool convert = needs_conversion(t.type);
  const std::int64_t blocks = m.cols / qblock;
  const std::int64_t converted_block = m.format == panel_format::q4m  ? 20
                                       : m.format == panel_format::q6 ? 36
                                                                      : 34;
  std::vector<std::uint8_t> converted;
  if (convert) converted.resize(std::size_t(panel_rows * blocks * converted_block));
  for (std::int64_t p = p0; p < p1; ++p) {
    for (int r = 0; convert && r < panel_rows && p * panel_rows + r < m.rows; ++r)
      convert_row(t, p * panel_rows + r, converted.data() + r * blocks * converted_block);
    auto* dst = reinterpret_cast<std::uint8_t*>(m.data.get() + p * m.panel_bytes);
    const int valid = int(std::min<std::int64_t>(panel_rows, m.rows - p * panel_rows));
    if (valid < panel_rows) std::memset(dst, 0, std::size_t(m.panel_bytes));  // padding rows
    if (!is_quantized(m.format)) {  // a transpose: 16 row streams in, one sequential stream out
      if (m.format == panel_format::f32)
        transpose_rows<std::uint32_t>(src, m.cols, p * panel_rows, valid, dst);
      else
        transpose_rows<std::uint16_t>(src, m.cols, p * panel_rows, valid, dst);
      continue;
    }
    // Quantized: written in the panel's order (sequential stores), 4 bytes at a time from the
    // panel's 16 row streams of blocks [f16 scale, (f16 min,) values].
    const std::int64_t src_block =
        convert ? converted_block : (m.format == panel_format::q8 ? 34 : 18);
    const int scalars = m.format == panel_format::q4m ? 2 : 1;  // scale (and min) per row
    const std::uint8_t* rows[panel_rows];
    for (int r = 0; r < valid; ++r)
      rows[r] = convert ? converted.data() + r * blocks * converted_block
                        : src + (p * panel_rows + r) * blocks * src_block;
    if (m.format == panel_format::q5 || m.format == panel_format::q6) {
      for (std::int64_t b = 0; b < blocks; ++b, dst += panel_step_bytes(m.format))
        pack_wide_block(m.format, rows, valid, b, dst);
      continue;
    }
    const int groups = m.format == panel_format::q8 ? qblock / 4 : qblock / 8;
    const std::uint32_t flip = m.format == panel_format::q8 ? 0x80808080u : 0;  // q8: u8 = q + 128
    const std::int64_t header = quant_header_bytes(m.format);
    for (std::int64_t b = 0; b < blocks; ++b, dst += panel_step_bytes(m.format)) {
      for (int k = 0; k < scalars; ++k)
        for (int r = 0; r < valid; ++r)
          std::memcpy(dst + 2 * (k * panel_rows + r), rows[r] + b * src_block + 2 * k, 2);
      for (int g = 0; g < groups; ++g)
        for (int r = 0; r < valid; ++r) {
          std::uint32_t v;
          std::memcpy(&v, rows[r] + b * src_block + 2 * scalars + 4 * g, 4);
          v ^= flip;
          std::memcpy(dst + header + (g * panel_rows + r) * 4, &v, 4);
        }
    }
  }
}

void dequantize_row(const gguf_tensor& t, std::int64_t row, float* out) {
  const std::int64_t cols = t.dims[0];
  const auto* src = reinterpret_cast<const std::uint8_t*>(t.data);
  switch (tensor_type(t.type)) {
    case tensor_type::f32:
      std::memcpy(out, src + row * cols * 4, std::size_t(cols) * 4);
      return;
    case tensor_type::f16:
    case tensor_type::bf16: {
      const std::uint8_t* s = src + row * cols * 2;
      for (std::int64_t c = 0; c < cols; ++c) {
        std::uint16_t h;
        std::memcpy(&h, s + 2 * c, 2);
        out[c] = t.type == std::uint32_t(tensor_type::f16) ? f16_to_f32(h) : bf16_to_f32(h);
      }
      return;
    }
    case tensor_type::q8_0:
      for (std::int64_t b = 0; b < cols / qblock; ++b) {
        const std::uint8_t* s = src + (row * (cols / qblock) + b) * 34;
        std::uint16_t h;
        std::memcpy(&h, s, 2);
        const float d = f16_to_f32(h);
        for (int c = 0; c < qblock; ++c) out[b * qblock + c] = d * float(std::int8_t(s[2 + c]));
      }
      return;
    case tensor_type::q4_k:
      for (std::int64_t b = 0; b < cols / 256; ++b)
        dequantize_q4_k(src + (row * (cols / 256) + b) * 144, out + b * 256);
      return;
    case tensor_type::q4_1:
    case tensor_type::q5_0: {  // through the q4m / q5 blocks they become
      const bool q41 = t.type == std::uint32_t(tensor_type::q4_1);
      std::vector<std::uint8_t> blocks(std::size_t(cols / qblock * (q41 ? 20 : 34)));
      convert_row(t, row, blocks.data());
      for (std::int64_t b = 0; b < cols / qblock; ++b) {
        const std::uint8_t* s = blocks.data() + b * (q41 ? 20 : 34);
        const float d = f16_at(s), m = q41 ? f16_at(s + 2) : 0.f;
        for (int c = 0; c < qblock; ++c)
          out[b * qblock + c] = q41 ? d * float(c < 16 ? s[4 + c] & 15 : s[4 + c - 16] >> 4) - m
                                    : d * float(s[2 + c] - 16);
      }
      return;
    }
    case tensor_type::q6_k:
      for (std::int64_t b = 0; b < cols / 256; ++b)
        dequantize_q6_k(src + (row * (cols / 256) + b) * 210, out + b * 256);
      return;
    case tensor_type::q4_0:
      for (std::int64_t b = 0; b < cols / qblock; ++b) {
        const std::uint8_t* s = src + (row * (cols / qblock) + b) * 18;
        std::uint16_t h;
        std::memcpy(&h, s, 2);
        const float d = f16_to_f32(h);
        for (int j = 0; j < 16; ++j) {
          out[b * qblock + j] = d * float((s[2 + j] & 15) - 8);
          out[b * qblock + j + 16] = d * float((s[2 + j] >> 4) - 8);
        }
      }
      return;
    default:
      throw_unsupported(t);
  }
}

}  // namespace kfuse::llm::detail
