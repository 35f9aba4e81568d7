// int8_accuracy: the accuracy of a model's calibrated int8 plan against its f32 plan, on any CPU.
// kfuse's int8 kernels need vpdpbusd (avx512_vnni / avx2_vnni); elsewhere an int8 plan of the
// native arch runs its linears in f32 (kfuse-run --prec int8 then measures nothing). The int8
// arithmetic is exact integer work whose result does not depend on the arch, so this tool
// compiles the int8 plan for arch::generic (scalar, slow) and the f32 plan for the native arch:
// the accuracy printed is the one an int8 plan has on a vpdpbusd machine (up to f32 rounding in
// the epilogues).
//
//   int8_accuracy MODEL.onnx NAME=FILE.npy [NAME=FILE.npy ...]
//
// Every model input needs a file (its dtype as the model's; the file's shape binds symbolic
// dims). Calibration: the same inputs (99.99th percentile, affine u8), as kfuse-run does
// without --calib. Prints one accuracy line per output (cosine, max error, top-1 agreement for
// [batch, classes] outputs) and the int8 plan's fusion summary.
#include <chrono>
#include <cstdio>
#include <exception>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "kfuse/graph/compile.hpp"
#include "kfuse/onnx/importer.hpp"
#include "kfuse/tools/accuracy.hpp"
#include "kfuse/tools/calibrate_graph.hpp"
#include "kfuse/tools/npy.hpp"

namespace {

using kfuse::index_t;

struct buffer {
  std::vector<index_t> shape;
  kfuse::dtype type = kfuse::dtype::f32;
  std::vector<std::byte> data;
  kfuse::binding bind() { return {data.data(), data.size(), true, type}; }
};

std::vector<buffer> outputs_of(const kfuse::plan& p) {
  std::vector<buffer> out;
  for (std::size_t i = 0; i < p.output_count(); ++i) {
    const auto& t = p.output(i);
    if (t.type != kfuse::dtype::f32) throw kfuse::error("int8_accuracy: a non-f32 output");
    out.push_back(
        {t.shape, t.type, std::vector<std::byte>(std::size_t(kfuse::shape_numel(t.shape)) * 4)});
  }
  return out;
}

void run(const kfuse::plan& p, std::vector<buffer>& in, std::vector<buffer>& out) {
  std::vector<kfuse::binding> bi, bo;
  for (buffer& b : in) bi.push_back(b.bind());
  for (buffer& b : out) bo.push_back(b.bind());
  p.run(bi, bo);
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 3) {
    std::fprintf(stderr, "usage: int8_accuracy MODEL.onnx NAME=FILE.npy [NAME=FILE.npy ...]\n");
    return 2;
  }
  kfuse::onnx::import_options opt;
  std::map<std::string, kfuse::npy_array> files;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    const auto eq = a.find('=');
    if (eq == std::string::npos) throw kfuse::error("int8_accuracy: '" + a + "' is not NAME=FILE");
    kfuse::npy_array arr = kfuse::read_npy(a.substr(eq + 1));
    opt.shapes[a.substr(0, eq)] = arr.shape;
    files[a.substr(0, eq)] = std::move(arr);
  }
  const kfuse::onnx::model m = kfuse::onnx::load(argv[1], opt);
  std::vector<buffer> in;
  for (const kfuse::onnx::value_info& vi : m.inputs) {
    const auto f = files.find(vi.name);
    if (f == files.end()) throw kfuse::error("int8_accuracy: no file for input '" + vi.name + "'");
    if (f->second.data.size() !=
        std::size_t(kfuse::shape_numel(vi.shape)) * kfuse::dtype_size(vi.type))
      throw kfuse::error("int8_accuracy: '" + vi.name + "': the file's dtype is not the model's");
    in.push_back({vi.shape, vi.type, f->second.data});
  }
  // f32 reference on the native arch.
  const kfuse::plan p32 = kfuse::compile(m.graph);
  std::vector<buffer> ref = outputs_of(p32);
  run(p32, in, ref);
  // Calibrate on the same inputs, then the int8 plan on the scalar generic arch.
  std::vector<std::vector<kfuse::binding>> samples(1);
  for (buffer& b : in) samples[0].push_back(b.bind());
  const std::vector<kfuse::tensor_id> targets = kfuse::calibration_targets(m.graph);
  const kfuse::graph_calibration cal = kfuse::calibrate_graph(
      m.graph, targets, std::span<const std::vector<kfuse::binding>>(samples),
      {kfuse::observer_method::percentile, 99.99}, kfuse::quant_scheme::affine);
  kfuse::graph g = m.graph;
  kfuse::apply_calibration(g, cal);
  const auto t0 = std::chrono::steady_clock::now();
  const kfuse::plan p8 = kfuse::compile<kfuse::arch::generic, kfuse::backend::xsimd>(
      g, {.prec = kfuse::precision::int8});
  std::vector<buffer> got = outputs_of(p8);
  run(p8, in, got);
  std::printf(
      "model: %s; %zu tensors calibrated on the given inputs; int8 plan (arch generic) "
      "compiled and run in %.0f ms\n",
      argv[1], cal.tensors.size(), ms_since(t0));
  int int8_steps = 0;
  for (const auto& s : p8.steps())
    int8_steps +=
        s.kernel.find("i8") != std::string::npos || s.kernel.find("int8") != std::string::npos;
  std::printf("int8 plan: %zu steps, %d with an int8 kernel\n", p8.steps().size(), int8_steps);
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const std::size_t n = ref[i].data.size() / 4;
    const std::span<const float> w(reinterpret_cast<const float*>(ref[i].data.data()), n),
        x(reinterpret_cast<const float*>(got[i].data.data()), n);
    const index_t rows = ref[i].shape.size() == 2 ? ref[i].shape[0] : 0;
    const kfuse::accuracy_report r = kfuse::compare_outputs(w, x, rows);
    std::string dims;
    for (index_t d : ref[i].shape) dims += (dims.empty() ? "" : "x") + std::to_string(d);
    std::printf("  %s [%s]: %s\n", m.outputs[i].name.c_str(), dims.c_str(),
                kfuse::to_string(r).c_str());
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "int8_accuracy: error: %s\n", e.what());
  return 2;
}
