// The executor's vocabulary helpers (graph/names.hpp): names generated from the op and stage
// lists, and no argument-dependent-lookup clash with a user's own functions of the same names.
#include <cstddef>
#include <string_view>
#include <vector>

#include "kfuse/graph/graph.hpp"
#include "support/test_support.hpp"

namespace user {
// A user's own helpers over kfuse's types: kfuse's are objects, which ADL never finds.
std::string_view layout_name(kfuse::tensor_layout) { return "mine"; }
std::string_view op_name(kfuse::op_kind) { return "mine"; }
int bind(kfuse::bf16_t*, std::size_t) { return 7; }

std::string_view call_layout_name() { return layout_name(kfuse::tensor_layout::nhwc); }
std::string_view call_op_name() { return op_name(kfuse::op_kind::linear); }
int call_bind() {
  kfuse::bf16_t b[2] = {};
  return bind(b, 2);
}
}  // namespace user

TEST_CASE("names: a user's functions of the same names are not ambiguous") {
  CHECK(user::call_layout_name() == "mine");
  CHECK(user::call_op_name() == "mine");
  CHECK(user::call_bind() == 7);
  CHECK(kfuse::layout_name(kfuse::tensor_layout::nhwc) == "nhwc");
}

TEST_CASE("names: op and stage names come from their lists") {
  CHECK(kfuse::op_name(kfuse::op_kind::eltwise) == "eltwise");
  CHECK(kfuse::op_name(kfuse::op_kind::convert_layout) == "convert_layout");
  CHECK(kfuse::op_name(kfuse::op_kind::custom) == "custom");
  CHECK(kfuse::stage_name(kfuse::stage_kind::relu) == "relu");
  CHECK(kfuse::stage_name(kfuse::stage_kind::gelu_erf) == "gelu_erf");
  CHECK(kfuse::stage_name(kfuse::stage_kind::mul) == "mul");
  CHECK(kfuse::stage_reads_operand(kfuse::stage_kind::bias));
  CHECK(kfuse::stage_reads_operand(kfuse::stage_kind::add));
  CHECK_FALSE(kfuse::stage_reads_operand(kfuse::stage_kind::scale));
  CHECK_FALSE(kfuse::stage_reads_operand(kfuse::stage_kind::clamp));
}

TEST_CASE("names: bind types a buffer by its element type, raw bytes stay untyped") {
  std::vector<kfuse::bf16_t> h(3);
  const kfuse::binding b = kfuse::bind(h);
  CHECK(b.typed);
  CHECK(b.type == kfuse::dtype::bf16);
  CHECK(b.bytes == 6);
  std::vector<std::byte> raw(5);
  const kfuse::binding r = kfuse::bind(raw);  // not std::bind
  CHECK_FALSE(r.typed);
  CHECK(r.bytes == 5);
}
