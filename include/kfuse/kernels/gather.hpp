#pragma once
// gather: rows of a table picked by integer indices (ONNX Gather, an embedding lookup).
//
//   const kfuse::gather_shape s{1, vocab, hidden, tokens};
//   kfuse::gather(table, ids, out, s);        // out[t, :] = table[ids[t], :]
//
// The table is [outer, rows, inner] (the gathered axis in the middle); out is [outer, count,
// inner] with out[o, j, :] = table[o, idx[j], :]. Indices are int32 or int64 and may be negative
// (from the end, as in NumPy and ONNX). Every index is checked before anything is written: one
// outside [-rows, rows) is a kfuse::error naming it and its position, never a read outside the
// table. A row is one memcpy: the copy does not look at values, so any element type works.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "kfuse/detail/checks.hpp"
#include "kfuse/threading/parallel_for.hpp"

namespace kfuse {

/// A gather's geometry (elements): the table is [outer, rows, inner], `count` indices.
struct gather_shape {
  index_t outer = 1, rows = 0, inner = 1, count = 0;
};

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

namespace detail {

/// Checks every index (throws naming `who`, the index and its position); returns nothing.
template <class I>
void check_gather_indices(std::string_view who, const I* idx, const gather_shape& s) {
  for (index_t j = 0; j < s.count; ++j) {
    const std::int64_t i = std::int64_t(idx[j]);
    if (i < -s.rows || i >= s.rows)
      fail(who, "index " + std::to_string(i) + " at position " + std::to_string(j) +
                    " is out of range for " + std::to_string(s.rows) + " rows");
  }
}

}  // namespace detail

/// out[o, j, :] = table[o, idx[j], :] for indices j in [j0, j1) (every index already checked).
template <class I>
void gather_range(const void* table, const I* idx, void* out, const gather_shape& s,
                  std::size_t elem_bytes, index_t j0, index_t j1) {
  const std::size_t row = std::size_t(s.inner) * elem_bytes;
  const auto* t = static_cast<const unsigned char*>(table);
  auto* o = static_cast<unsigned char*>(out);
  for (index_t q = 0; q < s.outer; ++q)
    for (index_t j = j0; j < j1; ++j) {
      index_t i = index_t(idx[j]);
      if (i < 0) i += s.rows;
      std::memcpy(o + std::size_t(q * s.count + j) * row, t + std::size_t(q * s.rows + i) * row,
                  row);
    }
}

/// Indices checked (an error naming `who`), then rows of `elem_bytes` elements copied on up to
/// `threads` threads: the type-free body of gather(), and the graph op's command.
template <class I>
void gather_rows(const void* table, const I* idx, void* out, const gather_shape& s,
                 std::size_t elem_bytes, int threads, std::string_view who) {
  detail::check_gather_indices(who, idx, s);
  if (threads <= 1 || s.count < 2) return gather_range(table, idx, out, s, elem_bytes, 0, s.count);
  const index_t grain = std::max<index_t>(1, (index_t(1) << 14) / std::max<index_t>(1, s.inner));
  parallel_for(
      0, s.count, grain,
      [&](range r, int) { gather_range(table, idx, out, s, elem_bytes, r.begin, r.end); }, threads);
}

/// The whole gather: extents and buffers checked, then gather_rows.
template <class T, class I>
void gather(const T* table, const I* idx, T* out, const gather_shape& s, int threads = 1,
            std::string_view who = "gather") {
  static_assert(std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>,
                "kfuse::gather: indices are int32 or int64");
  if (s.outer < 0 || s.rows < 0 || s.inner < 0 || s.count < 0) detail::fail(who, "negative extent");
  detail::check_buffer(who, "indices", idx, s.count);
  detail::check_buffer(
      who, "table", table,
      detail::checked_mul(who, "the table", detail::checked_mul(who, "the table", s.outer, s.rows),
                          s.inner));
  detail::check_buffer(
      who, "output", out,
      detail::checked_mul(who, "the output",
                          detail::checked_mul(who, "the output", s.outer, s.count), s.inner));
  gather_rows(table, idx, out, s, sizeof(T), threads, who);
}

KFUSE_END_NAMESPACE
