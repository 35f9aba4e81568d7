#pragma once
// Tiny llama / qwen2 models written by the tests (random weights in any tensor type, a small
// SentencePiece vocabulary) and an independent reference forward pass in double precision on
// the same dequantized weights.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gguf_writer.hpp"

namespace kfuse::llm::test {

struct tiny_shape {
  std::string arch = "llama";
  int n_embd = 64, n_layer = 2, n_head = 4, n_head_kv = 2, n_ff = 96, n_ctx = 128;
  float rope_base = 10000.f, rms_eps = 1e-5f;
  std::uint32_t type = 0;  // tensor_type of the layer matrices
  std::uint32_t head_type = 1;
  bool tied = false;
  bool k_mix = true;  // type q4_k: Q4_K_M's mix, q6_k for the value and down projections
};

inline std::uint16_t to_f16(float f) {
  // Through the hardware-independent path: round to nearest even via float arithmetic.
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  const std::uint32_t sign = (x >> 16) & 0x8000, ax = x & 0x7fffffff;
  if (ax >= 0x477ff000) return std::uint16_t(sign | 0x7c00);
  if (ax < 0x38800000) {
    float a;
    std::memcpy(&a, &ax, 4);
    return std::uint16_t(sign | std::uint32_t(std::nearbyint(a * 16777216.f)));
  }
  const std::uint32_t r = ax + 0xfff + ((ax >> 13) & 1);
  return std::uint16_t(sign | ((r - (112u << 23)) >> 13));
}
inline float from_f16(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000) << 16, e = (h >> 10) & 31, m = h & 0x3ff;
  float v;
  if (e == 0)
    v = std::ldexp(float(m), -24);
  else
    v = std::ldexp(float(m | 0x400), int(e) - 25);
  return sign ? -v : v;
}

/// Encodes rows of f32 values as `type`; `deq` receives the values the file then holds.
inline std::vector<std::byte> encode(std::uint32_t type, const std::vector<float>& v,
                                     std::int64_t cols, std::vector<float>& deq) {
  std::vector<std::byte> out;
  deq.resize(v.size());
  auto push = [&](const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    out.insert(out.end(), b, b + n);
  };
  if (type == 0) {
    push(v.data(), v.size() * 4);
    deq = v;
  } else if (type == 1 || type == 30) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::uint16_t h;
      if (type == 1) {
        h = to_f16(v[i]);
        deq[i] = from_f16(h);
      } else {
        std::uint32_t x;
        std::memcpy(&x, &v[i], 4);
        h = std::uint16_t((x + 0x7fff + ((x >> 16) & 1)) >> 16);
        const std::uint32_t y = std::uint32_t(h) << 16;
        std::memcpy(&deq[i], &y, 4);
      }
      push(&h, 2);
    }
  } else if (type == 3 || type == 6) {  // q4_1 / q5_0: random valid blocks
    std::mt19937 rng(std::uint32_t(v.size()) * 37u + type);
    const float unit = 1.f / std::sqrt(float(cols));
    for (std::size_t b = 0; b < v.size() / 32; ++b) {
      std::vector<std::uint8_t> blk(type == 3 ? 20 : 22);
      for (auto& x : blk) x = std::uint8_t(rng());
      float* y = &deq[b * 32];
      const std::uint16_t d = to_f16(unit / (type == 3 ? 8.f : 16.f)), m = to_f16(-unit);
      std::memcpy(&blk[0], &d, 2);
      if (type == 3) std::memcpy(&blk[2], &m, 2);
      std::uint32_t qh;
      std::memcpy(&qh, &blk[2], 4);
      const std::uint8_t* qs = &blk[type == 3 ? 4 : 6];
      for (int j = 0; j < 32; ++j) {
        const int nib = j < 16 ? qs[j] & 0xf : qs[j - 16] >> 4;
        y[j] = type == 3 ? from_f16(d) * float(nib) + from_f16(m)
                         : from_f16(d) * float((nib | int((qh >> j) & 1) << 4) - 16);
      }
      push(blk.data(), blk.size());
    }
  } else if (type == 12 || type == 14) {  // q4_k / q6_k: random valid super-blocks
    std::mt19937 rng(std::uint32_t(v.size()) * 31u + type);
    const float unit = 1.f / std::sqrt(float(cols));
    for (std::size_t b = 0; b < v.size() / 256; ++b) {
      std::vector<std::uint8_t> blk(type == 12 ? 144 : 210);
      for (auto& x : blk) x = std::uint8_t(rng());
      float* y = &deq[b * 256];
      if (type == 12) {
        const std::uint16_t d = to_f16(2.f * unit / 945.f), dmin = to_f16(unit / 63.f);
        std::memcpy(&blk[0], &d, 2);
        std::memcpy(&blk[2], &dmin, 2);
        const std::uint8_t* sc = &blk[4];
        for (int j = 0; j < 8; ++j) {
          const int s_ = j < 4 ? sc[j] & 63 : (sc[j + 4] & 0xf) | ((sc[j - 4] >> 6) << 4);
          const int m_ = j < 4 ? sc[j + 4] & 63 : (sc[j + 4] >> 4) | ((sc[j] >> 6) << 4);
          for (int l = 0; l < 32; ++l) {
            const std::uint8_t byte = blk[16 + (j / 2) * 32 + std::size_t(l)];
            const int q = j % 2 ? byte >> 4 : byte & 0xf;
            y[j * 32 + l] = from_f16(d) * float(s_) * float(q) - from_f16(dmin) * float(m_);
          }
        }
      } else {
        const std::uint16_t d = to_f16(unit / 2048.f);
        std::memcpy(&blk[208], &d, 2);
        for (int i = 0; i < 256; ++i) {  // value i: half h, then l and which of the four quarters
          const int h = i / 128, r = i % 128, quarter = r / 32, l = r % 32;
          const std::uint8_t ql = blk[std::size_t(h * 64 + l + (quarter % 2) * 32)];
          const std::uint8_t qh = blk[std::size_t(128 + h * 32 + l)];
          const int q =
              ((quarter < 2 ? ql & 0xf : ql >> 4) | (((qh >> (2 * quarter)) & 3) << 4)) - 32;
          const auto sc = std::int8_t(blk[std::size_t(192 + h * 8 + l / 16 + 2 * quarter)]);
          y[i] = from_f16(d) * float(sc) * float(q);
        }
      }
      push(blk.data(), blk.size());
    }
  } else {  // q8_0 (8) / q4_0 (2), llama.cpp's reference quantizers
    for (std::size_t b = 0; b < v.size() / 32; ++b) {
      const float* x = &v[b * 32];
      float amax = 0, max = 0;
      for (int i = 0; i < 32; ++i)
        if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), max = x[i];
      if (type == 8) {
        const float d = amax / 127.f, id = d ? 1.f / d : 0.f;
        const std::uint16_t h = to_f16(d);
        push(&h, 2);
        for (int i = 0; i < 32; ++i) {
          const auto q = std::int8_t(std::nearbyint(x[i] * id));
          push(&q, 1);
          deq[b * 32 + std::size_t(i)] = from_f16(h) * q;
        }
      } else {
        const float d = max / -8.f, id = d ? 1.f / d : 0.f;
        const std::uint16_t h = to_f16(d);
        push(&h, 2);
        std::uint8_t qs[16];
        for (int j = 0; j < 16; ++j) {
          const int q0 = std::min(15, int(x[j] * id + 8.5f)),
                    q1 = std::min(15, int(x[j + 16] * id + 8.5f));
          qs[j] = std::uint8_t(q0 | q1 << 4);
          deq[b * 32 + std::size_t(j)] = from_f16(h) * float(q0 - 8);
          deq[b * 32 + std::size_t(j) + 16] = from_f16(h) * float(q1 - 8);
        }
        push(qs, 16);
      }
    }
  }
  (void)cols;
  return out;
}

/// A SentencePiece vocabulary: <unk> <s> </s>, the 256 byte tokens, then letters and words.
inline void write_vocab(gguf_writer& w, int& n_vocab) {
  std::vector<std::string> tokens{"<unk>", "<s>", "</s>"};
  std::vector<float> scores{0, 0, 0};
  std::vector<std::int32_t> types{2, 3, 3};
  char buf[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    tokens.push_back(buf);
    scores.push_back(0);
    types.push_back(6);
  }
  const char* words[] = {"\xe2\x96\x81",
                         "a",
                         "b",
                         "c",
                         "d",
                         "e",
                         "h",
                         "l",
                         "o",
                         "r",
                         "w",
                         "\xe2\x96\x81h",
                         "he",
                         "ll",
                         "lo",
                         "\xe2\x96\x81w",
                         "or",
                         "ld",
                         "hell",
                         "hello",
                         "\xe2\x96\x81hello",
                         "wor",
                         "world",
                         "\xe2\x96\x81world"};
  float s = -1;
  for (const char* t : words) {
    tokens.push_back(t);
    scores.push_back(s -= 0.5f);
    types.push_back(1);
  }
  n_vocab = int(tokens.size());
  w.string("tokenizer.ggml.model", "llama");
  w.strings("tokenizer.ggml.tokens", tokens);
  w.floats("tokenizer.ggml.scores", scores);
  w.ints("tokenizer.ggml.token_type", types);
  w.u32("tokenizer.ggml.bos_token_id", 1);
  w.u32("tokenizer.ggml.eos_token_id", 2);
  w.u32("tokenizer.ggml.unknown_token_id", 0);
}

struct tiny_model {
  tiny_shape shape;
  int n_vocab = 0;
  std::map<std::string, std::vector<float>> w;  // dequantized weights by tensor name
  std::filesystem::path path;
};

/// Writes a model with random weights (fixed seed) to a temporary file.
inline tiny_model make_tiny_model(const tiny_shape& s, const std::string& file_name,
                                  unsigned seed = 7) {
  tiny_model m;
  m.shape = s;
  gguf_writer g;
  g.string("general.architecture", s.arch);
  g.string("general.name", "tiny");
  const std::string a = s.arch + ".";
  g.u32(a + "context_length", std::uint32_t(s.n_ctx));
  g.u32(a + "embedding_length", std::uint32_t(s.n_embd));
  g.u32(a + "block_count", std::uint32_t(s.n_layer));
  g.u32(a + "feed_forward_length", std::uint32_t(s.n_ff));
  g.u32(a + "attention.head_count", std::uint32_t(s.n_head));
  g.u32(a + "attention.head_count_kv", std::uint32_t(s.n_head_kv));
  g.f32(a + "rope.freq_base", s.rope_base);
  g.f32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  write_vocab(g, m.n_vocab);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  auto add = [&](const std::string& name, std::uint32_t type, std::int64_t cols, std::int64_t rows,
                 float scale, float mean = 0) {
    std::vector<float> v(std::size_t(cols * rows));
    for (auto& x : v) x = mean + scale * normal(rng);
    std::vector<float> deq;
    auto bytes = encode(type, v, cols, deq);
    m.w[name] = deq;
    if (rows == 1)
      g.tensor(name, type, {cols}, std::move(bytes));
    else
      g.tensor(name, type, {cols, rows}, std::move(bytes));
  };
  const std::int64_t E = s.n_embd, D = E / s.n_head, Q = E, KV = std::int64_t(s.n_head_kv) * D,
                     F = s.n_ff, V = m.n_vocab;
  add("token_embd.weight", s.tied ? s.head_type : 0, E, V, 1.f);
  add("output_norm.weight", 0, E, 1, 0.1f, 1.f);
  if (!s.tied) add("output.weight", s.head_type, E, V, 1.f / std::sqrt(float(E)));
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    add(b + "attn_norm.weight", 0, E, 1, 0.1f, 1.f);
    add(b + "ffn_norm.weight", 0, E, 1, 0.1f, 1.f);
    add(b + "attn_q.weight", s.type, E, Q, 1.f / std::sqrt(float(E)));
    add(b + "attn_k.weight", s.type, E, KV, 1.f / std::sqrt(float(E)));
    const std::uint32_t mixed = s.type == 12 && s.k_mix ? 14 : s.type;
    add(b + "attn_v.weight", mixed, E, KV, 1.f / std::sqrt(float(E)));
    add(b + "attn_output.weight", s.type, Q, E, 1.f / std::sqrt(float(Q)));
    add(b + "ffn_gate.weight", s.type, E, F, 1.f / std::sqrt(float(E)));
    add(b + "ffn_up.weight", s.type, E, F, 1.f / std::sqrt(float(E)));
    add(b + "ffn_down.weight", mixed, F, E, 1.f / std::sqrt(float(F)));
    if (s.arch == "qwen2") {
      add(b + "attn_q.bias", 0, Q, 1, 0.1f);
      add(b + "attn_k.bias", 0, KV, 1, 0.1f);
      add(b + "attn_v.bias", 0, KV, 1, 0.1f);
    }
  }
  m.path = std::filesystem::temp_directory_path() / file_name;
  const auto bytes = g.bytes();
  std::ofstream(m.path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return m;
}

/// Teacher-forced logits [n][n_vocab] of an fp64 forward pass on the dequantized weights.
inline std::vector<double> reference_logits(const tiny_model& m, const std::vector<int>& ids) {
  const tiny_shape& s = m.shape;
  const int E = s.n_embd, H = s.n_head, HKV = s.n_head_kv, D = E / H, F = s.n_ff, V = m.n_vocab;
  const int n = int(ids.size());
  auto W = [&](const std::string& name) -> const std::vector<float>& { return m.w.at(name); };
  // y[r] = sum_c w[r * cols + c] * x[c]
  auto matvec = [](const std::vector<float>& w, const std::vector<double>& x, int rows) {
    const std::size_t cols = x.size();
    std::vector<double> y(std::size_t(rows), 0.0);
    for (int r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c)
        y[std::size_t(r)] += double(w[std::size_t(r) * cols + c]) * x[c];
    return y;
  };
  auto rmsnorm = [&](const std::vector<double>& x, const std::vector<float>& g) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / double(x.size()) + double(s.rms_eps));
    std::vector<double> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * double(g[i]);
    return y;
  };
  auto rope = [&](double* h, int pos) {
    for (int i = 0; i < D / 2; ++i) {
      const double theta = pos * std::pow(double(s.rope_base), -2.0 * i / D);
      const int a = s.arch == "qwen2" ? i : 2 * i, b = s.arch == "qwen2" ? i + D / 2 : 2 * i + 1;
      const double x0 = h[a], x1 = h[b];
      h[a] = x0 * std::cos(theta) - x1 * std::sin(theta);
      h[b] = x0 * std::sin(theta) + x1 * std::cos(theta);
    }
  };
  std::vector<std::vector<std::vector<double>>> kc(std::size_t(s.n_layer)),
      vc(std::size_t(s.n_layer));
  std::vector<double> out;
  for (int t = 0; t < n; ++t) {
    std::vector<double> x(static_cast<std::size_t>(E));
    for (int i = 0; i < E; ++i)
      x[std::size_t(i)] = W(
          "token_embd.weight")[std::size_t(ids[std::size_t(t)]) * std::size_t(E) + std::size_t(i)];
    for (int l = 0; l < s.n_layer; ++l) {
      const std::string b = "blk." + std::to_string(l) + ".";
      const auto xn = rmsnorm(x, W(b + "attn_norm.weight"));
      auto q = matvec(W(b + "attn_q.weight"), xn, E);
      auto k = matvec(W(b + "attn_k.weight"), xn, HKV * D);
      auto v = matvec(W(b + "attn_v.weight"), xn, HKV * D);
      if (s.arch == "qwen2") {
        for (int i = 0; i < E; ++i) q[std::size_t(i)] += W(b + "attn_q.bias")[std::size_t(i)];
        for (int i = 0; i < HKV * D; ++i) k[std::size_t(i)] += W(b + "attn_k.bias")[std::size_t(i)];
        for (int i = 0; i < HKV * D; ++i) v[std::size_t(i)] += W(b + "attn_v.bias")[std::size_t(i)];
      }
      for (int h = 0; h < H; ++h) rope(&q[std::size_t(h * D)], t);
      for (int h = 0; h < HKV; ++h) rope(&k[std::size_t(h * D)], t);
      kc[std::size_t(l)].push_back(k);
      vc[std::size_t(l)].push_back(v);
      std::vector<double> att(std::size_t(E), 0.0);
      for (int h = 0; h < H; ++h) {
        const int kvh = h / (H / HKV);
        std::vector<double> sc(std::size_t(t + 1));
        double best = -1e300;
        for (int j = 0; j <= t; ++j) {
          double d = 0;
          for (int i = 0; i < D; ++i)
            d += q[std::size_t(h * D + i)] *
                 kc[std::size_t(l)][std::size_t(j)][std::size_t(kvh * D + i)];
          sc[std::size_t(j)] = d / std::sqrt(double(D));
          best = std::max(best, sc[std::size_t(j)]);
        }
        double total = 0;
        for (auto& v2 : sc) total += v2 = std::exp(v2 - best);
        for (int j = 0; j <= t; ++j)
          for (int i = 0; i < D; ++i)
            att[std::size_t(h * D + i)] +=
                sc[std::size_t(j)] / total *
                vc[std::size_t(l)][std::size_t(j)][std::size_t(kvh * D + i)];
      }
      const auto o = matvec(W(b + "attn_output.weight"), att, E);
      for (int i = 0; i < E; ++i) x[std::size_t(i)] += o[std::size_t(i)];
      const auto xf = rmsnorm(x, W(b + "ffn_norm.weight"));
      const auto g = matvec(W(b + "ffn_gate.weight"), xf, F);
      const auto u = matvec(W(b + "ffn_up.weight"), xf, F);
      std::vector<double> hid(static_cast<std::size_t>(F));
      for (int i = 0; i < F; ++i)
        hid[std::size_t(i)] =
            g[std::size_t(i)] / (1 + std::exp(-g[std::size_t(i)])) * u[std::size_t(i)];
      const auto d = matvec(W(b + "ffn_down.weight"), hid, E);
      for (int i = 0; i < E; ++i) x[std::size_t(i)] += d[std::size_t(i)];
    }
    const auto xo = rmsnorm(x, W("output_norm.weight"));
    const auto logits = matvec(W(s.tied ? "token_embd.weight" : "output.weight"), xo, V);
    out.insert(out.end(), logits.begin(), logits.end());
  }
  return out;
}

inline double cosine(const double* a, const float* b, std::size_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ab += a[i] * b[i];
    aa += a[i] * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

}  // namespace kfuse::llm::test
