// kfuse-run: load an ONNX model, compile it into a kfuse plan, record a replay buffer and time
// replays (like trtexec / onnxruntime_perf_test). `kfuse-run --help` documents every option
// (src/tools/kfuse_run_args.hpp). Any bad argument, file or model: one line
// "kfuse-run: error: ..." on stderr and exit code 2.
//
// Built for plain x86-64 (arch generic): kfuse::compile comes from kfuse::runtime
// (kfuse/runtime.hpp), which picks the best tier the running CPU supports (KFUSE_ARCH picks
// another), so one kfuse-run runs on any CPU and this TU instantiates no kernel.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kfuse/graph/split_replay.hpp"
#include "kfuse/onnx/export_qdq.hpp"
#include "kfuse/onnx/importer.hpp"
#include "kfuse/runtime.hpp"
#include "kfuse/tools/accuracy.hpp"
#include "kfuse/tools/batch_sweep.hpp"
#include "kfuse/tools/calibrate_graph.hpp"
#include "kfuse/tools/npy.hpp"
#include "kfuse/tools/replay_profiler.hpp"
#include "kfuse_run_args.hpp"

namespace {

namespace fs = std::filesystem;
using kfuse::index_t;
using kfuse_run::run_args;
using steady = std::chrono::steady_clock;

constexpr std::uint32_t random_seed = 2024;  // inputs without a file: seed + input index

[[noreturn]] void fail(const std::string& what) { throw kfuse::error(what); }

double ms_since(steady::time_point t0) {
  return std::chrono::duration<double, std::milli>(steady::now() - t0).count();
}

std::string shape_text(std::span<const index_t> s) {
  std::string t = "[";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

const char* prec_name(kfuse::precision p) {
  return p == kfuse::precision::bf16 ? "bf16" : p == kfuse::precision::int8 ? "int8" : "f32";
}

index_t count_of(std::span<const index_t> shape) {
  return kfuse::detail::checked_count("kfuse-run", "shape", shape);
}

// ---- host buffers ------------------------------------------------------------------------------

/// A buffer of the host bound to one plan input or output, with the model's shape.
struct host_tensor {
  std::string name;
  std::vector<index_t> shape;  // the model's (NCHW for 4-D activations)
  kfuse::dtype type = kfuse::dtype::f32;
  std::vector<std::byte> data;  // operator new's alignment (16) covers every dtype

  kfuse::binding binding() { return {data.data(), data.size(), true, type}; }
  template <class T>
  T* as() {
    return reinterpret_cast<T*>(data.data());
  }
  template <class T>
  const T* as() const {
    return reinterpret_cast<const T*>(data.data());
  }
  std::size_t count() const { return data.size() / kfuse::dtype_size(type); }
};

/// A zeroed buffer of the model's shape.
host_tensor make_buffer(const std::string& name, const std::vector<index_t>& shape,
                        kfuse::dtype type) {
  const auto n = std::size_t(count_of(shape));
  return {name, shape, type, std::vector<std::byte>(n * kfuse::dtype_size(type))};
}

bool is_float(kfuse::dtype t) {
  return t == kfuse::dtype::f32 || t == kfuse::dtype::bf16 || t == kfuse::dtype::f16;
}

/// Writes float values into a float buffer of any float dtype.
void store_floats(host_tensor& h, std::span<const float> v) {
  for (std::size_t i = 0; i < v.size(); ++i) switch (h.type) {
      case kfuse::dtype::bf16:
        h.as<kfuse::bf16_t>()[i] = kfuse::to_bf16(v[i]);
        break;
      case kfuse::dtype::f16:
        h.as<kfuse::f16_t>()[i] = kfuse::to_f16(v[i]);
        break;
      default:
        h.as<float>()[i] = v[i];
    }
}

/// The buffer's values as float (any dtype).
std::vector<float> load_floats(const host_tensor& h) {
  std::vector<float> v(h.count());
  for (std::size_t i = 0; i < v.size(); ++i) switch (h.type) {
      case kfuse::dtype::f32:
        v[i] = h.as<float>()[i];
        break;
      case kfuse::dtype::bf16:
        v[i] = kfuse::to_float(h.as<kfuse::bf16_t>()[i]);
        break;
      case kfuse::dtype::f16:
        v[i] = kfuse::to_float(h.as<kfuse::f16_t>()[i]);
        break;
      case kfuse::dtype::i32:
        v[i] = float(h.as<std::int32_t>()[i]);
        break;
      case kfuse::dtype::i64:
        v[i] = float(h.as<std::int64_t>()[i]);
        break;
      case kfuse::dtype::i8:
        v[i] = float(h.as<std::int8_t>()[i]);
        break;
      case kfuse::dtype::u8:
        v[i] = float(h.as<std::uint8_t>()[i]);
        break;
    }
  return v;
}

// ---- model and plan summary --------------------------------------------------------------------

/// The compile options of the flags: the plan keeps the layout --layout imported (compile()
/// would move an nchw import's image ops to nhwc itself; the nchw rows measure the nchw kernels,
/// and --layout auto times both imports).
kfuse::compile_options plan_options(const run_args& a,
                                    kfuse::precision prec = kfuse::precision::f32) {
  return {.threads = a.threads,
          .prec = prec,
          .choose_layout = false,
          .winograd = a.winograd,
          .emulated_bf16 = a.emulated_bf16};
}

/// The import options of the flags. An input given as a file and not by --shape takes the
/// file's shape: its symbolic dimensions need no --dim (a static one that differs is an error
/// naming the input and the dimension).
kfuse::onnx::import_options import_options_of(const run_args& a) {
  kfuse::onnx::import_options o;
  o.dims = a.dims;
  o.shapes = a.shapes;
  o.layout = a.layout;
  for (const auto& [name, file] : a.inputs)
    if (!o.shapes.count(name)) o.shapes[name] = kfuse::read_npy(file).shape;
  return o;
}

void print_values(const char* kind, const std::vector<kfuse::onnx::value_info>& v) {
  for (const auto& i : v)
    std::printf("  %-6s %-24s %s %s\n", kind, i.name.c_str(), shape_text(i.shape).c_str(),
                std::string(kfuse::dtype_name(i.type)).c_str());
}

/// At most `max` lines of a list, then how many more there are.
void print_list(const std::vector<std::string>& lines, std::size_t max) {
  for (std::size_t i = 0; i < lines.size() && i < max; ++i) std::printf("  %s\n", lines[i].c_str());
  if (lines.size() > max) std::printf("  ... and %zu more\n", lines.size() - max);
}

void print_model(const run_args& a, const kfuse::onnx::model& m, double load_ms) {
  std::printf("model: %s (opset %lld, producer '%s')\n", a.model.c_str(), (long long)m.opset,
              m.producer.c_str());
  print_values("input", m.inputs);
  print_values("output", m.outputs);
  std::printf("load: %.1f ms; importer rewrites: %zu\n", load_ms, m.rewrites.size());
  print_list(m.rewrites, 20);
}

void print_plan(const kfuse::plan& p, kfuse::precision prec, double compile_ms) {
  const kfuse::fusion_report& r = p.report();
  std::printf("compile: %.1f ms (%s, %d thread%s; pool: %s)\n", compile_ms, prec_name(prec),
              p.threads(), p.threads() == 1 ? "" : "s",
              kfuse::default_pool().size_reason().c_str());
  std::printf("arch: %s\n", r.target.text().c_str());
  if (!r.target.dispatch.empty()) std::printf("dispatch: %s\n", r.target.dispatch.c_str());
  std::printf("fusion: %d nodes -> %d steps, %zu fusion%s\n", r.nodes_before, r.nodes_after,
              r.fused.size(), r.fused.size() == 1 ? "" : "s");
  print_list(r.fused, 12);
  for (const std::string& n : r.notes) std::printf("note: %s\n", n.c_str());
  std::printf(
      "memory: arena %.1f KiB (%.1f KiB of kernel workspace) for %.1f KiB of "
      "intermediate tensors\n",
      double(p.arena_bytes()) / 1024, double(p.workspace_bytes()) / 1024,
      double(p.intermediate_bytes()) / 1024);
}

// ---- inputs ------------------------------------------------------------------------------------

/// Input data from a .npy file: its shape must be the model's; f64 / f16 files feed float inputs
/// (converted), i64 files i32 inputs (range-checked), bool files bool (u8) inputs; anything else
/// is an error.
host_tensor input_from_array(const kfuse::onnx::value_info& vi, const kfuse::npy_array& a,
                             const std::string& path, std::string& note) {
  if (a.shape != vi.shape)
    fail("input '" + vi.name + "': " + path + " has shape " + shape_text(a.shape) +
         ", the model takes " + shape_text(vi.shape));
  host_tensor h = make_buffer(vi.name, vi.shape, vi.type);
  const std::string have(kfuse::npy_dtype_name(a.dtype)), want(kfuse::dtype_name(vi.type));
  const auto mismatch = [&] {
    fail("input '" + vi.name + "': " + path + " holds " + have + ", the model takes " + want +
         " (save it as " + want + ")");
  };
  const bool float_file = a.dtype == kfuse::npy_dtype::f32 || a.dtype == kfuse::npy_dtype::f64 ||
                          a.dtype == kfuse::npy_dtype::f16;
  if (is_float(h.type)) {
    if (!float_file) mismatch();
    if (h.type == kfuse::dtype::f32 && a.dtype == kfuse::npy_dtype::f32) {
      std::memcpy(h.data.data(), a.data.data(), h.data.size());
    } else {
      store_floats(h, kfuse::npy_to_f32(a));
      note = " (converted from " + have + ")";
    }
  } else if (h.type == kfuse::dtype::i32 && a.dtype == kfuse::npy_dtype::i64) {
    const auto v = kfuse::npy_data<std::int64_t>(a);
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (v[i] < std::numeric_limits<std::int32_t>::min() ||
          v[i] > std::numeric_limits<std::int32_t>::max())
        fail("input '" + vi.name + "': " + path + " value " + std::to_string(v[i]) + " at " +
             std::to_string(i) + " does not fit the model's i32");
      h.as<std::int32_t>()[i] = std::int32_t(v[i]);
    }
    note = " (converted from i64)";
  } else if (h.type == kfuse::dtype::i64 && a.dtype == kfuse::npy_dtype::i32) {
    const auto v = kfuse::npy_data<std::int32_t>(a);
    for (std::size_t i = 0; i < v.size(); ++i) h.as<std::int64_t>()[i] = v[i];
    note = " (converted from i32)";
  } else {
    const bool same = (h.type == kfuse::dtype::i32 && a.dtype == kfuse::npy_dtype::i32) ||
                      (h.type == kfuse::dtype::i64 && a.dtype == kfuse::npy_dtype::i64) ||
                      (h.type == kfuse::dtype::i8 && a.dtype == kfuse::npy_dtype::i8) ||
                      (h.type == kfuse::dtype::u8 && a.dtype == kfuse::npy_dtype::u8) ||
                      (h.type == kfuse::dtype::u8 && a.dtype == kfuse::npy_dtype::boolean);
    if (!same) mismatch();
    std::memcpy(h.data.data(), a.data.data(), h.data.size());
  }
  return h;
}
host_tensor input_from_file(const kfuse::onnx::value_info& vi, const std::string& path,
                            std::string& note) {
  return input_from_array(vi, kfuse::read_npy(path), path, note);
}

/// Random data: uniform [-1, 1] for float inputs (fixed seed); ones for integer ones (a valid
/// token id of any vocabulary, an attention mask that keeps every position).
host_tensor random_input(const kfuse::onnx::value_info& vi, std::uint32_t seed, std::string& how) {
  host_tensor h = make_buffer(vi.name, vi.shape, vi.type);
  if (!is_float(h.type)) {
    for (std::size_t i = 0; i < h.count(); ++i) {
      if (h.type == kfuse::dtype::i64) h.as<std::int64_t>()[i] = 1;
      if (h.type == kfuse::dtype::i32) h.as<std::int32_t>()[i] = 1;
      if (h.type == kfuse::dtype::i8) h.as<std::int8_t>()[i] = 1;
      if (h.type == kfuse::dtype::u8) h.as<std::uint8_t>()[i] = 1;
    }
    how = "ones";
    return h;
  }
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(h.count());
  for (float& x : v) x = u(rng);
  store_floats(h, v);
  how = "random uniform [-1, 1] (seed " + std::to_string(seed) + ")";
  return h;
}

std::string names_of(const std::vector<kfuse::onnx::value_info>& v) {
  std::string s;
  for (const auto& i : v) s += (s.empty() ? "'" : ", '") + i.name + "'";
  return s.empty() ? "none" : s;
}

/// The model's inputs: from --input files, else random; `files` names only model inputs.
std::vector<host_tensor> make_inputs(const std::map<std::string, std::string>& files,
                                     const kfuse::onnx::model& m, bool print) {
  for (const auto& [name, file] : files)
    if (std::none_of(m.inputs.begin(), m.inputs.end(),
                     [&](const auto& i) { return i.name == name; }))
      fail("--input " + name + ": the model has no input '" + name +
           "' (its inputs: " + names_of(m.inputs) + ")");
  if (print) std::printf("inputs:\n");
  std::vector<host_tensor> in;
  for (std::size_t i = 0; i < m.inputs.size(); ++i) {
    const auto& vi = m.inputs[i];
    const auto file = files.find(vi.name);
    std::string how;
    if (file != files.end()) {
      in.push_back(input_from_file(vi, file->second, how));
      how = "from " + file->second + how;
    } else {
      in.push_back(random_input(vi, random_seed + std::uint32_t(i), how));
    }
    if (print)
      std::printf("  %s %s: %s\n", vi.name.c_str(), shape_text(vi.shape).c_str(), how.c_str());
  }
  return in;
}

/// Buffers for the plan's outputs (the plan's element types) with the model's shapes.
std::vector<host_tensor> make_outputs(const kfuse::onnx::model& m, const kfuse::plan& p) {
  std::vector<host_tensor> out;
  for (std::size_t i = 0; i < m.outputs.size(); ++i) {
    const kfuse::plan_tensor& t = p.output(i);
    out.push_back(make_buffer(m.outputs[i].name, m.outputs[i].shape, t.type));
    if (out.back().data.size() != t.bytes)
      fail("output '" + m.outputs[i].name + "': the model's shape " +
           shape_text(m.outputs[i].shape) + " does not match the plan's " + shape_text(t.shape));
  }
  return out;
}

std::vector<kfuse::binding> bindings_of(std::vector<host_tensor>& buffers) {
  std::vector<kfuse::binding> b;
  for (host_tensor& h : buffers) b.push_back(h.binding());
  return b;
}

kfuse::replay_buffer record(const kfuse::plan& p, std::vector<host_tensor>& in,
                            std::vector<host_tensor>& out) {
  return p.record(bindings_of(in), bindings_of(out));
}

// ---- int8 calibration --------------------------------------------------------------------------

/// Calibration batches of one input from DIR/<input>.npy: samples stacked along axis 0, split
/// into batches of the model's batch size (a remainder is dropped), each converted as an --input
/// file would be (token ids and masks too).
std::vector<host_tensor> samples_from_dir(const run_args& a, const kfuse::onnx::value_info& vi) {
  if (!fs::is_directory(a.calib_dir)) fail("--calib " + a.calib_dir + ": not a folder");
  const fs::path file = fs::path(a.calib_dir) / kfuse_run::file_name_for(vi.name);
  if (!fs::exists(file))
    fail("--calib: no " + file.string() + " (one file per input, named after it: samples of '" +
         vi.name + "' stacked along axis 0)");
  const kfuse::npy_array arr = kfuse::read_npy(file);
  const std::vector<index_t>& want = vi.shape;
  if (want.empty()) fail("--calib: the input '" + vi.name + "' is a scalar: nothing to stack");
  const bool same_tail = arr.shape.size() == want.size() &&
                         std::equal(want.begin() + 1, want.end(), arr.shape.begin() + 1);
  if (!same_tail || arr.shape[0] < want[0]) {
    std::string stacked = "[N";
    for (std::size_t d = 1; d < want.size(); ++d) stacked += ", " + std::to_string(want[d]);
    fail("--calib: " + file.string() + " has shape " + shape_text(arr.shape) + ", samples of '" +
         vi.name + "' " + shape_text(want) + " stacked along axis 0 are " + stacked +
         "] with N >= " + std::to_string(want[0]));
  }
  const std::size_t bytes = std::size_t(count_of(want)) * kfuse::npy_dtype_size(arr.dtype);
  const std::size_t batches = std::size_t(arr.shape[0] / want[0]);
  std::vector<host_tensor> s;
  std::string note;
  for (std::size_t b = 0; b < batches; ++b) {
    kfuse::npy_array one{arr.dtype, want, false, {}};
    one.data.assign(arr.data.begin() + std::ptrdiff_t(b * bytes),
                    arr.data.begin() + std::ptrdiff_t((b + 1) * bytes));
    s.push_back(input_from_array(vi, one, file.string(), note));
  }
  std::printf("calibration data: %s, %lld samples -> %zu batch%s of %lld%s", file.string().c_str(),
              (long long)arr.shape[0], batches, batches == 1 ? "" : "es", (long long)want[0],
              note.c_str());
  if (const index_t rest = arr.shape[0] % want[0])
    std::printf(" (%lld samples dropped)", (long long)rest);
  std::printf("\n");
  return s;
}

/// Quant params by tensor name: they carry over to the same model imported at another batch.
using quant_by_name = std::vector<std::pair<std::string, kfuse::tensor_quant>>;

void apply_quant(kfuse::graph& g, const quant_by_name& q) {
  for (const auto& [name, tq] : q) g.set_quant(g.find(name), tq);
}

/// --export-qdq: the model in QDQ form with the calibrated parameters of its activations.
void export_qdq(const run_args& a, const std::vector<kfuse::onnx::qdq_activation>& act) {
  const kfuse::onnx::qdq_export_report r = kfuse::onnx::export_qdq(a.model, a.export_qdq, act);
  std::printf("export-qdq: %s: %zu nodes with int8 weights, %zu activations quantized",
              a.export_qdq.c_str(), r.quantized.size(), r.activations);
  if (!r.kept_float.empty()) std::printf("; %zu left in float:", r.kept_float.size());
  std::printf("\n");
  for (const std::string& k : r.kept_float) std::printf("  %s\n", k.c_str());
}

/// Calibrates the model's graph for --prec int8 on --calib data or, without it, on the run's own
/// input; returns the parameters by tensor name.
quant_by_name calibrate_int8(const run_args& a, const kfuse::onnx::model& m,
                             std::vector<host_tensor>& inputs) {
  std::vector<kfuse::tensor_id> targets = kfuse::calibration_targets(m.graph);
  const std::size_t own = targets.size();  // what the int8 plan reads; the rest is for the export
  // --export-qdq: the model's own tensors by ONNX name (the importer's fused nodes hold some).
  std::vector<std::pair<std::string, kfuse::tensor_id>> qdq;
  if (!a.export_qdq.empty())
    for (const std::string& name : kfuse::onnx::qdq_activation_names(a.model))
      if (const auto v = m.values.find(name); v != m.values.end()) {
        const kfuse::tensor_desc& d = m.graph.tensor(v->second);
        if (d.is_constant || d.type != kfuse::dtype::f32) continue;
        qdq.emplace_back(name, v->second);
        if (std::none_of(targets.begin(), targets.end(),
                         [&](kfuse::tensor_id o) { return o.index == v->second.index; }))
          targets.push_back(v->second);
      }
  if (targets.empty()) {
    std::printf("calibration: no linear / conv node, nothing to quantize\n");
    return {};
  }
  std::vector<std::vector<kfuse::binding>> samples;
  std::vector<std::vector<host_tensor>> data;  // --calib batches, per input
  if (!a.calib_dir.empty()) {
    for (const kfuse::onnx::value_info& vi : m.inputs) {
      data.push_back(samples_from_dir(a, vi));
      if (data.back().size() != data.front().size())
        fail("--calib: '" + vi.name + "' has " + std::to_string(data.back().size()) +
             " batches of samples, '" + m.inputs[0].name + "' " +
             std::to_string(data.front().size()) + ": every input needs the same number");
    }
    for (std::size_t b = 0; b < data.front().size(); ++b) {
      std::vector<kfuse::binding> one;
      for (auto& per_input : data) one.push_back(per_input[b].binding());
      samples.push_back(std::move(one));
    }
  } else {
    std::printf(
        "calibration: no --calib DIR, calibrating on this run's input%s (one batch: the "
        "int8 accuracy may not carry over to other data)\n",
        m.inputs.size() == 1 ? "" : "s");
    std::vector<kfuse::binding> b;
    for (host_tensor& h : inputs) b.push_back(h.binding());
    samples.push_back(std::move(b));
  }
  const auto t0 = steady::now();
  const kfuse::graph_calibration cal = kfuse::calibrate_graph_with(
      [](const kfuse::graph& g, const kfuse::compile_options& o) { return kfuse::compile(g, o); },
      m.graph, targets, std::span<const std::vector<kfuse::binding>>(samples),
      {kfuse::observer_method::percentile, 99.99}, kfuse::quant_scheme::affine, plan_options(a));
  std::printf(
      "calibration: %zu tensors over %zu batch%s (99.99th percentile, affine u8) in %.1f ms\n",
      cal.tensors.size(), samples.size(), samples.size() == 1 ? "" : "es", ms_since(t0));
  quant_by_name q;
  for (std::size_t i = 0; i < own; ++i)
    q.emplace_back(m.graph.tensor(cal.tensors[i]).name, cal.quant[i]);
  if (!a.export_qdq.empty()) {
    std::vector<kfuse::onnx::qdq_activation> act;
    for (const auto& [name, id] : qdq)
      for (std::size_t i = 0; i < cal.tensors.size(); ++i)
        if (cal.tensors[i].index == id.index)
          act.push_back({name, cal.quant[i].scale, cal.quant[i].zero_point});
    export_qdq(a, act);
  }
  return q;
}

// ---- runs --------------------------------------------------------------------------------------

template <class Replay>
void time_replays(Replay& r, const run_args& a) {
  for (int i = 0; i < a.warmup; ++i) r.replay();
  std::vector<double> ms(std::size_t(a.reps));
  for (double& t : ms) {
    const auto t0 = steady::now();
    r.replay();
    t = ms_since(t0);
  }
  const double lo = *std::min_element(ms.begin(), ms.end());
  const double hi = *std::max_element(ms.begin(), ms.end());
  const double med = kfuse::median_of(ms);
  std::printf("latency: median %.3f ms, min %.3f ms, max %.3f ms (%d runs)\n", med, lo, hi, a.reps);
}

void profile_replays(kfuse::replay_buffer& r, const run_args& a) {
  // The roofline of the tier the plan runs on (this TU's own kernels are scalar).
  kfuse::profiler prof(kfuse::runtime_machine_limits());
  kfuse::replay_profiler rp(prof, r);
  for (int i = 0; i < a.reps; ++i) r.replay(rp.hook());
  if (a.profile) std::printf("profile (%d replays):\n%s", a.reps, prof.table().c_str());
  if (!a.trace.empty()) {
    prof.write_chrome_trace(a.trace);
    std::printf("Chrome trace of %d replays written to %s\n", a.reps, a.trace.c_str());
  }
}

/// The largest |x - y| and the largest |x| of a reference x and values y (NaN equals NaN; a NaN
/// on one side only counts as 1e30).
struct float_difference {
  double diff = 0, scale = 0;
  double relative() const { return diff / std::max(scale, 1e-30); }
};
float_difference difference_of(const std::vector<float>& x, const std::vector<float>& y) {
  float_difference f;
  for (std::size_t k = 0; k < x.size(); ++k) {
    f.scale = std::max(f.scale, double(std::abs(x[k])));
    if (x[k] == y[k]) continue;  // infinities too
    const double e = std::abs(double(x[k]) - double(y[k]));
    f.diff = std::isnan(e) ? (std::isnan(x[k]) && std::isnan(y[k]) ? f.diff : 1e30)
                           : std::max(f.diff, e);
  }
  return f;
}

/// --expect: each named output against its golden file; false when one differs by more than the
/// precision's tolerance (of the golden's largest |value|).
bool check_expected(const run_args& a, const std::vector<host_tensor>& out) {
  const double tol = a.prec == kfuse::precision::f32 ? 1e-4 : 3e-2;
  bool ok = true;
  for (const auto& [name, file] : a.expects) {
    const auto it =
        std::find_if(out.begin(), out.end(), [&](const host_tensor& h) { return h.name == name; });
    if (it == out.end()) fail("--expect " + name + ": the model has no output '" + name + "'");
    const std::vector<float> want = kfuse::npy_to_f32(kfuse::read_npy(file));
    const std::vector<float> got = load_floats(*it);
    if (want.size() != got.size())
      fail("--expect " + name + ": " + file + " holds " + std::to_string(want.size()) +
           " values, the output has " + std::to_string(got.size()));
    const float_difference f = difference_of(want, got);
    const bool pass = f.relative() <= tol;
    std::printf(
        "expect: %s: max |diff| %.3g (%.3g of the largest |value| %.3g; tolerance %g): %s\n",
        name.c_str(), f.diff, f.relative(), f.scale, tol, pass ? "ok" : "MISMATCH");
    ok = ok && pass;
  }
  return ok;
}

/// The --output-dir folder, made before anything runs (a typo fails at once).
void make_output_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir))
    fail("--output-dir " + dir + ": cannot create the folder" +
         (ec ? " (" + ec.message() + ")" : ""));
}

/// Each output as DIR/<name>.npy: float outputs as float32, integer ones in their own type.
void write_outputs(const std::vector<host_tensor>& out, const std::string& dir) {
  std::set<std::string> used;
  for (const host_tensor& h : out) {
    std::string file = kfuse_run::file_name_for(h.name);
    for (int k = 1; !used.insert(file).second; ++k)  // names equal after sanitizing
      file = kfuse_run::file_name_for(h.name + "_" + std::to_string(k));
    const fs::path path = fs::path(dir) / file;
    switch (h.type) {
      case kfuse::dtype::i32:
        kfuse::write_npy(path, h.as<std::int32_t>(), h.shape);
        break;
      case kfuse::dtype::i64:
        kfuse::write_npy(path, h.as<std::int64_t>(), h.shape);
        break;
      case kfuse::dtype::i8:
        kfuse::write_npy(path, h.as<std::int8_t>(), h.shape);
        break;
      case kfuse::dtype::u8:
        kfuse::write_npy(path, h.as<std::uint8_t>(), h.shape);
        break;
      default:
        kfuse::write_npy(path, load_floats(h), h.shape);
    }
    std::printf("wrote %s %s\n", path.string().c_str(), shape_text(h.shape).c_str());
  }
}

/// An f32 plan on the same inputs; the accuracy of each output against it.
void compare_with_fp32(const run_args& a, const kfuse::onnx::model& m, std::vector<host_tensor>& in,
                       const std::vector<host_tensor>& out) {
  if (a.prec == kfuse::precision::f32) {
    std::printf("compare-fp32: the plan is f32 already, nothing to compare\n");
    return;
  }
  const kfuse::plan p32 = kfuse::compile(m.graph, plan_options(a));
  std::vector<host_tensor> ref = make_outputs(m, p32);
  kfuse::replay_buffer r = record(p32, in, ref);
  r.replay();
  std::printf("accuracy of the %s plan against f32:\n", prec_name(a.prec));
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::vector<float> want = load_floats(ref[i]), got = load_floats(out[i]);
    const index_t rows = out[i].shape.size() == 2 ? out[i].shape[0] : 0;  // [batch, classes]
    const kfuse::accuracy_report rep = kfuse::compare_outputs(want, got, rows);
    std::printf("  %s: %s\n", out[i].name.c_str(), kfuse::to_string(rep).c_str());
  }
}

// ---- batch sweep -------------------------------------------------------------------------------

/// Import options with axis 0 of the first input (and, when `all`, of every input whose axis 0
/// has the same extent) set to `batch`.
kfuse::onnx::import_options at_batch(const run_args& a, const kfuse::onnx::model& m, index_t batch,
                                     bool all) {
  kfuse::onnx::import_options o = import_options_of(a);
  const index_t current = m.inputs[0].shape[0];
  for (std::size_t i = 0; i < m.inputs.size(); ++i) {
    const auto& vi = m.inputs[i];
    if (vi.shape.empty() || vi.shape[0] != current || (i > 0 && !all)) continue;
    std::vector<index_t> s = vi.shape;
    s[0] = batch;
    o.shapes[vi.name] = s;
  }
  return o;
}

void sweep_batches(const run_args& a, const kfuse::onnx::model& m, const quant_by_name& quant) {
  if (m.inputs.empty() || m.inputs[0].shape.empty()) {
    std::printf("batch sweep: skipped (the first input has no axis 0)\n");
    return;
  }
  const kfuse::onnx::value_info& first = m.inputs[0];
  const index_t current = first.shape[0];
  // Is axis 0 dynamic? Import once at another batch: every input that shares the extent first,
  // then the first input alone.
  const index_t probe = current == 1 ? 2 : 1;
  bool all = true;
  try {
    kfuse::onnx::load(a.model, at_batch(a, m, probe, true));
  } catch (const kfuse::error&) {
    all = false;
    try {
      kfuse::onnx::load(a.model, at_batch(a, m, probe, false));
    } catch (const kfuse::error& e) {
      std::printf(
          "batch sweep: skipped: axis 0 of input '%s' (%lld) is static or cannot change "
          "(importing at batch %lld: %s)\n",
          first.name.c_str(), (long long)current, (long long)probe, e.what());
      return;
    }
  }
  std::printf("batch sweep (%s, axis 0 of %s, random inputs, budget %.3g ms):\n", prec_name(a.prec),
              all && m.inputs.size() > 1 ? "every input of the same batch"
                                         : ("'" + first.name + "'").c_str(),
              a.sweep_budget_ms);
  kfuse::sweep_result res;
  res.budget_ms = a.sweep_budget_ms;
  for (int b = 1; b <= 64; b *= 2) {
    try {
      kfuse::onnx::model mb = kfuse::onnx::load(a.model, at_batch(a, m, b, all));
      apply_quant(mb.graph, quant);
      const kfuse::plan p = kfuse::compile(mb.graph, plan_options(a, a.prec));
      std::vector<host_tensor> in = make_inputs({}, mb, false);
      std::vector<host_tensor> out = make_outputs(mb, p);
      kfuse::replay_buffer r = record(p, in, out);
      kfuse::sweep_options so;
      so.batches = {b};
      const kfuse::sweep_result one =
          kfuse::batch_sweep([&](int) { return [&] { r.replay(); }; }, so);
      res.points.push_back(one.points.at(0));
    } catch (const kfuse::error& e) {
      std::printf("  batch %d: %s (sweep stopped)\n", b, e.what());
      break;
    }
  }
  if (res.points.empty()) return;
  res.best = kfuse::best_within_budget(res.points, res.budget_ms);
  std::printf("%s", kfuse::to_string(res).c_str());
}

/// Medians of 5 alternating replays of two candidates (ms): how --layout auto and --split auto
/// choose, each candidate warmed up by the caller.
template <class A, class B>
std::pair<double, double> trial_medians(A& a, B& b) {
  std::vector<double> a_ms, b_ms;
  for (int i = 0; i < 5; ++i) {
    auto t0 = steady::now();
    a.replay();
    a_ms.push_back(ms_since(t0));
    t0 = steady::now();
    b.replay();
    b_ms.push_back(ms_since(t0));
  }
  return {kfuse::median_of(a_ms), kfuse::median_of(b_ms)};
}

// ---- batch split -------------------------------------------------------------------------------

/// The model at a share of the batch, as one-thread plans, and the split replay over the run's
/// buffers (kfuse::split_replay). Keeps what the replay points into.
struct batch_split {
  std::vector<kfuse::plan> plans;  // [larger share,] share
  std::vector<host_tensor> out;    // the whole batch's outputs, written by the parts
  std::unique_ptr<kfuse::split_replay> replay;
};

/// Largest |a - b| over the outputs, relative to the largest |a| (0: equal; integer outputs
/// compare exactly: any difference is 1).
double outputs_differ(const std::vector<host_tensor>& a, const std::vector<host_tensor>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!is_float(a[i].type)) {
      if (a[i].data != b[i].data) return 1;
      continue;
    }
    worst = std::max(worst, difference_of(load_floats(a[i]), load_floats(b[i])).relative());
  }
  return worst;
}

/// --split auto: with several threads and a batch of 2 or more, one part per thread, each a
/// one-thread plan of its share of axis 0 (shares differ by one sample at most). Taken only where
/// every input and output has the batch on axis 0, the parts give the whole plan's outputs on
/// the run's inputs (a model that mixes samples differs at once), and the split replays faster
/// (medians of alternating trial replays). Prints one line "split: ..." either way.
std::optional<batch_split> try_split(const run_args& a, const kfuse::onnx::model& m,
                                     const quant_by_name& quant, kfuse::replay_buffer& whole,
                                     std::vector<host_tensor>& in,
                                     const std::vector<host_tensor>& out) {
  const int threads = kfuse::pool_threads(a.threads);
  if (!a.split || threads < 2 || m.inputs.empty() || m.inputs[0].shape.empty()) return {};
  const index_t batch = m.inputs[0].shape[0];
  if (batch < 2) return {};
  // As even as it gets: `parts` shares of `small` samples, the first `extra` of them one more.
  const index_t parts = std::min<index_t>(threads, batch), small = batch / parts,
                extra = batch % parts;
  const auto off = [](const std::string& why) {
    std::printf("split: off (%s)\n", why.c_str());
    return std::optional<batch_split>{};
  };
  const auto t0 = steady::now();
  batch_split s;
  try {
    for (const index_t b : {small + 1, small}) {
      if (b > small && extra == 0) continue;  // an even split: one plan serves every part
      const kfuse::onnx::model mb = kfuse::onnx::load(a.model, at_batch(a, m, b, true));
      const auto on_axis0 = [&](const std::vector<kfuse::onnx::value_info>& part,
                                const std::vector<kfuse::onnx::value_info>& full) {
        for (std::size_t i = 0; i < full.size(); ++i) {
          std::vector<index_t> want = full[i].shape;
          if (want.empty() || want[0] != batch) return false;
          want[0] = b;
          if (part[i].shape != want) return false;
        }
        return true;
      };
      if (!on_axis0(mb.inputs, m.inputs) || !on_axis0(mb.outputs, m.outputs))
        return off("not every input and output has the batch of " + std::to_string(batch) +
                   " on axis 0");
      kfuse::graph g = mb.graph;
      apply_quant(g, quant);
      kfuse::compile_options o = plan_options(a, a.prec);
      o.threads = 1;
      s.plans.push_back(kfuse::compile(g, o));
    }
  } catch (const kfuse::error& e) {
    return off(std::string("importing or compiling the model at a share of the batch: ") +
               e.what());
  }
  std::vector<const kfuse::plan*> part_plans(std::size_t(parts), &s.plans.back());
  std::fill_n(part_plans.begin(), extra, &s.plans.front());
  s.out = out;  // buffers of the whole plan's shapes and types, which the parts overwrite
  s.replay = std::make_unique<kfuse::split_replay>(part_plans, bindings_of(in), bindings_of(s.out),
                                                   threads);
  const double compile_ms = ms_since(t0);
  whole.replay();
  s.replay->replay();
  const double tol = a.prec == kfuse::precision::f32 ? 1e-4 : 3e-2;
  if (const double d = outputs_differ(out, s.out); d > tol) {
    char why[200];
    std::snprintf(why, sizeof why,
                  "the parts' outputs differ from the whole batch's by %.3g of their range, "
                  "above %.0e: the model mixes samples along axis 0",
                  d, tol);
    return off(why);
  }
  const auto [w, sp] = trial_medians(whole, *s.replay);
  char line[300];
  std::snprintf(
      line, sizeof line,
      "%lld parts of batch %lld%s on one thread each (trial medians: whole %.3f ms, "
      "split %.3f ms; split compile: %.1f ms)",
      (long long)parts, (long long)(small + (extra > 0)),
      extra == 0
          ? ""
          : (" (" + std::to_string(parts - extra) + " of " + std::to_string(small) + ")").c_str(),
      w, sp, compile_ms);
  if (sp >= w) {
    std::printf("split: off (%s)\n", line);
    return {};
  }
  std::printf("split: on, %s\n", line);
  return s;
}

// ---- main --------------------------------------------------------------------------------------

/// --layout auto: the layout whose f32 plan replays faster on the run's inputs (medians of a few
/// alternating replays after one warm-up each). A model without 4-D activations imports the
/// same either way and is not timed; a layout whose plan does not compile (a kfuse::runtime
/// built without conv2d_nchw, KFUSE_RUNTIME_OPS) leaves the other.
kfuse::tensor_layout choose_layout(const run_args& a) {
  run_args t = a;
  t.layout = kfuse::tensor_layout::nhwc;
  const kfuse::onnx::model mh = kfuse::onnx::load(a.model, import_options_of(t));
  bool four_d = false;
  for (const kfuse::node_desc& n : mh.graph.nodes())  // an nhwc import converts its images
    four_d |= n.op == kfuse::op_kind::convert_layout;
  if (!four_d) return kfuse::tensor_layout::nchw;
  t.layout = kfuse::tensor_layout::nchw;
  const kfuse::onnx::model mc = kfuse::onnx::load(a.model, import_options_of(t));
  std::vector<host_tensor> in = make_inputs(a.inputs, mc, false);
  std::optional<kfuse::plan> pc, ph;
  std::string failed;
  try {
    pc = kfuse::compile(mc.graph, plan_options(a));
  } catch (const kfuse::error& e) {
    failed = e.what();
  }
  try {
    ph = kfuse::compile(mh.graph, plan_options(a));
  } catch (const kfuse::error& e) {
    if (!pc) throw;  // neither compiles: the nhwc plan's error
    failed = e.what();
  }
  if (!pc || !ph) {
    std::printf("layout: auto -> %s (the %s plan does not compile: %s)\n", pc ? "nchw" : "nhwc",
                pc ? "nhwc" : "nchw", failed.c_str());
    return pc ? kfuse::tensor_layout::nchw : kfuse::tensor_layout::nhwc;
  }
  std::vector<host_tensor> oc = make_outputs(mc, *pc), oh = make_outputs(mh, *ph);
  kfuse::replay_buffer rc = record(*pc, in, oc), rh = record(*ph, in, oh);
  rc.replay();
  rh.replay();
  const auto [c, h] = trial_medians(rc, rh);
  const auto pick = h <= c ? kfuse::tensor_layout::nhwc : kfuse::tensor_layout::nchw;
  std::printf("layout: auto -> %s (f32 trial medians: nchw %.3f ms, nhwc %.3f ms)\n",
              pick == kfuse::tensor_layout::nhwc ? "nhwc" : "nchw", c, h);
  return pick;
}

int run(run_args a) {
  if (!a.output_dir.empty()) make_output_dir(a.output_dir);
  if (a.auto_layout) a.layout = choose_layout(a);
  auto t0 = steady::now();
  const kfuse::onnx::model m = kfuse::onnx::load(a.model, import_options_of(a));
  print_model(a, m, ms_since(t0));

  std::vector<host_tensor> in = make_inputs(a.inputs, m, true);

  kfuse::graph g = m.graph;
  quant_by_name quant;
  if (a.prec == kfuse::precision::int8) {
    quant = calibrate_int8(a, m, in);
    apply_quant(g, quant);
  }
  t0 = steady::now();
  const kfuse::plan p = kfuse::compile(g, plan_options(a, a.prec));
  print_plan(p, a.prec, ms_since(t0));

  std::vector<host_tensor> out = make_outputs(m, p);
  kfuse::replay_buffer r = record(p, in, out);
  std::optional<batch_split> split = try_split(a, m, quant, r, in, out);
  if (split) {
    time_replays(*split->replay, a);
    if (a.profile || !a.trace.empty()) {
      std::printf("profiled: part 0 of the split alone (one thread)\n");
      profile_replays(split->replay->part(0), a);
    }
  } else {
    time_replays(r, a);
    if (a.profile || !a.trace.empty()) profile_replays(r, a);
  }
  const std::vector<host_tensor>& result = split ? split->out : out;
  if (!a.output_dir.empty()) write_outputs(result, a.output_dir);
  const bool expected = check_expected(a, result);
  if (a.compare_fp32) compare_with_fp32(a, m, in, result);
  if (a.batch_sweep) sweep_batches(a, m, quant);
  return expected ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const run_args a = kfuse_run::parse_args(argc, argv);
    if (a.help) {
      std::printf("%s", kfuse_run::usage().c_str());
      return 0;
    }
    return run(a);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "kfuse-run: error: %s\n", e.what());
    return 2;
  }
}
