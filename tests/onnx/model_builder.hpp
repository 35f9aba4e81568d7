#pragma once
// A small ONNX model written in the test: one input x, nodes, initializers, output y.
#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kfuse/onnx/importer.hpp"

namespace kt {

// A model with one input x of `shape` (dim_param for negative entries: "batch") and element type
// `elem` (ONNX's code: 1 float, 2 uint8, 3 int8), the given nodes, and output y.
struct model_builder {
  ::onnx::ModelProto m;
  explicit model_builder(std::vector<std::int64_t> shape, std::int64_t opset = 17,
                         std::int32_t elem = 1) {
    m.set_ir_version(8);
    m.set_producer_name("kfuse-test");
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    auto* in = m.mutable_graph()->add_input();
    in->set_name("x");
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    for (std::int64_t d : shape) {
      auto* dim = tt->mutable_shape()->add_dim();
      if (d < 0)
        dim->set_dim_param("batch");
      else
        dim->set_dim_value(d);
    }
    m.mutable_graph()->add_output()->set_name("y");
  }
  ::onnx::NodeProto& node(const std::string& op, std::vector<std::string> in,
                          std::vector<std::string> out, const std::string& name = "") {
    auto* n = m.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? out[0] : name);
    for (auto& i : in) n->add_input(i);
    for (auto& o : out) n->add_output(o);
    return *n;
  }
  ::onnx::TensorProto& init(const std::string& name, std::vector<std::int64_t> dims,
                            std::vector<float> values) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(1);
    for (auto d : dims) t->add_dims(d);
    for (float v : values) t->add_float_data(v);
    return *t;
  }
  /// An integer initializer (elem: 2 uint8, 3 int8, 6 int32 in int32_data; 7 int64).
  ::onnx::TensorProto& init_ints(const std::string& name, std::vector<std::int64_t> dims,
                                 std::int32_t elem, std::vector<std::int32_t> values) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(elem);
    for (auto d : dims) t->add_dims(d);
    for (std::int32_t v : values)
      if (elem == 7)
        t->add_int64_data(v);
      else
        t->add_int32_data(v);
    return *t;
  }
  std::string bytes() const { return m.SerializeAsString(); }
  kfuse::onnx::model load(const kfuse::onnx::import_options& opt = {}) const {
    const std::string b = bytes();
    return kfuse::onnx::load_bytes(
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(b.data()), b.size()), opt);
  }
};

inline void attr_int(::onnx::NodeProto& n, const char* name, std::int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INT);
  a->set_i(v);
}

inline void attr_ints(::onnx::NodeProto& n, const char* name, std::vector<std::int64_t> v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(::onnx::AttributeProto::INTS);
  for (std::int64_t x : v) a->add_ints(x);
}

}  // namespace kt
