// Streaming stores (simd/stream.hpp): the size from which outputs are written with them.
#include "kfuse/simd/stream.hpp"

#include <string>

#include "support/test_support.hpp"

using kfuse::index_t;
using kfuse::detail::stream_min_bytes_of;

TEST_CASE("stream_min_bytes: KFUSE_STREAM_MIN_BYTES, else a quarter of the L3, else 8 MiB") {
  const long long mib = 1 << 20;
  std::string w;
  CHECK(stream_min_bytes_of(nullptr, 32 * mib, w) == 8 * mib);
  CHECK(stream_min_bytes_of(nullptr, 480 * mib, w) == 120 * mib);
  CHECK(stream_min_bytes_of(nullptr, -1, w) == 8 * mib);  // unknown cache size
  CHECK(stream_min_bytes_of(nullptr, 0, w) == 8 * mib);
  CHECK(stream_min_bytes_of("1048576", 480 * mib, w) == mib);
  CHECK(stream_min_bytes_of("1", -1, w) == 1);
  CHECK(w.empty());
  for (const char* bad : {"", "abc", "0", "-5", "12x", "99999999999999999999999"}) {
    INFO(bad);
    std::string warning;
    CHECK(stream_min_bytes_of(bad, 32 * mib, warning) == 8 * mib);
    CHECK(warning == std::string("kfuse: KFUSE_STREAM_MIN_BYTES='") + bad +
                         "' is not a byte count >= 1; ignored");
  }
  CHECK(kfuse::detail::stream_min_bytes() >= 1);
}
