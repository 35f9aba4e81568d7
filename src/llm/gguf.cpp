// GGUF parsing: every read is bounds-checked against the mapping, every count against what the
// remaining bytes can hold, so a hostile header cannot make the parser allocate or read past the
// end.
#include "kfuse/llm/gguf.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "kfuse/error.hpp"

namespace kfuse::llm {

namespace {
constexpr std::uint32_t gguf_magic = 0x46554747;  // "GGUF" little-endian
constexpr std::uint64_t max_dims = 4;

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw kfuse::error("gguf " + path + ": " + what);
}

struct reader {
  const std::byte* p;
  std::uint64_t size;
  std::uint64_t at = 0;
  const std::string& path;

  void need(std::uint64_t n, const char* what) const {
    if (n > size - at)
      fail(path, std::string("truncated while reading ") + what + " at byte " + std::to_string(at));
  }
  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p + at, sizeof(T));
    at += sizeof(T);
    return v;
  }
  std::string string(const char* what) {
    const auto n = read<std::uint64_t>(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(p + at), n);
    at += n;
    return s;
  }
};

std::uint64_t scalar_bytes(value_type t) {
  switch (t) {
    case value_type::u8:
    case value_type::i8:
    case value_type::boolean:
      return 1;
    case value_type::u16:
    case value_type::i16:
      return 2;
    case value_type::u32:
    case value_type::i32:
    case value_type::f32:
      return 4;
    case value_type::u64:
    case value_type::i64:
    case value_type::f64:
      return 8;
    default:
      return 0;
  }
}

bool is_float(value_type t) { return t == value_type::f32 || t == value_type::f64; }

// One scalar of type t: integers to i (u64 beyond i64's range kept as a bit pattern), floats to f.
void read_scalar(reader& r, value_type t, std::int64_t& i, double& f, const char* what) {
  switch (t) {
    case value_type::u8:
      i = r.read<std::uint8_t>(what);
      break;
    case value_type::i8:
      i = r.read<std::int8_t>(what);
      break;
    case value_type::boolean:
      i = r.read<std::uint8_t>(what) != 0;
      break;
    case value_type::u16:
      i = r.read<std::uint16_t>(what);
      break;
    case value_type::i16:
      i = r.read<std::int16_t>(what);
      break;
    case value_type::u32:
      i = r.read<std::uint32_t>(what);
      break;
    case value_type::i32:
      i = r.read<std::int32_t>(what);
      break;
    case value_type::u64:
      i = std::int64_t(r.read<std::uint64_t>(what));
      break;
    case value_type::i64:
      i = r.read<std::int64_t>(what);
      break;
    case value_type::f32:
      f = r.read<float>(what);
      break;
    case value_type::f64:
      f = r.read<double>(what);
      break;
    default:
      break;
  }
}

const char* value_type_name(value_type t) {
  switch (t) {
    case value_type::u8:
      return "u8";
    case value_type::i8:
      return "i8";
    case value_type::u16:
      return "u16";
    case value_type::i16:
      return "i16";
    case value_type::u32:
      return "u32";
    case value_type::i32:
      return "i32";
    case value_type::f32:
      return "f32";
    case value_type::boolean:
      return "bool";
    case value_type::string:
      return "string";
    case value_type::array:
      return "array";
    case value_type::u64:
      return "u64";
    case value_type::i64:
      return "i64";
    case value_type::f64:
      return "f64";
  }
  return "?";
}
}  // namespace

std::string tensor_type_name(std::uint32_t type) {
  switch (tensor_type(type)) {
    case tensor_type::f32:
      return "f32";
    case tensor_type::f16:
      return "f16";
    case tensor_type::bf16:
      return "bf16";
    case tensor_type::q4_0:
      return "q4_0";
    case tensor_type::q4_1:
      return "q4_1";
    case tensor_type::q5_0:
      return "q5_0";
    case tensor_type::q5_1:
      return "q5_1";
    case tensor_type::q8_0:
      return "q8_0";
    case tensor_type::q8_1:
      return "q8_1";
    case tensor_type::q2_k:
      return "q2_k";
    case tensor_type::q3_k:
      return "q3_k";
    case tensor_type::q4_k:
      return "q4_k";
    case tensor_type::q5_k:
      return "q5_k";
    case tensor_type::q6_k:
      return "q6_k";
    case tensor_type::q8_k:
      return "q8_k";
  }
  return "type " + std::to_string(type);
}

block_geometry geometry_of(std::uint32_t type) {
  switch (tensor_type(type)) {
    case tensor_type::f32:
      return {1, 4};
    case tensor_type::f16:
      return {1, 2};
    case tensor_type::bf16:
      return {1, 2};
    case tensor_type::q4_0:
      return {32, 18};
    case tensor_type::q4_1:
      return {32, 20};
    case tensor_type::q5_0:
      return {32, 22};
    case tensor_type::q5_1:
      return {32, 24};
    case tensor_type::q8_0:
      return {32, 34};
    case tensor_type::q8_1:
      return {32, 36};
    case tensor_type::q2_k:
      return {256, 84};
    case tensor_type::q3_k:
      return {256, 110};
    case tensor_type::q4_k:
      return {256, 144};
    case tensor_type::q5_k:
      return {256, 176};
    case tensor_type::q6_k:
      return {256, 210};
    case tensor_type::q8_k:
      return {256, 292};
  }
  return {};
}

std::int64_t gguf_tensor::elements() const {
  std::int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}
std::int64_t gguf_tensor::rows() const {
  std::int64_t n = 1;
  for (std::size_t i = 1; i < dims.size(); ++i) n *= dims[i];
  return n;
}

gguf_file gguf_file::open(const std::string& path) {
  gguf_file f;
  f.path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  f.size_ = std::uint64_t(st.st_size);
  if (f.size_ == 0) {
    ::close(fd);
    fail(path, "empty file");
  }
  void* m = ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (m == MAP_FAILED) fail(path, std::string("cannot map: ") + std::strerror(errno));
  f.mapping_ = m;
  f.base_ = static_cast<const std::byte*>(m);
  f.parse();
  return f;
}

gguf_file gguf_file::from_bytes(std::vector<std::byte> bytes, std::string name) {
  gguf_file f;
  f.path_ = std::move(name);
  f.owned_ = std::move(bytes);
  f.base_ = f.owned_.data();
  f.size_ = f.owned_.size();
  f.parse();
  return f;
}

gguf_file::gguf_file(gguf_file&& o) noexcept { *this = std::move(o); }
gguf_file& gguf_file::operator=(gguf_file&& o) noexcept {
  if (this == &o) return *this;
  if (mapping_) ::munmap(mapping_, size_);
  path_ = std::move(o.path_);
  owned_ = std::move(o.owned_);
  mapping_ = std::exchange(o.mapping_, nullptr);
  size_ = std::exchange(o.size_, 0);
  base_ = mapping_ ? static_cast<const std::byte*>(mapping_) : owned_.data();
  o.base_ = nullptr;
  version_ = o.version_;
  alignment_ = o.alignment_;
  kv_ = std::move(o.kv_);
  tensors_ = std::move(o.tensors_);
  by_name_ = std::move(o.by_name_);
  // Moving a vector keeps its buffer and the mapping does not move: tensor pointers stay valid.
  return *this;
}
void gguf_file::prefault() const {
  if (!mapping_) return;
#ifdef MADV_POPULATE_READ
  if (::madvise(mapping_, size_, MADV_POPULATE_READ) == 0) return;
#endif
  ::madvise(mapping_, size_, MADV_WILLNEED);
}

void gguf_file::release_pages() const {
  if (mapping_) ::madvise(mapping_, size_, MADV_DONTNEED);
}

gguf_file::~gguf_file() {
  if (mapping_) ::munmap(mapping_, size_);
}

void gguf_file::parse() {
  reader r{base_, size_, 0, path_};
  if (r.read<std::uint32_t>("the magic") != gguf_magic) fail(path_, "not a GGUF file (bad magic)");
  version_ = r.read<std::uint32_t>("the version");
  if (version_ < 2 || version_ > 3)
    fail(path_, "GGUF version " + std::to_string(version_) + " (kfuse reads versions 2 and 3)");
  const auto n_tensors = r.read<std::uint64_t>("the tensor count");
  const auto n_kv = r.read<std::uint64_t>("the key/value count");
  // Each key/value needs at least 12 bytes, each tensor entry at least 24: counts that the file
  // cannot hold are corrupt (and would otherwise make us reserve gigabytes).
  if (n_kv > size_ / 12)
    fail(path_, "key/value count " + std::to_string(n_kv) + " exceeds the file");
  if (n_tensors > size_ / 24)
    fail(path_, "tensor count " + std::to_string(n_tensors) + " exceeds the file");

  for (std::uint64_t k = 0; k < n_kv; ++k) {
    std::string key = r.string("a metadata key");
    const std::string what = "key '" + key + "'";
    gguf_value v;
    v.type = value_type(r.read<std::uint32_t>(what.c_str()));
    if (v.type == value_type::string) {
      v.s = r.string(what.c_str());
    } else if (v.type == value_type::array) {
      v.element_type = value_type(r.read<std::uint32_t>(what.c_str()));
      v.size = r.read<std::uint64_t>(what.c_str());
      if (v.element_type == value_type::string) {
        if (v.size > (size_ - r.at) / 8)
          fail(path_, what + ": array of " + std::to_string(v.size) + " strings exceeds the file");
        v.strings.reserve(v.size);
        for (std::uint64_t j = 0; j < v.size; ++j) v.strings.push_back(r.string(what.c_str()));
      } else if (const auto b = scalar_bytes(v.element_type); b != 0) {
        if (v.size > (size_ - r.at) / b)
          fail(path_, what + ": array of " + std::to_string(v.size) + " values exceeds the file");
        if (is_float(v.element_type))
          v.floats.resize(v.size);
        else
          v.ints.resize(v.size);
        for (std::uint64_t j = 0; j < v.size; ++j) {
          std::int64_t i = 0;
          double f = 0;
          read_scalar(r, v.element_type, i, f, what.c_str());
          if (is_float(v.element_type))
            v.floats[j] = f;
          else
            v.ints[j] = i;
        }
      } else {
        fail(path_, what + ": array of unsupported value type " +
                        std::to_string(std::uint32_t(v.element_type)));
      }
    } else if (scalar_bytes(v.type) != 0) {
      read_scalar(r, v.type, v.i, v.f, what.c_str());
    } else {
      fail(path_, what + ": unknown value type " + std::to_string(std::uint32_t(v.type)));
    }
    if (kv_.count(key)) fail(path_, what + " appears twice");
    kv_.emplace(std::move(key), std::move(v));
  }
  if (const gguf_value* a = find("general.alignment")) {
    if (a->type != value_type::u32 || a->i == 0 || (a->i & (a->i - 1)) != 0 || a->i > 65536)
      fail(path_,
           "key 'general.alignment' must be a power of two u32 (is " + std::to_string(a->i) + ")");
    alignment_ = std::uint64_t(a->i);
  }

  tensors_.reserve(n_tensors);
  for (std::uint64_t t = 0; t < n_tensors; ++t) {
    gguf_tensor info;
    info.name = r.string("a tensor name");
    const std::string what = "tensor '" + info.name + "'";
    const auto n_dims = r.read<std::uint32_t>(what.c_str());
    if (n_dims == 0 || n_dims > max_dims)
      fail(path_, what + ": " + std::to_string(n_dims) + " dimensions (1 to 4)");
    std::int64_t elements = 1;
    for (std::uint32_t d = 0; d < n_dims; ++d) {
      const auto n = r.read<std::int64_t>(what.c_str());
      if (n <= 0 || n > (std::int64_t(1) << 40) || elements > (std::int64_t(1) << 42) / n)
        fail(path_, what + ": bad dimension " + std::to_string(n));
      elements *= n;
      info.dims.push_back(n);
    }
    info.type = r.read<std::uint32_t>(what.c_str());
    info.offset = r.read<std::uint64_t>(what.c_str());
    const block_geometry g = geometry_of(info.type);
    if (g.elements == 0)
      fail(path_, what + ": unsupported tensor type " + tensor_type_name(info.type));
    if (info.dims[0] % g.elements != 0)
      fail(path_, what + ": row length " + std::to_string(info.dims[0]) +
                      " is not a multiple of the " + tensor_type_name(info.type) + " block (" +
                      std::to_string(g.elements) + ")");
    info.bytes = std::uint64_t(elements / g.elements * g.bytes);
    if (by_name_.count(info.name)) fail(path_, what + " appears twice");
    by_name_.emplace(info.name, tensors_.size());
    tensors_.push_back(std::move(info));
  }
  const std::uint64_t data_start = (r.at + alignment_ - 1) / alignment_ * alignment_;
  if (!tensors_.empty() && data_start > size_) fail(path_, "truncated before the tensor data");
  for (auto& t : tensors_) {
    if (t.offset % alignment_ != 0)
      fail(path_, "tensor '" + t.name + "': offset not aligned to " + std::to_string(alignment_));
    if (t.offset > size_ - data_start || t.bytes > size_ - data_start - t.offset)
      fail(path_, "tensor '" + t.name + "': data (" + std::to_string(t.bytes) +
                      " bytes at offset " + std::to_string(t.offset) +
                      ") extends past the end of the file (truncated?)");
    t.data = base_ + data_start + t.offset;
  }
}

bool gguf_file::has(std::string_view key) const { return kv_.find(key) != kv_.end(); }
const gguf_value* gguf_file::find(std::string_view key) const {
  const auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

namespace {
const gguf_value& need_key(const gguf_file& f, std::string_view key) {
  const gguf_value* v = f.find(key);
  if (!v) fail(f.path(), "missing key '" + std::string(key) + "'");
  return *v;
}
[[noreturn]] void wrong_type(const gguf_file& f, std::string_view key, const gguf_value& v,
                             const char* want) {
  fail(f.path(),
       "key '" + std::string(key) + "' is " + value_type_name(v.type) + ", expected " + want);
}
bool is_integer(value_type t) {
  return scalar_bytes(t) != 0 && !is_float(t) && t != value_type::boolean;
}
}  // namespace

std::string gguf_file::get_string(std::string_view key) const {
  const gguf_value& v = need_key(*this, key);
  if (v.type != value_type::string) wrong_type(*this, key, v, "a string");
  return v.s;
}
std::uint64_t gguf_file::get_u64(std::string_view key) const {
  const gguf_value& v = need_key(*this, key);
  if (!is_integer(v.type)) wrong_type(*this, key, v, "an integer");
  if (v.type != value_type::u64 && v.i < 0)
    fail(path_, "key '" + std::string(key) + "' is negative (" + std::to_string(v.i) + ")");
  return std::uint64_t(v.i);
}
std::uint32_t gguf_file::get_u32(std::string_view key) const {
  const std::uint64_t u = get_u64(key);
  if (u > std::numeric_limits<std::uint32_t>::max())
    fail(path_, "key '" + std::string(key) + "' is out of range (" + std::to_string(u) + ")");
  return std::uint32_t(u);
}
float gguf_file::get_f32(std::string_view key) const {
  const gguf_value& v = need_key(*this, key);
  if (is_float(v.type)) return float(v.f);
  if (is_integer(v.type)) return float(v.i);
  wrong_type(*this, key, v, "a number");
}
bool gguf_file::get_bool(std::string_view key) const {
  const gguf_value& v = need_key(*this, key);
  if (v.type != value_type::boolean) wrong_type(*this, key, v, "a bool");
  return v.i != 0;
}
std::uint32_t gguf_file::get_u32_or(std::string_view key, std::uint32_t fallback) const {
  return has(key) ? get_u32(key) : fallback;
}
float gguf_file::get_f32_or(std::string_view key, float fallback) const {
  return has(key) ? get_f32(key) : fallback;
}
std::string gguf_file::get_string_or(std::string_view key, std::string fallback) const {
  return has(key) ? get_string(key) : fallback;
}
const std::vector<std::string>& gguf_file::get_strings(std::string_view key) const {
  const gguf_value& v = need_key(*this, key);
  if (v.type != value_type::array || v.element_type != value_type::string)
    wrong_type(*this, key, v, "an array of strings");
  return v.strings;
}
const std::vector<double>& gguf_file::get_floats(std::string_view key) const {
  const gguf_value& v = need_key(*this, key);
  if (v.type != value_type::array || !is_float(v.element_type))
    wrong_type(*this, key, v, "an array of floats");
  return v.floats;
}
const std::vector<std::int64_t>& gguf_file::get_ints(std::string_view key) const {
  const gguf_value& v = need_key(*this, key);
  if (v.type != value_type::array || v.floats.size() != 0 || v.element_type == value_type::string ||
      is_float(v.element_type))
    wrong_type(*this, key, v, "an array of integers");
  return v.ints;
}
const gguf_tensor* gguf_file::find_tensor(std::string_view name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}
const gguf_tensor& gguf_file::tensor(std::string_view name) const {
  const gguf_tensor* t = find_tensor(name);
  if (!t) fail(path_, "no tensor '" + std::string(name) + "'");
  return *t;
}

}  // namespace kfuse::llm
