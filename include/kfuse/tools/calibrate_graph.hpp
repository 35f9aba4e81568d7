#pragma once
// Calibration of a graph's activations for its int8 plan: run the fp32 plan on sample inputs,
// observe the chosen tensors (activation_observer), and set their quantization parameters on
// the graph (graph::set_quant), which compile() then uses for the int8 linear / conv nodes.
//
//   auto cal = kfuse::calibrate_graph(g, {x, h1, h2}, samples, {observer_method::percentile});
//   kfuse::apply_calibration(g, cal);
//   auto int8_plan = kfuse::compile(g, {.prec = kfuse::precision::int8});
#include <set>
#include <span>
#include <string>
#include <vector>

#include "kfuse/graph/compile.hpp"
#include "kfuse/tools/calibrate.hpp"

namespace kfuse {

/// The observed tensors, their calibrated ranges and the parameters derived from them.
struct graph_calibration {
  std::vector<tensor_id> tensors;
  std::vector<value_range> ranges;
  std::vector<tensor_quant> quant;
  std::vector<std::int64_t> observed;  // values seen per tensor
};

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

namespace detail {
/// compile<A, B> as a callable: calibrate_graph's probe plans.
template <class A, class B>
struct compile_for {
  plan operator()(const graph& g, const compile_options& o) const { return compile<A, B>(g, o); }
};
}  // namespace detail

/// calibrate_graph (below) with the f32 probe plan compiled by `compile_fn(graph, options)`:
/// e.g. kfuse::runtime's compile (kfuse/runtime.hpp), in a TU that instantiates no plan compiler.
template <class Compile>
graph_calibration calibrate_graph_with(Compile&& compile_fn, const graph& g,
                                       std::span<const tensor_id> tensors,
                                       std::span<const std::vector<binding>> samples,
                                       observer_options observer = {},
                                       quant_scheme scheme = quant_scheme::affine,
                                       compile_options options = {}) {
  if (samples.empty()) detail::fail("calibrate", "no sample inputs");
  // A copy of the graph whose extra outputs are the observed node outputs, run in fp32.
  graph probe = g;
  std::vector<int> slot(tensors.size(), -1);   // output slot of each observed node output
  std::vector<int> input(tensors.size(), -1);  // or the graph input it is
  std::size_t outputs = g.outputs().size();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const tensor_desc& t = g.tensor(tensors[i]);
    if (t.is_constant)
      detail::fail("calibrate", "'" + t.name + "' is a constant, not an activation");
    if (t.type != dtype::f32) detail::fail("calibrate", "'" + t.name + "' is not f32");
    if (t.is_input) {
      for (std::size_t k = 0; k < g.inputs().size(); ++k)
        if (g.inputs()[k].index == tensors[i].index) input[i] = int(k);
      continue;
    }
    for (std::size_t k = 0; k < g.outputs().size(); ++k)  // already an output: read it there
      if (g.outputs()[k].index == tensors[i].index) slot[i] = int(k);
    if (slot[i] >= 0) continue;
    probe.output(tensors[i]);
    slot[i] = int(outputs++);
  }
  options.prec = precision::f32;
  const plan p = compile_fn(probe, options);
  std::vector<std::vector<float>> out(p.output_count());
  std::vector<binding> out_b(p.output_count());
  for (std::size_t o = 0; o < out.size(); ++o) {  // floats hold any output type's bytes
    out[o].resize((p.output(o).bytes + sizeof(float) - 1) / sizeof(float));
    out_b[o] = {out[o].data(), p.output(o).bytes, true, p.output(o).type};
  }
  std::vector<activation_observer> obs(tensors.size(), activation_observer(observer));
  for (const std::vector<binding>& in_b : samples) {
    if (in_b.size() != g.inputs().size())
      detail::fail("calibrate", "a sample binds " + std::to_string(in_b.size()) +
                                    " inputs, the graph has " + std::to_string(g.inputs().size()));
    replay_buffer r = p.record(in_b, out_b);  // checks each binding's size and type
    r.replay();
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (slot[i] >= 0) {
        obs[i].observe(std::span<const float>(out[std::size_t(slot[i])]));
      } else {
        const binding& b = in_b[std::size_t(input[i])];
        obs[i].observe(
            std::span<const float>(static_cast<const float*>(b.data), b.bytes / sizeof(float)));
      }
    }
  }
  graph_calibration c;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    c.tensors.push_back(tensors[i]);
    c.ranges.push_back(obs[i].range(scheme));
    const quant_params q = quant_params_for<u8>(c.ranges.back(), scheme);
    c.quant.push_back(tensor_quant{q.scale, q.zero_point});
    c.observed.push_back(obs[i].count());
  }
  return c;
}

/// Observes `tensors` of `g` (f32 graph inputs or node outputs) over the samples: each sample
/// binds every graph input, in order (any input types: token ids, masks), a batch of the size
/// the graph declares. The parameters are for u8 activations (what kfuse's int8 kernels take):
/// `scheme` affine maps the observed range onto [0, 255]; symmetric puts zero at 128.
template <class A = arch::native, class B = backend::xsimd>
graph_calibration calibrate_graph(const graph& g, std::span<const tensor_id> tensors,
                                  std::span<const std::vector<binding>> samples,
                                  observer_options observer = {},
                                  quant_scheme scheme = quant_scheme::affine,
                                  compile_options options = {}) {
  return calibrate_graph_with(detail::compile_for<A, B>{}, g, tensors, samples, observer, scheme,
                              options);
}

/// The same for a graph with one f32 input: each sample is that input's data.
template <class Compile>
graph_calibration calibrate_graph_with(Compile&& compile_fn, const graph& g,
                                       std::span<const tensor_id> tensors,
                                       std::span<const std::vector<float>> samples,
                                       observer_options observer = {},
                                       quant_scheme scheme = quant_scheme::affine,
                                       compile_options options = {}) {
  if (g.inputs().size() != 1)
    detail::fail("calibrate", "calibrate_graph needs a graph with one input, this one has " +
                                  std::to_string(g.inputs().size()) +
                                  " (give each sample as one binding per input)");
  if (samples.empty()) detail::fail("calibrate", "no sample inputs");
  const tensor_desc& in = g.tensor(g.inputs()[0]);
  if (in.type != dtype::f32) detail::fail("calibrate", "the graph input must be f32");
  const auto in_count = std::size_t(shape_numel(in.shape));
  std::vector<std::vector<binding>> bound;
  for (const std::vector<float>& s : samples) {
    if (s.size() != in_count)
      detail::fail("calibrate", "a sample has " + std::to_string(s.size()) +
                                    " values, the input '" + in.name + "' takes " +
                                    std::to_string(in_count));
    bound.push_back({bind(s)});
  }
  return calibrate_graph_with(compile_fn, g, tensors, std::span<const std::vector<binding>>(bound),
                              observer, scheme, options);
}

template <class A = arch::native, class B = backend::xsimd>
graph_calibration calibrate_graph(const graph& g, std::span<const tensor_id> tensors,
                                  std::span<const std::vector<float>> samples,
                                  observer_options observer = {},
                                  quant_scheme scheme = quant_scheme::affine,
                                  compile_options options = {}) {
  return calibrate_graph_with(detail::compile_for<A, B>{}, g, tensors, samples, observer, scheme,
                              options);
}

/// The tensors an int8 plan needs quant params for: the data input of every linear and conv2d
/// (each once), what calibrate_graph should observe.
inline std::vector<tensor_id> calibration_targets(const graph& g) {
  std::vector<tensor_id> t;
  std::set<std::int32_t> seen;
  for (const node_desc& n : g.nodes())
    if ((n.op == op_kind::linear || n.op == op_kind::conv2d) && !n.inputs.empty() &&
        seen.insert(n.inputs[0].index).second)
      t.push_back(n.inputs[0]);
  return t;
}

/// Sets the calibrated parameters on the graph (graph::set_quant per observed tensor).
inline void apply_calibration(graph& g, const graph_calibration& c) {
  for (std::size_t i = 0; i < c.tensors.size(); ++i) g.set_quant(c.tensors[i], c.quant[i]);
}

KFUSE_END_NAMESPACE
