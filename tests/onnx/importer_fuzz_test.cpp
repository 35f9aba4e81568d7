// Fuzzing the importer with damaged real models (fixed seed and count, so CI runs the same cases
// every time; ASan/UBSan in CI): truncations at every length class, random bit flips, random
// byte runs and pure noise. Every load either succeeds (and then compiles or throws
// kfuse::error) or throws kfuse::error; anything else (a crash, another exception type, a huge
// allocation) fails the test.
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "graph/compiler_instance.hpp"
#include "kfuse/onnx/importer.hpp"

namespace {

std::vector<std::byte> read_all(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  std::memcpy(out.data(), c.data(), c.size());
  return out;
}

struct outcome {
  int loaded = 0, compiled = 0, rejected = 0;
};

void try_bytes(const std::vector<std::byte>& bytes, outcome& o) {
  kfuse::onnx::import_options opt;
  opt.max_bytes = std::size_t(64) << 20;  // hostile dims stop here, not at the machine's memory
  kfuse::onnx::model m;
  try {
    m = kfuse::onnx::load_bytes(bytes, opt);
  } catch (const kfuse::error&) {
    ++o.rejected;
    return;
  }
  ++o.loaded;
  try {  // a graph the importer accepted compiles, or compile() says why not
    kfuse::plan p = kfuse::compile(m.graph, {.threads = 1});
    ++o.compiled;
  } catch (const kfuse::error&) {
  }
}

}  // namespace

TEST_CASE("onnx fuzz: damaged models are loaded or rejected with kfuse::error") {
  std::mt19937_64 rng(20261125);
  outcome o;
  int cases = 0;
  for (const char* name :
       {"small_cnn_b1", "mlp_b3", "conv1d_b2", "decomposed_b2", "upsampling_b2"}) {
    const std::vector<std::byte> good =
        read_all(std::string(KFUSE_ONNX_TEST_MODELS) + "/" + name + ".onnx");
    REQUIRE(good.size() > 100);
    // Truncations: every length near the start, then a sweep.
    for (std::size_t len = 0; len < good.size(); len += len < 64 ? 1 : 1 + len / 16) {
      try_bytes(std::vector<std::byte>(good.begin(), good.begin() + std::ptrdiff_t(len)), o);
      ++cases;
    }
    // Bit flips (1 to 4 bits), anywhere.
    for (int k = 0; k < 150; ++k) {
      std::vector<std::byte> b = good;
      const int flips = 1 + int(rng() % 4);
      for (int f = 0; f < flips; ++f) b[rng() % b.size()] ^= std::byte(1u << (rng() % 8));
      try_bytes(b, o);
      ++cases;
    }
    // Runs of random bytes (overwrite lengths, varints, tags).
    for (int k = 0; k < 50; ++k) {
      std::vector<std::byte> b = good;
      const std::size_t at = rng() % b.size(), len = 1 + rng() % 8;
      for (std::size_t i = at; i < std::min(b.size(), at + len); ++i) b[i] = std::byte(rng());
      try_bytes(b, o);
      ++cases;
    }
  }
  for (int k = 0; k < 100; ++k) {  // noise
    std::vector<std::byte> b(rng() % 512);
    for (auto& v : b) v = std::byte(rng());
    try_bytes(b, o);
    ++cases;
  }
  INFO(cases << " cases: " << o.loaded << " loaded (" << o.compiled << " compiled), " << o.rejected
             << " rejected");
  CHECK(o.loaded + o.rejected == cases);
  CHECK(o.rejected > 0);
}
