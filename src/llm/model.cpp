// Loading: metadata -> config (checked), every tensor's presence, type and shape checked before
// any repacking, then the matrices repacked into panels on all cores.
#include "kfuse/llm/model.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "kfuse/error.hpp"
#include "kfuse/threading/thread_pool.hpp"
#include "model_impl.hpp"
#include "pack.hpp"

namespace kfuse::llm {

namespace {

[[noreturn]] void bad(const gguf_file& f, const std::string& what) {
  throw kfuse::error("model " + f.path() + ": " + what);
}

model_config read_config(const gguf_file& f) {
  model_config c;
  c.arch = f.get_string("general.architecture");
  if (c.arch != "llama" && c.arch != "qwen2")
    bad(f, "key 'general.architecture' = '" + c.arch +
               "' is not supported (kfuse::llm runs llama and qwen2)");
  const std::string a = c.arch + ".";
  c.name = f.get_string_or("general.name", "");
  c.n_embd = int(f.get_u32(a + "embedding_length"));
  c.n_layer = int(f.get_u32(a + "block_count"));
  c.n_ff = int(f.get_u32(a + "feed_forward_length"));
  c.n_head = int(f.get_u32(a + "attention.head_count"));
  c.n_head_kv = int(f.get_u32_or(a + "attention.head_count_kv", std::uint32_t(c.n_head)));
  c.n_ctx_train = int(f.get_u32_or(a + "context_length", 2048));
  c.rope_base = f.get_f32_or(a + "rope.freq_base", 10000.f);
  c.rms_eps = f.get_f32_or(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  c.rope = c.arch == "qwen2" ? rope_style::neox : rope_style::norm;
  auto positive = [&](int v, const std::string& key, int limit) {
    if (v <= 0 || v > limit)
      bad(f, "key '" + a + key + "' = " + std::to_string(v) + " is out of range (1 to " +
                 std::to_string(limit) + ")");
  };
  positive(c.n_embd, "embedding_length", 1 << 16);
  positive(c.n_layer, "block_count", 1024);
  positive(c.n_ff, "feed_forward_length", 1 << 18);
  positive(c.n_head, "attention.head_count", 1024);
  positive(c.n_head_kv, "attention.head_count_kv", c.n_head);
  positive(c.n_ctx_train, "context_length", 1 << 24);
  if (c.n_embd % c.n_head != 0)
    bad(f, "embedding_length " + std::to_string(c.n_embd) + " is not a multiple of head_count " +
               std::to_string(c.n_head));
  if (c.n_head % c.n_head_kv != 0)
    bad(f, "head_count " + std::to_string(c.n_head) + " is not a multiple of head_count_kv " +
               std::to_string(c.n_head_kv));
  c.head_dim = int(f.get_u32_or(a + "attention.key_length", std::uint32_t(c.n_embd / c.n_head)));
  if (c.head_dim <= 0 || c.head_dim % 2 != 0 || c.head_dim > 1024)
    bad(f, "head dimension " + std::to_string(c.head_dim) + " must be even, at most 1024");
  if (f.has(a + "rope.dimension_count") && int(f.get_u32(a + "rope.dimension_count")) != c.head_dim)
    bad(f, "key '" + a + "rope.dimension_count' (partial RoPE) is not supported");
  if (!(c.rope_base > 0) || !(c.rms_eps > 0) || !(c.rms_eps < 1))
    bad(f, "rope.freq_base and layer_norm_rms_epsilon must be positive");
  return c;
}

// A tensor of the file with the given ggml dims, or an error naming it.
const gguf_tensor& need(const gguf_file& f, const std::string& name,
                        std::vector<std::int64_t> dims) {
  const gguf_tensor* t = f.find_tensor(name);
  if (!t) bad(f, "missing tensor '" + name + "'");
  if (t->dims != dims) {
    auto str = [](const std::vector<std::int64_t>& d) {
      std::string s = "[";
      for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
      return s + "]";
    };
    bad(f, "tensor '" + name + "' has shape " + str(t->dims) + ", expected " + str(dims));
  }
  return *t;
}

std::vector<float> to_f32(const gguf_tensor& t) {
  std::vector<float> v(std::size_t(t.elements()));
  if (t.dims.size() == 1) {
    gguf_tensor row = t;
    row.dims = {t.dims[0], 1};
    detail::dequantize_row(row, 0, v.data());
  } else {
    for (std::int64_t r = 0; r < t.rows(); ++r)
      detail::dequantize_row(t, r, v.data() + r * t.dims[0]);
  }
  return v;
}

}  // namespace

void model::impl::embed(std::int32_t token, float* out) const {
  detail::dequantize_row(embedding_info, token, out);
}

model model::load(const std::string& path, const load_options& opt) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  gguf_file f = gguf_file::open(path);
  if (opt.max_file_bytes && f.file_bytes() > opt.max_file_bytes)
    bad(f, "file of " + std::to_string(f.file_bytes()) + " bytes exceeds the limit of " +
               std::to_string(opt.max_file_bytes));
  model_config c = read_config(f);
  tokenizer vocab(f);
  c.n_vocab = vocab.size();

  const std::int64_t E = c.n_embd, F = c.n_ff, Q = std::int64_t(c.n_head) * c.head_dim,
                     KV = std::int64_t(c.n_head_kv) * c.head_dim, V = c.n_vocab;
  // Every tensor checked (presence, shape, type) before any work.
  const gguf_tensor& embd = need(f, "token_embd.weight", {E, V});
  const gguf_tensor& out_norm = need(f, "output_norm.weight", {E});
  const gguf_tensor* head = f.find_tensor("output.weight");
  if (head) need(f, "output.weight", {E, V});
  c.tied_output = head == nullptr;
  struct layer_tensors {
    const gguf_tensor *attn_norm, *ffn_norm, *q, *k, *v, *o, *gate, *up, *down,
        *bq = nullptr, *bk = nullptr, *bv = nullptr;
  };
  std::vector<layer_tensors> lt(std::size_t(c.n_layer));
  std::map<std::string, int> type_count;
  detail::panel_format pf{};
  auto matrix = [&](const std::string& name, std::vector<std::int64_t> dims) {
    const gguf_tensor& t = need(f, name, std::move(dims));
    if (!detail::panel_format_of(t.type, pf)) detail::throw_unsupported(t);
    ++type_count[tensor_type_name(t.type)];
    return &t;
  };
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    auto& L = lt[std::size_t(l)];
    L.attn_norm = &need(f, b + "attn_norm.weight", {E});
    L.ffn_norm = &need(f, b + "ffn_norm.weight", {E});
    L.q = matrix(b + "attn_q.weight", {E, Q});
    L.k = matrix(b + "attn_k.weight", {E, KV});
    L.v = matrix(b + "attn_v.weight", {E, KV});
    L.o = matrix(b + "attn_output.weight", {Q, E});
    L.gate = matrix(b + "ffn_gate.weight", {E, F});
    L.up = matrix(b + "ffn_up.weight", {E, F});
    L.down = matrix(b + "ffn_down.weight", {F, E});
    if (f.find_tensor(b + "attn_q.bias")) {
      L.bq = &need(f, b + "attn_q.bias", {Q});
      L.bk = &need(f, b + "attn_k.bias", {KV});
      L.bv = &need(f, b + "attn_v.bias", {KV});
      c.qkv_bias = true;
    }
  }
  for (const gguf_tensor* t : {&embd, head ? head : &embd})
    if (!detail::panel_format_of(t->type, pf)) detail::throw_unsupported(*t);
  c.weight_type = std::max_element(type_count.begin(), type_count.end(), [](auto& x, auto& y) {
                    return x.second < y.second;
                  })->first;

  model m;
  m.impl_ = std::make_unique<impl>(std::move(c), std::move(vocab));
  impl& I = *m.impl_;
  I.kernels = &detail::select_kernels(I.kernel_reason);

  const auto t_repack = clock::now();
  f.prefault();
  thread_pool pool;
  auto parallel = [&](std::int64_t n, auto&& fn) {
    pool.parallel_for(0, n, 16, [&](range r, int) { fn(r.begin, r.end); });
  };
  I.layers.resize(lt.size());
  for (std::size_t l = 0; l < lt.size(); ++l) {
    const auto& L = lt[l];
    auto& W = I.layers[l];
    W.attn_norm = to_f32(*L.attn_norm);
    W.ffn_norm = to_f32(*L.ffn_norm);
    if (L.bq) {
      W.q_bias = to_f32(*L.bq);
      W.k_bias = to_f32(*L.bk);
      W.v_bias = to_f32(*L.bv);
    }
    W.wq = detail::pack_matrix(*L.q, parallel, opt.huge_pages);
    W.wk = detail::pack_matrix(*L.k, parallel, opt.huge_pages);
    W.wv = detail::pack_matrix(*L.v, parallel, opt.huge_pages);
    W.wo = detail::pack_matrix(*L.o, parallel, opt.huge_pages);
    W.w_gate = detail::pack_matrix(*L.gate, parallel, opt.huge_pages);
    W.w_up = detail::pack_matrix(*L.up, parallel, opt.huge_pages);
    W.w_down = detail::pack_matrix(*L.down, parallel, opt.huge_pages);
  }
  I.output_norm = to_f32(out_norm);
  I.output = detail::pack_matrix(head ? *head : embd, parallel, opt.huge_pages);
  I.embedding_info = embd;  // its data stays valid: the mapping moves, its address does not
  f.release_pages();
  I.file.emplace(std::move(f));
  const auto t1 = clock::now();
  I.repack_seconds = std::chrono::duration<double>(t1 - t_repack).count();
  I.load_seconds = std::chrono::duration<double>(t1 - t0).count();
  return m;
}

model::model(model&&) noexcept = default;
model& model::operator=(model&&) noexcept = default;
model::~model() = default;

const model_config& model::config() const { return impl_->config; }
const tokenizer& model::vocab() const { return impl_->vocab; }
double model::load_seconds() const { return impl_->load_seconds; }
double model::repack_seconds() const { return impl_->repack_seconds; }
std::string model::kernel_tier() const {
  return std::string(impl_->kernels->name) + " (" + impl_->kernel_reason + ")";
}

std::uint64_t model::bytes_per_token() const {
  std::uint64_t b = impl_->output.bytes();
  for (const auto& L : impl_->layers)
    for (const auto* w : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down})
      b += w->bytes();
  b += std::uint64_t(impl_->embedding_info.bytes / std::uint64_t(impl_->config.n_vocab));
  return b;
}

}  // namespace kfuse::llm
