// split_replay (kfuse/graph/split_replay.hpp): a batch run as one-thread parts at once gives the
// whole batch's results bitwise (even and uneven splits, f32 and int8, pools of 1..4 threads on
// the default pool and on a user executor, replayed many times over poisoned outputs), and every
// misuse is a kfuse::error naming the part or the binding. Built into graph_threading ("threads":
// the ThreadSanitizer phase runs it). Correctness only: nothing here is timed.
#include "kfuse/graph/split_replay.hpp"

#include <cmath>

#include "graph/graph_common.hpp"
#include "kfuse/tools/calibrate_graph.hpp"

using namespace kfuse;

namespace {

constexpr index_t image = gt::cnn::C * gt::cnn::H * gt::cnn::W;

/// The whole batch's output on one thread: the reference.
std::vector<float> whole(const graph& g, const std::vector<float>& x, compile_options o = {}) {
  o.threads = 1;
  std::vector<float> y(std::size_t(x.size() / std::size_t(image) * gt::cnn::K), std::nanf(""));
  auto r = compile(g, o).record({bind(x)}, {bind(y)});
  r.replay();
  return y;
}

std::string error_of(const auto& f) {
  try {
    f();
  } catch (const kfuse::error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("split_replay: parts of a batch give the whole batch's results",
          "[graph][threads][split]") {
  const gt::cnn net;
  const index_t batch = 7;
  const std::vector<float> x = gt::random_vec(std::size_t(batch * image), 31);
  // Parts of 3, 2, 2 (two plans) and 7 of 1 (one plan for all). Bitwise where the part plans
  // pick the whole plan's kernels: a batch-1 plan runs the 3x3 conv direct where batch 7 takes
  // Winograd (conv2d's cost model), so that split is compared with direct convs on both sides.
  for (const bool winograd : {true, false}) {
    const compile_options o{.threads = 1, .winograd = winograd};
    const std::vector<float> want = whole(net.build(batch), x, o);
    const plan p3 = compile(net.build(3), o), p2 = compile(net.build(2), o),
               p1 = compile(net.build(1), o);
    const std::vector<const plan*> parts =
        winograd ? std::vector<const plan*>{&p3, &p2, &p2} : std::vector<const plan*>(7, &p1);
    INFO(parts.size() << " parts");
    std::vector<float> y(want.size());
    split_replay s(parts, std::vector<binding>{bind(x)}, std::vector<binding>{bind(y)});
    CHECK(s.part_count() == parts.size());
    for (int rep = 0; rep < 20; ++rep) {
      std::fill(y.begin(), y.end(), std::nanf(""));  // poison
      s.replay();
      REQUIRE(gt::bitwise_equal(y, want));
    }
    for (int threads : {1, 2, 3, 4}) {  // at most `threads` parts at once
      INFO(threads << " threads");
      split_replay t(parts, std::vector<binding>{bind(x)}, std::vector<binding>{bind(y)}, threads);
      std::fill(y.begin(), y.end(), std::nanf(""));
      t.replay();
      CHECK(gt::bitwise_equal(y, want));
    }
  }
}

TEST_CASE("split_replay: on a user executor and with int8 parts", "[graph][threads][split]") {
  const gt::cnn net;
  const index_t batch = 4;
  const std::vector<float> x = gt::random_vec(std::size_t(batch * image), 32);
  // int8: every part calibrated like the whole (the same tensors and ranges, by name).
  graph g4 = net.build(batch), g2 = net.build(2);
  const std::vector<tensor_id> t4 = {g4.find("x"), g4.find("hswish")};
  const graph_calibration cal =
      calibrate_graph(g4, t4, std::vector<std::vector<float>>{x}, {observer_method::minmax});
  apply_calibration(g4, cal);
  for (std::size_t i = 0; i < cal.tensors.size(); ++i)
    g2.set_quant(g2.find(g4.tensor(cal.tensors[i]).name), cal.quant[i]);
  for (const precision prec : {precision::f32, precision::int8}) {
    INFO((prec == precision::int8 ? "int8" : "f32"));
    const std::vector<float> want = whole(g4, x, {.prec = prec});
    for (int n = 1; n <= 4; ++n) {
      INFO("executor over a pool of " << n);
      gt::pool_executor pool(n);
      const executor ex = pool.get();
      const plan p2 = compile(g2, {.threads = 1, .prec = prec, .exec = &ex});
      std::vector<float> y(want.size());
      split_replay s(std::vector<const plan*>{&p2, &p2}, std::vector<binding>{bind(x)},
                     std::vector<binding>{bind(y)});
      const scoped_executor use(&ex);
      for (int rep = 0; rep < 5; ++rep) {
        std::fill(y.begin(), y.end(), std::nanf(""));
        s.replay();
        CHECK(gt::bitwise_equal(y, want));
      }
    }
  }
}

TEST_CASE("split_replay: misuse is a kfuse::error naming the part or the binding",
          "[graph][threads][split]") {
  const gt::cnn net;
  const std::vector<float> x = gt::random_vec(std::size_t(4 * image), 33);
  std::vector<float> y(std::size_t(4 * gt::cnn::K));
  const plan p2 = compile(net.build(2), {.threads = 1});
  const plan two_threads = compile(net.build(2), {.threads = 2, .fork_join_ns = 0});
  gt::mlp other_net(2);
  const plan other = compile(other_net.build(), {.threads = 1});
  const std::vector<binding> in{bind(x)}, out{bind(y)};
  const auto split = [&](std::vector<const plan*> parts, std::vector<binding> i = {},
                         std::vector<binding> o = {}) {
    return error_of([&] { split_replay(parts, i.empty() ? in : i, o.empty() ? out : o); });
  };
  CHECK(split({}) == "split_replay: no parts to run");
  CHECK(split({&p2, nullptr}) == "split_replay: part 1 has no plan");
  const plan empty;
  CHECK(split({&empty}) == "split_replay: part 0 has no plan");
  if (two_threads.threads() == 2)  // a pool of one thread compiles it for one
    CHECK(
        split({&p2, &two_threads})
            .starts_with(
                "split_replay: part 1's plan uses 2 threads: compile each part with threads = 1"));
  // Another model with as many inputs and outputs: its sizes do not add up.
  CHECK(split({&p2, &other}).starts_with("split_replay: input 0 ('x') is bound to"));
  // The whole batch's buffers are the parts' end to end: one sample short, or one too many.
  const std::vector<float> x_short(x.begin(), x.end() - 1);
  CHECK(split({&p2, &p2}, {bind(x_short)}) ==
        "split_replay: input 0 ('x') is bound to " + std::to_string(x_short.size() * 4) +
            " bytes, the 2 parts take " + std::to_string(x.size() * 4) +
            " (is axis 0 the batch of every input and output?)");
  CHECK(split({&p2, &p2, &p2}).starts_with("split_replay: input 0 ('x') is bound to"));
  std::vector<float> y_long(y.size() + 1);
  CHECK(split({&p2, &p2}, {}, {bind(y_long)}).starts_with("split_replay: output 0 ('"));
  CHECK(error_of([&] {
          split_replay(std::vector<const plan*>{&p2, &p2}, {}, out);
        }) == "split_replay: 0 inputs bound, the model has 1");
  // Each part's record() checks the rest (null pointers, aliasing, element types).
  std::vector<int> wrong_type(x.size());
  CHECK(split({&p2, &p2}, {bind(wrong_type)}).find("i32") != std::string::npos);
  split_replay ok(std::vector<const plan*>{&p2, &p2}, in, out);
  CHECK(error_of([&] { ok.part(2); }) == "split_replay: part 2 does not exist (there are 2)");
}
