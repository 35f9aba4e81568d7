#include "tensor.hpp"

#include <bit>
#include <cstring>
#include <fstream>

#include "kfuse/detail/checks.hpp"

namespace kfuse::onnx::detail {

namespace {

[[noreturn]] void bad(const std::string& what, const std::string& msg) {
  kfuse::detail::fail("onnx", what + ": " + msg);
}

std::size_t elem_bytes(std::int32_t t) {
  switch (t) {
    case elem_float:
    case elem_int32:
    case elem_uint32:
      return 4;
    case elem_uint8:
    case elem_int8:
    case elem_bool:
      return 1;
    case elem_uint16:
    case elem_int16:
    case elem_float16:
    case elem_bfloat16:
      return 2;
    case elem_int64:
    case elem_double:
    case elem_uint64:
      return 8;
    default:
      return 0;
  }
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  std::uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: value = man * 2^-24
      float f = float(man) * 0x1p-24f;
      return sign ? -f : f;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  return std::bit_cast<float>(bits);
}

template <class T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Little-endian bytes of n elements of type t into c.
void from_bytes(const unsigned char* p, std::size_t n, std::int32_t t, const_value& c) {
  const std::size_t b = elem_bytes(t);
  if (c.is_float())
    c.f.resize(n);
  else
    c.i.resize(n);
  for (std::size_t k = 0; k < n; ++k, p += b) {
    switch (t) {
      case elem_float:
        c.f[k] = load<float>(p);
        break;
      case elem_double:
        c.f[k] = float(load<double>(p));
        break;
      case elem_float16:
        c.f[k] = half_to_float(load<std::uint16_t>(p));
        break;
      case elem_bfloat16:
        c.f[k] = std::bit_cast<float>(std::uint32_t(load<std::uint16_t>(p)) << 16);
        break;
      case elem_uint8:
        c.i[k] = load<std::uint8_t>(p);
        break;
      case elem_int8:
        c.i[k] = load<std::int8_t>(p);
        break;
      case elem_bool:
        c.i[k] = load<std::uint8_t>(p) != 0;
        break;
      case elem_uint16:
        c.i[k] = load<std::uint16_t>(p);
        break;
      case elem_int16:
        c.i[k] = load<std::int16_t>(p);
        break;
      case elem_int32:
        c.i[k] = load<std::int32_t>(p);
        break;
      case elem_uint32:
        c.i[k] = load<std::uint32_t>(p);
        break;
      case elem_int64:
        c.i[k] = load<std::int64_t>(p);
        break;
      case elem_uint64:
        c.i[k] = std::int64_t(load<std::uint64_t>(p));
        break;
      default:
        break;
    }
  }
}

// External data: a file next to the model, read within [offset, offset + length).
std::string read_external(const ::onnx::TensorProto& t, const tensor_source& src,
                          const std::string& what, std::size_t want) {
  if (src.base_dir.empty())
    bad(what, "uses external data, which needs the model's folder (load it from a path)");
  std::string location;
  std::int64_t offset = 0, length = -1;
  for (const auto& e : t.external_data()) {
    if (e.key() == "location")
      location = e.value();
    else if (e.key() == "offset" || e.key() == "length") {
      std::int64_t v = 0;
      try {
        std::size_t used = 0;
        v = std::stoll(e.value(), &used);
        if (used != e.value().size()) throw std::invalid_argument("trailing");
      } catch (const std::exception&) {
        bad(what, "external data " + e.key() + " '" + e.value() + "' is not a number");
      }
      if (v < 0) bad(what, "external data " + e.key() + " is negative");
      (e.key() == "offset" ? offset : length) = v;
    }
  }
  if (location.empty()) bad(what, "external data without a location");
  const std::filesystem::path rel(location);
  if (rel.is_absolute()) bad(what, "external data location '" + location + "' is absolute");
  std::error_code ec;
  const auto base = std::filesystem::weakly_canonical(src.base_dir, ec);
  const auto file = std::filesystem::weakly_canonical(src.base_dir / rel, ec);
  if (ec) bad(what, "external data '" + location + "': " + ec.message());
  auto [bi, fi] = std::mismatch(base.begin(), base.end(), file.begin(), file.end());
  if (bi != base.end())
    bad(what, "external data location '" + location + "' escapes the model's folder");
  std::ifstream in(file, std::ios::binary);
  if (!in) bad(what, "cannot open external data file '" + file.string() + "'");
  in.seekg(0, std::ios::end);
  const auto size = std::int64_t(in.tellg());
  if (length < 0) length = size - offset;
  if (offset > size || length > size - offset)
    bad(what, "external data range [" + std::to_string(offset) + ", +" + std::to_string(length) +
                  ") is past the end of '" + location + "' (" + std::to_string(size) + " bytes)");
  if (std::size_t(length) != want)
    bad(what, "external data has " + std::to_string(length) + " bytes, the dims need " +
                  std::to_string(want));
  std::string out(std::size_t(length), '\0');
  in.seekg(offset);
  in.read(out.data(), length);
  if (!in) bad(what, "reading external data '" + location + "' failed");
  return out;
}

}  // namespace

std::vector<index_t> checked_dims(const google::protobuf::RepeatedField<std::int64_t>& dims,
                                  std::size_t max_elems, const std::string& what) {
  std::vector<index_t> shape;
  index_t n = 1;
  for (std::int64_t d : dims) {
    if (d < 0) bad(what, "has a negative dimension " + std::to_string(d));
    if (__builtin_mul_overflow(n, d, &n) || std::size_t(n) > max_elems)
      bad(what, "has too many elements (dims exceed the size limit)");
    shape.push_back(d);
  }
  return shape;
}

const_value decode_tensor(const ::onnx::TensorProto& t, const tensor_source& src,
                          const std::string& what) {
  const_value c;
  c.elem = t.data_type();
  const std::size_t b = elem_bytes(c.elem);
  if (b == 0) bad(what, "has element type " + elem_name(c.elem) + ", which kfuse does not read");
  c.shape = checked_dims(t.dims(), src.max_bytes / b, what);
  const std::size_t n = std::size_t(numel(c.shape));
  if (t.has_data_location() && t.data_location() == ::onnx::TensorProto::EXTERNAL) {
    const std::string bytes = read_external(t, src, what, n * b);
    from_bytes(reinterpret_cast<const unsigned char*>(bytes.data()), n, c.elem, c);
    return c;
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != n * b)
      bad(what, "raw data has " + std::to_string(t.raw_data().size()) + " bytes, dims " +
                    shape_str(c.shape) + " of " + elem_name(c.elem) + " need " +
                    std::to_string(n * b));
    from_bytes(reinterpret_cast<const unsigned char*>(t.raw_data().data()), n, c.elem, c);
    return c;
  }
  auto need = [&](std::size_t have) {
    if (have != n)
      bad(what, "holds " + std::to_string(have) + " values, dims " + shape_str(c.shape) + " need " +
                    std::to_string(n));
  };
  switch (c.elem) {
    case elem_float:
      need(std::size_t(t.float_data_size()));
      c.f.assign(t.float_data().begin(), t.float_data().end());
      break;
    case elem_double:
      need(std::size_t(t.double_data_size()));
      for (double v : t.double_data()) c.f.push_back(float(v));
      break;
    case elem_float16:
    case elem_bfloat16:
      need(std::size_t(t.int32_data_size()));
      for (std::int32_t v : t.int32_data())
        c.f.push_back(c.elem == elem_float16
                          ? half_to_float(std::uint16_t(v))
                          : std::bit_cast<float>(std::uint32_t(std::uint16_t(v)) << 16));
      break;
    case elem_int64:
      need(std::size_t(t.int64_data_size()));
      c.i.assign(t.int64_data().begin(), t.int64_data().end());
      break;
    case elem_uint32:
    case elem_uint64:
      need(std::size_t(t.uint64_data_size()));
      for (std::uint64_t v : t.uint64_data()) c.i.push_back(std::int64_t(v));
      break;
    default:  // int32, int16, int8, uint16, uint8, bool: int32_data
      need(std::size_t(t.int32_data_size()));
      for (std::int32_t v : t.int32_data()) c.i.push_back(c.elem == elem_bool ? v != 0 : v);
      break;
  }
  return c;
}

}  // namespace kfuse::onnx::detail
