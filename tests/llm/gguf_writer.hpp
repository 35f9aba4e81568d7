#pragma once
// A small GGUF v3 writer for the tests: metadata of every value type and tensors given as raw
// bytes, so tests build the files they read (tiny models, damaged headers) themselves.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kfuse/llm/gguf.hpp"

namespace kfuse::llm::test {

class gguf_writer {
 public:
  void u32(const std::string& key, std::uint32_t v) { scalar(key, value_type::u32, v); }
  void i32(const std::string& key, std::int32_t v) { scalar(key, value_type::i32, v); }
  void f32(const std::string& key, float v) { scalar(key, value_type::f32, v); }
  void boolean(const std::string& key, bool v) {
    scalar(key, value_type::boolean, std::uint8_t(v));
  }
  void string(const std::string& key, const std::string& v) {
    put_string(kv_, key);
    put(kv_, std::uint32_t(value_type::string));
    put_string(kv_, v);
    ++n_kv_;
  }
  void strings(const std::string& key, const std::vector<std::string>& v) {
    array_header(key, value_type::string, v.size());
    for (const auto& s : v) put_string(kv_, s);
  }
  void floats(const std::string& key, const std::vector<float>& v) {
    array_header(key, value_type::f32, v.size());
    for (float f : v) put(kv_, f);
  }
  void ints(const std::string& key, const std::vector<std::int32_t>& v) {
    array_header(key, value_type::i32, v.size());
    for (auto i : v) put(kv_, i);
  }
  /// A tensor of `type` with ggml dims (dims[0] contiguous) and its encoded bytes.
  void tensor(const std::string& name, std::uint32_t type, std::vector<std::int64_t> dims,
              std::vector<std::byte> bytes) {
    tensors_.push_back({name, type, std::move(dims), std::move(bytes)});
  }

  std::vector<std::byte> bytes(std::uint64_t alignment = 32) const {
    std::vector<std::byte> out;
    put(out, std::uint32_t(0x46554747));
    put(out, std::uint32_t(3));
    put(out, std::uint64_t(tensors_.size()));
    put(out, std::uint64_t(n_kv_));
    out.insert(out.end(), kv_.begin(), kv_.end());
    std::uint64_t offset = 0;
    for (const auto& t : tensors_) {
      put_string(out, t.name);
      put(out, std::uint32_t(t.dims.size()));
      for (auto d : t.dims) put(out, d);
      put(out, t.type);
      put(out, offset);
      offset += (t.data.size() + alignment - 1) / alignment * alignment;
    }
    out.resize((out.size() + alignment - 1) / alignment * alignment);
    for (const auto& t : tensors_) {
      out.insert(out.end(), t.data.begin(), t.data.end());
      out.resize((out.size() + alignment - 1) / alignment * alignment);
    }
    return out;
  }

 private:
  struct entry {
    std::string name;
    std::uint32_t type;
    std::vector<std::int64_t> dims;
    std::vector<std::byte> data;
  };
  template <class T>
  static void put(std::vector<std::byte>& out, T v) {
    const auto at = out.size();
    out.resize(at + sizeof(T));
    std::memcpy(out.data() + at, &v, sizeof(T));
  }
  static void put_string(std::vector<std::byte>& out, const std::string& s) {
    put(out, std::uint64_t(s.size()));
    const auto at = out.size();
    out.resize(at + s.size());
    std::memcpy(out.data() + at, s.data(), s.size());
  }
  template <class T>
  void scalar(const std::string& key, value_type t, T v) {
    put_string(kv_, key);
    put(kv_, std::uint32_t(t));
    put(kv_, v);
    ++n_kv_;
  }
  void array_header(const std::string& key, value_type elem, std::size_t n) {
    put_string(kv_, key);
    put(kv_, std::uint32_t(value_type::array));
    put(kv_, std::uint32_t(elem));
    put(kv_, std::uint64_t(n));
    ++n_kv_;
  }
  std::vector<std::byte> kv_;
  std::uint64_t n_kv_ = 0;
  std::vector<entry> tensors_;
};

/// f32 values as bytes (the F32 tensor type).
inline std::vector<std::byte> f32_bytes(const std::vector<float>& v) {
  std::vector<std::byte> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace kfuse::llm::test
