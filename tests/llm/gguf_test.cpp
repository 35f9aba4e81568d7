// The GGUF reader: metadata of every type, tensors located in the mapping, and every kind of
// damage (truncation at each byte, flipped bytes, hostile counts) a clear kfuse::error.
#include "kfuse/llm/gguf.hpp"

#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "gguf_writer.hpp"
#include "kfuse/error.hpp"

using Catch::Matchers::Contains;
using kfuse::llm::gguf_file;
using kfuse::llm::tensor_type;
using kfuse::llm::test::gguf_writer;

namespace {
gguf_writer sample() {
  gguf_writer w;
  w.string("general.architecture", "llama");
  w.u32("llama.block_count", 2);
  w.f32("llama.rope.freq_base", 10000.f);
  w.boolean("tokenizer.ggml.add_bos_token", true);
  w.strings("tokenizer.ggml.tokens", {"<s>", "a", "b"});
  w.floats("tokenizer.ggml.scores", {0.f, -1.f, -2.f});
  w.ints("tokenizer.ggml.token_type", {3, 1, 1});
  w.tensor("w", std::uint32_t(tensor_type::f32), {4, 2},
           kfuse::llm::test::f32_bytes({1, 2, 3, 4, 5, 6, 7, 8}));
  std::vector<std::byte> q(34 * 2);  // two q8_0 blocks
  w.tensor("q", std::uint32_t(tensor_type::q8_0), {64}, q);
  return w;
}
}  // namespace

TEST_CASE("gguf: metadata and tensors of a well-formed file", "[llm][gguf]") {
  const gguf_file f = gguf_file::from_bytes(sample().bytes());
  CHECK(f.version() == 3);
  CHECK(f.get_string("general.architecture") == "llama");
  CHECK(f.get_u32("llama.block_count") == 2);
  CHECK(f.get_f32("llama.rope.freq_base") == 10000.f);
  CHECK(f.get_bool("tokenizer.ggml.add_bos_token"));
  CHECK(f.get_strings("tokenizer.ggml.tokens").size() == 3);
  CHECK(f.get_floats("tokenizer.ggml.scores")[2] == -2.0);
  CHECK(f.get_ints("tokenizer.ggml.token_type")[0] == 3);
  CHECK(f.get_u32_or("llama.missing", 7) == 7);
  const auto& w = f.tensor("w");
  CHECK(w.dims == std::vector<std::int64_t>{4, 2});
  CHECK(w.rows() == 2);
  CHECK(w.bytes == 32);
  float v[8];
  std::memcpy(v, w.data, 32);
  CHECK(v[7] == 8.f);
  CHECK(f.tensor("q").bytes == 68);
  CHECK(f.tensor("q").type == std::uint32_t(tensor_type::q8_0));
}

TEST_CASE("gguf: a mapped file reads like bytes in memory", "[llm][gguf]") {
  const auto path = std::filesystem::temp_directory_path() / "kfuse_gguf_test.gguf";
  const auto bytes = sample().bytes();
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  {
    gguf_file f = gguf_file::open(path.string());
    gguf_file moved = std::move(f);
    CHECK(moved.get_string("general.architecture") == "llama");
    float v[8];
    std::memcpy(v, moved.tensor("w").data, 32);
    CHECK(v[0] == 1.f);
  }
  std::filesystem::remove(path);
}

TEST_CASE("gguf: wrong keys and types name the key", "[llm][gguf]") {
  const gguf_file f = gguf_file::from_bytes(sample().bytes(), "m.gguf");
  CHECK_THROWS_WITH(f.get_u32("nope"), Contains("m.gguf") && Contains("missing key 'nope'"));
  CHECK_THROWS_WITH(f.get_u32("general.architecture"),
                    Contains("key 'general.architecture' is string, expected an integer"));
  CHECK_THROWS_WITH(f.get_strings("llama.block_count"), Contains("'llama.block_count'"));
  CHECK_THROWS_WITH(f.tensor("x"), Contains("no tensor 'x'"));
  CHECK_THROWS_WITH(gguf_file::open("/nonexistent/m.gguf"), Contains("cannot open"));
}

TEST_CASE("gguf: unsupported tensor types and bad shapes name the tensor", "[llm][gguf]") {
  gguf_writer w;
  w.tensor("blk.0.ffn_up.weight", 17, {256}, std::vector<std::byte>(256));
  CHECK_THROWS_WITH(gguf_file::from_bytes(w.bytes()),
                    Contains("tensor 'blk.0.ffn_up.weight': unsupported tensor type type 17"));
  gguf_writer r;
  r.tensor("t", std::uint32_t(tensor_type::q4_0), {48}, std::vector<std::byte>(36));
  CHECK_THROWS_WITH(gguf_file::from_bytes(r.bytes()), Contains("tensor 't': row length 48"));
}

TEST_CASE("gguf: every truncation is a clear error", "[llm][gguf]") {
  const auto bytes = sample().bytes();
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    std::vector<std::byte> cut(bytes.begin(), bytes.begin() + std::ptrdiff_t(n));
    try {
      gguf_file::from_bytes(std::move(cut));
      // Only the padding after the last tensor may be cut without losing data.
      CHECK(n >= bytes.size() - 32);
    } catch (const kfuse::error& e) {
      CHECK_THAT(e.what(), Contains("gguf <memory>: "));
    }
  }
}

TEST_CASE("gguf: fuzzed headers never crash, hang or allocate wildly", "[llm][gguf][fuzz]") {
  const auto bytes = sample().bytes();
  std::mt19937 rng(1234);
  int errors = 0, parsed = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    auto damaged = bytes;
    const int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      // Mostly the header (where the counts and lengths live), sometimes anywhere.
      const std::size_t at =
          rng() % 4 ? rng() % std::min<std::size_t>(bytes.size(), 400) : rng() % bytes.size();
      damaged[at] = rng() % 3 ? std::byte(rng()) : std::byte(0xff);
    }
    try {
      const gguf_file f = gguf_file::from_bytes(std::move(damaged));
      for (const auto& t : f.tensors()) CHECK(t.offset + t.bytes <= f.file_bytes());
      ++parsed;
    } catch (const kfuse::error& e) {
      CHECK_THAT(e.what(), Contains("gguf <memory>: "));
      ++errors;
    }
  }
  CHECK(errors > 1000);
  CHECK(parsed + errors == 20000);
}
