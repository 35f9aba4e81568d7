#pragma once
// Code-free vocabulary of the executor: element types and layouts as run-time values, tensor
// handles, op parameters, bindings, the replay command and the profiler hook. Everything here is
// an aggregate or an enum (no code of its own, so it is shared by every ISA).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kfuse/config/macros.hpp"
#include "kfuse/epilogue/stage_list.hpp"
#include "kfuse/types/conv_geometry.hpp"
#include "kfuse/types/elem.hpp"
#include "kfuse/types/pad_mode.hpp"
#include "kfuse/types/pool_window.hpp"
#include "kfuse/types/reduce_kind.hpp"
#include "kfuse/types/resize_modes.hpp"
#include "kfuse/types/shuffle_selection.hpp"

namespace kfuse {

// Whether each stage form of KFUSE_BUILTIN_STAGES reads an operand (stage_reads_operand).
namespace stage_form {
inline constexpr bool unary = false, one_param = false, two_params = false, factor = false;
inline constexpr bool add_operand = true, mul_operand = true;
inline constexpr bool math_unary = false, math_one_param = false, math_two_params = false;
inline constexpr bool math_operand = true;
}  // namespace stage_form

/// An element type as a run-time value (the graph's tensors carry one).
/// i32 / i64: integer data (token ids, gather indices; i32 also raw int8 accumulators).
enum class dtype : std::uint8_t { f32, bf16, f16, i8, u8, i32, i64 };

/// How a tensor's elements sit in memory. `plain` is dense row-major over its shape (any rank);
/// nchw / nhwc name the memory order of a 4-D tensor whose shape is always given as (N, C, H, W).
enum class tensor_layout : std::uint8_t { plain, nchw, nhwc };

/// A tensor of a graph (an index into it). A default-constructed id means "none".
struct tensor_id {
  std::int32_t index = -1;
};

/// The arithmetic a linear / conv node runs in. `inherit` takes compile_options::precision.
/// bf16: activations are rounded to bf16 and weights stored as bf16 (vdpbf16ps), f32 out.
/// int8: u8/i8 activations (quant params from graph::set_quant, e.g. from calibration), i8
/// weights quantized per output channel at compile time, f32 out unless a quantize is fused.
enum class precision : std::uint8_t { inherit, f32, bf16, int8 };

/// How an op takes part in an NHWC region (graph/passes/layout_choice.hpp): `no`, it stays out;
/// `data`, its data input (input 0) is in the region and its other inputs are weights; `all`,
/// every input is in the region (concat; eltwise: its same-shape operands); `target`, a broadcast
/// into a 4-D NCHW target, whose layout becomes NHWC.
enum class nhwc_support : std::uint8_t { no, data, all, target };

/// The graph ops, declared once with their traits: the op_kind enum, op_name(), nhwc_support_of()
/// and the plan compiler's rule table (graph/ops/registry.hpp: X(name, nhwc) is handled by
/// graph_ops::name##_rule) come from it. A new op is one line here, its rule file in graph/ops/,
/// and a builder call in graph.hpp. Append, never reorder.
#define KFUSE_GRAPH_OPS(X)                                                                       \
  X(eltwise, all)           /* a chain of eltwise stages (activation, scale, bias, add / mul) */ \
  X(linear, no)             /* y = x . W^T (+ bias), W given as PyTorch [N, K] */                \
  X(conv2d, data)           /* 2-D convolution, OIHW weights, nchw or nhwc activations */        \
  X(pool2d, data)           /* max / average / global pooling */                                 \
  X(softmax, no)            /* over one axis */                                                  \
  X(layer_norm, no)         /* over the last axis, optional affine */                            \
  X(rms_norm, no)           /* over the last axis, optional gamma */                             \
  X(batch_norm, data)       /* inference batch norm (per channel affine) */                      \
  X(reshape, no)            /* a view with another shape (a copy only when it must be) */        \
  X(concat, all)            /* along one axis */                                                 \
  X(convert_layout, data)   /* nchw <-> nhwc */                                                  \
  X(cast, data)             /* element type change, or quantize / dequantize */                  \
  X(custom, no)             /* a user-supplied callable with declared output and cost */         \
  X(broadcast, target)      /* NumPy broadcast of x to a target shape (ONNX Expand) */           \
  X(resize, data)           /* 2-D nearest / bilinear resampling of an image */                  \
  X(conv_transpose2d, data) /* transposed 2-D convolution (nhwc), [C, K / groups, R, S] */       \
  X(strided_view, no)       /* x read through strides and an offset (transpose, slice) */        \
  X(matmul, no)             /* a . b of two run-time tensors, NumPy batch broadcast */           \
  X(gather, no)             /* rows of a table picked by i32 / i64 indices (embeddings) */       \
  X(attention, no)          /* fused softmax(Q.K^T * scale + bias) . V, [B, S, H, d] */          \
  X(cached_attention, no)   /* a decoder step: K / V rows into caches, then attention */         \
  X(reduce, no)             /* sum / mean / max / min / prod / L1 / L2 / log-sum-exp */          \
  X(pad, no)                /* constant / reflect / edge padding (negative pads crop) */         \
  X(arg_reduce, no)         /* int64 index of the max / min along one axis */                    \
  X(max_pool_indices, no)   /* int64 input index of each max-pooling window's max */             \
  X(channel_shuffle, data)  /* an image's channels shuffled over groups, or a run */

/// Op kinds of graph nodes.
enum class op_kind : std::uint8_t {
#define KFUSE_OP_ENUM(name, nhwc) name,
  KFUSE_GRAPH_OPS(KFUSE_OP_ENUM)
#undef KFUSE_OP_ENUM
};

/// An op's part in NHWC regions, as its line in KFUSE_GRAPH_OPS declares it.
constexpr nhwc_support nhwc_support_of(op_kind k) noexcept {
  switch (k) {
#define KFUSE_OP_NHWC(name, nhwc) \
  case op_kind::name:             \
    return nhwc_support::nhwc;
    KFUSE_GRAPH_OPS(KFUSE_OP_NHWC)
#undef KFUSE_OP_NHWC
  }
  return nhwc_support::no;
}

/// One stage of an eltwise chain (the list: kfuse/epilogue/stage_list.hpp). Binary stages
/// (bias, add, mul, div, max, min, pow, prelu: stage_reads_operand) read an operand: bias one
/// value per channel, the others a tensor of x's shape, or one value per channel with
/// per_channel. leaky_relu, elu, celu: p0 = alpha; clamp: p0 = lo, p1 = hi; scale: p0 = factor;
/// selu: p0 = alpha, p1 = gamma; power: p0 = exponent.
enum class stage_kind : std::uint8_t {
#define KFUSE_STAGE_ENUM(name, form) name,
  KFUSE_BUILTIN_STAGES(KFUSE_STAGE_ENUM)
#undef KFUSE_STAGE_ENUM
};

/// A stage of a chain at run time. One struct for every level, by how it names its operand: the
/// graph's eltwise_stage (a tensor_id), the compiler's op_stage (a plan tensor) and the plan's
/// chain_stage (a slot of the command).
template <class Operand>
struct stage_desc {
  stage_kind kind = stage_kind::relu;
  float p0 = 0.f;
  float p1 = 0.f;
  Operand operand{-1};
  bool per_channel = false;
};

/// Whether stage kind k reads a tensor operand.
constexpr bool stage_reads_operand(stage_kind k) noexcept {
  switch (k) {
#define KFUSE_STAGE_OPERAND(name, form) \
  case stage_kind::name:                \
    return stage_form::form;
    KFUSE_BUILTIN_STAGES(KFUSE_STAGE_OPERAND)
#undef KFUSE_STAGE_OPERAND
  }
  return false;
}

using eltwise_stage = stage_desc<tensor_id>;

/// conv2d: its window (conv_geometry, as the kernels' conv_shape has it; weights are OIHW
/// [K, C / groups, R, S]) and the arithmetic it runs in (inherit: compile_options::prec).
struct conv2d_params : conv_geometry {
  precision prec = precision::inherit;
};

/// pool2d: its window, as the kernels' pool_shape has it (the input's extents come from the
/// graph). The defaults are the kernel's: 1x1, stride 1, padded positions counted in an average's
/// divisor (PyTorch's); the ONNX importer sets ONNX's count_include_pad (default 0) itself.
using pool2d_params = pool_window;

/// pad: x padded by pads[d] positions before and pads[rank + d] after each logical axis d (ONNX
/// Pad's order; negative pads crop); the new positions hold `value` (constant), mirror x without
/// its edge (reflect) or repeat the edge (edge).
struct pad_params {
  std::vector<index_t> pads;
  pad_mode mode = pad_mode::constant;
  float value = 0.f;
};

/// reduce: `kind` over the logical `axes` (negative count from the end; empty: all), kept as
/// extents of 1 with keepdims.
struct reduce_params {
  reduce_kind kind = reduce_kind::sum;
  std::vector<int> axes;
  bool keepdims = true;
};

/// arg_reduce: the index of the maximum / minimum along `axis` (ties: the first, or the last with
/// select_last), the axis kept as extent 1 with keepdims.
struct arg_reduce_params {
  arg_kind kind = arg_kind::max;
  int axis = -1;
  bool keepdims = true;
  bool select_last = false;
};

/// resize geometry: the output's H and W, and the scales the coordinate transform divides by
/// (ONNX's scales, or out / in when the model gave sizes).
struct resize_params {
  index_t out_h = 1, out_w = 1;
  double scale_h = 1, scale_w = 1;
  resize_mode mode = resize_mode::nearest;
  resize_coords coords = resize_coords::half_pixel;
  resize_rounding rounding = resize_rounding::round_prefer_floor;
  float cubic_a = -0.75f;        // cubic: the kernel's coefficient (ONNX cubic_coeff_a)
  bool exclude_outside = false;  // cubic: taps outside the input get weight 0 (renormalized)
  // tf_crop_and_resize: the region of interest (fractions of the input's H and W) and the value
  // of outputs that sample outside the input
  double roi_h0 = 0, roi_h1 = 1, roi_w0 = 0, roi_w1 = 1;
  float extrapolation = 0.f;
};

/// channel_shuffle: the channels in `groups` groups, transposed (ShuffleNet's shuffle; 1: none),
/// and the run [first, first + count) of the result kept (count -1: to the last channel), as the
/// kernel's channel_shuffle_shape has it.
using channel_shuffle_params = shuffle_selection;

/// attention: the scale of Q.K^T (0: 1 / sqrt(head_dim)) and a causal mask.
struct attention_params {
  float scale = 0.f;
  bool causal = false;
};

/// Per-tensor affine quantization: real = scale * (q - zero_point).
struct tensor_quant {
  float scale = 1.f;
  std::int32_t zero_point = 0;
};

/// A caller's buffer bound to a graph input or output: its address, its size in bytes and,
/// when made by bind() from a typed pointer, its element type (checked against the tensor's:
/// a bf16 buffer bound where the plan expects f32 is an error, not a reinterpretation).
/// binding{p, bytes} and bind() of void / std::byte / char buffers are untyped: size only.
struct binding {
  void* data = nullptr;
  std::size_t bytes = 0;
  bool typed = false;
  dtype type = dtype::f32;
  bool read_only = false;  // made by bind() from a const pointer: not for an input the plan writes
};

/// A user-supplied executor (defined in kfuse/threading/parallel_for.hpp).
struct executor;

struct command;
/// A replay command's entry point. It receives its own command (pointers, params, range).
using command_fn = void (*)(const command&);

/// One step of a replay buffer: plain data, walked in order by replay_buffer::replay().
struct command {
  command_fn fn = nullptr;
  const void* params = nullptr;  // the step's parameters, owned by the plan (packed weights...)
  const void* in[4] = {};        // resolved input pointers (arena, bound input, constant)
  void* out = nullptr;           // resolved output pointer
  index_t begin = 0, end = 0;    // the work range of this command (items of its step)
  std::int32_t threads = 1;      // threads it may use (1: runs on the calling thread only)
  std::int32_t step = 0;         // the plan step it runs (plan::step_info(step))
  void* workspace = nullptr;     // its kernel's scratch: a slice of the arena
  std::size_t workspace_bytes = 0;
};

/// Profiler hook: replay(hook) calls on_command(user, command_index, step, begin_ns, end_ns)
/// after every command, with steady-clock nanoseconds. replay() without a hook has no check.
struct profiler_hook {
  void* user = nullptr;
  void (*on_command)(void* user, std::int32_t command_index, std::int32_t step,
                     std::int64_t begin_ns, std::int64_t end_ns) = nullptr;
};

/// Options of compile(graph, options).
struct compile_options {
  /// Threads a node may use at most (0: the default pool's size; see docs/executor.md).
  int threads = 0;
  /// Arithmetic of linear / conv nodes whose own precision is `inherit`.
  precision prec = precision::f32;
  /// Run the fusion passes (batch-norm folding, epilogue absorption, eltwise merging).
  bool fuse = true;
  /// What splitting a node over threads costs, in ns. < 0: measured by the pool
  /// (thread_pool::fork_join_ns(), once per process); 0: split every node (tests). A node runs
  /// on t threads when that makes it at least 10% faster by the cost model of
  /// docs/executor.md (its flops and bytes at per-thread rates, plus this once).
  double fork_join_ns = -1;
  /// Run parallel work on this executor instead of kfuse's pool (must outlive the plan).
  const executor* exec = nullptr;
  /// Let the plan run an NCHW graph's image ops in NHWC, with one conversion at the region's
  /// edges (graph/passes/layout_choice.hpp lists the ops; the report says so). false: every
  /// tensor in its declared layout.
  bool choose_layout = true;
  /// Let f32 NHWC 3x3 stride-1 convs run as Winograd F(4x4, 3x3) where conv2d's cost model says
  /// it pays (kernels/conv/winograd.hpp: ~3-4x fewer multiply-adds; outputs differ from the
  /// direct conv by ~1e-6 of sum |x w|). false: the direct conv everywhere.
  bool winograd = true;
  /// A bf16 plan runs its nodes in f32 and says so where bf16 would be slower: on an arch
  /// without a bf16 dot product (vdpbf16ps; every arch but avx512_bf16), whose emulation rounds
  /// the operands to bf16 and runs them on the FMA at 1.4-3x the f32 conv's time (Zen 3), and on
  /// a CPU whose vdpbf16ps is no faster than its f32 FMAs (probed once per process:
  /// cached_bf16_dot_speed()). true: bf16 kernels anyway (tests, or to see bf16's numerics).
  /// kfuse::runtime's tiers without a bf16 dot product hold no emulated bf16 kernels: there
  /// compile() throws and says to compile header-only (compile<arch::X>) instead.
  bool emulated_bf16 = false;
};

}  // namespace kfuse
