#pragma once
// ONNX TensorProto -> const_value, checked: sizes against the dims, dims against the limits,
// external data only from inside the model's folder.
#include <filesystem>

#include "context.hpp"

namespace kfuse::onnx::detail {

struct tensor_source {
  std::filesystem::path base_dir;  // external data root (empty: external data refused)
  std::size_t max_bytes = 0;
};

/// `what` names the tensor in errors ("initializer 'w'", "node 'c' (Constant)").
const_value decode_tensor(const ::onnx::TensorProto& t, const tensor_source& src,
                          const std::string& what);

/// Checked dims of a tensor: each >= 0, the product representable and below max_elems.
std::vector<index_t> checked_dims(const google::protobuf::RepeatedField<std::int64_t>& dims,
                                  std::size_t max_elems, const std::string& what);

}  // namespace kfuse::onnx::detail
