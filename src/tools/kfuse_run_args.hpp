#pragma once
// kfuse-run's command line: the options (run_args), their parser, the usage text and the
// file names kfuse-run derives from tensor names. Pure: nothing here opens a file or loads a
// model (tests/tools/kfuse_run_args_test.cpp tests it without the ONNX importer). Every mistake
// throws kfuse::error with a one-line message.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "kfuse/error.hpp"
#include "kfuse/graph/types.hpp"

namespace kfuse_run {

using kfuse::index_t;

struct run_args {
  std::string model;
  std::map<std::string, index_t> dims;                 // --dim NAME=V
  std::map<std::string, std::vector<index_t>> shapes;  // --shape INPUT=d0,d1,...
  std::map<std::string, std::string> inputs;           // --input INPUT=FILE.npy
  std::string output_dir;                              // --output-dir
  std::map<std::string, std::string> expects;          // --expect OUTPUT=FILE.npy
  kfuse::precision prec = kfuse::precision::f32;       // --prec
  bool emulated_bf16 = false;                          // --prec bf16-emulated
  std::string calib_dir;                               // --calib
  std::string export_qdq;                              // --export-qdq OUT.onnx
  kfuse::tensor_layout layout = kfuse::tensor_layout::nchw;
  bool auto_layout = true;  // --layout auto (the default): the faster of nchw and nhwc, timed
  int threads = 0;          // 0: the default pool's size
  bool winograd = true;     // --conv auto (default) | direct
  bool split = true;        // --split auto (default) | off
  int reps = 100;
  int warmup = 10;
  bool profile = false;
  std::string trace;  // --trace FILE.json
  bool compare_fp32 = false;
  bool batch_sweep = false;
  double sweep_budget_ms = 0;  // --batch-sweep MS
  bool help = false;
};

inline std::string usage() {
  return R"(usage: kfuse-run MODEL.onnx [options]

Loads an ONNX model, compiles it into a kfuse plan, records a replay buffer and times replays
(like trtexec / onnxruntime_perf_test). Prints the model summary, load and compile times, the
importer's rewrites, the plan's fusion summary, the inputs used and one line
  latency: median M ms, min A ms, max B ms (N runs)

Model and shapes:
  --dim NAME=V           value of the symbolic dimension NAME (e.g. --dim batch=8); repeatable
  --shape INPUT=D0,D1,.. whole shape of input INPUT (its static dims must agree); repeatable
  --layout auto|nchw|nhwc  memory order of 4-D activations inside the plan; inputs and
                         outputs stay NCHW either way. auto (default): when the model has 4-D
                         activations, both plans are compiled and timed over a few replays
                         (f32) and the faster one runs; the line "layout: auto -> ..." shows
                         both medians

Data:
  --input INPUT=FILE.npy data of input INPUT (dtype and static dimensions must match the
                         model's; the file's shape binds INPUT's symbolic ones, no --dim
                         needed; f64 is converted for f32 inputs, i64 for i32); repeatable. Inputs
                         without a file get random data: uniform [-1, 1] for float inputs (fixed
                         seed), ones for integer inputs (a valid id, a full mask)
  --output-dir DIR       write each output as DIR/<output name>.npy after the timed runs (float
                         outputs as float32, integer ones in their own type; '/', '\' and
                         leading '.' of names become '_')
  --expect OUTPUT=FILE.npy  check output OUTPUT of the timed runs against FILE.npy (golden
                         outputs, e.g. ONNX Runtime's or PyTorch's): one line per output with
                         its largest difference over the largest |value| of FILE; above 1e-4
                         (f32; 3e-2 for bf16 / int8 plans) the run fails with exit code 1;
                         repeatable

Plan:
  --prec f32|bf16|int8   arithmetic of linear / conv nodes (default f32); bf16 runs in f32 on
                         a CPU whose bf16 dot product would be slower (the plan says so)
  --prec bf16-emulated   bf16 there too (compile_options::emulated_bf16), for bf16's numerics;
                         needs a tier with a bf16 dot product (kfuse::runtime holds no emulated
                         bf16 kernels)
  --calib DIR            int8 calibration data: DIR/<input>.npy for every input, samples
                         stacked along axis 0 (split into batches of the model's batch size; the
                         same number for every input; token ids and masks too); needs --prec
                         int8. Without it an int8 run calibrates on its own inputs
  --export-qdq OUT.onnx  also write the model as ONNX QDQ (QuantizeLinear / DequantizeLinear)
                         with this run's calibration and kfuse's int8 weights, for another
                         runtime's int8 kernels (ONNX Runtime's); needs --prec int8 and opset 13+
  --threads N            threads a node may use (default 0: the default pool's size)
  --conv auto|direct     f32 3x3 stride-1 convs of an NHWC plan: auto (default) runs them as
                         Winograd F(4x4, 3x3) where kfuse's cost model says it pays (3-4x fewer
                         multiply-adds, outputs within ~1e-6 of the direct conv's scale);
                         direct: never
  --split auto|off       with 2+ threads and a batch of 2+: auto (default) also compiles the
                         model for a share of the batch on one thread and runs the shares at
                         once (kfuse::split_replay: threads meet once per run, not per node),
                         when that gives the whole batch's outputs on the run's inputs and
                         replays faster; the line "split: ..." shows both medians or why not

Timing and reports:
  --warmup N             untimed replays first (default 10)
  --reps N               timed replays (default 100)
  --profile              per-step profiler table over --reps extra replays
  --trace FILE.json      Chrome trace of the profiled replays (chrome://tracing, Perfetto)
  --compare-fp32         also run an f32 plan on the same inputs and print the accuracy of each
                         output against it (top-1 agreement for 2-D [batch, classes] outputs)
  --batch-sweep MS       re-import with batch 1, 2, 4, ..., 64 (axis 0 of the first input, when
                         it is dynamic) and print latency / throughput and the best batch whose
                         median latency is within MS milliseconds
  --help, -h             this text

Options take their value as the next argument or after '=' (--reps=300). Exit codes: 0 done,
1 an --expect mismatch, 2 bad arguments, bad files or a model kfuse cannot run (one line
"kfuse-run: error: ..." on stderr).

Environment: KFUSE_ARCH=<tier> runs another tier of kfuse::runtime than the best one this CPU
supports (the "dispatch:" line says which ran and why); KFUSE_NUM_THREADS=N sizes the pool.
)";
}

namespace detail {

[[noreturn]] inline void bad(const std::string& what) { throw kfuse::error(what); }

/// A whole number in [lo, hi]; `what` names the option for the message.
inline std::int64_t parse_int(std::string_view s, std::string_view what, std::int64_t lo,
                              std::int64_t hi) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec == std::errc::invalid_argument || end != s.data() + s.size())
    bad(std::string(what) + ": '" + std::string(s) + "' is not a whole number");
  if (ec == std::errc::result_out_of_range || v < lo || v > hi)
    bad(std::string(what) + ": " + std::string(s) + " is out of range [" + std::to_string(lo) +
        ", " + std::to_string(hi) + "]");
  return v;
}

inline double parse_ms(std::string_view s, std::string_view what) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v <= 0)
    bad(std::string(what) + ": '" + std::string(s) + "' is not a positive number of milliseconds");
  return v;
}

/// NAME=VALUE split at the first (or last) '='; both parts non-empty.
inline std::pair<std::string, std::string> split_assignment(std::string_view s,
                                                            std::string_view what,
                                                            std::string_view form, bool last) {
  const std::size_t eq = last ? s.rfind('=') : s.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == s.size())
    bad(std::string(what) + ": '" + std::string(s) + "' is not of the form " + std::string(form));
  return {std::string(s.substr(0, eq)), std::string(s.substr(eq + 1))};
}

/// Extents of at most 1 << 40 each: a typo of a few digits too many is an error here, not an
/// allocation failure later.
inline constexpr std::int64_t max_extent = std::int64_t(1) << 40;

inline std::vector<index_t> parse_shape(std::string_view list, std::string_view what) {
  std::vector<index_t> shape;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = list.find(',', start);
    const std::string_view e = list.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    shape.push_back(parse_int(e, what, 1, max_extent));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return shape;
}

}  // namespace detail

/// Parses the arguments after the program name.
inline run_args parse_args(std::span<const std::string_view> args) {
  using detail::bad;
  run_args a;
  for (const std::string_view s : args)
    if (s == "--help" || s == "-h") {
      a.help = true;
      return a;
    }
  bool options_end = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string_view arg = args[i];
    if (options_end || arg.empty() || arg[0] != '-' || arg == "-") {
      if (!a.model.empty())
        bad("unexpected argument '" + std::string(arg) + "' (one model only; the model is '" +
            a.model + "')");
      if (arg.empty()) bad("the model path is empty");
      a.model = std::string(arg);
      continue;
    }
    if (arg == "--") {
      options_end = true;
      continue;
    }
    // --name VALUE or --name=VALUE
    std::string_view name = arg, inline_value;
    bool has_inline = false;
    if (const std::size_t eq = arg.find('=');
        eq != std::string_view::npos && arg.starts_with("--")) {
      name = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
      has_inline = true;
    }
    const std::string opt(name);
    const auto value = [&]() -> std::string_view {
      if (has_inline) {
        if (inline_value.empty()) bad(opt + " needs a value");
        return inline_value;
      }
      if (i + 1 >= args.size()) bad(opt + " needs a value");
      const std::string_view v = args[++i];
      if (v.starts_with("--"))
        bad(opt + " needs a value (found the option '" + std::string(v) + "')");
      if (v.empty()) bad(opt + " needs a value (found an empty argument)");
      return v;
    };
    const auto flag = [&] {
      if (has_inline) bad(opt + " takes no value");
      return true;
    };
    if (opt == "--dim") {
      auto [n, v] = detail::split_assignment(value(), opt, "NAME=VALUE", true);
      const index_t d = detail::parse_int(v, "--dim " + n, 1, detail::max_extent);
      if (!a.dims.emplace(n, d).second) bad("--dim " + n + " is given twice");
    } else if (opt == "--shape") {
      auto [n, v] = detail::split_assignment(value(), opt, "INPUT=D0,D1,...", true);
      auto shape = detail::parse_shape(v, "--shape " + n);
      if (!a.shapes.emplace(n, std::move(shape)).second) bad("--shape " + n + " is given twice");
    } else if (opt == "--input") {
      auto [n, v] = detail::split_assignment(value(), opt, "INPUT=FILE.npy", false);
      if (!a.inputs.emplace(n, v).second) bad("--input " + n + " is given twice");
    } else if (opt == "--output-dir") {
      a.output_dir = std::string(value());
    } else if (opt == "--expect") {
      auto [n, v] = detail::split_assignment(value(), opt, "OUTPUT=FILE.npy", false);
      if (!a.expects.emplace(n, v).second) bad("--expect " + n + " is given twice");
    } else if (opt == "--prec") {
      const std::string_view v = value();
      if (v == "f32" || v == "fp32")
        a.prec = kfuse::precision::f32;
      else if (v == "bf16" || v == "bf16-emulated") {
        a.prec = kfuse::precision::bf16;
        a.emulated_bf16 = v == "bf16-emulated";
      } else if (v == "int8")
        a.prec = kfuse::precision::int8;
      else
        bad("--prec: '" + std::string(v) + "' is not one of f32, bf16, bf16-emulated, int8");
    } else if (opt == "--calib") {
      a.calib_dir = std::string(value());
    } else if (opt == "--export-qdq") {
      a.export_qdq = std::string(value());
    } else if (opt == "--layout") {
      const std::string_view v = value();
      a.auto_layout = v == "auto";
      if (v == "nchw")
        a.layout = kfuse::tensor_layout::nchw;
      else if (v == "nhwc")
        a.layout = kfuse::tensor_layout::nhwc;
      else if (v != "auto")
        bad("--layout: '" + std::string(v) + "' is not one of auto, nchw, nhwc");
    } else if (opt == "--conv") {
      const std::string_view v = value();
      if (v != "auto" && v != "direct")
        bad("--conv: '" + std::string(v) + "' is not one of auto, direct");
      a.winograd = v == "auto";
    } else if (opt == "--split") {
      const std::string_view v = value();
      if (v != "auto" && v != "off")
        bad("--split: '" + std::string(v) + "' is not one of auto, off");
      a.split = v == "auto";
    } else if (opt == "--threads") {
      a.threads = int(detail::parse_int(value(), opt, 0, 4096));
    } else if (opt == "--reps") {
      a.reps = int(detail::parse_int(value(), opt, 1, 100'000'000));
    } else if (opt == "--warmup") {
      a.warmup = int(detail::parse_int(value(), opt, 0, 100'000'000));
    } else if (opt == "--profile") {
      a.profile = flag();
    } else if (opt == "--trace") {
      a.trace = std::string(value());
    } else if (opt == "--compare-fp32") {
      a.compare_fp32 = flag();
    } else if (opt == "--batch-sweep") {
      a.sweep_budget_ms = detail::parse_ms(value(), opt);
      a.batch_sweep = true;
    } else {
      bad("unknown option '" + opt + "' (kfuse-run --help lists the options)");
    }
  }
  if (a.model.empty()) bad("no model given (usage: kfuse-run MODEL.onnx [options]; see --help)");
  if (!a.calib_dir.empty() && a.prec != kfuse::precision::int8)
    bad("--calib calibrates an int8 plan: add --prec int8");
  if (!a.export_qdq.empty() && a.prec != kfuse::precision::int8)
    bad("--export-qdq writes an int8 plan's quantization: add --prec int8");
  return a;
}

inline run_args parse_args(int argc, const char* const* argv) {
  std::vector<std::string_view> v;
  for (int i = 1; i < argc; ++i) v.emplace_back(argv[i]);
  return parse_args(v);
}

/// The file name of a tensor in a folder: '/', '\' and control characters become '_', and so do
/// leading '.' (no "..", no hidden files), so that a hostile model's names stay inside the
/// folder; empty names become "tensor"; at most 200 characters before the extension.
inline std::string file_name_for(std::string_view tensor, std::string_view extension = ".npy") {
  std::string s(tensor.substr(0, 200));
  bool leading = true;
  for (char& c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '/' || c == '\\' || u < 0x20 || u == 0x7f || (leading && c == '.')) c = '_';
    if (c != '_') leading = false;
  }
  if (s.empty()) s = "tensor";
  return s + std::string(extension);
}

}  // namespace kfuse_run
