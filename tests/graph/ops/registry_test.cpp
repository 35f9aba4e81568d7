// The op registry (graph/ops/registry.hpp): every op of KFUSE_GRAPH_OPS has a rule with the
// members the passes ask for, and its builder call makes a node holding the rule's attributes.
// A new op that misses one of them fails here (docs/executor.md, "Adding an op").
#include "kfuse/graph/ops/registry.hpp"

#include <cstddef>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "kfuse/graph/graph.hpp"
#include "support/test_support.hpp"

using namespace kfuse;

namespace {

// What each pass reads of a rule, checked at compile time for every op.
template <op_kind K>
constexpr bool rule_is_complete() {
  using R = typename graph_ops::rule_of<K>::type;
  static_assert(std::is_base_of_v<graph_ops::op_rule, R>, "a rule derives from op_rule");
  static_assert(R::kind == K, "a rule handles the kind it is registered for");
  static_assert(node_attribute_types::index_of<typename R::attributes>() >= 0 ||
                    std::is_same_v<typename R::attributes, no_attributes>,
                "a rule's attributes are one of node_attribute_types (graph/attributes.hpp)");
  static_assert(
      std::is_same_v<decltype(&R::infer), void (*)(detail::compile_context&, const node_desc&)>,
      "a rule has infer(compile_context&, const node_desc&)");
  static_assert(std::is_same_v<decltype(R::absorbs_chain), const bool> &&
                    std::is_same_v<decltype(R::folds_batch_norm), const bool> &&
                    std::is_same_v<decltype(R::chain_operand_slots), const int> &&
                    std::is_same_v<decltype(R::by_precision), const bool>,
                "a rule has the fusion traits of op_rule");
  return true;
}
#define KFUSE_CHECK_RULE(name, nhwc) static_assert(rule_is_complete<op_kind::name>());
KFUSE_GRAPH_OPS(KFUSE_CHECK_RULE)
#undef KFUSE_CHECK_RULE

std::vector<op_kind> every_op() {
  return {
#define KFUSE_OP_KIND(name, nhwc) op_kind::name,
      KFUSE_GRAPH_OPS(KFUSE_OP_KIND)
#undef KFUSE_OP_KIND
  };
}

// One node of every op, made by its builder call.
graph one_node_per_op() {
  graph g;
  const tensor_id x = g.input("x", {1, 4, 6, 6}, dtype::f32, tensor_layout::nchw);
  const tensor_id row = g.input("row", {2, 8});
  const tensor_id w = g.weight("w", {4, 4, 3, 3});
  const tensor_id wl = g.weight("wl", {8, 8});
  const tensor_id c4 = g.weight("c4", {4});
  const tensor_id ids = g.input("ids", {3}, dtype::i64);
  const tensor_id q = g.input("q", {1, 2, 2, 8});
  const tensor_id cache = g.input("cache", {1, 8, 2, 8});
  const tensor_id pos = g.input("pos", {1}, dtype::i32);
  g.relu("eltwise", x);
  g.linear("linear", row, wl);
  g.conv2d("conv2d", x, w);
  g.pool2d("pool2d", x, pool2d_params{});
  g.softmax("softmax", row);
  g.layer_norm("layer_norm", row);
  g.rms_norm("rms_norm", row);
  g.batch_norm("batch_norm", x, c4, c4, c4, c4);
  g.reshape("reshape", row, {16});
  g.concat("concat", {row, row}, 0);
  g.convert_layout("convert_layout", x, tensor_layout::nhwc);
  g.cast("cast", row, dtype::bf16);
  g.custom("custom", {row}, make_custom_op([](const void* const*, void*) {}, {2, 8}));
  g.broadcast("broadcast", c4, {2, 4});
  g.resize("resize", x, resize_params{});
  g.conv_transpose2d("conv_transpose2d", x, w, {}, conv2d_params{}, 8, 8);
  g.strided_view("strided_view", row, {8, 2}, 0, {1, 8});
  g.matmul("matmul", row, wl);
  g.gather("gather", wl, ids);
  g.attention("attention", q, q, q);
  g.cached_attention("cached_attention", q, q, q, cache, cache, pos);
  g.reduce("reduce", row, reduce_kind::sum);
  g.pad("pad", row, {0, 1, 0, 1});
  g.arg_reduce("arg_reduce", row, arg_kind::max);
  g.max_pool_indices("max_pool_indices", x, pool2d_params{});
  g.channel_shuffle("channel_shuffle", x, 2);
  return g;
}

}  // namespace

TEST_CASE("op registry: every op's builder call makes a node holding its rule's attributes") {
  const graph g = one_node_per_op();
  std::set<op_kind> built;
  for (const node_desc& n : g.nodes()) {
    INFO(n.name);
    CHECK(n.name == op_name(n.op));  // one node per op, named after it
    built.insert(n.op);
    graph_ops::with_rule(n.op, [&](auto rule) {
      using R = decltype(rule);
      CHECK(n.attributes.holds<typename R::attributes>());
    });
  }
  for (op_kind k : every_op()) {
    INFO(op_name(k));
    CHECK(built.count(k) == 1);  // a new op adds its builder call to one_node_per_op
  }
}

TEST_CASE("op registry: the passes' hooks answer for every op") {
  for (op_kind k : every_op()) {
    INFO(op_name(k));
    CHECK(op_name(k) != "?");
    const int slots = graph_ops::chain_operand_slots(k);
    CHECK(slots >= 0);
    CHECK(slots <= graph_ops::chain_max_operands);
    // A rule that folds a batch norm or takes a chain has a data input to fuse after.
    if (graph_ops::folds_batch_norm(k)) CHECK(graph_ops::absorbs_chain(k));
    CHECK_FALSE(graph_ops::optional_slot(k, 0));  // the data input is never optional
  }
}

TEST_CASE("op registry: a node's attributes are read as its op's type only") {
  node_desc n;
  n.name = "c";
  n.op = op_kind::conv2d;
  n.attributes = conv2d_params{};
  CHECK(n.attr<conv2d_params>().groups == 1);
  n.attr<conv2d_params>().groups = 2;
  CHECK(n.attributes.get_if<conv2d_params>()->groups == 2);
  CHECK(n.attributes.get_if<pool2d_params>() == nullptr);
  // Copies share the value until one changes it.
  node_desc m = n;
  m.attr<conv2d_params>().groups = 4;
  CHECK(n.attr<conv2d_params>().groups == 2);
  CHECK(m.attr<conv2d_params>().groups == 4);
  CHECK(node_desc{}.attributes.holds<no_attributes>());
  CHECK_THROWS_WITH(n.attr<pool2d_params>(), Catch::Matchers::Contains("node 'c' (conv2d)"));
  CHECK(declared_precision(n) == precision::inherit);
  n.attr<conv2d_params>().prec = precision::int8;
  CHECK(declared_precision(n) == precision::int8);
}

TEST_CASE("op registry: every op and conv part lives in one kfuse::runtime op family") {
  using detail::runtime_family;
  // The names KFUSE_RUNTIME_OPS takes (CMakeLists.txt's kfuse_runtime_families, in the enum's
  // order after core), which a tier built without some lists in KFUSE_RUNTIME_LEFT_OUT_FAMILIES.
  const std::vector<std::string> cmake_names = {
      "attention",   "conv2d", "conv2d_depthwise", "conv2d_gated", "conv2d_few_channel",
      "conv2d_nchw", "image",  "linear",           "matmul",       "norm",
      "pool",        "reduce"};
  CHECK(detail::runtime_family_name(runtime_family::core) == "core");
  for (std::size_t i = 0; i < cmake_names.size(); ++i) {
    const auto f = runtime_family(i + 1);
    CHECK(detail::runtime_family_name(f) == cmake_names[i]);
    CHECK(detail::runtime_builds(f));  // this TU is not a tier built without it
    CHECK(detail::set_builds<detail::all_ops>(f));
  }
  CHECK(detail::runtime_family_of(op_kind::conv2d) == runtime_family::conv2d);
  CHECK(detail::runtime_family_of(op_kind::cached_attention) == runtime_family::attention);
  CHECK(detail::runtime_family_of(op_kind::conv_transpose2d) == runtime_family::image);
  CHECK(detail::runtime_family_of(op_kind::batch_norm) == runtime_family::norm);
  CHECK(detail::runtime_family_of(op_kind::max_pool_indices) == runtime_family::pool);
  CHECK(detail::runtime_family_of(op_kind::arg_reduce) == runtime_family::reduce);
  // The ops the plan compiler inserts itself are always built.
  for (const op_kind k : {op_kind::eltwise, op_kind::cast, op_kind::convert_layout,
                          op_kind::reshape, op_kind::strided_view, op_kind::custom})
    CHECK(detail::runtime_family_of(k) == runtime_family::core);
  // conv2d's parts: the dense NHWC ones in conv2d, the NCHW ones apart, the specialized ones
  // in their own families.
  using part = graph_ops::conv2d_rule::part;
  const auto family = [](part p) { return graph_ops::conv2d_rule::part_family(p); };
  for (const part p : {part::dense_f32, part::dense_bf16, part::dense_bf16_to_bf16, part::dense_i8,
                       part::dense_i8_to_u8})
    CHECK(family(p) == runtime_family::conv2d);
  for (const part p : {part::dense_f32_nchw, part::dense_bf16_nchw, part::dense_i8_nchw})
    CHECK(family(p) == runtime_family::conv2d_nchw);
  CHECK(family(part::depthwise) == runtime_family::conv2d_depthwise);
  CHECK(family(part::dense_i8_to_bf16) == runtime_family::conv2d_depthwise);
  CHECK(family(part::gated) == runtime_family::conv2d_gated);
  CHECK(family(part::few_channel) == runtime_family::conv2d_few_channel);
}
