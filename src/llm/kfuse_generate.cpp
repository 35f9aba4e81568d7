// kfuse-generate: text generation, tokenization, teacher-forced logits and llama-bench-style
// benchmarks on a GGUF model (docs/llm.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "kfuse/error.hpp"
#include "kfuse/llm/bandwidth.hpp"
#include "kfuse/llm/generate.hpp"
#include "kfuse/llm/model.hpp"
#include "kfuse/llm/session.hpp"

namespace {

using kfuse::llm::token_id;

const char* usage =
    "usage: kfuse-generate MODEL.gguf [options]\n"
    "  -p, --prompt TEXT     prompt (with --tokens: space-separated ids)\n"
    "  -f, --file FILE       prompt from a file\n"
    "  -n, --n-predict N     tokens to generate (default 128)\n"
    "  -t, --threads N       threads (default: the cores this process may use)\n"
    "  -c, --ctx N           context length (default: the model's, at most 4096)\n"
    "  -b, --batch N         prompt tokens per prefill step (default 256)\n"
    "  --temp T --top-k K --top-p P --repeat-penalty R --repeat-last-n N --seed S\n"
    "                        sampling (default 0.8 / 40 / 0.95 / 1.0 / 64 / 0; --temp 0: greedy)\n"
    "  --cache f32|bf16      KV cache type (default f32)\n"
    "  --fast-prefill        one int8 level for prompt tokens (llama.cpp's arithmetic; faster\n"
    "                        prefill, logits cosine ~0.9998 instead of 1 - 1e-7 against fp32)\n"
    "  --no-huge-pages       4 KiB pages for the weights (slower decoding; avoids the seconds a\n"
    "                        VM may take to fault in fresh huge pages at load)\n"
    "  --no-bos              do not add the vocabulary's BOS token\n"
    "  --no-special          do not parse special tokens (<|im_start|>) in the prompt\n"
    "  --ignore-eos          generate n tokens even past an end-of-generation token\n"
    "  --tokens              ids in (-p \"1 2 3\"), ids out\n"
    "  --tokenize            print the prompt's ids (as llama-tokenize --ids) and exit\n"
    "  --logits FILE.npy     write the teacher-forced logits of the prompt's tokens [n, vocab]\n"
    "  --bench               llama-bench's table: -p N (pp), -n N (tg), -r reps, -t threads\n"
    "                        (comma lists allowed), rows pp<N> and tg<N>\n"
    "  kfuse-generate --probe N   the read bandwidth of N threads (GB/s)\n";

[[noreturn]] void die(const std::string& msg, int code = 2) {
  std::fprintf(stderr, "kfuse-generate: %s\n", msg.c_str());
  std::exit(code);
}

int to_int(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || x < -1 || x > (1L << 30))
    die(flag + ": '" + v + "' is not a valid count");
  return int(x);
}
float to_float(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const float x = std::strtof(v.c_str(), &end);
  if (v.empty() || *end) die(flag + ": '" + v + "' is not a number");
  return x;
}
std::vector<int> int_list(const std::string& flag, const std::string& v) {
  std::vector<int> out;
  std::stringstream ss(v);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(to_int(flag, item));
  if (out.empty()) die(flag + ": empty list");
  return out;
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

void write_npy(const std::string& path, const std::vector<float>& data, std::size_t rows,
               std::size_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  if (!out) die("--logits: cannot write " + path, 1);
  const char magic[] = "\x93NUMPY\x01\x00";
  out.write(magic, 8);
  const auto len = std::uint16_t(header.size());
  out.write(reinterpret_cast<const char*>(&len), 2);
  out.write(header.data(), std::streamsize(header.size()));
  out.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size() * 4));
  if (!out) die("--logits: writing " + path + " failed", 1);
}

struct options {
  std::string model, prompt;
  bool prompt_set = false;
  int n_predict = 128, threads = 0, ctx = 0, batch = 256;
  kfuse::llm::sampling sample;
  kfuse::llm::cache_type cache = kfuse::llm::cache_type::f32;
  bool fast_prefill = false;
  bool huge_pages = true;
  bool bos = true, special = true, ignore_eos = false, tokens = false, tokenize = false,
       bench = false;
  std::string logits;
  std::vector<int> bench_p{512}, bench_n{128}, bench_t{0};
  int bench_r = 5;
  bool bench_p_set = false, bench_n_set = false;
};

options parse(int argc, char** argv) {
  options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const auto& a : args)
    if (a == "--bench") o.bench = true;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) die(a + " needs a value");
      return args[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(usage, stdout);
      std::exit(0);
    } else if (a == "-p" || a == "--prompt") {
      const std::string v = value();
      if (o.bench) {
        o.bench_p = int_list(a, v);
        o.bench_p_set = true;
      } else {
        o.prompt = v;
        o.prompt_set = true;
      }
    } else if (a == "-f" || a == "--file") {
      std::ifstream in(value(), std::ios::binary);
      if (!in) die(a + ": cannot read " + args[i]);
      o.prompt.assign(std::istreambuf_iterator<char>(in), {});
      o.prompt_set = true;
    } else if (a == "-n" || a == "--n-predict" || a == "--n-gen") {
      const std::string v = value();
      if (o.bench) {
        o.bench_n = int_list(a, v);
        o.bench_n_set = true;
      } else {
        o.n_predict = to_int(a, v);
      }
    } else if (a == "-t" || a == "--threads") {
      const std::string v = value();
      if (o.bench)
        o.bench_t = int_list(a, v);
      else
        o.threads = to_int(a, v);
    } else if (a == "-r" || a == "--repetitions") {
      o.bench_r = std::max(1, to_int(a, value()));
    } else if (a == "-c" || a == "--ctx") {
      o.ctx = to_int(a, value());
    } else if (a == "-b" || a == "--batch") {
      o.batch = to_int(a, value());
    } else if (a == "--temp") {
      o.sample.temperature = to_float(a, value());
    } else if (a == "--top-k") {
      o.sample.top_k = to_int(a, value());
    } else if (a == "--top-p") {
      o.sample.top_p = to_float(a, value());
    } else if (a == "--repeat-penalty") {
      o.sample.repeat_penalty = to_float(a, value());
    } else if (a == "--repeat-last-n") {
      o.sample.repeat_last_n = to_int(a, value());
    } else if (a == "--seed") {
      o.sample.seed = std::uint64_t(std::strtoull(value().c_str(), nullptr, 10));
    } else if (a == "--fast-prefill") {
      o.fast_prefill = true;
    } else if (a == "--no-huge-pages") {
      o.huge_pages = false;
    } else if (a == "--cache") {
      const std::string v = value();
      if (v != "f32" && v != "bf16") die("--cache: '" + v + "' (f32 or bf16)");
      o.cache = v == "bf16" ? kfuse::llm::cache_type::bf16 : kfuse::llm::cache_type::f32;
    } else if (a == "--no-bos") {
      o.bos = false;
    } else if (a == "--no-special") {
      o.special = false;
    } else if (a == "--ignore-eos") {
      o.ignore_eos = true;
    } else if (a == "--tokens") {
      o.tokens = true;
    } else if (a == "--tokenize") {
      o.tokenize = true;
    } else if (a == "--logits") {
      o.logits = value();
    } else if (a == "--bench" || a == "-m" || a == "--model") {
      if (a != "--bench") o.model = value();
    } else if (!a.empty() && a[0] == '-') {
      die("unknown option '" + a + "'\n" + usage);
    } else if (o.model.empty()) {
      o.model = a;
    } else {
      die("unexpected argument '" + a + "'");
    }
  }
  if (o.model.empty()) die(std::string("no model given\n") + usage);
  return o;
}

std::vector<token_id> prompt_ids(const kfuse::llm::model& m, const options& o) {
  if (o.tokens) {
    std::vector<token_id> ids;
    std::stringstream ss(o.prompt);
    for (std::string item; ss >> item;) ids.push_back(to_int("--tokens", item));
    return ids;
  }
  return m.vocab().encode(
      o.prompt, {.add_bos = o.bos && m.vocab().add_bos_default(), .parse_special = o.special});
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// llama-bench's table: pp<N> is a prompt of N random tokens, tg<N> N decoded tokens after an
// empty context; each a fresh context, median of -r repetitions after one warm-up.
int bench(const kfuse::llm::model& m, const options& o) {
  const auto& c = m.config();
  const double gib = double(m.bytes_per_token()) / double(1 << 30);
  const std::vector<int> pp = o.bench_p, tg = o.bench_n;
  std::printf("bytes/token: %llu\n\n", static_cast<unsigned long long>(m.bytes_per_token()));
  std::printf("| model | size | params | backend | threads | test | t/s |\n");
  std::printf("| ----- | ---: | -----: | ------- | ------: | ---: | --: |\n");
  for (int threads : o.bench_t) {
    int max_len = 1;
    for (int p : pp) max_len = std::max(max_len, p);
    for (int n : tg) max_len = std::max(max_len, n + 1);
    kfuse::llm::session s(m, {.n_ctx = max_len,
                              .cache = o.cache,
                              .threads = threads,
                              .batch = std::min(o.batch, 512),
                              .fast_prefill = o.fast_prefill});
    std::vector<token_id> ids(static_cast<std::size_t>(max_len));
    std::uint64_t r = 42;
    for (auto& id : ids) {
      r = r * 6364136223846793005ull + 1442695040888963407ull;
      id = token_id((r >> 33) % std::uint64_t(c.n_vocab));
    }
    auto row = [&](const std::string& test, int n, auto&& run) {
      std::vector<double> tps;
      for (int rep = -1; rep < o.bench_r; ++rep) {
        s.reset();
        const auto t0 = std::chrono::steady_clock::now();
        run();
        const double sec =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (rep >= 0) tps.push_back(n / sec);
      }
      std::printf("| %s %s | %.2f GiB | %.2f B | kfuse %s | %d | %s | %.2f |\n", c.arch.c_str(),
                  c.weight_type.c_str(), gib, 0.0,
                  m.kernel_tier().substr(0, m.kernel_tier().find(' ')).c_str(), s.threads(),
                  test.c_str(), median(tps));
      std::fflush(stdout);
    };
    for (int p : pp)
      if (p > 0)
        row("pp" + std::to_string(p), p,
            [&] { s.prefill(std::span<const token_id>(ids.data(), std::size_t(p))); });
    for (int n : tg)
      if (n > 0)
        row("tg" + std::to_string(n), n, [&] {
          token_id t = ids[0];
          for (int i = 0; i < n; ++i) {
            const auto logits = s.decode(t);
            t = token_id(std::max_element(logits.begin(), logits.end()) - logits.begin());
          }
        });
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--probe") {  // the read bandwidth of N threads
    const int threads = to_int("--probe", argv[2]);
    std::printf("read bandwidth: %.1f GB/s (%d threads)\n",
                kfuse::llm::probe_read_bandwidth(threads), threads);
    return 0;
  }
  const options o = parse(argc, argv);
  try {
    const kfuse::llm::model m = kfuse::llm::model::load(o.model, {.huge_pages = o.huge_pages});
    if (o.bench) return bench(m, o);
    if (!o.prompt_set && !o.tokenize) die("no prompt (-p TEXT or -f FILE)");
    const std::vector<token_id> ids = prompt_ids(m, o);
    if (o.tokenize) {
      std::printf("[");
      for (std::size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? ", " : "", ids[i]);
      std::printf("]\n");
      return 0;
    }
    const int ctx = o.ctx > 0 ? o.ctx
                              : std::min(m.config().n_ctx_train,
                                         std::max<int>(4096, int(ids.size()) + o.n_predict));
    kfuse::llm::session s(m, {.n_ctx = ctx,
                              .cache = o.cache,
                              .threads = o.threads,
                              .batch = o.batch,
                              .fast_prefill = o.fast_prefill});
    if (!o.logits.empty()) {
      const auto logits = s.prefill_all_logits(ids);
      write_npy(o.logits, logits, ids.size(), std::size_t(m.config().n_vocab));
      std::fprintf(stderr, "logits: %zu x %d written to %s\n", ids.size(), m.config().n_vocab,
                   o.logits.c_str());
      return 0;
    }
    kfuse::llm::generate_options g;
    g.n_predict = o.n_predict;
    g.sample = o.sample;
    g.stop_at_end = !o.ignore_eos;
    if (!o.tokens) std::fputs(m.vocab().decode(ids).c_str(), stdout);
    std::vector<token_id> out;
    const auto stats = kfuse::llm::generate(s, ids, g, [&](token_id t) {
      if (o.tokens)
        std::printf("%s%d", out.empty() ? "" : " ", t);
      else
        std::fputs(m.vocab().piece(t).c_str(), stdout);
      std::fflush(stdout);
      out.push_back(t);
      return true;
    });
    std::printf("\n");
    std::fflush(stdout);
    const double gbs = kfuse::llm::probe_read_bandwidth(s.threads());
    const double eff = double(m.bytes_per_token()) * stats.decode_tokens_per_second() / 1e9;
    std::fprintf(stderr, "cpu: %s; kernels: %s; %d threads\n", cpu_name().c_str(),
                 m.kernel_tier().c_str(), s.threads());
    std::fprintf(stderr, "load: %.3f s (repacking %.3f s)\n", m.load_seconds(), m.repack_seconds());
    std::fprintf(stderr, "prefill: %d tokens, %.2f tokens/s\n", stats.prompt_tokens,
                 stats.prefill_tokens_per_second());
    std::fprintf(stderr, "decode: %d tokens, %.2f tokens/s\n", stats.generated,
                 stats.decode_tokens_per_second());
    std::fprintf(stderr,
                 "bandwidth: %.1f GB/s effective (%.1f MB per token) of %.1f GB/s probed read "
                 "bandwidth (%.0f%%)\n",
                 eff, double(m.bytes_per_token()) / 1e6, gbs, gbs > 0 ? 100 * eff / gbs : 0.0);
    return 0;
  } catch (const kfuse::error& e) {
    std::fprintf(stderr, "kfuse-generate: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kfuse-generate: %s\n", e.what());
    return 1;
  }
}
