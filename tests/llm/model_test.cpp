// Whole tiny models against the fp64 reference (tiny_model.hpp): every weight type, both
// architectures, tied heads, prefill = decode, the bf16 cache, every kernel tier against scalar,
// and the errors of bad files and bad calls.
#include "kfuse/llm/model.hpp"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <iomanip>
#include <thread>

#include "kfuse/error.hpp"
#include "kfuse/llm/generate.hpp"
#include "kfuse/llm/session.hpp"
#include "tiny_model.hpp"

using namespace kfuse::llm;
using namespace kfuse::llm::test;
using Catch::Matchers::Contains;

namespace {
std::vector<int> some_ids(int n, int vocab, unsigned seed = 3) {
  std::mt19937 rng(seed);
  std::vector<int> ids(static_cast<std::size_t>(n));
  for (auto& i : ids) i = int(rng() % unsigned(vocab));
  return ids;
}

// The smallest per-position cosine between kfuse's logits and the reference's.
double worst_cosine(const tiny_model& tm, const std::vector<float>& got,
                    const std::vector<int>& ids) {
  const auto ref = reference_logits(tm, ids);
  double worst = 1;
  for (std::size_t t = 0; t < ids.size(); ++t)
    worst = std::min(worst, cosine(&ref[t * std::size_t(tm.n_vocab)],
                                   &got[t * std::size_t(tm.n_vocab)], std::size_t(tm.n_vocab)));
  return worst;
}

struct env_guard {
  explicit env_guard(const char* v) { setenv("KFUSE_LLM_KERNELS", v, 1); }
  ~env_guard() { unsetenv("KFUSE_LLM_KERNELS"); }
};
}  // namespace

// Tolerances: f32 / f16 / bf16 weights multiply f32 activations (only f32 rounding: cosine
// 1 - 1e-6) over 128 positions; q8_0 / q5_0 / q4_0 / q4_1 (3: read as q4m, 6: as q8_0, both exact)
// multiply two-level int8 activations (~15 bits per
// value, panels.hpp), measured at 1 - 1e-7 here; 1e-5 leaves room for other seeds.
TEST_CASE("llm model: logits match an fp64 forward pass on the same weights", "[llm][model]") {
  const auto [arch, type, min_cos] =
      GENERATE(table<std::string, std::uint32_t, double>({{"llama", 0, 0.999999},
                                                          {"llama", 1, 0.999999},
                                                          {"llama", 30, 0.999999},
                                                          {"llama", 8, 0.99999},
                                                          {"llama", 2, 0.99999},
                                                          {"llama", 3, 0.99999},
                                                          {"llama", 6, 0.99999},
                                                          {"qwen2", 1, 0.999999},
                                                          {"qwen2", 8, 0.99999},
                                                          {"qwen2", 2, 0.99999}}));
  tiny_shape s;
  s.arch = arch;
  s.type = type;
  s.head_type = type;
  const auto tm = make_tiny_model(s, "kfuse_llm_" + arch + "_" + std::to_string(type) + ".gguf");
  const model m = model::load(tm.path.string());
  CHECK(m.config().arch == arch);
  CHECK(m.config().n_vocab == tm.n_vocab);
  session sess(m, {.n_ctx = 128, .threads = 2, .batch = 7});  // 128 tokens in steps of 7
  const auto ids = some_ids(128, tm.n_vocab);
  const auto got = sess.prefill_all_logits(ids);
  REQUIRE(got.size() == ids.size() * std::size_t(tm.n_vocab));
  const double c = worst_cosine(tm, got, ids);
  INFO(arch << " type " << type << ": worst cosine " << std::setprecision(9) << c);
  CHECK(c >= min_cos);
  std::filesystem::remove(tm.path);
}

// Q4_K and Q6_K are read as they are (Q4_K's scales and mins rounded to f16: ~0.05% of a block's
// scale; Q6_K exact), so the mix stays as close as the exact formats above.
TEST_CASE("llm model: q4_k / q6_k weights (the Q4_K_M mix) match the reference", "[llm][model]") {
  tiny_shape s;
  s.n_embd = 256;
  s.n_ff = 512;
  s.n_head = 4;
  s.type = 12;
  s.head_type = 14;
  const auto tm = make_tiny_model(s, "kfuse_llm_kquant.gguf");
  const model m = model::load(tm.path.string());
  session sess(m, {.n_ctx = 128, .threads = 2});
  const auto ids = some_ids(128, tm.n_vocab);
  const double c = worst_cosine(tm, sess.prefill_all_logits(ids), ids);
  INFO("worst cosine " << std::setprecision(9) << c);
  CHECK(c >= 0.99999);
  std::filesystem::remove(tm.path);
  // Q4_K alone: no requantization, only the f16 rounding of its scales and mins.
  s.k_mix = false;
  s.head_type = 12;
  const auto tq = make_tiny_model(s, "kfuse_llm_q4_k.gguf");
  const model mq = model::load(tq.path.string());
  session sq(mq, {.n_ctx = 128, .threads = 2});
  const double cq = worst_cosine(tq, sq.prefill_all_logits(ids), ids);
  INFO("q4_k only: worst cosine " << std::setprecision(9) << cq);
  CHECK(cq >= 0.99999);
  std::filesystem::remove(tq.path);
}

// fast_prefill: one int8 level on the prompt (llama.cpp's arithmetic), on every tier.
TEST_CASE("llm model: fast prefill stays close to the reference on every tier", "[llm][model]") {
  for (std::uint32_t type : {8u, 2u, 12u}) {
    tiny_shape s;
    s.type = type;
    s.head_type = type == 12 ? 8 : type;
    if (type == 12) s.n_embd = 256, s.n_ff = 512;
    const auto tm = make_tiny_model(s, "kfuse_llm_fast_prefill.gguf");
    const auto ids = some_ids(64, tm.n_vocab, 5);
    std::vector<float> scalar;
    for (const char* tier : {"scalar", "avx2", "avx512_vnni"}) {
      env_guard g(tier);
      try {
        const model m = model::load(tm.path.string());
        session sess(m, {.n_ctx = 64, .threads = 2, .fast_prefill = true});
        const auto got = sess.prefill_all_logits(ids);
        const double c = worst_cosine(tm, got, ids);
        INFO(tier << " type " << type << ": worst cosine " << std::setprecision(9) << c);
        CHECK(c >= 0.999);  // one level keeps ~8 bits per value: measured 0.99988-0.9999 here
        if (scalar.empty()) {
          scalar = got;
          continue;
        }
        double worst = 0, scale = 0;
        for (std::size_t i = 0; i < got.size(); ++i) {
          worst = std::max(worst, double(std::fabs(got[i] - scalar[i])));
          scale = std::max(scale, double(std::fabs(scalar[i])));
        }
        CHECK(worst <= 1e-4 * scale);
      } catch (const kfuse::error& e) {
        CHECK_THAT(e.what(), Contains("this CPU does not run it"));
      }
    }
    std::filesystem::remove(tm.path);
  }
}

TEST_CASE("llm model: decoding token by token equals one prefill", "[llm][model]") {
  tiny_shape s;
  s.type = 8;
  s.tied = true;
  const auto tm = make_tiny_model(s, "kfuse_llm_decode.gguf");
  const model m = model::load(tm.path.string());
  CHECK(m.config().tied_output);
  const auto ids = some_ids(20, tm.n_vocab, 11);
  session a(m, {.n_ctx = 32, .threads = 1});
  const auto all = a.prefill_all_logits(ids);
  session b(m, {.n_ctx = 32, .threads = 2});
  for (std::size_t t = 0; t < ids.size(); ++t) {
    const auto l = b.decode(ids[t]);
    double worst = 0;
    for (std::size_t i = 0; i < l.size(); ++i)
      worst = std::max(worst, double(std::fabs(l[i] - all[t * l.size() + i])));
    CHECK(worst < 1e-3);
  }
  CHECK(b.position() == 20);
  // The last token's logits of prefill() equal the last row of prefill_all_logits().
  session c(m, {.n_ctx = 32});
  const auto last = c.prefill(ids);
  CHECK(std::fabs(last[5] - all[(ids.size() - 1) * last.size() + 5]) < 1e-3);
  std::filesystem::remove(tm.path);
}

TEST_CASE("llm model: weights in 4 KiB pages give the same logits", "[llm][model]") {
  tiny_shape s;
  s.type = 2;
  s.n_embd = 1024;  // 2.6 MB of q4_0 panels per FFN matrix: past the 2 MiB huge-page threshold
  s.n_head = 16;
  s.n_ff = 4096;
  const auto tm = make_tiny_model(s, "kfuse_llm_pages.gguf");
  const auto ids = some_ids(9, tm.n_vocab, 3);
  const model huge = model::load(tm.path.string());
  const model small = model::load(tm.path.string(), {.huge_pages = false});
  session a(huge, {.n_ctx = 16}), b(small, {.n_ctx = 16});
  CHECK(a.prefill_all_logits(ids) == b.prefill_all_logits(ids));
  std::filesystem::remove(tm.path);
}

TEST_CASE("llm model: a bf16 KV cache stays close to the f32 one", "[llm][model]") {
  tiny_shape s;
  s.type = 1;
  const auto tm = make_tiny_model(s, "kfuse_llm_bf16cache.gguf");
  const model m = model::load(tm.path.string());
  const auto ids = some_ids(30, tm.n_vocab, 5);
  session f(m, {.n_ctx = 32, .cache = cache_type::f32});
  session h(m, {.n_ctx = 32, .cache = cache_type::bf16});
  const auto a = f.prefill_all_logits(ids), b = h.prefill_all_logits(ids);
  const auto ref = reference_logits(tm, ids);
  for (std::size_t t = 0; t < ids.size(); ++t)
    CHECK(cosine(&ref[t * std::size_t(tm.n_vocab)], &b[t * std::size_t(tm.n_vocab)],
                 std::size_t(tm.n_vocab)) > 0.9999);
  (void)a;
  std::filesystem::remove(tm.path);
}

TEST_CASE("llm model: every kernel tier this CPU runs agrees with scalar", "[llm][model][tiers]") {
  for (std::uint32_t type : {0u, 1u, 30u, 8u, 2u, 3u, 6u, 12u, 14u}) {
    tiny_shape s;
    s.type = type;
    s.head_type = type;
    s.n_ff = 160;                    // 10 panels: a tail of a 6-token tile and of the AVX2 paths
    if (type == 12 || type == 14) {  // K-quant rows are multiples of 256 values
      s.n_embd = 256;
      s.n_ff = 768;
    }
    const auto tm = make_tiny_model(s, "kfuse_llm_tiers.gguf");
    const auto ids = some_ids(13, tm.n_vocab, 9);
    std::vector<float> scalar;
    {
      env_guard g("scalar");
      const model m = model::load(tm.path.string());
      session sess(m, {.n_ctx = 16});
      scalar = sess.prefill_all_logits(ids);
    }
    for (const char* tier : {"avx2", "avx512_vnni"}) {
      env_guard g(tier);
      try {
        const model m = model::load(tm.path.string());
        session sess(m, {.n_ctx = 16});
        const auto got = sess.prefill_all_logits(ids);
        double worst = 0, scale = 0;
        for (std::size_t i = 0; i < got.size(); ++i) {
          worst = std::max(worst, double(std::fabs(got[i] - scalar[i])));
          scale = std::max(scale, double(std::fabs(scalar[i])));
        }
        INFO(tier << " type " << type << ": largest difference " << worst << " of " << scale);
        CHECK(worst <= 1e-4 * scale);  // the same integer dots; only float summation order differs
      } catch (const kfuse::error& e) {
        CHECK_THAT(e.what(), Contains("this CPU does not run it"));
      }
    }
    std::filesystem::remove(tm.path);
  }
}

TEST_CASE("llm model: bad calls are clear errors and change nothing", "[llm][model][errors]") {
  tiny_shape s;
  s.type = 8;
  const auto tm = make_tiny_model(s, "kfuse_llm_errors.gguf");
  const model m = model::load(tm.path.string());
  session sess(m, {.n_ctx = 8});
  CHECK_THROWS_WITH(session(m, {.threads = -2}), Contains("session: threads = -2"));
  CHECK_THROWS_WITH(sess.prefill({}), Contains("empty prompt"));
  const std::vector<int> bad{1, tm.n_vocab};
  CHECK_THROWS_WITH(sess.prefill(bad), Contains("token 1 has id " + std::to_string(tm.n_vocab)) &&
                                           Contains("outside the vocabulary"));
  CHECK_THROWS_WITH(sess.decode(-1), Contains("outside the vocabulary"));
  CHECK(sess.position() == 0);
  const auto ids = some_ids(6, tm.n_vocab);
  sess.prefill(ids);
  CHECK_THROWS_WITH(sess.prefill(ids),
                    Contains("context overflow: 6 tokens in the cache + 6 new > n_ctx 8"));
  CHECK(sess.position() == 6);
  sess.decode(1);
  sess.decode(2);
  CHECK_THROWS_WITH(sess.decode(3), Contains("context overflow"));
  CHECK_THROWS_WITH(generate(sess, {}, {}, nullptr), Contains("empty prompt"));
  // generate stops at the end of the context instead of overflowing it.
  sess.truncate(2);
  const std::vector<int> prompt{1, 5};
  const auto st =
      generate(sess, prompt, {.n_predict = 100, .sample = {.temperature = 0}, .stop_at_end = false},
               nullptr);
  CHECK(sess.position() == 8);
  CHECK(st.generated == 5);
  std::filesystem::remove(tm.path);
}

TEST_CASE("llm model: bad files name the key or tensor", "[llm][model][errors]") {
  auto write = [](gguf_writer& g, const char* name) {
    const auto p = std::filesystem::temp_directory_path() / name;
    const auto bytes = g.bytes();
    std::ofstream(p, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    return p.string();
  };
  {
    gguf_writer g;
    g.string("general.architecture", "mamba");
    CHECK_THROWS_WITH(model::load(write(g, "kfuse_llm_arch.gguf")),
                      Contains("'general.architecture' = 'mamba' is not supported"));
  }
  {
    gguf_writer g;
    g.string("general.architecture", "llama");
    g.u32("llama.embedding_length", 64);
    CHECK_THROWS_WITH(model::load(write(g, "kfuse_llm_key.gguf")),
                      Contains("missing key 'llama.block_count'"));
  }
  // A complete model with one tensor renamed, one reshaped, one of an unsupported type.
  tiny_shape s;
  s.type = 8;
  const auto tm = make_tiny_model(s, "kfuse_llm_complete.gguf");
  std::ifstream in(tm.path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  auto damaged = [&](const std::string& from, const std::string& to, const char* name) {
    std::string b = bytes;
    const auto at = b.find(from);
    REQUIRE(at != std::string::npos);
    b.replace(at, from.size(), to);
    const auto p = std::filesystem::temp_directory_path() / name;
    std::ofstream(p, std::ios::binary) << b;
    return p.string();
  };
  CHECK_THROWS_WITH(
      model::load(damaged("blk.1.ffn_up.weight", "blk.1.ffn_xx.weight", "kfuse_llm_missing.gguf")),
      Contains("missing tensor 'blk.1.ffn_up.weight'"));
  // Truncation: the last tensor's data is cut off.
  {
    const auto p = std::filesystem::temp_directory_path() / "kfuse_llm_cut.gguf";
    std::ofstream(p, std::ios::binary) << bytes.substr(0, bytes.size() - 100);
    CHECK_THROWS_WITH(model::load(p.string()), Contains("extends past the end of the file"));
  }
  std::filesystem::remove(tm.path);
}

TEST_CASE("llm model: sessions on several threads share one model", "[llm][model][threads]") {
  tiny_shape s;
  s.type = 2;
  const auto tm = make_tiny_model(s, "kfuse_llm_shared.gguf");
  const model m = model::load(tm.path.string());
  const auto ids = some_ids(24, tm.n_vocab, 21);
  session one(m, {.n_ctx = 32, .threads = 1});
  const auto expected = one.prefill_all_logits(ids);
  std::vector<std::vector<float>> got(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&, i] {
      session mine(m, {.n_ctx = 32, .threads = 2});
      got[std::size_t(i)] = mine.prefill_all_logits(ids);
    });
  for (auto& t : threads) t.join();
  for (const auto& g : got) {
    REQUIRE(g.size() == expected.size());
    double worst = 0;
    for (std::size_t i = 0; i < g.size(); ++i)
      worst = std::max(worst, double(std::fabs(g[i] - expected[i])));
    CHECK(worst < 1e-3);
  }
  std::filesystem::remove(tm.path);
}
