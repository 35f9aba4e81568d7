// 04_models: the end-to-end demo. Builds an MLP (784-1024-1024-10, ReLU, softmax) and a ResNet
// basic block (conv3x3-BN-ReLU, conv3x3-BN, + residual, ReLU, global average pool, linear) with
// seeded Kaiming-normal weights, compiles each into fp32, bf16 and int8 plans (int8 calibrated
// on sample inputs), and prints:
//   * the arch and vector impl in use ("scalar fallback" when built without SIMD -march flags),
//   * the fusion report and the memory plan,
//   * the fp32 plan checked against a double-precision forward pass,
//   * the agreement of the bf16 and int8 plans with the fp32 plan (accuracy report),
//   * the profiler table (per step: time, GFLOP/s, GB/s, roofline verdict),
//   * a batch-size sweep (latency, throughput, the best batch within --budget-ms).
// Ends with "result: ok" when every check passed.
//
//   ex04_models [--budget-ms 5] [--threads N] [--batch 64] [--channels 64] [--hw 56]
//               [--sweep-max 64] [--cnn-sweep-max 64] [--trace trace.json] [--model mlp|block|all]
//               [--small]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kfuse/simd/target.hpp"
#if KFUSE_EXAMPLE_RUNTIME  // compile() from kfuse::runtime (CMake links it when built)
#include "kfuse/runtime.hpp"
#else
#include "kfuse/graph/compile.hpp"
#endif
#include "kfuse/tools/accuracy.hpp"
#include "kfuse/tools/batch_sweep.hpp"
#include "kfuse/tools/calibrate_graph.hpp"
#include "kfuse/tools/replay_profiler.hpp"
#include "models.hpp"

namespace {

using kfuse::index_t;

/// kfuse::compile as a callable (the f32 probe plans of the int8 calibration).
kfuse::plan compile_plan(const kfuse::graph& g, const kfuse::compile_options& o) {
  return kfuse::compile(g, o);
}

struct options {
  double budget_ms = 5;
  int threads = 0;
  index_t batch = 64;  // MLP batch for the accuracy report and the profile
  index_t cnn_batch = 1;
  index_t channels = 64, hw = 56;
  int sweep_max = 64, cnn_sweep_max = 64;
  int calib_batches = 8;
  int profile_runs = 50;
  std::string trace;
  std::string model = "all";  // mlp | block | all
  std::uint64_t seed = 2024;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "ex04_models: %s\nusage: ex04_models [--budget-ms MS] [--threads N] [--batch N] "
               "[--cnn-batch N] [--channels C] [--hw H] [--sweep-max B] [--cnn-sweep-max B] "
               "[--profile-runs N] [--trace FILE] [--seed S] [--model mlp|block|all] [--small]\n",
               why);
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--budget-ms")
      o.budget_ms = std::atof(next());
    else if (a == "--threads")
      o.threads = std::atoi(next());
    else if (a == "--batch")
      o.batch = std::atoll(next());
    else if (a == "--cnn-batch")
      o.cnn_batch = std::atoll(next());
    else if (a == "--channels")
      o.channels = std::atoll(next());
    else if (a == "--hw")
      o.hw = std::atoll(next());
    else if (a == "--sweep-max")
      o.sweep_max = std::atoi(next());
    else if (a == "--cnn-sweep-max")
      o.cnn_sweep_max = std::atoi(next());
    else if (a == "--profile-runs")
      o.profile_runs = std::atoi(next());
    else if (a == "--trace")
      o.trace = next();
    else if (a == "--model")
      o.model = next();
    else if (a == "--seed")
      o.seed = std::strtoull(next(), nullptr, 10);
    else if (a == "--small") {  // the ctest run: small image, short sweeps
      o.channels = 16;
      o.hw = 14;
      o.batch = 16;
      o.sweep_max = 8;
      o.cnn_sweep_max = 4;
      o.calib_batches = 4;
      o.profile_runs = 10;
    } else if (a == "--help" || a == "-h") {
      usage("help");
    } else {
      usage(("unknown argument " + a).c_str());
    }
  }
  if (o.model != "mlp" && o.model != "block" && o.model != "all")
    usage("--model takes mlp, block or all");
  if (o.batch < 1 || o.cnn_batch < 1 || o.channels < 1 || o.hw < 1 || o.sweep_max < 1 ||
      o.cnn_sweep_max < 1 || o.profile_runs < 1)
    usage("sizes must be positive");
  return o;
}

std::vector<int> powers_of_two_upto(int max) {
  std::vector<int> v;
  for (int b = 1; b <= max; b *= 2) v.push_back(b);
  if (v.back() != max) v.push_back(max);
  return v;
}

double median_replay_us(kfuse::replay_buffer& r, int runs) {
  r.replay();
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    r.replay();
    t.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  return kfuse::median_of(t);
}

const char* prec_name(kfuse::precision p) {
  return p == kfuse::precision::f32 ? "fp32" : p == kfuse::precision::bf16 ? "bf16" : "int8";
}

struct checks {
  int failed = 0;
  void expect(bool ok, const std::string& what) {
    if (!ok) {
      ++failed;
      std::printf("  CHECK FAILED: %s\n", what.c_str());
    }
  }
};

void print_plan_summary(const kfuse::plan& p) {
  std::printf("%s", p.report().text().c_str());
  std::printf("memory plan: one arena of %.1f KiB for %.1f KiB of intermediate tensors\n",
              double(p.arena_bytes()) / 1024, double(p.intermediate_bytes()) / 1024);
  for (const auto& s : p.steps())
    std::printf("  step %-10s %s (%d thread%s)\n", s.name.c_str(), s.kernel.c_str(), s.threads,
                s.threads == 1 ? "" : "s");
}

// A reduced-precision plan's output on `x` against the fp32 output; empty when the plan cannot
// be built on this machine (reported, not a failure).
struct variant {
  kfuse::precision prec;
  std::optional<kfuse::plan> plan;
  std::string unavailable;
};

variant compile_variant(const kfuse::graph& g, kfuse::precision prec, int threads) {
  variant v{prec, std::nullopt, {}};
  try {
    v.plan = kfuse::compile(g, {.threads = threads, .prec = prec});
  } catch (const kfuse::error& e) {
    v.unavailable = e.what();
  }
  return v;
}

// ---- MLP ---------------------------------------------------------------------------------------
void run_mlp(const options& o, checks& ck) {
  using W = models::mlp_weights;
  std::printf("\n=== MLP 784-1024-1024-10 (ReLU, softmax), batch %lld\n", (long long)o.batch);
  std::printf(
      "weights: Kaiming normal N(0, sqrt(2/fan_in)), biases U(+-1/sqrt(fan_in)), seed "
      "%llu; inputs: N(0, 1)\n",
      (unsigned long long)o.seed);
  const W w = W::make(o.seed);
  models::rng data(o.seed + 1);
  models::mlp_graph mg = models::build_mlp(w, o.batch);

  // fp32 plan, checked against a double-precision forward pass.
  const kfuse::plan p32 = kfuse::compile(mg.g, {.threads = o.threads});
  print_plan_summary(p32);
  const std::vector<float> x = data.normal(std::size_t(o.batch * W::in), 0, 1);
  std::vector<float> y32(std::size_t(o.batch * W::out));
  auto r32 = p32.record({kfuse::bind(x)}, {kfuse::bind(y32)});
  r32.replay();
  const index_t ref_rows = std::min<index_t>(o.batch, 8);
  const std::vector<double> ref = models::mlp_reference(w, x.data(), ref_rows);
  double max_err = 0;
  for (std::size_t i = 0; i < ref.size(); ++i)
    max_err = std::max(max_err, std::fabs(ref[i] - double(y32[i])));
  std::printf("fp32 plan vs double reference (%lld rows): max abs error %.2e (limit 1e-5)\n",
              (long long)ref_rows, max_err);
  ck.expect(max_err <= 1e-5, "MLP fp32 plan matches the double reference");

  // int8: calibrate the inputs of the three linear layers on sample batches (another seed than
  // the test batch), 99.99th percentile, affine u8.
  std::vector<std::vector<float>> samples;
  for (int i = 0; i < o.calib_batches; ++i)
    samples.push_back(data.normal(std::size_t(o.batch * W::in), 0, 1));
  const auto targets = mg.linear_inputs();
  const kfuse::graph_calibration cal = kfuse::calibrate_graph_with(
      compile_plan, mg.g, targets, samples, {kfuse::observer_method::percentile, 99.99});
  std::printf("calibration: 99.99th percentile over %d batches of %lld samples, affine u8:\n",
              o.calib_batches, (long long)o.batch);
  for (std::size_t i = 0; i < cal.tensors.size(); ++i)
    std::printf("  %-6s range [%8.4f, %8.4f]  scale %.6f  zero point %d\n",
                mg.g.tensor(cal.tensors[i]).name.c_str(), cal.ranges[i].lo, cal.ranges[i].hi,
                cal.quant[i].scale, cal.quant[i].zero_point);
  kfuse::graph g8 = mg.g;
  kfuse::apply_calibration(g8, cal);

  std::printf("accuracy against the fp32 plan (%lld test rows, probabilities):\n",
              (long long)o.batch);
  std::vector<variant> variants;
  variants.push_back(compile_variant(mg.g, kfuse::precision::bf16, o.threads));
  variants.push_back(compile_variant(g8, kfuse::precision::int8, o.threads));
  for (variant& v : variants) {
    if (!v.plan) {
      std::printf("  %s: not available here (%s)\n", prec_name(v.prec), v.unavailable.c_str());
      continue;
    }
    std::vector<float> y(y32.size());
    auto r = v.plan->record({kfuse::bind(x)}, {kfuse::bind(y)});
    r.replay();
    const auto rep = kfuse::compare_outputs(y32, y, o.batch);
    std::printf("  %s: %s\n", prec_name(v.prec), kfuse::to_string(rep).c_str());
    if (v.prec == kfuse::precision::int8) {
      // The int8 recipe's own fusions: dequantization scales in the epilogues, and the
      // quantization of each layer's input written by the layer before it.
      std::printf("  int8 plan:\n");
      print_plan_summary(*v.plan);
    }
    // bf16 keeps 8 mantissa bits, int8 about 7 per layer: both must keep the classifier's
    // decisions on nearly every row and the outputs' direction.
    const bool bf = v.prec == kfuse::precision::bf16;
    ck.expect(kfuse::meets(rep, {.max_abs = bf ? 0.02 : 0.05,
                                 .min_cosine = bf ? 0.9999 : 0.999,
                                 .min_top1 = bf ? 0.9 : 0.85}),
              std::string("MLP ") + prec_name(v.prec) + " agrees with fp32");
  }

  // Latency of each precision at batch 1 (weight streaming) and at the report's batch.
  std::printf("latency (median of replays, %d threads):\n", p32.threads());
  for (const index_t b : {index_t(1), o.batch}) {
    models::mlp_graph gb = models::build_mlp(w, b);
    kfuse::graph gb8 = gb.g;
    for (std::size_t i = 0; i < cal.tensors.size(); ++i)
      gb8.set_quant(gb.linear_inputs()[i], cal.quant[i]);
    std::printf("  batch %3lld:", (long long)b);
    for (const kfuse::precision prec :
         {kfuse::precision::f32, kfuse::precision::bf16, kfuse::precision::int8}) {
      variant v = compile_variant(prec == kfuse::precision::int8 ? gb8 : gb.g, prec, o.threads);
      if (!v.plan) {
        std::printf("  %s n/a", prec_name(prec));
        continue;
      }
      std::vector<float> xb(std::size_t(b * W::in), 0.5f), yb(std::size_t(b * W::out));
      auto r = v.plan->record({kfuse::bind(xb)}, {kfuse::bind(yb)});
      const double us = median_replay_us(r, b == 1 ? 200 : 30);
      std::printf("  %s %8.1f us (%6.1f GFLOP/s)", prec_name(prec), us, W::flops(b) / us * 1e-3);
    }
    std::printf("\n");
  }

  // Profile of the fp32 plan.
  kfuse::profiler prof;
  kfuse::replay_profiler rp(prof, r32, "mlp.");
  for (int i = 0; i < o.profile_runs; ++i) r32.replay(rp.hook());
  std::printf("profile (fp32 plan, batch %lld, %d replays):\n%s", (long long)o.batch,
              o.profile_runs, prof.table().c_str());
  if (!o.trace.empty()) {
    prof.write_chrome_trace(o.trace);
    std::printf("Chrome trace written to %s (open in chrome://tracing or ui.perfetto.dev)\n",
                o.trace.c_str());
  }

  // Batch sweep of the fp32 plan.
  kfuse::sweep_options so;
  so.batches = powers_of_two_upto(o.sweep_max);
  so.budget_ms = o.budget_ms;
  so.min_seconds = 0.05;
  struct prepared {
    kfuse::plan p;
    std::vector<float> x, y;
    std::shared_ptr<kfuse::replay_buffer> r;
  };
  const auto sweep = kfuse::batch_sweep(
      [&](int b) {
        auto st = std::make_shared<prepared>();
        st->p = kfuse::compile(models::build_mlp(w, b).g, {.threads = o.threads});
        st->x.assign(std::size_t(b * W::in), 0.5f);
        st->y.resize(std::size_t(b * W::out));
        st->r = std::make_shared<kfuse::replay_buffer>(
            st->p.record({kfuse::bind(st->x)}, {kfuse::bind(st->y)}));
        return [st] { st->r->replay(); };
      },
      so);
  std::printf("batch sweep (fp32, budget %.3g ms):\n%s", o.budget_ms,
              kfuse::to_string(sweep).c_str());
}

// ---- ResNet basic block ------------------------------------------------------------------------
void run_block(const options& o, checks& ck) {
  const index_t c = o.channels, hw = o.hw, n = o.cnn_batch;
  std::printf("\n=== ResNet basic block, %lld channels, %lldx%lld, NHWC, batch %lld\n",
              (long long)c, (long long)hw, (long long)hw, (long long)n);
  std::printf(
      "conv3x3-BN-ReLU, conv3x3-BN, + input, ReLU, global average pool, linear %lld->10; "
      "Kaiming-normal convs, BN stats as in models.hpp; images N(0, 1)\n",
      (long long)c);
  const models::block_weights w = models::block_weights::make(o.seed + 10, c);
  models::rng data(o.seed + 11);
  models::block_graph bg = models::build_block(w, n, hw, hw);
  const kfuse::plan p32 = kfuse::compile(bg.g, {.threads = o.threads});
  print_plan_summary(p32);
  const std::vector<float> x = data.normal(std::size_t(n * c * hw * hw), 0, 1);
  std::vector<float> y32(std::size_t(n * models::block_weights::classes));
  auto r32 = p32.record({kfuse::bind(x)}, {kfuse::bind(y32)});
  r32.replay();
  const std::vector<double> ref = models::block_reference(w, x.data(), 0, hw, hw);
  double max_err = 0, scale = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    max_err = std::max(max_err, std::fabs(ref[i] - double(y32[i])));
    scale = std::max(scale, std::fabs(ref[i]));
  }
  std::printf(
      "fp32 plan vs double reference (image 0): max abs error %.2e on logits up to %.2f "
      "(limit 1e-4 x max)\n",
      max_err, scale);
  ck.expect(max_err <= 1e-4 * std::max(scale, 1.0), "block fp32 plan matches the double reference");

  // Calibrate on sample batches; the accuracy test batch needs several images for top-1.
  const index_t test_n = std::max<index_t>(n, 16);
  models::block_graph tg = models::build_block(w, test_n, hw, hw);
  std::vector<std::vector<float>> samples;
  for (int i = 0; i < std::max(2, o.calib_batches / 2); ++i)
    samples.push_back(data.normal(std::size_t(test_n * c * hw * hw), 0, 1));
  const auto targets = tg.calibrated();
  const auto cal = kfuse::calibrate_graph_with(compile_plan, tg.g, targets, samples,
                                               {kfuse::observer_method::percentile, 99.99});
  std::printf("calibration: 99.99th percentile over %zu batches of %lld images, affine u8:\n",
              samples.size(), (long long)test_n);
  for (std::size_t i = 0; i < cal.tensors.size(); ++i)
    std::printf("  %-8s range [%8.4f, %8.4f]  scale %.6f  zero point %d\n",
                tg.g.tensor(cal.tensors[i]).name.c_str(), cal.ranges[i].lo, cal.ranges[i].hi,
                cal.quant[i].scale, cal.quant[i].zero_point);
  kfuse::graph g8 = tg.g;
  kfuse::apply_calibration(g8, cal);
  const kfuse::plan t32 = kfuse::compile(tg.g, {.threads = o.threads});
  const std::vector<float> xt = data.normal(std::size_t(test_n * c * hw * hw), 0, 1);
  std::vector<float> yt32(std::size_t(test_n * models::block_weights::classes));
  auto rt = t32.record({kfuse::bind(xt)}, {kfuse::bind(yt32)});
  rt.replay();
  std::printf("accuracy against the fp32 plan (%lld test images, logits):\n", (long long)test_n);
  for (variant v : {compile_variant(tg.g, kfuse::precision::bf16, o.threads),
                    compile_variant(g8, kfuse::precision::int8, o.threads)}) {
    if (!v.plan) {
      std::printf("  %s: not available here (%s)\n", prec_name(v.prec), v.unavailable.c_str());
      continue;
    }
    std::vector<float> y(yt32.size());
    auto r = v.plan->record({kfuse::bind(xt)}, {kfuse::bind(y)});
    r.replay();
    const auto rep = kfuse::compare_outputs(yt32, y, test_n);
    std::printf("  %s: %s\n", prec_name(v.prec), kfuse::to_string(rep).c_str());
    if (v.prec == kfuse::precision::int8) {
      // The int8 recipe's own fusions: dequantization scales in the epilogues, and the
      // quantization of each layer's input written by the layer before it.
      std::printf("  int8 plan:\n");
      print_plan_summary(*v.plan);
    }
    const bool bf = v.prec == kfuse::precision::bf16;
    ck.expect(kfuse::meets(rep, {.min_cosine = bf ? 0.999 : 0.99, .min_top1 = bf ? 0.75 : 0.6}),
              std::string("block ") + prec_name(v.prec) + " agrees with fp32");
  }

  kfuse::profiler prof;
  kfuse::replay_profiler rp(prof, r32, "block.");
  const int runs = std::max(3, o.profile_runs / 5);
  for (int i = 0; i < runs; ++i) r32.replay(rp.hook());
  std::printf("profile (fp32 plan, batch %lld, %d replays):\n%s", (long long)n, runs,
              prof.table().c_str());

  kfuse::sweep_options so;
  so.batches = powers_of_two_upto(o.cnn_sweep_max);
  so.budget_ms = o.budget_ms;
  so.min_reps = 3;
  so.warmup = 1;
  so.min_seconds = 0.05;
  struct prepared {
    kfuse::plan p;
    std::vector<float> x, y;
    std::shared_ptr<kfuse::replay_buffer> r;
  };
  const auto sweep = kfuse::batch_sweep(
      [&](int b) {
        auto st = std::make_shared<prepared>();
        st->p = kfuse::compile(models::build_block(w, b, hw, hw).g, {.threads = o.threads});
        st->x.assign(std::size_t(b * c * hw * hw), 0.5f);
        st->y.resize(std::size_t(b * models::block_weights::classes));
        st->r = std::make_shared<kfuse::replay_buffer>(
            st->p.record({kfuse::bind(st->x)}, {kfuse::bind(st->y)}));
        return [st] { st->r->replay(); };
      },
      so);
  std::printf("batch sweep (fp32, budget %.3g ms):\n%s", o.budget_ms,
              kfuse::to_string(sweep).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  const int used =
      o.threads > 0 ? std::min(o.threads, kfuse::pool_threads(0)) : kfuse::pool_threads(0);
  // The arch and vector impl the plans run on (compile()'s defaults: arch::native, xsimd); a
  // build without SIMD -march flags says "scalar fallback" here and in every report below.
  std::printf("kfuse models demo: arch %s, %d thread%s (pool of %d)\n",
              kfuse::target_of<kfuse::arch::native, kfuse::backend::xsimd>().text().c_str(), used,
              used == 1 ? "" : "s", kfuse::pool_threads(0));
  std::printf("pool: %s\n", kfuse::default_pool().size_reason().c_str());
  const kfuse::machine_limits& lim = kfuse::cached_machine_limits();
  std::printf(
      "machine limits (50-100 ms probe): f32 %.0f, bf16 %.0f, int8 %.0f G/s per core; "
      "memory %.1f GB/s (1 thread), %.1f GB/s (%d threads)\n",
      lim.f32_gflops, lim.bf16_gflops, lim.int8_gops, lim.mem_gbs_1t, lim.mem_gbs_all, lim.cores);
  checks ck;
  try {
    if (o.model != "block") run_mlp(o, ck);
    if (o.model != "mlp") run_block(o, ck);
  } catch (const kfuse::error& e) {
    std::printf("FAILED: kfuse::error: %s\n", e.what());
    return 1;
  }
  if (ck.failed) {
    std::printf("\nresult: FAILED (%d checks)\n", ck.failed);
    return 1;
  }
  std::printf("\nresult: ok\n");
  return 0;
}
