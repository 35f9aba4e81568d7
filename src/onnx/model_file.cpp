#include "model_file.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <climits>
#include <fstream>
#include <string>

#include "kfuse/detail/checks.hpp"

namespace kfuse::onnx::detail {

namespace {

[[noreturn]] void bad(const std::string& what) { kfuse::detail::fail("onnx", what); }

// Opsets 9 to 17 are what the importer is built against; older files load where their ops'
// semantics are handled (e.g. Clip and Slice attributes, pre-13 Softmax and Squeeze).
constexpr std::int64_t min_opset = 1, max_opset = 18;

}  // namespace

std::vector<std::byte> read_model_file(const std::filesystem::path& file, std::size_t max_bytes) {
  std::ifstream in(file, std::ios::binary);
  if (!in) bad("cannot open '" + file.string() + "'");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) bad("cannot read '" + file.string() + "'");
  if (std::size_t(size) > max_bytes)
    bad("'" + file.string() + "' has " + std::to_string(size) + " bytes, above the limit of " +
        std::to_string(max_bytes) + " (import_options::max_bytes)");
  std::vector<std::byte> bytes(static_cast<std::size_t>(size));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), size);
  if (!in) bad("reading '" + file.string() + "' failed");
  return bytes;
}

::onnx::ModelProto parse_model(std::span<const std::byte> bytes, std::size_t max_bytes) {
  if (bytes.size() > max_bytes)
    bad("the model has " + std::to_string(bytes.size()) + " bytes, above the limit of " +
        std::to_string(max_bytes) + " (import_options::max_bytes)");
  if (bytes.size() > std::size_t(INT_MAX))
    bad("models above 2 GiB must keep their weights as external data");
  google::protobuf::io::ArrayInputStream raw(bytes.data(), int(bytes.size()));
  google::protobuf::io::CodedInputStream in(&raw);
  in.SetTotalBytesLimit(INT_MAX);
  in.SetRecursionLimit(64);
  ::onnx::ModelProto m;
  if (!m.ParseFromCodedStream(&in) || !in.ConsumedEntireMessage())
    bad("not a valid ONNX model (the protobuf does not parse: truncated or corrupt file?)");
  if (!m.has_graph()) bad("the model has no graph");
  return m;
}

std::int64_t default_opset(const ::onnx::ModelProto& m) {
  std::int64_t v = -1;
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") v = o.version();
  if (v < 0) bad("the model imports no opset of the default ONNX domain");
  if (v < min_opset || v > max_opset)
    bad("opset " + std::to_string(v) + " is not supported (kfuse imports opsets " +
        std::to_string(min_opset) + " to " + std::to_string(max_opset) + ")");
  return v;
}

}  // namespace kfuse::onnx::detail
