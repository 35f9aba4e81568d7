#pragma once
// The importer's state while it walks a model: the graph being built, what every ONNX value is
// (a constant known at load time, or a graph tensor with its shape and memory layout), the
// attribute readers and the errors that name the node.
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "kfuse/onnx/importer.hpp"

namespace kfuse::onnx::detail {

using node_proto = ::onnx::NodeProto;

/// ONNX element types (TensorProto.DataType) the importer reads.
enum elem_type : std::int32_t {
  elem_float = 1,
  elem_uint8 = 2,
  elem_int8 = 3,
  elem_uint16 = 4,
  elem_int16 = 5,
  elem_int32 = 6,
  elem_int64 = 7,
  elem_string = 8,
  elem_bool = 9,
  elem_float16 = 10,
  elem_double = 11,
  elem_uint32 = 12,
  elem_uint64 = 13,
  elem_bfloat16 = 16,
};
std::string elem_name(std::int32_t t);
inline bool is_float_elem(std::int32_t t) {
  return t == elem_float || t == elem_float16 || t == elem_double || t == elem_bfloat16;
}

/// A tensor known at load time: initializers, Constant nodes and folded subgraphs. Float types
/// keep their values in `f`, integer and bool types in `i` (exact).
struct const_value {
  std::int32_t elem = elem_float;
  std::vector<index_t> shape;
  std::vector<float> f;
  std::vector<std::int64_t> i;

  bool is_float() const { return is_float_elem(elem); }
  index_t numel() const { return is_float() ? index_t(f.size()) : index_t(i.size()); }
  double at(index_t k) const {
    return is_float() ? double(f[std::size_t(k)]) : double(i[std::size_t(k)]);
  }
};

/// A tensor computed at run time: a graph tensor. `shape` is the logical (ONNX) shape; for 4-D
/// tensors `layout` says how the graph holds it (plain is the same memory order as nchw).
struct run_value {
  tensor_id id;
  std::vector<index_t> shape;
  dtype type = dtype::f32;
  tensor_layout layout = tensor_layout::plain;
  bool boolean = false;  // an ONNX bool tensor, held as f32 0 / 1 (a u8 at the model's edges)
};
/// The ONNX element type a run-time value holds (bool for a boolean's f32 0 / 1).
std::int32_t elem_of(const run_value& r);

/// An ONNX value: a constant (c; r.id set once it is also needed as a graph tensor), or a
/// run-time tensor (r).
struct value {
  bool is_const = false;
  const_value c;
  run_value r;
};

class context {
 public:
  context(const import_options& o, std::int64_t opset) : opt(o), opset(opset) {}

  graph g;
  const import_options& opt;
  std::int64_t opset;
  std::vector<std::string> rewrites;
  std::unordered_map<std::string, value> values;

  // ---- errors ----------------------------------------------------------------------------------
  [[noreturn]] void fail(const node_proto& n, const std::string& what) const;
  static std::string describe(const node_proto& n);  // "node 'name' (OpType)"

  // ---- inputs and outputs of the current node --------------------------------------------------
  bool has_input(const node_proto& n, int k) const {
    return k < n.input_size() && !n.input(k).empty();
  }
  const value& in(const node_proto& n, int k) const;
  bool is_const(const node_proto& n, int k) const { return in(n, k).is_const; }
  /// Input k, which must be a load-time constant (`what` names it in the error).
  const const_value& const_in(const node_proto& n, int k, const char* what) const;
  /// Input k as a graph tensor (a constant becomes a graph constant).
  run_value run_in(const node_proto& n, int k);
  /// Input k as f32 run-time data (float32 only: other types are an error naming the input).
  run_value float_in(const node_proto& n, int k);
  /// Integer values of a constant input (shapes, axes, pads).
  std::vector<std::int64_t> ints_in(const node_proto& n, int k, const char* what) const;

  void set_const(const node_proto& n, int k, const_value c);
  void set_run(const node_proto& n, int k, run_value r);
  void set_alias(const node_proto& n, int k, const value& v);
  /// Output k is consumed by some node or is a model output.
  bool output_used(const node_proto& n, int k) const;

  // ---- attributes ------------------------------------------------------------------------------
  const ::onnx::AttributeProto* attr(const node_proto& n, const char* name) const;
  std::int64_t attr_int(const node_proto& n, const char* name, std::int64_t dflt) const;
  float attr_float(const node_proto& n, const char* name, float dflt) const;
  std::string attr_string(const node_proto& n, const char* name, const std::string& dflt) const;
  std::vector<std::int64_t> attr_ints(const node_proto& n, const char* name) const;
  /// Attributes not in `known` are an error (a value the importer would silently ignore).
  void only_attrs(const node_proto& n, std::initializer_list<const char*> known) const;

  // ---- graph building --------------------------------------------------------------------------
  /// A graph name derived from `base`, unique in the graph.
  std::string unique(const std::string& base);
  /// The name of output k of n as a graph node name (unique).
  std::string out_name(const node_proto& n, int k = 0) { return unique(n.output(k)); }
  /// A graph constant (f32) holding c, for a run-time value of `layout` (nhwc: data permuted).
  run_value graph_constant(const const_value& c, const std::string& name,
                           tensor_layout layout = tensor_layout::plain,
                           const std::vector<index_t>* shape = nullptr);
  /// v in the given layout (4-D only; a convert_layout node when it differs).
  run_value to_layout(const run_value& v, tensor_layout l, const std::string& name);
  /// v as a 4-D nchw / nhwc image (plain 4-D data is relabelled into the preferred layout).
  run_value as_image(const run_value& v, const std::string& name);
  /// v with plain row-major memory (nhwc data is reordered by a reshape).
  run_value as_plain(const run_value& v, const std::string& name);
  /// v with another shape (a graph reshape; plain result).
  run_value reshape(const run_value& v, std::vector<index_t> shape, const std::string& name);
  /// Channels [first, first + count) of image v's channel shuffle over `groups` (groups 1: a
  /// channel slice). A run of a shuffle this context built reads the shuffle's own source.
  run_value channel_shuffle(const run_value& v, int groups, index_t first, index_t count,
                            const std::string& name);
  /// The image (4-D) that run-time tensor `id` is a reshape of, or nullptr.
  const run_value* image_viewed_by(tensor_id id) const;
  /// v expanded to `shape` (NumPy broadcast), in layout l (4-D only; else plain).
  run_value broadcast(const run_value& v, std::vector<index_t> shape, tensor_layout l,
                      const std::string& name);
  /// The preferred layout for images.
  tensor_layout image_layout() const {
    return opt.layout == tensor_layout::nhwc ? tensor_layout::nhwc : tensor_layout::nchw;
  }

  std::map<std::string, int> consumers;  // value name -> number of consuming inputs
  std::set<std::string> model_outputs;

 private:
  std::set<std::string> names_;
  // Reshapes of 4-D images by their output's tensor index (ShuffleNet's reshape to
  // [N, g, C / g, H, W]): a transpose of the channel axes becomes a channel_shuffle of the image,
  // and a reshape back to the image's shape is the image itself.
  std::unordered_map<std::int32_t, run_value> image_views_;
  // Whole channel shuffles by their output's tensor index: their source and groups.
  struct shuffled {
    run_value source;
    int groups = 1;
  };
  std::unordered_map<std::int32_t, shuffled> shuffles_;
};

/// One op's import: reads n's inputs from cx, adds graph nodes or constants for its outputs.
using import_fn = void (*)(context& cx, const node_proto& n);
/// One op's load-time evaluation when all its inputs are constants (nullptr: none).
using fold_fn = void (*)(context& cx, const node_proto& n);

struct op_entry {
  const char* type;
  import_fn run;  // nullptr: the op is only supported on constants
  fold_fn fold;
};
/// The importer's op table (ops/registry.cpp), sorted by type.
const std::vector<op_entry>& op_table();

// ---- shared helpers (shape.cpp) ----------------------------------------------------------------
/// NumPy multidirectional broadcast of two shapes (error text in `why` when they do not).
bool broadcast_shape(const std::vector<index_t>& a, const std::vector<index_t>& b,
                     std::vector<index_t>& out);
/// axis in [-rank, rank) -> [0, rank) (error naming the node otherwise).
int norm_axis(const context& cx, const node_proto& n, std::int64_t axis, int rank);
std::string shape_str(const std::vector<index_t>& s);
index_t numel(const std::vector<index_t>& s);
/// Element `k` (row-major over `shape`) -> its position in a broadcast operand of shape `from`.
index_t broadcast_index(index_t k, const std::vector<index_t>& shape,
                        const std::vector<index_t>& from);

}  // namespace kfuse::onnx::detail
