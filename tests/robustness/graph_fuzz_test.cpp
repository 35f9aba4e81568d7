// Randomized differential test of the graph executor (docs/robustness.md, "Randomized
// differential test").
//  - valid: random graphs (tests/robustness/graph_fuzz.hpp) compiled with random options
//    (precision f32 / bf16 / int8, fusion on / off, 1 or 2 threads) against their double
//    reference within the bound of the error model, and against the unfused f32 plan; outputs
//    are poisoned before each run; a second replay, the eager plan::run and (2 threads) the
//    1-thread plan must give the same bits.
//  - invalid: random corruptions of valid graphs, options and arguments, each of which must
//    raise kfuse::error. One that does not is an "accepted invalid" case: listed, not a failure
//    (checks are being added); an accepted invalid graph is still recorded and replayed, so a
//    crash shows.
// Fails on: a result outside the bound, a plan that disagrees with itself, an exception that
// is not kfuse::error (and on a crash, which ends the process).
//
// Environment: KFUSE_FUZZ_SEED (base seed), KFUSE_FUZZ_COUNT (cases of each kind),
// KFUSE_FUZZ_ONLY=i (only case i), KFUSE_FUZZ_CASE_SEED (only the valid case of that printed
// seed), KFUSE_FUZZ_KIND (only invalid kinds whose name contains it), KFUSE_FUZZ_KNOWN_BUGS=mask
// (also generate those known bugs, gfuzz::bug: CI leaves them out), KFUSE_FUZZ_VERBOSE=1 (print
// every case), KFUSE_FUZZ_STATS=1 (how close errors come to their bound).
// scripts/fuzz_graphs.sh runs it longer.
#include "robustness/graph_fuzz.hpp"

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>

#include "support/test_support.hpp"

using gfuzz::raw;
using kfuse::dtype;
using kfuse::index_t;
using kfuse::precision;
using kfuse::tensor_id;
using kfuse::tensor_layout;

namespace {

// CI: the whole test (both cases) well within 20 s under ASan+UBSan -O0 on 2 shared cores:
// measured 4.6 s there (idle VM; ~9 s at a load of 4.6), 0.2 s in the Release build.
constexpr std::uint64_t default_seed = 20261125;
constexpr int default_count = 1200;

std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  const char* s = std::getenv(name);
  if (!s || !*s) return fallback;
  return std::strtoull(s, nullptr, 10);
}
long env_long(const char* name, long fallback) {
  const char* s = std::getenv(name);
  if (!s || !*s) return fallback;
  return std::strtol(s, nullptr, 10);
}
std::string env_str(const char* name) {
  const char* s = std::getenv(name);
  return s ? s : "";
}
unsigned known_bugs() { return unsigned(env_long("KFUSE_FUZZ_KNOWN_BUGS", 0)) | gfuzz::bug::fixed; }
bool verbose() { return env_long("KFUSE_FUZZ_VERBOSE", 0) != 0; }

std::uint64_t mix(std::uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// ---- valid graphs ---------------------------------------------------------------------------

enum class verdict { correct, mismatch, rejected, wrong_exception };
struct outcome {
  verdict v = verdict::correct;
  std::string detail;
};

struct bound_buffers {
  std::vector<raw> in, out;
  std::vector<kfuse::binding> in_b, out_b;
};

/// The graph's inputs encoded from the reference values, and poisoned outputs of the plan.
bound_buffers buffers_for(const gfuzz::gen& G, const kfuse::plan& p, bool second_poison) {
  bound_buffers b;
  for (tensor_id id : G.g.inputs()) {
    const gfuzz::rt& t = G.T[std::size_t(id.index)];
    b.in.push_back(gfuzz::encode(t.shape, t.type, t.layout, t.v));
  }
  for (std::size_t o = 0; o < p.output_count(); ++o)
    b.out.push_back(gfuzz::poisoned(p.output(o).bytes, p.output(o).type, second_poison));
  for (raw& r : b.in) b.in_b.push_back(r.bind());
  for (raw& r : b.out) b.out_b.push_back(r.bind());
  return b;
}

bool same_bits(const std::vector<raw>& a, const std::vector<raw>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].bytes != b[i].bytes || std::memcmp(a[i].data(), b[i].data(), a[i].bytes) != 0)
      return false;
  return true;
}

std::string num(double v) {
  std::ostringstream s;
  s.precision(9);
  s << v;
  return s.str();
}

/// How close results come to their bound: the largest |got - ref| / allowed per plan precision
/// (KFUSE_FUZZ_STATS=1 prints it: a bound far above every error would test little).
#define KFUSE_COUNT_OP(name, nhwc) +1
constexpr int op_kinds = 0 KFUSE_GRAPH_OPS(KFUSE_COUNT_OP);
#undef KFUSE_COUNT_OP
struct tightness {
  double worst[4] = {0, 0, 0, 0};  // by precision (f32, bf16, int8 at [1..3])
  double integer = 0;
  double pure_f32 = 0;        // graphs without any bf16 / f16 / int8 tensor or arithmetic
  long nodes[op_kinds] = {};  // nodes generated per op_kind
  long fused = 0;             // nodes the plans under test fused into a producer
  long quant_fused = 0;       // of which quantize absorptions
  std::string where[6];       // the worst element of each
};
bool pure_f32(const gfuzz::gen& G) {
  if (G.cfg.prec != precision::f32) return false;
  for (const gfuzz::rt& t : G.T)
    if (t.type != dtype::f32) return false;
  for (const kfuse::node_desc& n : G.g.nodes())
    if (kfuse::declared_precision(n) != precision::inherit) return false;
  return true;
}
tightness& stats() {
  static tightness t;
  return t;
}

/// Checks every output of a plan against the reference (mode 0: reference plan, 1: under test).
/// Returns "" or what is wrong.
std::string check_outputs(const gfuzz::gen& G, const std::vector<raw>& out, int mode,
                          const char* what) {
  const precision prec = mode == 0 ? precision::f32 : G.cfg.prec;
  for (std::size_t k = 0; k < G.outputs.size(); ++k) {
    const gfuzz::rt& t = G.T[std::size_t(G.outputs[k])];
    const auto got = gfuzz::decode(t.shape, t.type, t.layout, out[k]);
    const bool integer = gfuzz::is_int(t.type);
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double ref = t.v[i], e = t.e[std::size_t(mode)][i];
      const double tol = integer ? e + 1e-9 : 2 * e + 1e-6;
      double& worst = integer ? stats().integer : stats().worst[int(prec)];
      if (std::fabs(got[i] - ref) / tol > worst) {
        worst = std::fabs(got[i] - ref) / tol;
        stats().where[integer ? 4 : int(prec)] =
            "seed " + std::to_string(G.seed) + " output '" +
            G.g.tensors()[std::size_t(G.outputs[k])].name + "' element " + std::to_string(i) +
            ": got " + num(got[i]) + ", reference " + num(ref) + ", bound " + num(e);
      }
      if (pure_f32(G) && std::fabs(got[i] - ref) / tol > stats().pure_f32) {
        stats().pure_f32 = std::fabs(got[i] - ref) / tol;
        stats().where[5] = "seed " + std::to_string(G.seed) + " output '" +
                           G.g.tensors()[std::size_t(G.outputs[k])].name + "' element " +
                           std::to_string(i) + ": got " + num(got[i]) + ", reference " + num(ref) +
                           ", bound " + num(e);
      }
      if (!(std::fabs(got[i] - ref) <= tol))
        return std::string(what) + ": output " + std::to_string(k) + " ('" +
               G.g.tensors()[std::size_t(G.outputs[k])].name + "' " + gfuzz::shape_str(t.shape) +
               " " + std::string(kfuse::dtype_name(t.type)) + " " +
               std::string(kfuse::layout_name(t.layout)) + ") element " + std::to_string(i) +
               ": got " + num(got[i]) + ", reference " + num(ref) + ", allowed error " + num(tol);
    }
  }
  return "";
}

/// Replays a plan once; then checks that a second replay (other poison) and the eager run give
/// the same bits. Returns the outputs of the first replay, or sets `why`.
std::vector<raw> run_plan(const gfuzz::gen& G, const kfuse::plan& p, std::string& why) {
  bound_buffers a = buffers_for(G, p, false);
  auto r = p.record(a.in_b, a.out_b);
  r.replay();
  const std::vector<raw> first = a.out;
  for (std::size_t o = 0; o < a.out.size(); ++o) {  // poison again in place, replay
    const raw fresh = gfuzz::poisoned(a.out[o].bytes, p.output(o).type, true);
    std::memcpy(a.out[o].data(), fresh.data(), fresh.bytes);
  }
  r.replay();
  if (!same_bits(first, a.out)) why = "a second replay of the same buffer gave other bits";
  bound_buffers b = buffers_for(G, p, true);
  p.run(b.in_b, b.out_b);
  if (why.empty() && !same_bits(first, b.out)) why = "plan::run (eager) and replay differ";
  return first;
}

outcome run_valid(std::uint64_t seed, unsigned bugs) {
  std::mt19937_64 crng(mix(seed));
  auto coin = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(crng) < p; };
  gfuzz::config cfg;
  const double pr = std::uniform_real_distribution<double>(0, 1)(crng);
  cfg.prec = pr < 0.4                       ? precision::f32
             : pr < 0.7 || !gfuzz::has_int8 ? precision::bf16
                                            : precision::int8;
  cfg.fuse = coin(0.6);
  cfg.threads = coin(0.5) ? 2 : 1;
  cfg.fork_join_ns = cfg.threads == 2 && coin(0.7) ? 0.0 : -1.0;  // 0: split every node
  cfg.known_bugs = bugs;
  gfuzz::gen G(seed, cfg);
  G.build(8);
  auto header = [&] {
    return "seed " + std::to_string(seed) + " (" + cfg.text() + ")\n" + gfuzz::describe(G.g);
  };
  if (verbose()) std::cout << "running " << header() << std::flush;  // before a crash
  try {
    // int8: the calibrated params of the generator (min / max of the reference values) must be
    // what calibrate_graph observes running the f32 plan on the same input.
    if (!G.calibrated.empty() && G.g.inputs().size() == 1 &&
        G.T[std::size_t(G.g.inputs()[0].index)].type == dtype::f32) {
      // KNOWN BUG (docs/robustness.md): calibrate_graph fails on a graph with an output that
      // is not f32 ("calibrate: output 'q' is not f32") although it observes only f32 tensors.
      // KNOWN BUG: it also fails ("output 'h' is listed twice") when an observed tensor is a
      // graph output.
      bool observable = true;
      for (int o : G.outputs)
        observable =
            observable &&
            ((bugs & gfuzz::bug::calibrate_outputs) ||
             (G.T[std::size_t(o)].type == dtype::f32 &&
              std::find(G.calibrated.begin(), G.calibrated.end(), o) == G.calibrated.end()));
      if (observable) {
        const gfuzz::rt& in = G.T[std::size_t(G.g.inputs()[0].index)];
        const auto mo = gfuzz::memory_order(in.shape, in.layout);
        std::vector<float> sample(in.v.size());
        for (std::size_t i = 0; i < in.v.size(); ++i) sample[mo[i]] = float(in.v[i]);
        std::vector<tensor_id> ids;
        for (int t : G.calibrated) ids.push_back({t});
        const std::vector<std::vector<float>> samples{sample};
        const auto cal = kfuse::calibrate_graph(G.g, ids, samples);
        for (std::size_t i = 0; i < ids.size(); ++i) {
          // The f32 plan's values (an explicit int8 / bf16 node stays so) are within the
          // reference plan's bound E of the reference: so are their min and max.
          const gfuzz::rt& t = G.T[std::size_t(ids[i].index)];
          const auto mine = t.cq;
          double E = 0;
          for (double e : t.e[0]) E = std::max(E, e);
          if (!(std::fabs(cal.quant[i].scale - mine.scale) <= 1e-4 * mine.scale + 4 * E / 255) ||
              std::abs(cal.quant[i].zero_point - mine.zero_point) >
                  1 + std::ceil(4 * E / double(mine.scale)))
            return {verdict::mismatch, header() + "calibrate_graph on '" +
                                           G.g.tensors()[std::size_t(ids[i].index)].name +
                                           "': scale " + num(cal.quant[i].scale) + " zero point " +
                                           std::to_string(cal.quant[i].zero_point) +
                                           ", min / max of the reference: " + num(mine.scale) +
                                           " / " + std::to_string(mine.zero_point)};
        }
      }
    }
    const kfuse::plan ref =
        kfuse::compile(G.g, {.threads = 1, .prec = precision::f32, .fuse = false});
    const kfuse::plan test = kfuse::compile(G.g, {.threads = cfg.threads,
                                                  .prec = cfg.prec,
                                                  .fuse = cfg.fuse,
                                                  .fork_join_ns = cfg.fork_join_ns,
                                                  .emulated_bf16 = true});
    for (std::size_t k = 0; k < G.outputs.size(); ++k) {
      const gfuzz::rt& t = G.T[std::size_t(G.outputs[k])];
      for (const kfuse::plan* p : {&ref, &test}) {
        const kfuse::plan_tensor& o = p->output(k);
        if (o.shape != t.shape || o.type != t.type || o.layout != t.layout)
          return {verdict::mismatch,
                  header() + "output " + std::to_string(k) + " is " + gfuzz::shape_str(o.shape) +
                      " " + std::string(kfuse::dtype_name(o.type)) + " " +
                      std::string(kfuse::layout_name(o.layout)) + " in the plan, expected " +
                      gfuzz::shape_str(t.shape) + " " + std::string(kfuse::dtype_name(t.type)) +
                      " " + std::string(kfuse::layout_name(t.layout))};
      }
    }
    for (const kfuse::node_desc& n : G.g.nodes()) ++stats().nodes[int(n.op)];
    for (const std::string& f : test.report().fused) {
      ++stats().fused;
      stats().quant_fused += f.find("quantize") != std::string::npos;
    }
    std::string why;
    const auto yr = run_plan(G, ref, why);
    if (why.empty()) why = check_outputs(G, yr, 0, "reference plan (f32, unfused)");
    std::vector<raw> yt;
    if (why.empty()) yt = run_plan(G, test, why);
    if (why.empty()) why = check_outputs(G, yt, 1, "plan under test");
    if (why.empty()) {  // the two plans against each other (each within its bound)
      for (std::size_t k = 0; k < G.outputs.size() && why.empty(); ++k) {
        const gfuzz::rt& t = G.T[std::size_t(G.outputs[k])];
        const auto a = gfuzz::decode(t.shape, t.type, t.layout, yr[k]);
        const auto b = gfuzz::decode(t.shape, t.type, t.layout, yt[k]);
        const double floor = gfuzz::is_int(t.type) ? 1e-9 : 2e-6;
        const double f = gfuzz::is_int(t.type) ? 1 : 2;
        for (std::size_t i = 0; i < a.size(); ++i)
          if (!(std::fabs(a[i] - b[i]) <= f * (t.e[0][i] + t.e[1][i]) + floor)) {
            why = "plan under test vs reference plan: output " + std::to_string(k) + " element " +
                  std::to_string(i) + ": " + num(b[i]) + " vs " + num(a[i]);
            break;
          }
      }
    }
    if (why.empty() && cfg.threads == 2) {  // bitwise the same on one thread
      const kfuse::plan one = kfuse::compile(G.g, {.threads = 1,
                                                   .prec = cfg.prec,
                                                   .fuse = cfg.fuse,
                                                   .fork_join_ns = cfg.fork_join_ns,
                                                   .emulated_bf16 = true});
      std::string w1;
      const auto y1 = run_plan(G, one, w1);
      if (!same_bits(y1, yt)) why = "1 and 2 threads give different bits";
    }
    if (!why.empty()) return {verdict::mismatch, header() + why + "\n" + test.report().text()};
  } catch (const kfuse::error& e) {
    return {verdict::rejected, header() + "kfuse::error: " + e.what()};
  } catch (const std::exception& e) {
    return {verdict::wrong_exception,
            header() + "exception " + typeid(e).name() + " (not kfuse::error): " + e.what()};
  }
  return {verdict::correct, verbose() ? header() : ""};
}

// ---- invalid graphs and arguments -----------------------------------------------------------

using runner = std::function<void()>;

/// Compiles, then records and replays with zeroed inputs of the plan's sizes.
void compile_and_run(const kfuse::graph& g, const kfuse::compile_options& o = {.threads = 1}) {
  const kfuse::plan p = kfuse::compile(g, o);
  std::vector<raw> in(p.input_count()), out(p.output_count());
  std::vector<kfuse::binding> ib, ob;
  for (std::size_t i = 0; i < in.size(); ++i) {
    in[i].resize(p.input(i).bytes);
    ib.push_back(in[i].bind());
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i].resize(p.output(i).bytes);
    ob.push_back(out[i].bind());
  }
  auto r = p.record(ib, ob);
  r.replay();
}

struct ctx {
  std::shared_ptr<gfuzz::gen> G;
  std::string note;  // the corruption, in words
  gfuzz::gen& g() { return *G; }
  kfuse::graph& graph() { return G->g; }
  std::string name() { return G->fresh("bad"); }
  /// A float plain tensor of the prefix (or a new f32 input).
  int plain_float() {
    const int x = G->pick([](const gfuzz::rt& t) {
      return (t.type == dtype::f32 || t.type == dtype::bf16) && t.layout == tensor_layout::plain &&
             !t.shape.empty();
    });
    if (x >= 0) return x;
    return G->new_input({G->ri(1, 4), G->ri(1, 9)}, dtype::f32, tensor_layout::plain);
  }
  /// A float 4-D nchw / nhwc tensor (or a new one).
  int four_d() {
    const int x = G->pick([](const gfuzz::rt& t) {
      return (t.type == dtype::f32 || t.type == dtype::bf16) && t.four_d() && t.shape[2] > 1 &&
             t.shape[3] > 1;
    });
    if (x >= 0) return x;
    return G->new_input({G->ri(1, 2), G->ri(1, 6), G->ri(2, 7), G->ri(2, 7)}, dtype::f32,
                        G->coin(0.5) ? tensor_layout::nchw : tensor_layout::nhwc);
  }
  int any() {
    const int x = G->pick([](const gfuzz::rt& t) { return !t.shape.empty(); });
    return x >= 0 ? x : plain_float();
  }
  int int_tensor(bool quant) {
    const dtype t = G->coin(0.5) ? dtype::u8 : dtype::i8;
    if (quant)
      return G->new_input({G->ri(1, 2), G->ri(1, 4), G->ri(2, 5), G->ri(2, 5)}, t,
                          tensor_layout::nchw);
    const tensor_id id = graph().input(G->fresh("q"), {1, G->ri(1, 4), G->ri(2, 5), G->ri(2, 5)}, t,
                                       tensor_layout::nchw);
    return reg(id);
  }
  const gfuzz::rt& T(int i) { return G->T[std::size_t(i)]; }
  const kfuse::node_desc& any_of_nodes() {
    const auto& n = graph().nodes();
    return n[std::size_t(G->ri(0, int(n.size()) - 1))];
  }
  /// Keeps the generator's tensor list in step with a node or tensor made directly.
  int reg(tensor_id id) {
    gfuzz::rt r;
    r.k = gfuzz::rt::kind::constant;  // never picked as an input by the generator
    return G->add(id, std::move(r));
  }
  /// Outputs of the valid part plus the bad node; compile, record and replay.
  runner finish(tensor_id bad) {
    reg(bad);
    G->choose_outputs();
    graph().output(bad);
    auto g = G;
    return [g] { compile_and_run(g->g); };
  }
  runner finish_graph() {  // structural corruptions (outputs already chosen)
    auto g = G;
    return [g] { compile_and_run(g->g); };
  }
  std::vector<double> zeros(index_t n) { return std::vector<double>(std::size_t(n), 0.0); }
  int cst(std::vector<index_t> shape, dtype t = dtype::f32) {
    return G->new_const_random(std::move(shape), t, -1, 1);
  }
  /// A valid graph, compiled: for argument corruptions.
  struct compiled {
    std::shared_ptr<gfuzz::gen> G;
    std::shared_ptr<kfuse::plan> p;
    bound_buffers b;
  };
  compiled valid_plan() {
    G->build(4);
    compiled c{G, std::make_shared<kfuse::plan>(kfuse::compile(G->g, {.threads = 1})), {}};
    c.b = buffers_for(*G, *c.p, false);
    return c;
  }
};

struct kind {
  const char* name;
  unsigned known_bug;  // its current behaviour is this known bug (docs/robustness.md): only
                       // with that bit in KFUSE_FUZZ_KNOWN_BUGS, never in CI
  std::function<runner(ctx&)> make;
};

kfuse::eltwise_stage stage(kfuse::stage_kind k, float p0 = 0, float p1 = 0, tensor_id op = {},
                           bool pc = false) {
  kfuse::eltwise_stage s;
  s.kind = k;
  s.p0 = p0;
  s.p1 = p1;
  s.operand = op;
  s.per_channel = pc;
  return s;
}

std::vector<kind> invalid_kinds() {
  using sk = kfuse::stage_kind;
  std::vector<kind> k;
  auto add = [&](const char* n, std::function<runner(ctx&)> f, unsigned bug = 0) {
    k.push_back({n, bug, std::move(f)});
  };
  // -- linear
  add("linear: weight in-features differ from the input's", [](ctx& c) {
    const int x = c.plain_float();
    const index_t K = c.T(x).shape.back(), d = K > 1 && c.g().coin(0.5) ? -1 : c.g().ri(1, 2);
    return c.finish(c.graph().linear(c.name(), {x}, {c.cst({3, K + d})}));
  });
  add("linear: bias count differs from the out features", [](ctx& c) {
    const int x = c.plain_float();
    const index_t N = c.g().ri(2, 6);
    return c.finish(c.graph().linear(c.name(), {x}, {c.cst({N, c.T(x).shape.back()})},
                                     {c.cst({N + (c.g().coin(0.5) ? 1 : -1)})}));
  });
  add("linear: weight is a graph input, not a constant", [](ctx& c) {
    const int x = c.plain_float();
    const int w = c.g().new_input({3, c.T(x).shape.back()}, dtype::f32, tensor_layout::plain);
    return c.finish(c.graph().linear(c.name(), {x}, {w}));
  });
  add("linear: weight declared without data", [](ctx& c) {
    const int x = c.plain_float();
    const int w = c.reg(c.graph().weight(c.g().fresh("w"), {3, c.T(x).shape.back()}));
    return c.finish(c.graph().linear(c.name(), {x}, {w}));
  });
  add("linear: weight of rank 1 or 3", [](ctx& c) {
    const int x = c.plain_float();
    const index_t K = c.T(x).shape.back();
    const int w = c.g().coin(0.5) ? c.cst({K}) : c.cst({2, 3, K});
    return c.finish(c.graph().linear(c.name(), {x}, {w}));
  });
  add("linear: input is nchw / nhwc (not flattened)", [](ctx& c) {
    const int x = c.four_d();
    return c.finish(c.graph().linear(c.name(), {x}, {c.cst({3, c.T(x).shape.back()})}));
  });
  add("linear: input is u8 / i8", [](ctx& c) {
    const int x = c.int_tensor(true);
    return c.finish(c.graph().linear(c.name(), {x}, {c.cst({3, c.T(x).shape.back()})}));
  });
  add("linear: input is a scalar (shape [])", [](ctx& c) {
    const int x = c.g().new_input({}, dtype::f32, tensor_layout::plain);
    return c.finish(c.graph().linear(c.name(), {x}, {c.cst({3, 1})}));
  });
  add("linear: weight is an integer constant", [](ctx& c) {
    const int x = c.plain_float();
    return c.finish(c.graph().linear(c.name(), {x}, {c.cst({3, c.T(x).shape.back()}, dtype::i8)}));
  });
  if (gfuzz::has_int8)
    add("linear: int8 node without the input's quant params", [](ctx& c) {
      const int x = c.g().new_input({2, c.g().ri(1, 9)}, dtype::f32, tensor_layout::plain);
      return c.finish(
          c.graph().linear(c.name(), {x}, {c.cst({3, c.T(x).shape.back()})}, {}, precision::int8));
    });
  add("linear: required weight slot left empty",
      [](ctx& c) { return c.finish(c.graph().linear(c.name(), {c.plain_float()}, tensor_id{})); });
  // -- eltwise
  add("eltwise: operand shape differs", [](ctx& c) {
    const int x = c.any();
    auto s = c.T(x).shape;
    s.back() += 1;
    const int o = c.g().new_input(s, dtype::f32, c.T(x).layout);
    return c.finish(c.graph().add(c.name(), {x}, {o}));
  });
  add("eltwise: operand with the same element count, another shape", [](ctx& c) {
    const int x = c.g().new_input({2, 6}, dtype::f32, tensor_layout::plain);
    const int o =
        c.g().new_input(c.g().coin(0.5) ? std::vector<index_t>{3, 4} : std::vector<index_t>{12},
                        dtype::f32, tensor_layout::plain);
    return c.finish(c.graph().mul(c.name(), {x}, {o}));
  });
  add("eltwise: operand layout differs", [](ctx& c) {
    const int x = c.four_d();
    const int o = c.g().new_input(
        c.T(x).shape, dtype::f32,
        c.T(x).layout == tensor_layout::nchw ? tensor_layout::nhwc : tensor_layout::nchw);
    return c.finish(c.graph().add(c.name(), {x}, {o}));
  });
  add("eltwise: per-channel operand count differs", [](ctx& c) {
    const int x = c.any();
    const index_t C = c.T(x).channels();
    if (c.g().coin(0.5)) return c.finish(c.graph().bias_add(c.name(), {x}, {c.cst({C + 1})}));
    return c.finish(
        c.graph().eltwise(c.name(), {x}, {stage(sk::mul, 0, 0, {c.cst({C + 2})}, true)}));
  });
  add("eltwise: operand is bf16", [](ctx& c) {
    const int x = c.plain_float();
    const int o = c.g().new_input(c.T(x).shape, dtype::bf16, tensor_layout::plain);
    return c.finish(c.graph().add(c.name(), {x}, {o}));
  });
  add("eltwise: input is u8 / i8",
      [](ctx& c) { return c.finish(c.graph().relu(c.name(), {c.int_tensor(true)})); });
  add("eltwise: input is f16", [](ctx& c) {
    const int x = c.g().new_input({3, 5}, dtype::f16, tensor_layout::plain);
    return c.finish(c.graph().sigmoid(c.name(), {x}));
  });
  add("clamp: lo exceeds hi", [](ctx& c) {
    const float lo = float(c.g().rf(-1, 1));
    return c.finish(c.graph().clamp(c.name(), {c.any()}, lo, lo - float(c.g().rf(0.01, 2))));
  });
  add("clamp: NaN bound", [](ctx& c) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    return c.g().coin(0.5) ? c.finish(c.graph().clamp(c.name(), {c.any()}, nan, 1.f))
                           : c.finish(c.graph().clamp(c.name(), {c.any()}, -1.f, nan));
  });
  add("scale: NaN factor", [](ctx& c) {
    return c.finish(c.graph().scale(c.name(), {c.any()}, std::numeric_limits<float>::quiet_NaN()));
  });
  add("scale: infinite factor", [](ctx& c) {
    return c.finish(c.graph().scale(c.name(), {c.any()}, -std::numeric_limits<float>::infinity()));
  });
  add("leaky_relu: NaN slope", [](ctx& c) {
    return c.finish(
        c.graph().leaky_relu(c.name(), {c.any()}, std::numeric_limits<float>::quiet_NaN()));
  });
  add("eltwise: more than 3 tensor operands", [](ctx& c) {
    const int x = c.plain_float();
    std::vector<kfuse::eltwise_stage> st;
    for (int i = 0; i < 4; ++i)
      st.push_back(
          stage(sk::add, 0, 0, {c.g().new_input(c.T(x).shape, dtype::f32, tensor_layout::plain)}));
    return c.finish(c.graph().eltwise(c.name(), {x}, st));
  });
  add("eltwise: more than 12 stages", [](ctx& c) {
    return c.finish(c.graph().eltwise(c.name(), {c.any()},
                                      std::vector<kfuse::eltwise_stage>(13, stage(sk::relu))));
  });
  // -- softmax and norms
  add("softmax: axis out of range", [](ctx& c) {
    const int x = c.any();
    const int r = int(c.T(x).shape.size());
    return c.finish(c.graph().softmax(c.name(), {x}, c.g().coin(0.5) ? r : -r - 1));
  });
  add("softmax: input is u8 / i8",
      [](ctx& c) { return c.finish(c.graph().softmax(c.name(), {c.int_tensor(true)}, 1)); });
  add("softmax: input is f16", [](ctx& c) {
    return c.finish(c.graph().softmax(
        c.name(), {c.g().new_input({2, 7}, dtype::f16, tensor_layout::plain)}, -1));
  });
  add("softmax: scalar input", [](ctx& c) {
    return c.finish(
        c.graph().softmax(c.name(), {c.g().new_input({}, dtype::f32, tensor_layout::plain)}, 0));
  });
  add("layer_norm: nchw / nhwc input",
      [](ctx& c) { return c.finish(c.graph().layer_norm(c.name(), {c.four_d()})); });
  add("layer_norm: gamma count differs", [](ctx& c) {
    const int x = c.plain_float();
    return c.finish(c.graph().layer_norm(c.name(), {x}, {c.cst({c.T(x).shape.back() + 1})}));
  });
  add("layer_norm: gamma is a graph input", [](ctx& c) {
    const int x = c.plain_float();
    return c.finish(c.graph().layer_norm(
        c.name(), {x}, {c.g().new_input({c.T(x).shape.back()}, dtype::f32, tensor_layout::plain)}));
  });
  add("layer_norm: negative eps", [](ctx& c) {
    return c.finish(c.graph().layer_norm(c.name(), {c.plain_float()}, {}, {}, -1e-5f));
  });
  add("rms_norm: NaN eps", [](ctx& c) {
    return c.finish(c.graph().rms_norm(c.name(), {c.plain_float()}, {},
                                       std::numeric_limits<float>::quiet_NaN()));
  });
  add("rms_norm: beta count differs (gamma slot)", [](ctx& c) {
    const int x = c.plain_float();
    return c.finish(c.graph().rms_norm(c.name(), {x}, {c.cst({c.T(x).shape.back() + 2})}));
  });
  add("layer_norm: scalar input", [](ctx& c) {
    return c.finish(
        c.graph().layer_norm(c.name(), {c.g().new_input({}, dtype::f32, tensor_layout::plain)}));
  });
  auto bn = [](ctx& c, int x, index_t C, float eps, double var_lo, bool mean_data) {
    const int m = mean_data ? c.cst({C}) : c.reg(c.graph().weight(c.g().fresh("mean"), {C}));
    const int v = c.g().new_const_random({C}, dtype::f32, var_lo, var_lo + 1);
    return c.graph().batch_norm(c.name(), {x}, {m}, {v}, {c.cst({C})}, {c.cst({C})}, eps);
  };
  add("batch_norm: parameter count differs", [bn](ctx& c) {
    const int x = c.any();
    return c.finish(bn(c, x, c.T(x).channels() + 1, 1e-5f, 0.5, true));
  });
  add("batch_norm: negative eps", [bn](ctx& c) {
    const int x = c.any();
    return c.finish(bn(c, x, c.T(x).channels(), -1e-3f, 0.5, true));
  });
  add("batch_norm: NaN eps", [bn](ctx& c) {
    const int x = c.any();
    return c.finish(
        bn(c, x, c.T(x).channels(), std::numeric_limits<float>::quiet_NaN(), 0.5, true));
  });
  add("batch_norm: negative variance", [bn](ctx& c) {
    const int x = c.any();
    return c.finish(bn(c, x, c.T(x).channels(), 1e-5f, -3, true));
  });
  add("batch_norm: mean declared without data", [bn](ctx& c) {
    const int x = c.any();
    return c.finish(bn(c, x, c.T(x).channels(), 1e-5f, 0.5, false));
  });
  // -- shape ops
  add("reshape: element count differs", [](ctx& c) {
    const int x = c.any();
    return c.finish(c.graph().reshape(c.name(), {x}, {c.T(x).numel() + c.g().ri(1, 3)}));
  });
  add("reshape: two -1", [](ctx& c) {
    return c.finish(c.graph().reshape(c.name(), {c.any()}, {-1, 1, -1}));
  });
  add("reshape: zero extent", [](ctx& c) {
    const int x = c.any();
    return c.finish(c.graph().reshape(c.name(), {x}, {0, c.T(x).numel()}));
  });
  add("reshape: negative extent other than -1", [](ctx& c) {
    const int x = c.any();
    return c.finish(c.graph().reshape(c.name(), {x}, {-2, c.T(x).numel()}));
  });
  add("reshape: -1 cannot be inferred", [](ctx& c) {
    const int x = c.g().new_input({2, 7}, dtype::f32, tensor_layout::plain);
    return c.finish(c.graph().reshape(c.name(), {x}, {-1, 3}));
  });
  add("flatten: axis out of range", [](ctx& c) {
    const int x = c.any();
    const int r = int(c.T(x).shape.size());
    return c.finish(c.graph().flatten(c.name(), {x}, c.g().coin(0.5) ? r + 1 : -r - 1));
  });
  add("concat: axis out of range", [](ctx& c) {
    const int x = c.any();
    const int r = int(c.T(x).shape.size());
    return c.finish(c.graph().concat(c.name(), {{x}, {x}}, c.g().coin(0.5) ? r : -r - 1));
  });
  add("concat: extents differ off the axis", [](ctx& c) {
    const int x = c.g().new_input({2, 3, 4}, dtype::f32, tensor_layout::plain);
    const int y = c.g().new_input({2, 5, 4}, dtype::f32, tensor_layout::plain);
    return c.finish(c.graph().concat(c.name(), {{x}, {y}}, c.g().coin(0.5) ? 0 : 2));
  });
  add("concat: element types differ", [](ctx& c) {
    const int x = c.g().new_input({2, 3}, dtype::f32, tensor_layout::plain);
    const int y = c.g().new_input({2, 3}, dtype::bf16, tensor_layout::plain);
    return c.finish(c.graph().concat(c.name(), {{x}, {y}}, 1));
  });
  add("concat: layouts differ", [](ctx& c) {
    const int x = c.g().new_input({1, 2, 3, 3}, dtype::f32, tensor_layout::nchw);
    const int y = c.g().new_input({1, 2, 3, 3}, dtype::f32, tensor_layout::nhwc);
    return c.finish(c.graph().concat(c.name(), {{x}, {y}}, 1));
  });
  add("concat: ranks differ", [](ctx& c) {
    const int x = c.g().new_input({2, 3}, dtype::f32, tensor_layout::plain);
    const int y = c.g().new_input({2, 3, 1}, dtype::f32, tensor_layout::plain);
    return c.finish(c.graph().concat(c.name(), {{x}, {y}}, 0));
  });
  add("concat: no inputs", [](ctx& c) { return c.finish(c.graph().concat(c.name(), {}, 0)); });
  add("convert_layout: target plain", [](ctx& c) {
    return c.finish(c.graph().convert_layout(c.name(), {c.four_d()}, tensor_layout::plain));
  });
  add("convert_layout: input not 4-D", [](ctx& c) {
    const int x = c.g().new_input({2, 3, 4}, dtype::f32, tensor_layout::plain);
    return c.finish(c.graph().convert_layout(c.name(), {x}, tensor_layout::nhwc));
  });
  // -- conv2d
  auto conv = [](ctx& c, int x, std::vector<index_t> w, kfuse::conv2d_params p, index_t bias = 0,
                 dtype wt = dtype::f32) {
    const int wi = c.cst(std::move(w), wt);
    return c.graph().conv2d(c.name(), {x}, {wi}, bias > 0 ? tensor_id{c.cst({bias})} : tensor_id{},
                            p);
  };
  add("conv2d: plain 4-D input", [conv](ctx& c) {
    const int x = c.g().new_input({1, 3, 5, 5}, dtype::f32, tensor_layout::plain);
    return c.finish(conv(c, x, {2, 3, 3, 3}, {}));
  });
  add("conv2d: input not 4-D", [conv](ctx& c) {
    return c.finish(conv(c, c.plain_float(), {2, 1, 1, 1}, {}));
  });
  add("conv2d: weight of rank 3", [](ctx& c) {
    const int x = c.four_d();
    return c.finish(c.graph().conv2d(c.name(), {x}, {c.cst({2, c.T(x).shape[1], 3})}));
  });
  add("conv2d: groups do not divide the channels", [conv](ctx& c) {
    const int x = c.g().new_input({1, 5, 4, 4}, dtype::f32, tensor_layout::nhwc);
    kfuse::conv2d_params p;
    p.groups = 2;
    return c.finish(conv(c, x, {4, 2, 1, 1}, p));
  });
  add("conv2d: weight channels differ from the input's", [conv](ctx& c) {
    const int x = c.four_d();
    return c.finish(conv(c, x, {3, c.T(x).shape[1] + 1, 1, 1}, {}));
  });
  add("conv2d: negative padding", [conv](ctx& c) {
    const int x = c.four_d();
    kfuse::conv2d_params p;
    p.pad_left = -1;
    return c.finish(conv(c, x, {2, c.T(x).shape[1], 1, 1}, p));
  });
  add("conv2d: zero stride", [conv](ctx& c) {
    const int x = c.four_d();
    kfuse::conv2d_params p;
    p.stride_h = 0;
    return c.finish(conv(c, x, {2, c.T(x).shape[1], 1, 1}, p));
  });
  add("conv2d: zero dilation", [conv](ctx& c) {
    const int x = c.four_d();
    kfuse::conv2d_params p;
    p.dilation_w = 0;
    return c.finish(conv(c, x, {2, c.T(x).shape[1], 1, 1}, p));
  });
  add("conv2d: kernel larger than the padded input", [conv](ctx& c) {
    const int x = c.four_d();
    return c.finish(conv(c, x, {2, c.T(x).shape[1], c.T(x).shape[2] + 1, 1}, {}));
  });
  add("conv2d: bias count differs", [conv](ctx& c) {
    const int x = c.four_d();
    return c.finish(conv(c, x, {2, c.T(x).shape[1], 1, 1}, {}, 3));
  });
  add("conv2d: groups zero or negative", [conv](ctx& c) {
    const int x = c.four_d();
    kfuse::conv2d_params p;
    p.groups = c.g().coin(0.5) ? 0 : -1;
    return c.finish(conv(c, x, {2, c.T(x).shape[1], 1, 1}, p));
  });
  add("conv2d: integer weight", [conv](ctx& c) {
    const int x = c.four_d();
    return c.finish(conv(c, x, {2, c.T(x).shape[1], 1, 1}, {}, 0, dtype::u8));
  });
  if (gfuzz::has_int8)
    add("conv2d: int8 node without the input's quant params", [conv](ctx& c) {
      const int x = c.g().new_input({1, 3, 4, 4}, dtype::f32, tensor_layout::nchw);
      kfuse::conv2d_params p;
      p.prec = precision::int8;
      return c.finish(conv(c, x, {2, 3, 1, 1}, p));
    });
  // -- pool2d
  auto pool = [](ctx& c, int x, kfuse::pool2d_params p) {
    return c.graph().pool2d(c.name(), {x}, p);
  };
  add("pool2d: plain input", [pool](ctx& c) {
    return c.finish(pool(c, c.g().new_input({1, 2, 4, 4}, dtype::f32, tensor_layout::plain), {}));
  });
  add("pool2d: window larger than the padded input", [pool](ctx& c) {
    const int x = c.four_d();
    kfuse::pool2d_params p;
    p.r = int(c.T(x).shape[2]) + 1;
    return c.finish(pool(c, x, p));
  });
  add("pool2d: padding more than half the window", [pool](ctx& c) {
    kfuse::pool2d_params p;
    p.pad_top = 2;
    return c.finish(pool(c, c.four_d(), p));
  });
  add("pool2d: zero stride", [pool](ctx& c) {
    kfuse::pool2d_params p;
    p.stride_w = 0;
    return c.finish(pool(c, c.four_d(), p));
  });
  add("pool2d: negative padding", [pool](ctx& c) {
    kfuse::pool2d_params p;
    p.pad_left = -1;
    return c.finish(pool(c, c.four_d(), p));
  });
  add("pool2d: zero window", [pool](ctx& c) {
    kfuse::pool2d_params p;
    p.s = 0;
    return c.finish(pool(c, c.four_d(), p));
  });
  add("pool2d: average of u8 / i8 without quant params", [pool](ctx& c) {
    kfuse::pool2d_params p;
    p.kind = kfuse::pool_kind::avg;
    p.global = c.g().coin(0.5);
    return c.finish(pool(c, c.int_tensor(false), p));
  });
  add("pool2d: global pooling with padding", [pool](ctx& c) {
    kfuse::pool2d_params p;
    p.kind = kfuse::pool_kind::max;
    p.global = true;
    p.pad_bottom = 1;
    return c.finish(pool(c, c.four_d(), p));
  });
  add("pool2d: f16 input", [pool](ctx& c) {
    return c.finish(pool(c, c.g().new_input({1, 2, 4, 4}, dtype::f16, tensor_layout::nhwc), {}));
  });
  // -- casts and quantization
  add("cast: u8 to i8", [](ctx& c) {
    const int x = c.int_tensor(true);
    return c.finish(
        c.graph().cast(c.name(), {x}, c.T(x).type == dtype::u8 ? dtype::i8 : dtype::u8));
  });
  add("cast: to or from i32", [](ctx& c) {
    if (c.g().coin(0.5)) return c.finish(c.graph().cast(c.name(), {c.any()}, dtype::i32));
    const int x = c.g().new_input({4}, dtype::i32, tensor_layout::plain);
    return c.finish(c.graph().cast(c.name(), {x}, dtype::f32));
  });
  add("dequantize: input without quant params",
      [](ctx& c) { return c.finish(c.graph().dequantize(c.name(), {c.int_tensor(false)})); });
  add("cast: u8 / i8 to bf16",
      [](ctx& c) { return c.finish(c.graph().cast(c.name(), {c.int_tensor(true)}, dtype::bf16)); });
  add("quantize: scale zero, negative, NaN or infinite", [](ctx& c) {
    static constexpr float bad[] = {0.f, -0.1f, std::numeric_limits<float>::quiet_NaN(),
                                    std::numeric_limits<float>::infinity()};
    const int x = c.g().new_input({2, 5}, dtype::f32, tensor_layout::plain);
    return c.finish(c.graph().quantize(c.name(), {x}, dtype::u8, {bad[c.g().ri(0, 3)], 128}));
  });
  add("quantize: zero point outside the type's range", [](ctx& c) {
    const int x = c.g().new_input({2, 5}, dtype::f32, tensor_layout::plain);
    const bool u8 = c.g().coin(0.5);
    return c.finish(c.graph().quantize(c.name(), {x}, u8 ? dtype::u8 : dtype::i8,
                                       {0.1f, u8 ? (c.g().coin(0.5) ? 256 : -1) : 128}));
  });
  add("quantize: bf16 input", [](ctx& c) {
    const int x = c.g().new_input({2, 5}, dtype::bf16, tensor_layout::plain);
    return c.finish(c.graph().quantize(c.name(), {x}, dtype::u8, {0.1f, 128}));
  });
  add("set_quant: bad params on an input", [](ctx& c) {
    const int x = c.int_tensor(true);
    c.graph().set_quant(
        {x}, c.g().coin(0.5) ? kfuse::tensor_quant{0.f, 0} : kfuse::tensor_quant{0.1f, 300});
    return c.finish(c.graph().dequantize(c.name(), {x}));
  });
  // -- custom
  auto copy_op = [](kfuse::index_t n) {
    return kfuse::make_custom_op(
        [n](const void* const* in, void* out) {
          std::memcpy(out, in[0], std::size_t(n) * sizeof(float));
        },
        {n});
  };
  add("custom: 5 inputs", [copy_op](ctx& c) {
    const int x = c.g().new_input({6}, dtype::f32, tensor_layout::plain);
    return c.finish(c.graph().custom(c.name(), {{x}, {x}, {x}, {x}, {x}}, copy_op(6)));
  });
  add("custom: no callable", [copy_op](ctx& c) {
    auto op = copy_op(6);
    op.run = nullptr;
    return c.finish(
        c.graph().custom(c.name(), {{c.g().new_input({6}, dtype::f32, tensor_layout::plain)}}, op));
  });
  add("custom: output extent zero", [copy_op](ctx& c) {
    auto op = copy_op(6);
    op.out_shape = {0, 6};
    return c.finish(
        c.graph().custom(c.name(), {{c.g().new_input({6}, dtype::f32, tensor_layout::plain)}}, op));
  });
  // -- tensors
  add("input: zero or negative extent", [](ctx& c) {
    const int x = c.reg(c.graph().input(c.g().fresh("in"), {2, c.g().coin(0.5) ? 0 : -3}));
    return c.finish(c.graph().relu(c.name(), {x}));
  });
  add("constant: zero extent", [](ctx& c) {
    const int x = c.plain_float();
    const int w = c.reg(c.graph().constant(c.g().fresh("w"), {0, c.T(x).shape.back()},
                                           static_cast<const float*>(nullptr)));
    return c.finish(c.graph().linear(c.name(), {x}, {w}));
  });
  add("input: nhwc of rank 3", [](ctx& c) {
    const int x =
        c.reg(c.graph().input(c.g().fresh("in"), {2, 3, 4}, dtype::f32, tensor_layout::nhwc));
    return c.finish(c.graph().relu(c.name(), {x}));
  });
  // KNOWN BUG (docs/robustness.md): compile accepts a constant without data anywhere but in a
  // weight slot; replay then reads a null pointer (SIGSEGV: eltwise operand, concat input).
  add(
      "constant without data as an eltwise operand",
      [](ctx& c) {
        const int x = c.plain_float();
        const int w = c.reg(c.graph().weight(c.g().fresh("w"), c.T(x).shape));
        return c.finish(c.graph().add(c.name(), {x}, {w}));
      },
      gfuzz::bug::no_data_operand);
  add(
      "constant without data as the input of a node",
      [](ctx& c) {
        const int w = c.reg(c.graph().weight(c.g().fresh("w"), {3, 4}));
        return c.g().coin(0.5) ? c.finish(c.graph().softmax(c.name(), {w}))
                               : c.finish(c.graph().concat(c.name(), {{w}, {w}}, 0));
      },
      gfuzz::bug::no_data_operand);
  // -- structure (on a complete valid graph)
  add("dangling input id (past the last tensor)", [](ctx& c) {
    c.G->build(5);
    const auto& n = c.any_of_nodes();
    c.graph().set_node_input(n.name, 0, tensor_id{std::int32_t(c.graph().tensors().size()) + 7});
    return c.finish_graph();
  });
  add("dangling input id (negative)", [](ctx& c) {
    c.G->build(5);
    const auto& n = c.any_of_nodes();
    c.graph().set_node_input(n.name, 0, tensor_id{-7});
    return c.finish_graph();
  });
  add("cycle: a node reads its own output", [](ctx& c) {
    c.G->build(5);
    const auto& n = c.any_of_nodes();
    c.graph().set_node_input(n.name, 0, n.output);
    return c.finish_graph();
  });
  add("cycle: a node reads the output of one of its readers", [](ctx& c) {
    c.G->build(6);
    const auto& nodes = c.graph().nodes();
    // Node a's output is read by node b: a reading b's output closes a -> b -> a.
    std::vector<std::pair<std::size_t, std::size_t>> pairs;
    for (std::size_t b = 0; b < nodes.size(); ++b)
      for (tensor_id in : nodes[b].inputs)
        for (std::size_t a = 0; a < b; ++a)
          if (nodes[a].output.index == in.index) pairs.push_back({a, b});
    if (pairs.empty()) pairs.push_back({nodes.size() - 1, nodes.size() - 1});  // a self-loop
    const auto [a, b] = c.g().any_of(pairs);
    c.graph().set_node_input(nodes[a].name, 0, nodes[b].output);
    return c.finish_graph();
  });
  add("output: unknown id", [](ctx& c) {
    c.G->build(4);
    c.graph().output(tensor_id{std::int32_t(c.graph().tensors().size()) + 3});
    return c.finish_graph();
  });
  add("output: a graph input", [](ctx& c) {
    c.G->build(4);
    c.graph().output(c.graph().inputs().front());
    return c.finish_graph();
  });
  add("output: a constant", [](ctx& c) {
    c.G->build(4);
    c.graph().output({c.cst({3})});
    return c.finish_graph();
  });
  add("output: listed twice", [](ctx& c) {
    c.G->build(4);
    c.graph().output(c.graph().outputs().back());
    return c.finish_graph();
  });
  add("output: none", [](ctx& c) {
    c.G->build_body(c.g().ri(1, 4));
    return c.finish_graph();
  });
  add("names: two nodes with one name", [](ctx& c) {
    const int x = c.plain_float();
    const auto a = c.graph().relu("twin", {x});
    c.reg(a);
    return c.finish(c.graph().relu("twin", a));
  });
  add("names: an input named like a node", [](ctx& c) {
    c.G->build(3);
    const std::string nm = c.graph().nodes().back().name;
    c.reg(c.graph().input(nm, {3}));
    return c.finish_graph();
  });
  add("names: empty node name", [](ctx& c) { return c.finish(c.graph().relu("", {c.any()})); });
  // -- options
  add("compile: negative thread count", [](ctx& c) {
    c.G->build(3);
    auto g = c.G;
    const int t = -c.g().ri(1, 5);
    return runner([g, t] { compile_and_run(g->g, {.threads = t}); });
  });
  add("compile: NaN fork_join_ns", [](ctx& c) {
    c.G->build(3);
    auto g = c.G;
    return runner([g] {
      compile_and_run(g->g,
                      {.threads = 2, .fork_join_ns = std::numeric_limits<double>::quiet_NaN()});
    });
  });
  // -- builder misuse
  add("builder: set_node_input slot out of range", [](ctx& c) {
    c.G->build(3);
    const auto& n = c.any_of_nodes();
    const std::size_t slot = n.inputs.size() + std::size_t(c.g().ri(0, 3));
    auto g = c.G;
    const std::string nm = n.name;
    return runner([g, nm, slot] { g->g.set_node_input(nm, slot, g->g.inputs().front()); });
  });
  add("builder: set_node_input of an unknown node", [](ctx& c) {
    c.G->build(3);
    auto g = c.G;
    return runner([g] { g->g.set_node_input("no such node", 0, g->g.inputs().front()); });
  });
  add("builder: set_data on a non-constant", [](ctx& c) {
    c.G->build(2);
    auto g = c.G;
    return runner([g] {
      const float v[64] = {};
      g->g.set_data(g->g.inputs().front(), v);
    });
  });
  add("builder: set_data with a null pointer", [](ctx& c) {
    const int w = c.reg(c.graph().weight(c.g().fresh("w"), {4, 2}));
    auto g = c.G;
    return runner([g, w] { g->g.set_data({w}, nullptr); });
  });
  add("builder: tensor, set_quant or find with a bad id / name", [](ctx& c) {
    c.G->build(2);
    auto g = c.G;
    const int which = c.g().ri(0, 2);
    return runner([g, which] {
      if (which == 0) (void)g->g.tensor(tensor_id{-1});
      if (which == 1) g->g.set_quant(tensor_id{std::int32_t(g->g.tensors().size())}, {0.1f, 0});
      if (which == 2) (void)g->g.find("no such tensor");
    });
  });
  // -- arguments of record / run / bind / replay
  add("record: input count differs", [](ctx& c) {
    auto v = std::make_shared<ctx::compiled>(c.valid_plan());
    const bool more = c.g().coin(0.5);
    return runner([v, more] {
      auto in = v->b.in_b;
      if (more)
        in.push_back(in.front());
      else
        in.pop_back();
      (void)v->p->record(in, v->b.out_b);
    });
  });
  add("record: output count differs", [](ctx& c) {
    auto v = std::make_shared<ctx::compiled>(c.valid_plan());
    return runner([v] {
      auto out = v->b.out_b;
      out.pop_back();
      (void)v->p->record(v->b.in_b, out);
    });
  });
  add("record / run: input size off by one element or byte", [](ctx& c) {
    auto v = std::make_shared<ctx::compiled>(c.valid_plan());
    const auto i = std::size_t(c.g().ri(0, int(v->b.in_b.size()) - 1));
    const long d = std::array<long, 3>{
        -1, 1, -long(kfuse::dtype_size(v->p->input(i).type))}[std::size_t(c.g().ri(0, 2))];
    const bool eager = c.g().coin(0.3);
    return runner([v, i, d, eager] {
      auto in = v->b.in_b;
      in[i].bytes = std::size_t(long(in[i].bytes) + d);
      if (eager)
        v->p->run(in, v->b.out_b);
      else
        (void)v->p->record(in, v->b.out_b);
    });
  });
  add("record: output size differs", [](ctx& c) {
    auto v = std::make_shared<ctx::compiled>(c.valid_plan());
    return runner([v] {
      auto out = v->b.out_b;
      out.back().bytes += 4;
      (void)v->p->record(v->b.in_b, out);
    });
  });
  add("record: null input or output", [](ctx& c) {
    auto v = std::make_shared<ctx::compiled>(c.valid_plan());
    const bool input = c.g().coin(0.5);
    return runner([v, input] {
      auto in = v->b.in_b;
      auto out = v->b.out_b;
      (input ? in.front() : out.front()).data = nullptr;
      (void)v->p->record(in, out);
    });
  });
  add("record: misaligned input", [](ctx& c) {
    auto v = std::make_shared<ctx::compiled>(c.valid_plan());
    int which = -1;
    for (std::size_t i = 0; i < v->b.in_b.size(); ++i)
      if (kfuse::dtype_size(v->p->input(i).type) > 1) which = int(i);
    if (which < 0) {  // only u8 / i8 inputs: misalign an output (outputs are f32 but for
                      // a quantize node's; then an output of one-byte elements: null it)
      return runner([v] {
        auto out = v->b.out_b;
        std::vector<std::uint64_t> spare(out.front().bytes / 8 + 2);
        out.front().data = kfuse::dtype_size(v->p->output(0).type) > 1
                               ? reinterpret_cast<unsigned char*>(spare.data()) + 1
                               : nullptr;
        (void)v->p->record(v->b.in_b, out);
      });
    }
    return runner([v, which] {
      auto in = v->b.in_b;
      std::vector<std::uint64_t> spare(in[std::size_t(which)].bytes / 8 + 2);
      in[std::size_t(which)].data = reinterpret_cast<unsigned char*>(spare.data()) + 1;
      (void)v->p->record(in, v->b.out_b);
    });
  });
  add("record: typed buffer of another element type, same bytes", [](ctx& c) {
    auto v = std::make_shared<ctx::compiled>(c.valid_plan());
    return runner([v] {
      auto in = v->b.in_b;
      const dtype t = v->p->input(0).type;
      const std::size_t bytes = in.front().bytes;
      std::vector<std::int8_t> as_i8(bytes);
      std::vector<std::uint8_t> as_u8(bytes);
      in.front() = t == dtype::i8 ? kfuse::bind(as_u8) : kfuse::bind(as_i8);
      (void)v->p->record(in, v->b.out_b);
    });
  });
  add("record: output overlaps an input", [](ctx& c) {
    auto v = std::make_shared<ctx::compiled>(c.valid_plan());
    return runner([v] {
      auto in = v->b.in_b;
      auto out = v->b.out_b;
      std::vector<std::uint64_t> big((in.front().bytes + out.front().bytes) / 8 + 2);
      in.front().data = big.data();
      out.front().data = reinterpret_cast<unsigned char*>(big.data()) +
                         (in.front().bytes / 2 / 4) * 4;  // inside the input
      (void)v->p->record(in, out);
    });
  });
  add("record: two outputs share a buffer", [](ctx& c) {
    auto v = std::make_shared<ctx::compiled>(c.valid_plan());
    return runner([v] {
      auto out = v->b.out_b;
      if (out.size() < 2) out.push_back(out.front());  // also a count error: either raises
      out[1].data = out[0].data;
      (void)v->p->record(v->b.in_b, out);
    });
  });
  add("bind_input / bind_output: bad index, size or pointer", [](ctx& c) {
    auto v = std::make_shared<ctx::compiled>(c.valid_plan());
    const int which = c.g().ri(0, 3);
    return runner([v, which] {
      auto r = v->p->record(v->b.in_b, v->b.out_b);
      kfuse::binding b = v->b.in_b.front();
      if (which == 0) r.bind_input(v->b.in_b.size() + 2, b);
      if (which == 1) r.bind_output(v->b.out_b.size(), v->b.out_b.front());
      b.bytes += 1;
      if (which == 2) r.bind_input(0, b);
      if (which == 3) r.bind_output(0, kfuse::binding{nullptr, v->b.out_b.front().bytes});
    });
  });
  add("bind_output: onto an input's buffer", [](ctx& c) {
    auto v = std::make_shared<ctx::compiled>(c.valid_plan());
    return runner([v] {
      auto r = v->p->record(v->b.in_b, v->b.out_b);
      std::vector<std::uint64_t> big((v->b.in_b[0].bytes + v->b.out_b[0].bytes) / 8 + 2);
      kfuse::binding in = v->b.in_b[0];
      in.data = big.data();
      r.bind_input(0, in);  // valid
      kfuse::binding out = v->b.out_b[0];
      out.data = big.data();  // overlaps input 0
      r.bind_output(0, out);
    });
  });
  add("replay: empty or moved-from replay buffer", [](ctx& c) {
    auto v = std::make_shared<ctx::compiled>(c.valid_plan());
    const int which = c.g().ri(0, 2);
    return runner([v, which] {
      kfuse::replay_buffer r;
      if (which == 1) {
        auto a = v->p->record(v->b.in_b, v->b.out_b);
        kfuse::replay_buffer b = std::move(a);
        b.replay();
        a.replay();  // moved-from
      }
      if (which == 2) r.bind_input(0, v->b.in_b.front());
      r.replay();
    });
  });
  add("plan: empty plan", [](ctx& c) {
    const int which = c.g().ri(0, 2);
    return runner([which] {
      const kfuse::plan p;
      if (which == 0) (void)p.record({}, {});
      if (which == 1) p.run({}, {});
      (void)p.steps();
    });
  });
  // KNOWN BUG (docs/robustness.md): these accessors index with std::vector::at and throw
  // std::out_of_range, not kfuse::error.
  add(
      "plan::input / output: index out of range",
      [](ctx& c) {
        auto v = std::make_shared<ctx::compiled>(c.valid_plan());
        const bool out = c.g().coin(0.5);
        return runner([v, out] {
          if (out)
            (void)v->p->output(v->p->output_count());
          else
            (void)v->p->input(v->p->input_count() + 1);
        });
      },
      gfuzz::bug::accessor_exception);
  add(
      "replay_buffer::step: index out of range",
      [](ctx& c) {
        auto v = std::make_shared<ctx::compiled>(c.valid_plan());
        return runner([v] {
          auto r = v->p->record(v->b.in_b, v->b.out_b);
          (void)r.step(std::int32_t(v->p->steps().size()) + 3);
        });
      },
      gfuzz::bug::accessor_exception);
  return k;
}

}  // namespace

namespace {
struct totals {
  long tried = 0, correct = 0, mismatches = 0, rejected = 0, wrong = 0;
  long errors = 0, accepted = 0, known = 0;
};
}  // namespace

TEST_CASE("graph fuzz: random valid graphs match the double reference and the unfused plan",
          "[robustness][fuzz]") {
  if (!kt::cpu_can_run()) return;
  const std::uint64_t seed = env_u64("KFUSE_FUZZ_SEED", default_seed);
  const long count = env_long("KFUSE_FUZZ_COUNT", default_count);
  const long only = env_long("KFUSE_FUZZ_ONLY", -1);
  const unsigned bugs = known_bugs();
  totals t;
  std::vector<std::string> failures, rejections;
  const auto t0 = std::chrono::steady_clock::now();
  const std::uint64_t case_seed = env_u64("KFUSE_FUZZ_CASE_SEED", 0);
  for (long i = 0; i < count; ++i) {
    if (only >= 0 && i != only) continue;
    const std::uint64_t cs = case_seed ? case_seed : mix(seed * 1000003u + std::uint64_t(i));
    if (case_seed && i > 0) break;
    const outcome o = run_valid(cs, bugs);
    ++t.tried;
    const std::string tag = "valid case " + std::to_string(i) + ", ";
    switch (o.v) {
      case verdict::correct:
        ++t.correct;
        if (verbose()) std::cout << tag << "correct: " << o.detail << "\n";
        break;
      case verdict::mismatch:
        ++t.mismatches;
        failures.push_back(tag + "MISMATCH: " + o.detail);
        break;
      case verdict::rejected:
        // KNOWN BUG (docs/robustness.md): fusion fills a chain up to 3 tensor operands, then
        // lowering adds one (the int8 dequantization scales, a folded batch norm's bias) and
        // rejects the valid graph. Counted apart unless its bit is set.
        if (!(bugs & gfuzz::bug::fused_operand_limit) &&
            o.detail.find("too many fused operands") != std::string::npos) {
          ++t.known;
          if (verbose()) std::cout << tag << "known bug (fused operand limit): " << o.detail;
          break;
        }
        ++t.rejected;
        rejections.push_back(tag + "rejected: " + o.detail);
        break;
      case verdict::wrong_exception:
        ++t.wrong;
        failures.push_back(tag + "WRONG EXCEPTION: " + o.detail);
        break;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& f : failures) std::cout << f << "\n";
  for (const auto& r : rejections) std::cout << r << "\n";
  std::cout << "FUZZ valid seed=" << seed << " tried=" << t.tried << " correct=" << t.correct
            << " mismatches=" << t.mismatches << " rejected=" << t.rejected
            << " known_bug_rejections=" << t.known << " wrong_exceptions=" << t.wrong
            << " known_bugs=" << bugs << " seconds=" << secs << std::endl;
  if (env_long("KFUSE_FUZZ_STATS", 0))
    std::cout << "FUZZ tightness (largest |got - ref| / allowed): f32 " << stats().worst[1]
              << ", bf16 " << stats().worst[2] << ", int8 " << stats().worst[3]
              << ", integer outputs " << stats().integer << "\n  f32: " << stats().where[1]
              << "\n  bf16: " << stats().where[2] << "\n  int8: " << stats().where[3]
              << "\n  integer: " << stats().where[4] << "\n  f32-only graphs: " << stats().pure_f32
              << " " << stats().where[5] << std::endl;
  if (env_long("KFUSE_FUZZ_STATS", 0)) {
    std::cout << "FUZZ nodes generated:";
    for (int k = 0; k < op_kinds; ++k)
      std::cout << " " << kfuse::op_name(kfuse::op_kind(k)) << " " << stats().nodes[k];
    std::cout << "; fused into producers " << stats().fused << " (quantize absorptions "
              << stats().quant_fused << ")" << std::endl;
  }
  if (!rejections.empty())
    WARN(rejections.size() << " generated valid graphs were rejected with kfuse::error (above)");
  CHECK(t.mismatches == 0);
  CHECK(t.wrong == 0);
}

TEST_CASE("graph fuzz: random invalid graphs and arguments raise kfuse::error",
          "[robustness][fuzz]") {
  if (!kt::cpu_can_run()) return;
  const std::uint64_t seed = env_u64("KFUSE_FUZZ_SEED", default_seed);
  const long count = env_long("KFUSE_FUZZ_COUNT", default_count);
  const long only = env_long("KFUSE_FUZZ_ONLY", -1);
  const std::string filter = env_str("KFUSE_FUZZ_KIND");
  const unsigned bugs = known_bugs();
  const std::vector<kind> kinds = invalid_kinds();
  std::vector<const kind*> active;
  for (const kind& k : kinds)
    if ((k.known_bug & ~bugs) == 0 &&
        (filter.empty() || std::string(k.name).find(filter) != std::string::npos))
      active.push_back(&k);
  REQUIRE(!active.empty());
  totals t;
  std::vector<std::string> failures;
  std::map<std::string, std::pair<int, std::string>> accepted;  // kind -> count, an example
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < count; ++i) {
    if (only >= 0 && i != only) continue;
    const std::uint64_t cs = mix(seed * 1000003u + std::uint64_t(i) + 0x51ed2701u);
    std::mt19937_64 krng(cs);
    const kind& k = *active[std::size_t(krng() % active.size())];
    gfuzz::config cfg;
    cfg.known_bugs = bugs;
    ctx c{std::make_shared<gfuzz::gen>(cs, cfg), ""};
    ++t.tried;
    std::string where =
        "invalid case " + std::to_string(i) + " (seed " + std::to_string(cs) + "): " + k.name;
    try {
      runner run;
      // Building a corrupted graph may already raise (builder checks): that counts.
      run = k.make(c);
      where += "\n" + gfuzz::describe(c.graph());
      if (verbose()) std::cout << where << "\n";
      run();
      ++t.accepted;
      auto& a = accepted[k.name];
      if (a.first++ == 0) a.second = where;
    } catch (const kfuse::error& e) {
      ++t.errors;
      if (verbose()) std::cout << "  -> kfuse::error: " << e.what() << "\n";
    } catch (const std::exception& e) {
      ++t.wrong;
      failures.push_back(where + "\nWRONG EXCEPTION " + typeid(e).name() + ": " + e.what());
    } catch (...) {
      ++t.wrong;
      failures.push_back(where + "\nWRONG EXCEPTION (not a std::exception)");
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& f : failures) std::cout << f << "\n";
  for (const auto& [name, a] : accepted)
    std::cout << "FUZZ accepted-invalid (x" << a.first << "): " << name
              << "\n  example: " << a.second << "\n";
  std::cout << "FUZZ invalid seed=" << seed << " tried=" << t.tried << " errors=" << t.errors
            << " accepted=" << t.accepted << " wrong_exceptions=" << t.wrong
            << " kinds=" << active.size() << " known_bugs=" << bugs << " seconds=" << secs
            << std::endl;
  CHECK(t.wrong == 0);
}
