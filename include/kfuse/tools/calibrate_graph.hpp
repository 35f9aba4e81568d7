#pragma once
// Calibration of a graph's activations for its int8 plan: run the fp32 plan on sample inputs,
// observe the chosen tensors (activation_observer), and set their quantization parameters on
// the graph (graph::set_quant), which compile() then uses for the int8 linear / conv nodes.
//
//   auto cal = kfuse::calibrate_graph(g, {x, h1, h2}, samples, {observer_method::percentile});
//   kfuse::apply_calibration(g, cal);
//   auto int8_plan = kfuse::compile(g, {.prec = kfuse::precision::int8});
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

/// Observes `tensors` of `g` (graph inputs or node outputs) over the sample batches: each sample
/// is the data of the graph's single f32 input, a batch of the size the graph declares. The
/// parameters are for u8 activations (what kfuse's int8 kernels take): `scheme` affine maps the
/// observed range onto [0, 255]; symmetric puts zero at 128.
template <class A = arch::native, class B = backend::xsimd>
graph_calibration calibrate_graph(const graph& g, std::span<const tensor_id> tensors,
                                  std::span<const std::vector<float>> samples,
                                  observer_options observer = {},
                                  quant_scheme scheme = quant_scheme::affine,
                                  compile_options options = {}) {
  if (g.inputs().size() != 1)
    detail::fail("calibrate", "calibrate_graph needs a graph with one input, this one has " +
                                  std::to_string(g.inputs().size()));
  if (samples.empty()) detail::fail("calibrate", "no sample inputs");
  const tensor_desc& in = g.tensor(g.inputs()[0]);
  if (in.type != dtype::f32) detail::fail("calibrate", "the graph input must be f32");
  const auto in_count = std::size_t(shape_numel(in.shape));

  // A copy of the graph whose extra outputs are the observed node outputs, run in fp32.
  graph probe = g;
  std::vector<int> slot(tensors.size(), -1);  // output slot of each observed tensor (-1: input)
  std::size_t outputs = g.outputs().size();
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const tensor_desc& t = g.tensor(tensors[i]);
    if (t.is_constant)
      detail::fail("calibrate", "'" + t.name + "' is a constant, not an activation");
    if (t.is_input) continue;
    probe.output(tensors[i]);
    slot[i] = int(outputs++);
  }
  options.prec = precision::f32;
  const plan p = compile<A, B>(probe, options);
  std::vector<std::vector<float>> out(p.output_count());
  std::vector<binding> out_b(p.output_count());
  for (std::size_t o = 0; o < out.size(); ++o) {
    if (p.output(o).type != dtype::f32)
      detail::fail("calibrate", "output '" + p.output(o).name + "' is not f32");
    out[o].resize(p.output(o).bytes / sizeof(float));
    out_b[o] = bind(out[o]);
  }
  std::vector<float> x(in_count);
  const binding in_b = bind(x);
  replay_buffer r = p.record(std::span<const binding>(&in_b, 1), out_b);

  std::vector<activation_observer> obs(tensors.size(), activation_observer(observer));
  for (const std::vector<float>& s : samples) {
    if (s.size() != in_count)
      detail::fail("calibrate", "a sample has " + std::to_string(s.size()) +
                                    " values, the input '" + in.name + "' takes " +
                                    std::to_string(in_count));
    std::copy(s.begin(), s.end(), x.begin());
    r.replay();
    for (std::size_t i = 0; i < tensors.size(); ++i)
      obs[i].observe(slot[i] < 0 ? std::span<const float>(x)
                                 : std::span<const float>(out[std::size_t(slot[i])]));
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

/// Sets the calibrated parameters on the graph (graph::set_quant per observed tensor).
inline void apply_calibration(graph& g, const graph_calibration& c) {
  for (std::size_t i = 0; i < c.tensors.size(); ++i) g.set_quant(c.tensors[i], c.quant[i]);
}

KFUSE_END_NAMESPACE
