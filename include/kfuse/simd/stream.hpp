#pragma once
// Streaming (non-temporal) f32 stores for large outputs, and what a kernel needs around them.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "kfuse/config/macros.hpp"
#include "kfuse/simd/vec.hpp"
#include "kfuse/types/elem.hpp"

#if KFUSE_X86
#include <immintrin.h>
#endif

KFUSE_BEGIN_NAMESPACE
namespace detail {

// Non-temporal (streaming) f32 stores: a large output that will not stay in cache is written
// without reading its lines first (a normal store reads each line for ownership: 3 memory
// transfers per element instead of 2). xsimd 8 does not wrap vmovntps, so x86 intrinsics;
// Highway has Stream.
template <class I>
struct stream_ops {
  static constexpr bool available = false;
};
#if KFUSE_X86
template <class XA>
struct stream_ops<simd::xsimd_impl<XA>> {
  using reg = typename simd::xsimd_impl<XA>::reg;
  static constexpr bool available = true;
  static KFUSE_INLINE void store(float* p, reg v) {  // p aligned to the vector size
#if KFUSE_TIER >= KFUSE_TIER_AVX512
    if constexpr (reg::size == 16) return _mm512_stream_ps(p, v);
#endif
#if KFUSE_TIER >= KFUSE_TIER_AVX2
    if constexpr (reg::size == 8) return _mm256_stream_ps(p, v);
#endif
    if constexpr (reg::size == 4) return _mm_stream_ps(p, v);
  }
};
#if KFUSE_WITH_HWY
template <>
struct stream_ops<simd::hwy_impl> {
  static constexpr bool available = true;
  static KFUSE_INLINE void store(float* p, simd::hwy_impl::reg v) {
    simd::hn::Stream(v, simd::hwy_impl::D(), p);
  }
};
#endif
#endif

/// The streaming threshold from KFUSE_STREAM_MIN_BYTES's value (env: null when unset) and the
/// last-level cache's size in bytes (l3 <= 0: unknown): the variable when it is a whole number
/// of bytes >= 1, else a quarter of the cache (an output that fits there stays for the next
/// operation), else 8 MiB. `warning` says why a set variable was ignored.
inline index_t stream_min_bytes_of(const char* env, long long l3, std::string& warning) {
  if (env) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(env, &end, 10);
    if (end != env && *end == 0 && errno == 0 && v >= 1) return index_t(v);
    warning = std::string("kfuse: KFUSE_STREAM_MIN_BYTES='") + env +
              "' is not a byte count >= 1; ignored";
  }
  return l3 > 0 ? index_t(l3 / 4) : index_t(8) << 20;
}

/// Outputs of at least this many bytes are written with streaming stores (where the output is
/// f32, vector-aligned and its rows are whole vectors); smaller outputs stay in cache for the
/// next operation. A quarter of this machine's last-level cache (8 MiB where unknown), or
/// KFUSE_STREAM_MIN_BYTES; decided once per process.
inline index_t stream_min_bytes() {
  static const index_t bytes = [] {
    long long l3 = -1;
#if defined(_SC_LEVEL3_CACHE_SIZE)
    l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    std::string warning;
    const index_t b = stream_min_bytes_of(std::getenv("KFUSE_STREAM_MIN_BYTES"), l3, warning);
    if (!warning.empty()) std::fprintf(stderr, "%s\n", warning.c_str());
    return b;
  }();
  return bytes;
}

template <class V, class Out>
bool use_streaming_stores(const Out* out, index_t rows, index_t cols) {
  if constexpr (!std::is_same_v<Out, float> || !stream_ops<typename V::impl>::available) {
    return false;
  } else {
    constexpr index_t vbytes = index_t(sizeof(float)) * V::lanes;
    return rows * cols * index_t(sizeof(float)) >= stream_min_bytes() &&
           reinterpret_cast<std::uintptr_t>(out) % std::uintptr_t(vbytes) == 0 &&
           (cols * index_t(sizeof(float))) % vbytes == 0;
  }
}

template <bool Stream, class T, class V>
KFUSE_INLINE void store_row(T* p, V v) {
  if constexpr (Stream)
    stream_ops<typename V::impl>::store(p, v.r);
  else
    simd::store(p, v);
}

/// Rows per parallel_for chunk. Each chunk with streaming stores ends in an sfence, which
/// waits for the write-combining buffers to drain: with streaming, chunks are ~8 per thread
/// instead of ~64 KiB each (the default grain).
inline index_t streaming_grain(index_t grain, index_t rows, int threads, bool stream) {
  return stream ? std::max(grain, rows / (8 * index_t(std::max(threads, 1)))) : grain;
}

/// Orders this thread's streaming stores before the parallel_for hand-back (release/acquire
/// does not order them).
inline void stream_fence() {
#if KFUSE_X86
  _mm_sfence();
#endif
}

}  // namespace detail
KFUSE_END_NAMESPACE
