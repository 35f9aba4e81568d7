// kfuse-run's command line (src/tools/kfuse_run_args.hpp): defaults, every option in both forms,
// the errors (one line each, naming the option), --help winning over everything, and the output
// file names that cannot leave their folder.
#include "kfuse_run_args.hpp"

#include <catch2/catch.hpp>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

using kfuse::index_t;
using kfuse_run::parse_args;
using kfuse_run::run_args;

namespace {

run_args parse(std::initializer_list<std::string_view> args) {
  const std::vector<std::string_view> v(args);
  return parse_args(v);
}

std::string error_of(std::initializer_list<std::string_view> args) {
  try {
    parse(args);
  } catch (const kfuse::error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("kfuse-run args: defaults", "[tools][kfuse_run]") {
  const run_args a = parse({"model.onnx"});
  CHECK(a.model == "model.onnx");
  CHECK(a.dims.empty());
  CHECK(a.shapes.empty());
  CHECK(a.inputs.empty());
  CHECK(a.output_dir.empty());
  CHECK(a.prec == kfuse::precision::f32);
  CHECK(a.calib_dir.empty());
  CHECK(a.auto_layout);  // --layout auto: both layouts timed, the faster runs
  CHECK(a.threads == 0);
  CHECK(a.winograd);  // --conv auto
  CHECK(a.split);     // --split auto
  CHECK(a.reps == 100);
  CHECK(a.warmup == 10);
  CHECK_FALSE(a.profile);
  CHECK(a.trace.empty());
  CHECK_FALSE(a.compare_fp32);
  CHECK_FALSE(a.batch_sweep);
  CHECK_FALSE(a.help);
}

TEST_CASE("kfuse-run args: every option", "[tools][kfuse_run]") {
  const run_args a = parse({"--dim",
                            "batch=8",
                            "--dim=seq=128",
                            "m.onnx",
                            "--shape",
                            "x=1,3,224,224",
                            "--shape=y=5",
                            "--input",
                            "x=data/x.npy",
                            "--input=y=a=b.npy",
                            "--output-dir",
                            "out",
                            "--prec",
                            "int8",
                            "--calib",
                            "calib",
                            "--export-qdq=q.onnx",
                            "--layout=nhwc",
                            "--threads",
                            "2",
                            "--conv",
                            "direct",
                            "--split=off",
                            "--reps=300",
                            "--warmup",
                            "0",
                            "--profile",
                            "--trace",
                            "t.json",
                            "--compare-fp32",
                            "--batch-sweep",
                            "2.5"});
  CHECK(a.model == "m.onnx");
  CHECK(a.dims == std::map<std::string, index_t>{{"batch", 8}, {"seq", 128}});
  CHECK(a.shapes.at("x") == std::vector<index_t>{1, 3, 224, 224});
  CHECK(a.shapes.at("y") == std::vector<index_t>{5});
  CHECK(a.inputs.at("x") == "data/x.npy");
  CHECK(a.inputs.at("y") == "a=b.npy");  // the input name ends at the first '='
  CHECK(a.output_dir == "out");
  CHECK(a.prec == kfuse::precision::int8);
  CHECK(a.calib_dir == "calib");
  CHECK(a.export_qdq == "q.onnx");
  CHECK(a.layout == kfuse::tensor_layout::nhwc);
  CHECK_FALSE(a.auto_layout);
  CHECK(a.threads == 2);
  CHECK_FALSE(a.winograd);
  CHECK_FALSE(a.split);
  CHECK(a.reps == 300);
  CHECK(a.warmup == 0);
  CHECK(a.profile);
  CHECK(a.trace == "t.json");
  CHECK(a.compare_fp32);
  CHECK(a.batch_sweep);
  CHECK(a.sweep_budget_ms == 2.5);
  CHECK(parse({"m.onnx", "--prec", "bf16"}).prec == kfuse::precision::bf16);
  CHECK_FALSE(parse({"m.onnx", "--prec", "bf16"}).emulated_bf16);
  CHECK(parse({"m.onnx", "--prec", "bf16-emulated"}).prec == kfuse::precision::bf16);
  CHECK(parse({"m.onnx", "--prec", "bf16-emulated"}).emulated_bf16);
  CHECK(parse({"m.onnx", "--prec", "fp32"}).prec == kfuse::precision::f32);
  // Names with '=' in --dim / --shape: the value starts after the last '='.
  CHECK(parse({"m.onnx", "--shape", "a=b=2,3"}).shapes.at("a=b") == std::vector<index_t>{2, 3});
  // After "--" everything is the model, even a name starting with '-'.
  CHECK(parse({"--reps", "5", "--", "-odd.onnx"}).model == "-odd.onnx");
}

TEST_CASE("kfuse-run args: --help wins", "[tools][kfuse_run]") {
  CHECK(parse({"--help"}).help);
  CHECK(parse({"-h"}).help);
  CHECK(parse({"--bogus", "--reps", "x", "-h"}).help);  // no model, bad options: still help
  const std::string u = kfuse_run::usage();
  for (const char* opt :
       {"--dim", "--shape", "--input", "--output-dir", "--prec", "--calib", "--export-qdq",
        "--layout", "--threads", "--conv", "--split", "--reps", "--warmup", "--profile", "--trace",
        "--compare-fp32", "--batch-sweep", "--help"})
    CHECK(u.find(opt) != std::string::npos);
}

TEST_CASE("kfuse-run args: errors name the option", "[tools][kfuse_run]") {
  CHECK(error_of({}) == "no model given (usage: kfuse-run MODEL.onnx [options]; see --help)");
  CHECK(error_of({"--reps", "5"}) ==
        "no model given (usage: kfuse-run MODEL.onnx [options]; see --help)");
  CHECK(error_of({"a.onnx", "b.onnx"}) ==
        "unexpected argument 'b.onnx' (one model only; the model is 'a.onnx')");
  CHECK(error_of({"m.onnx", "--bogus"}) ==
        "unknown option '--bogus' (kfuse-run --help lists the options)");
  CHECK(error_of({"m.onnx", "-x"}) == "unknown option '-x' (kfuse-run --help lists the options)");
  CHECK(error_of({"m.onnx", "--reps"}) == "--reps needs a value");
  CHECK(error_of({"m.onnx", "--reps="}) == "--reps needs a value");
  CHECK(error_of({"m.onnx", "--output-dir", "--profile"}) ==
        "--output-dir needs a value (found the option '--profile')");
  CHECK(error_of({"m.onnx", "--trace", ""}) == "--trace needs a value (found an empty argument)");
  CHECK(error_of({"m.onnx", "--profile=yes"}) == "--profile takes no value");
  CHECK(error_of({"m.onnx", "--reps", "abc"}) == "--reps: 'abc' is not a whole number");
  CHECK(error_of({"m.onnx", "--reps", "10x"}) == "--reps: '10x' is not a whole number");
  CHECK(error_of({"m.onnx", "--reps", "0"}) == "--reps: 0 is out of range [1, 100000000]");
  CHECK(error_of({"m.onnx", "--reps", "99999999999999999999"}) ==
        "--reps: 99999999999999999999 is out of range [1, 100000000]");
  CHECK(error_of({"m.onnx", "--warmup", "-1"}) == "--warmup: -1 is out of range [0, 100000000]");
  CHECK(error_of({"m.onnx", "--threads", "-2"}) == "--threads: -2 is out of range [0, 4096]");
  CHECK(error_of({"m.onnx", "--threads", "1.5"}) == "--threads: '1.5' is not a whole number");
  CHECK(error_of({"m.onnx", "--prec", "fp16"}) ==
        "--prec: 'fp16' is not one of f32, bf16, bf16-emulated, int8");
  CHECK(error_of({"m.onnx", "--layout", "NCHW"}) ==
        "--layout: 'NCHW' is not one of auto, nchw, nhwc");
  CHECK(error_of({"m.onnx", "--conv", "winograd"}) ==
        "--conv: 'winograd' is not one of auto, direct");
  CHECK(error_of({"m.onnx", "--split", "on"}) == "--split: 'on' is not one of auto, off");
  CHECK(error_of({"m.onnx", "--dim", "batch"}) == "--dim: 'batch' is not of the form NAME=VALUE");
  CHECK(error_of({"m.onnx", "--dim", "=3"}) == "--dim: '=3' is not of the form NAME=VALUE");
  CHECK(error_of({"m.onnx", "--dim", "batch="}) == "--dim: 'batch=' is not of the form NAME=VALUE");
  CHECK(error_of({"m.onnx", "--dim", "batch=0"}) ==
        "--dim batch: 0 is out of range [1, 1099511627776]");
  CHECK(error_of({"m.onnx", "--dim", "batch=two"}) == "--dim batch: 'two' is not a whole number");
  CHECK(error_of({"m.onnx", "--dim", "b=1", "--dim", "b=2"}) == "--dim b is given twice");
  CHECK(error_of({"m.onnx", "--shape", "x=1,,3"}) == "--shape x: '' is not a whole number");
  CHECK(error_of({"m.onnx", "--shape", "x=1,3,"}) == "--shape x: '' is not a whole number");
  CHECK(error_of({"m.onnx", "--shape", "x=1,-3"}) ==
        "--shape x: -3 is out of range [1, 1099511627776]");
  CHECK(error_of({"m.onnx", "--shape", "x=1x3"}) == "--shape x: '1x3' is not a whole number");
  CHECK(error_of({"m.onnx", "--shape", "x=1", "--shape", "x=2"}) == "--shape x is given twice");
  CHECK(error_of({"m.onnx", "--input", "x.npy"}) ==
        "--input: 'x.npy' is not of the form INPUT=FILE.npy");
  CHECK(error_of({"m.onnx", "--input", "x=a.npy", "--input", "x=b.npy"}) ==
        "--input x is given twice");
  CHECK(error_of({"m.onnx", "--batch-sweep", "0"}) ==
        "--batch-sweep: '0' is not a positive number of milliseconds");
  CHECK(error_of({"m.onnx", "--batch-sweep", "nan"}) ==
        "--batch-sweep: 'nan' is not a positive number of milliseconds");
  CHECK(error_of({"m.onnx", "--batch-sweep", "5ms"}) ==
        "--batch-sweep: '5ms' is not a positive number of milliseconds");
  CHECK(error_of({"m.onnx", "--calib", "dir"}) ==
        "--calib calibrates an int8 plan: add --prec int8");
  CHECK(error_of({"m.onnx", "--export-qdq", "q.onnx", "--prec", "bf16"}) ==
        "--export-qdq writes an int8 plan's quantization: add --prec int8");
  CHECK(error_of({"", "--reps", "3"}) == "the model path is empty");
}

TEST_CASE("kfuse-run args: output file names stay in their folder", "[tools][kfuse_run]") {
  using kfuse_run::file_name_for;
  CHECK(file_name_for("logits") == "logits.npy");
  CHECK(file_name_for("output:0") == "output:0.npy");
  CHECK(file_name_for("a/b\\c") == "a_b_c.npy");
  CHECK(file_name_for("../../etc/passwd") == "______etc_passwd.npy");
  CHECK(file_name_for("..") == "__.npy");
  CHECK(file_name_for(".hidden") == "_hidden.npy");
  CHECK(file_name_for("/abs") == "_abs.npy");
  CHECK(file_name_for("a.b") == "a.b.npy");  // inner dots stay
  CHECK(file_name_for("") == "tensor.npy");
  CHECK(file_name_for(std::string("a\nb\0c", 5)) == "a_b_c.npy");
  CHECK(file_name_for(std::string(300, 'x')).size() == 204);
  CHECK(file_name_for("x", ".bin") == "x.bin");
}
