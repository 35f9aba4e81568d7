#pragma once
// GGUF files (llama.cpp's model format): the header, the metadata key/values and the tensor
// directory of a memory-mapped file. Everything is checked against the file's size before it is
// read; a truncated, corrupt or hostile file throws kfuse::error naming the key or tensor.
//
//   auto f = kfuse::llm::gguf_file::open("model.gguf");
//   std::string arch = f.get_string("general.architecture");
//   std::uint32_t layers = f.get_u32(arch + ".block_count");
//   const kfuse::llm::gguf_tensor& w = f.tensor("blk.0.attn_q.weight");   // w.data: mapped bytes
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kfuse::llm {

/// Tensor element types (ggml_type numbers).
enum class tensor_type : std::uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q8_1 = 9,
  q2_k = 10,
  q3_k = 11,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  q8_k = 15,
  bf16 = 30,
};
/// "f32", "q4_k", ... ("type 17" for numbers kfuse does not know).
std::string tensor_type_name(std::uint32_t type);
/// Elements per block and bytes per block of a type; {0, 0} for types kfuse does not read.
struct block_geometry {
  std::int64_t elements = 0;
  std::int64_t bytes = 0;
};
block_geometry geometry_of(std::uint32_t type);

/// Metadata value types (gguf_type numbers).
enum class value_type : std::uint32_t {
  u8 = 0,
  i8 = 1,
  u16 = 2,
  i16 = 3,
  u32 = 4,
  i32 = 5,
  f32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  u64 = 10,
  i64 = 11,
  f64 = 12,
};

/// One metadata value. Scalars are kept as i64 / u64 / f64; arrays of numbers as doubles or
/// integers, arrays of strings as strings (a vocabulary of 150k tokens is one such array).
struct gguf_value {
  value_type type = value_type::u8;
  value_type element_type = value_type::u8;  // arrays only
  std::int64_t i = 0;                        // integer and bool scalars
  double f = 0;                              // float scalars
  std::string s;                             // strings
  std::vector<std::int64_t> ints;            // arrays of integers / bools
  std::vector<double> floats;                // arrays of floats
  std::vector<std::string> strings;          // arrays of strings
  std::uint64_t size = 0;                    // array length
};

struct gguf_tensor {
  std::string name;
  std::uint32_t type = 0;           // tensor_type
  std::vector<std::int64_t> dims;   // ggml order: dims[0] is the contiguous (row) dimension
  std::uint64_t offset = 0;         // from the start of the data section
  const std::byte* data = nullptr;  // in the mapping
  std::uint64_t bytes = 0;
  std::int64_t elements() const;
  std::int64_t rows() const;  // product of dims[1..]
};

class gguf_file {
 public:
  /// Maps the file read-only. Throws kfuse::error naming the path and the problem.
  static gguf_file open(const std::string& path);
  /// Parses bytes held in memory (tests, fuzzing); `name` appears in error messages.
  static gguf_file from_bytes(std::vector<std::byte> bytes, std::string name = "<memory>");

  gguf_file(gguf_file&&) noexcept;
  gguf_file& operator=(gguf_file&&) noexcept;
  ~gguf_file();

  const std::string& path() const { return path_; }
  /// Maps every page of a mapped file now, in one call, instead of one fault per page later
  /// (the loader reads all of it); a hint: ignored where the kernel lacks it.
  void prefault() const;
  /// Drops the mapped pages from this process (they come back from the page cache on access):
  /// after a repack, the file's copy of the weights need not count in the process's memory.
  void release_pages() const;
  std::uint32_t version() const { return version_; }
  std::uint64_t alignment() const { return alignment_; }
  std::uint64_t file_bytes() const { return size_; }

  bool has(std::string_view key) const;
  const gguf_value* find(std::string_view key) const;
  /// Typed getters: throw kfuse::error "gguf FILE: key 'K' ..." when missing or of another type.
  std::string get_string(std::string_view key) const;
  std::uint64_t get_u64(std::string_view key) const;  // any non-negative integer type
  std::uint32_t get_u32(std::string_view key) const;  // any integer type that fits
  float get_f32(std::string_view key) const;          // any float type
  bool get_bool(std::string_view key) const;
  std::uint32_t get_u32_or(std::string_view key, std::uint32_t fallback) const;
  float get_f32_or(std::string_view key, float fallback) const;
  std::string get_string_or(std::string_view key, std::string fallback) const;
  const std::vector<std::string>& get_strings(std::string_view key) const;
  const std::vector<double>& get_floats(std::string_view key) const;
  const std::vector<std::int64_t>& get_ints(std::string_view key) const;
  const std::map<std::string, gguf_value, std::less<>>& metadata() const { return kv_; }

  const std::vector<gguf_tensor>& tensors() const { return tensors_; }
  const gguf_tensor* find_tensor(std::string_view name) const;
  /// Throws kfuse::error "gguf FILE: no tensor 'NAME'".
  const gguf_tensor& tensor(std::string_view name) const;

 private:
  gguf_file() = default;
  void parse();
  std::string path_;
  const std::byte* base_ = nullptr;
  std::uint64_t size_ = 0;
  void* mapping_ = nullptr;       // mmap'd region (open)
  std::vector<std::byte> owned_;  // from_bytes
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = 32;
  std::map<std::string, gguf_value, std::less<>> kv_;
  std::vector<gguf_tensor> tensors_;
  std::map<std::string, std::size_t, std::less<>> by_name_;
};

}  // namespace kfuse::llm
