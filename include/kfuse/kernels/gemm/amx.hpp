#pragma once
// AMX (Advanced Matrix Extensions, Sapphire Rapids and later): the tile GEMM the bf16 and i8
// recipes run on where the CPU has it. One tdpbf16ps multiplies a 16 x 32 bf16 tile of A with a
// 32 x 16 tile of B into 16 x 16 f32 accumulators (tdpbusd / tdpbssd: 16 x 64 bytes of u8 / s8 A
// with 64 x 16 s8 B into s32), about 14x (bf16) and 8x (int8) the rate of vdpbf16ps / vpdpbusd
// on the same core (Xeon probe: 3.5 TFLOP/s bf16, 7.4 TOP/s int8 per core against 245 GFLOP/s
// of f32 FMAs).
//
// The B tiles are the GEMM's packed panels as they are: a k-group row of a 64-column panel is 256
// bytes (64 columns x 2 bf16 or 4 int8), so tile column j of a panel is 16 rows of 64 bytes, 256
// bytes apart - the layout tileloadd reads. Packing only pads K to a whole tile depth (32 bf16,
// 64 int8 values: packed_weights' k_align) so that the last B tile reads zeros. A is read in
// place (16 rows, lda apart), its last partial tile from a zero-padded copy.
//
// A block is 32 rows x 32 columns: 4 accumulator tiles, 2 of A, 2 of B (all 8 tiles). Rows past
// the last multiple of 32 run as a block of one row tile configured with fewer rows, so tile
// loads and stores never touch a row past M. The accumulators go to a stack buffer and through
// the caller's epilogue (gemm.hpp), which stores them once.
//
// Linux grants a process the 8 KiB tile state only on request (arch_prctl ARCH_REQ_XCOMP_PERM);
// amx_enabled() asks once. KFUSE_AMX=0 in the environment, or set_amx_enabled(false), turns the
// tile path off (the vdpbf16ps / vpdpbusd kernels run instead).
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kfuse/kernels/gemm/packed_weights.hpp"
#include "kfuse/threading/parallel_for.hpp"

// The run-time check is the same in every TU (whatever its tier: one inline definition); the
// tile kernels exist in the avx512_bf16 tier's.
#if defined(__linux__) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define KFUSE_AMX_LINUX 1
#else
#define KFUSE_AMX_LINUX 0
#endif
#if KFUSE_AMX_LINUX && KFUSE_X86 && KFUSE_TIER >= KFUSE_TIER_AVX512_BF16
#define KFUSE_AMX 1
#else
#define KFUSE_AMX 0
#endif

namespace kfuse {

namespace detail {
/// Whether this CPU and OS run AMX bf16 and int8, the tile state granted to this process.
inline bool amx_cpu_ready() noexcept {
#if KFUSE_AMX_LINUX
  static const bool ready = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c >> 27 & 1)) return false;  // OSXSAVE
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool bf16 = d >> 22 & 1, tile = d >> 24 & 1, int8 = d >> 25 & 1;
    if (!(bf16 && tile && int8)) return false;
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return false;  // XTILECFG, XTILEDATA enabled by the OS
    constexpr long req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
    return syscall(SYS_arch_prctl, req_xcomp_perm, xfeature_xtiledata) == 0;
  }();
  return ready;
#else
  return false;
#endif
}
inline std::atomic<bool>& amx_switch() noexcept {
  static std::atomic<bool> on{[] {
    const char* e = std::getenv("KFUSE_AMX");
    return !(e && e[0] == '0');
  }()};
  return on;
}
}  // namespace detail

/// True when the bf16 and i8 GEMMs (and the convolutions built on them) run on AMX tiles.
inline bool amx_enabled() noexcept {
  return detail::amx_switch().load(std::memory_order_relaxed) && detail::amx_cpu_ready();
}
/// Turns the AMX path on or off for kernels packed and run from now on (both paths give results
/// within the recipe's tolerance; weights packed either way run on either path).
inline void set_amx_enabled(bool on) noexcept {
  detail::amx_switch().store(on, std::memory_order_relaxed);
}

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE
namespace detail {

/// The tile products: bf16 x bf16 -> f32, u8 x s8 -> s32, s8 x s8 -> s32.
enum class amx_op { bf16, u8s8, s8s8 };

template <class TA>
constexpr amx_op amx_op_for = std::is_same_v<TA, bf16_t>
                                  ? amx_op::bf16
                                  : (std::is_signed_v<TA> ? amx_op::s8s8 : amx_op::u8s8);

/// Values of K per tile step (64 bytes of A per row).
template <class TA>
constexpr index_t amx_depth = 64 / index_t(sizeof(TA));

/// K shorter than one step in whole 4-byte groups: one narrow step read in place.
template <class TA>
constexpr bool amx_short_k(index_t K) {
  return K < amx_depth<TA> && K * index_t(sizeof(TA)) % 4 == 0;
}
/// The K the tile path takes: a whole step or more, or a short one of at least half a step.
template <class TA>
constexpr bool amx_takes_k(index_t K) {
  return K >= amx_depth<TA> || (amx_short_k<TA>(K) && K * index_t(sizeof(TA)) >= 32);
}

#if KFUSE_AMX
/// The tile palette for one thread's AMX work: row tile 0 (its accumulators 0-1 and A tile 4)
/// of `rows0` rows, row tile 1 (accumulators 2-3, A tile 5) of `rows1`; the accumulator and B
/// tiles 64 bytes wide, A `a_bytes` (64; K's bytes when all of K is one short step) and B
/// a_bytes / 4 k-group rows. Released (tilerelease) when the scope ends so the thread's
/// context switches stop saving 8 KiB of tile data.
class amx_scope {
 public:
  explicit amx_scope(int a_bytes = 64) : a_bytes_(a_bytes) { configure(16, 16); }
  ~amx_scope() { __asm__ volatile("tilerelease" ::: "memory"); }
  amx_scope(const amx_scope&) = delete;
  amx_scope& operator=(const amx_scope&) = delete;
  /// Rows of the two row tiles (1..16 each); reloading zeroes every tile.
  void configure(int rows0, int rows1) {
    const int rows = rows0 * 32 + rows1;
    if (rows == rows_) return;
    struct alignas(64) config {
      std::uint8_t palette = 1, start_row = 0;
      std::uint8_t reserved[14] = {};
      std::uint16_t colsb[16] = {};
      std::uint8_t rows[16] = {};
    } c;
    const int tile_rows[8] = {rows0, rows0, rows1, rows1, rows0, rows1, a_bytes_ / 4, a_bytes_ / 4};
    for (int t = 0; t < 8; ++t) {
      c.colsb[t] = std::uint16_t(t == 4 || t == 5 ? a_bytes_ : 64);
      c.rows[t] = std::uint8_t(tile_rows[t]);
    }
    __asm__ volatile("ldtilecfg %0" ::"m"(c) : "memory");
    rows_ = rows;
  }

 private:
  int rows_ = 0, a_bytes_;
};

#define KFUSE_AMX_DP(op, b, a, c) op " %%tmm" #b ", %%tmm" #a ", %%tmm" #c "\n\t"
/// One tile step: A's row tiles (16 rows, lda apart) at a0 and a1, B's two column tiles at b and
/// b + 64 (16 k-group rows 256 bytes apart), into accumulators 0-1 (row tile 0) and 2-3.
template <amx_op Op, int RT>
KFUSE_INLINE void amx_step(const std::byte* a0, const std::byte* a1, index_t lda,
                           const std::byte* b) {
  constexpr index_t b_ld = 256;
// Each product issued as soon as its two tiles are loaded, the loads of a row tile's second
// product overlapping its first (loads first, then the 4 products: 15-20% slower on the Xeon).
#define KFUSE_AMX_STEP(op)                                                                      \
  if constexpr (RT == 2)                                                                        \
    __asm__ volatile("tileloadd (%0,%4,1), %%tmm4\n\t"                                        \
                     "tileloadd (%2,%5,1), %%tmm6\n\t" KFUSE_AMX_DP(op, 6, 4, 0)               \
                     "tileloadd (%3,%5,1), %%tmm7\n\t" KFUSE_AMX_DP(op, 7, 4, 1)               \
                     "tileloadd (%1,%4,1), %%tmm5\n\t" KFUSE_AMX_DP(op, 6, 5, 2)               \
                         KFUSE_AMX_DP(op, 7, 5, 3)::"r"(a0),                                  \
                     "r"(a1), "r"(b), "r"(b + 64), "r"(lda), "r"(b_ld)                        \
                     : "memory"); \
  else                                                                                          \
    __asm__ volatile(                                                                           \
        "tileloadd (%0,%3,1), %%tmm4\n\t"                                                       \
        "tileloadd (%1,%4,1), %%tmm6\n\t" KFUSE_AMX_DP(                                         \
            op, 6, 4, 0) "tileloadd (%2,%4,1), %%tmm7\n\t" KFUSE_AMX_DP(op, 7, 4, 1)::"r"(a0),  \
        "r"(b), "r"(b + 64), "r"(lda), "r"(b_ld)                                                \
        : "memory")
  if constexpr (Op == amx_op::bf16)
    KFUSE_AMX_STEP("tdpbf16ps");
  else if constexpr (Op == amx_op::u8s8)
    KFUSE_AMX_STEP("tdpbusd");
  else
    KFUSE_AMX_STEP("tdpbssd");
#undef KFUSE_AMX_STEP
}

/// One block: C[16 RT rows][32 columns] (f32 or s32, 128 bytes a row) = A . B over `steps` tile
/// steps. A's row r, step s at a + r lda + 64 s bytes; the last step reads `a_tail` instead
/// (16 RT rows of 64 bytes, zero past K) when given. B: a panel's two 16-column tiles at b and
/// b + 64, 16 k-group rows of 256 bytes per step.
template <amx_op Op, int RT>
KFUSE_NOINLINE void amx_block(const std::byte* a, index_t lda, const std::byte* a_tail,
                              const std::byte* b, index_t steps, void* c) {
  __asm__ volatile("tilezero %%tmm0\n\ttilezero %%tmm1" ::: "memory");
  if constexpr (RT == 2) __asm__ volatile("tilezero %%tmm2\n\ttilezero %%tmm3" ::: "memory");
  const index_t full = a_tail ? steps - 1 : steps;
  // The lines of the step after next, prefetched: tileloadd's 16 strided rows are not streams
  // the hardware prefetchers follow (one-panel GEMMs from L2 ran 35-45% faster, 540 -> 700-830
  // GFLOP/s bf16 on one Xeon core).
  constexpr index_t ahead = 2;
  for (index_t s = 0; s < full; ++s) {
    if (Op == amx_op::bf16 && s + ahead < full) {
      const std::byte* na = a + (s + ahead) * 64;
      for (int i = 0; i < 16 * RT; ++i) __builtin_prefetch(na + i * lda, 0, 3);
    }
    amx_step<Op, RT>(a + s * 64, a + 16 * lda + s * 64, lda, b + s * 16 * 256);
  }
  if (a_tail) amx_step<Op, RT>(a_tail, a_tail + 16 * 64, 64, b + full * 16 * 256);
  auto* out = static_cast<std::byte*>(c);
  __asm__ volatile(
      "tilestored %%tmm0, (%0,%1,1)\n\t"
      "tilestored %%tmm1, (%2,%1,1)" ::"r"(out),
      "r"(index_t(128)), "r"(out + 64)
      : "memory");
  if constexpr (RT == 2)
    __asm__ volatile(
        "tilestored %%tmm2, (%0,%1,1)\n\t"
        "tilestored %%tmm3, (%2,%1,1)" ::"r"(out + 16 * 128),
        "r"(index_t(128)), "r"(out + 16 * 128 + 64)
        : "memory");
}
#undef KFUSE_AMX_DP

/// C = A . B on tiles, for M rows and every column panel of w (64 columns, K padded to the tile
/// depth: w.kp() % amx_depth<TA> == 0). Each finished block goes to
/// store(row0, rows, col0, acc) - acc: `rows` rows of 32 accumulators (float for bf16, int32 for
/// int8), 32 a row - for the caller's epilogue. Work items are chunks of 32-row blocks whose A
/// stays in L2 while every panel passes (each panel half in L1 while the chunk's blocks use it),
/// split over panels too when there are fewer chunks than threads. Returns the threads used.
template <class TA, class TB, class Store>
int amx_gemm(const TA* a, index_t M, index_t lda, const packed_weights<TB>& w, int threads,
             const Store& store) {
  constexpr amx_op op = amx_op_for<TA>;
  constexpr index_t depth = amx_depth<TA>;
  using acc_t = std::conditional_t<op == amx_op::bf16, float, std::int32_t>;
  const index_t K = w.K(), N = w.N(), panels = w.panels();
  const index_t steps = (K + depth - 1) / depth;
  // K shorter than one step, in whole 4-byte groups (a 1x1 conv of 16 channels): one step of
  // that width, read in place; otherwise the last partial step from a zero-padded copy.
  const bool short_k = amx_short_k<TA>(K);
  const index_t rem = short_k ? 0 : K % depth;
  const int a_bytes = short_k ? int(K * index_t(sizeof(TA))) : 64;
  const index_t lda_bytes = lda * index_t(sizeof(TA));
  const index_t blocks = (M + 31) / 32;
  // Up to 8 blocks (or ~1 MiB of A: half of a 2 MiB L2) per chunk: each chunk streams every
  // weight once, so weights larger than L2 (3x3 x 512 -> 512: 4.7 MB of bf16) are read from
  // memory once per chunk, not once per block.
  constexpr index_t max_chunk = 8;
  const index_t block_bytes = 32 * K * index_t(sizeof(TA));
  const index_t per_chunk =
      std::clamp<index_t>(index_t(1024 * 1024) / std::max<index_t>(block_bytes, 1), 1, max_chunk);
  const index_t chunks = (blocks + per_chunk - 1) / per_chunk;
  const index_t groups =
      chunks >= threads ? 1 : std::min<index_t>(panels, (threads + chunks - 1) / chunks);
  const index_t items = chunks * groups;
  const int used = int(std::min<index_t>(threads, items));
  parallel_for(
      0, items, (items + used - 1) / used,
      [&](range rg, int) {
        amx_scope tiles(a_bytes);
        alignas(64) std::byte tails[max_chunk][32 * 64];
        alignas(64) acc_t acc[32 * 32];
        for (index_t it = rg.begin; it < rg.end; ++it) {
          const index_t chunk = it / groups, group = it % groups;
          const index_t b0 = chunk * per_chunk, b1 = std::min(blocks, b0 + per_chunk);
          const index_t p0 = group * panels / groups, p1 = (group + 1) * panels / groups;
          if (rem)  // the last partial tile step of each block's rows, zero past K
            for (index_t blk = b0; blk < b1; ++blk) {
              const index_t row0 = blk * 32, rows = std::min<index_t>(32, M - row0);
              std::byte* t = tails[blk - b0];
              std::memset(t, 0, sizeof(tails[0]));
              for (index_t r = 0; r < rows; ++r)
                std::memcpy(t + r * 64, a + (row0 + r) * lda + (steps - 1) * depth,
                            std::size_t(rem) * sizeof(TA));
            }
          for (index_t p = p0; p < p1; ++p)
            for (index_t half = 0; half < 2; ++half) {
              const index_t col0 = p * 64 + half * 32;
              if (col0 >= N) break;
              const auto* b = reinterpret_cast<const std::byte*>(w.panel(p)) + half * 128;
              for (index_t blk = b0; blk < b1; ++blk) {
                const index_t row0 = blk * 32;
                const int rows = int(std::min<index_t>(32, M - row0));
                const auto* ab = reinterpret_cast<const std::byte*>(a + row0 * lda);
                const std::byte* tail = rem ? tails[blk - b0] : nullptr;
                if (rows > 16) {
                  tiles.configure(16, rows - 16);
                  amx_block<op, 2>(ab, lda_bytes, tail, b, steps, acc);
                } else {
                  tiles.configure(rows, 16);
                  amx_block<op, 1>(ab, lda_bytes, tail, b, steps, acc);
                }
                store(row0, index_t(rows), col0, static_cast<const acc_t*>(acc));
              }
            }
        }
      },
      used);
  return used;
}
#endif

}  // namespace detail
KFUSE_END_NAMESPACE
