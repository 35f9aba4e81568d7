// The store of a finished register tile (kernels/register_tile.hpp): a run-time chain of the
// common form (per-channel mul, bias, add, relu / clamp / hardswish / gelu / silu), alone or
// followed by an int8 output's quantize, runs in one pass over the registers and must give
// what the same chain gives stage by stage on a saved tile (bitwise, except the roundings of
// rounds_differently), for every value (NaN, -0, infinities), tail and channel walk. Also which
// chains graph_ops::with_shape finds common, and that a chain without stages counts as the identity
// (is_identity).
#include "kfuse/kernels/register_tile.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "kfuse/graph/ops/chain.hpp"
#include "support/test_support.hpp"

using namespace kt;
using kfuse::common_form;
using kfuse::stage_kind;
namespace go = kfuse::graph_ops;

namespace {

go::chain_list list_of(std::initializer_list<go::chain_stage> stages) {
  go::chain_list l;
  for (const go::chain_stage& s : stages) l.stages[l.count++] = s;
  return go::with_shape(l);
}
go::chain_stage st(stage_kind k, int operand = -1, float p0 = 0.f, float p1 = 0.f,
                   bool per_channel = false) {
  go::chain_stage s;
  s.kind = k;
  s.operand = std::int8_t(operand);
  s.p0 = p0;
  s.p1 = p1;
  s.per_channel = per_channel;
  return s;
}

/// Random values with the special ones mixed in.
void fill_special(float* p, std::size_t n, std::mt19937& rng) {
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {
      std::numeric_limits<float>::quiet_NaN(), -0.f, 0.f, inf, -inf, -3.f, 3.f, 1e30f, -1e30f};
  fill_random(p, index_t(n), rng, -8.f, 8.f);
  for (std::size_t i = 0; i < n; i += 5) p[i] = specials[(i / 5) % std::size(specials)];
}

/// Where the common form may round differently from the stages: a scale and a bias are one FMA
/// (one rounding instead of two: within 2e-6 relative, or absolute below 1), and SiLU before a
/// quantize uses the coarse exp2 (8e-5 relative: at most one quantization step).
template <class Out>
bool rounds_differently(const go::chain_list& l) {
  const go::chain_shape& f = l.shape;
  const bool fma = f.scale >= 0 && f.bias >= 0;
  return fma || (!std::is_same_v<Out, float> && f.kind == common_form::act::silu);
}

/// The same tile stored through the common form and stage by stage: bitwise equal, or as close
/// as rounds_differently says. Out = uint8_t
/// or int8_t adds the plan's quantize<E> of an int8 output after the chain.
template <class V, bool PerLane, int Rows, int NV, class Out = float>
void check_tile(const go::chain_list& common, index_t valid, index_t ch_step, std::mt19937& rng) {
  constexpr int L = V::lanes;
  constexpr bool quantized = !std::is_same_v<Out, float>;
  const index_t ld = NV * L + 3, flat0 = 5, ch0 = 2;
  const std::size_t span = std::size_t(flat0 + Rows * ld + 8);
  std::vector<float> acc_vals(std::size_t(Rows * NV * L)), bias(std::size_t(ch0 + Rows + NV * L)),
      scale(bias.size()), addend(span);
  fill_special(acc_vals.data(), acc_vals.size(), rng);
  fill_special(bias.data(), bias.size(), rng);
  fill_special(scale.data(), scale.size(), rng);
  fill_special(addend.data(), addend.size(), rng);
  V acc[Rows][NV];
  for (int r = 0; r < Rows; ++r)
    for (int j = 0; j < NV; ++j)
      acc[r][j] = kfuse::simd::load<V>(acc_vals.data() + (r * NV + j) * L);

  go::chain_list general = common;
  general.shape = {};  // act::other: the stage-by-stage path
  const Out poison = quantized ? Out(77) : Out(777.f);
  std::vector<Out> fast(span, poison), slow(span, poison);
  const auto run = [&](const go::chain_list& l, std::vector<Out>& out) {
    const go::chain c{&l, {bias.data(), addend.data(), scale.data()}};
    if constexpr (quantized) {
      using E = kfuse::elem_of<Out>;
      // zero point 3 and scale 0.05: the values above cover the whole range and saturate
      const kfuse::quantize<E> q{kfuse::quant_params{0.05f, 3}};
      kfuse::detail::store_tile<PerLane>(acc, out.data() + flat0, ld, flat0, ld, ch0, valid,
                                         kfuse::epilogue<go::chain, kfuse::quantize<E>>{c, q},
                                         ch_step);
    } else {
      kfuse::detail::store_tile<PerLane>(acc, out.data() + flat0, ld, flat0, ld, ch0, valid,
                                         kfuse::epilogue<go::chain>{c}, ch_step);
    }
  };
  run(common, fast);
  run(general, slow);
  if (!rounds_differently<Out>(common)) {
    CHECK(std::memcmp(fast.data(), slow.data(), span * sizeof(Out)) == 0);
  } else {
    for (std::size_t i = 0; i < span; ++i) {
      INFO("at " << i << ": common form " << double(fast[i]) << ", stage by stage "
                 << double(slow[i]));
      if constexpr (quantized) {
        CHECK(std::abs(int(fast[i]) - int(slow[i])) <= 1);
      } else if (std::isnan(slow[i]) || std::isinf(slow[i])) {
        CHECK(std::memcmp(&fast[i], &slow[i], sizeof(Out)) == 0);
      } else {
        CHECK(std::abs(fast[i] - slow[i]) <= 2e-6f * std::max(1.f, std::abs(slow[i])));
      }
    }
  }
  for (int r = 0; r < Rows; ++r)  // past `valid`: untouched
    for (index_t col = valid; col < ld; ++col)
      CHECK(fast[std::size_t(flat0 + r * ld + col)] == poison);
}

template <class V>
void check_all(std::mt19937& rng) {
  const float inf = std::numeric_limits<float>::infinity();
  const go::chain_list chains[] = {
      list_of({}),
      list_of({st(stage_kind::bias, 0)}),
      list_of({st(stage_kind::bias, 0), st(stage_kind::relu)}),
      list_of({st(stage_kind::bias, 0), st(stage_kind::add, 1)}),
      list_of({st(stage_kind::bias, 0), st(stage_kind::add, 1), st(stage_kind::relu)}),
      list_of({st(stage_kind::add, 0, 0, 0, true), st(stage_kind::clamp, -1, -1.f, 2.f)}),
      list_of({st(stage_kind::bias, 0), st(stage_kind::clamp, -1, 0.f, inf)}),
      list_of({st(stage_kind::bias, 0), st(stage_kind::hardswish)}),
      list_of({st(stage_kind::add, 1), st(stage_kind::hardswish)}),
      list_of({st(stage_kind::relu)}),
      // int8 kernels' dequantization scale first (operand 2: a third per-channel array)
      list_of({st(stage_kind::mul, 2, 0, 0, true), st(stage_kind::bias, 0), st(stage_kind::relu)}),
      list_of({st(stage_kind::mul, 2, 0, 0, true), st(stage_kind::bias, 0), st(stage_kind::add, 1),
               st(stage_kind::hardswish)}),
      list_of({st(stage_kind::bias, 0), st(stage_kind::gelu_erf)}),
      list_of(
          {st(stage_kind::mul, 2, 0, 0, true), st(stage_kind::bias, 0), st(stage_kind::gelu_erf)}),
      list_of({st(stage_kind::add, 1), st(stage_kind::gelu_tanh)}),
      list_of({st(stage_kind::bias, 0), st(stage_kind::add, 1), st(stage_kind::silu)}),
      list_of({st(stage_kind::mul, 2, 0, 0, true), st(stage_kind::bias, 0), st(stage_kind::silu)}),
  };
  for (const go::chain_list& l : chains) {
    REQUIRE(l.shape.kind != common_form::act::other);
    constexpr int L = V::lanes;
    for (index_t valid : {index_t(2 * L), index_t(2 * L - 1), index_t(1)}) {
      INFO("chain of " << l.count << " stages, valid " << valid);
      check_tile<V, true, 3, 2>(l, valid, 1, rng);
      check_tile<V, false, 3, 2>(l, valid, 1, rng);
      check_tile<V, false, 3, 2>(l, valid, 0, rng);
      check_tile<V, true, 1, 2>(l, valid, 1, rng);
      check_tile<V, true, 3, 2, std::uint8_t>(l, valid, 1, rng);
      check_tile<V, false, 3, 2, std::int8_t>(l, valid, 0, rng);
    }
  }
}

}  // namespace

TEST_CASE("register tile: a common-form chain stored inline equals the chain stage by stage",
          "[kernels][register_tile]") {
  std::mt19937 rng(11);
  SECTION("generic") {
    check_all<kfuse::simd::vec_for<kfuse::arch::generic, kfuse::backend::xsimd>>(rng);
  }
  if (!cpu_can_run()) return;
  for_each_backend([&](auto b) { check_all<kfuse::simd::vec_for<test_arch, decltype(b)>>(rng); });
}

TEST_CASE("register tile: which chains are of the common form", "[kernels][register_tile]") {
  using act = common_form::act;
  const go::chain_list hs =
      list_of({st(stage_kind::bias, 1), st(stage_kind::add, 0), st(stage_kind::hardswish)});
  CHECK(hs.shape.kind == act::hardswish);
  CHECK(hs.shape.bias == 1);
  CHECK(hs.shape.addend == 0);
  CHECK(hs.shape.scale == -1);
  const go::chain_list dq =
      list_of({st(stage_kind::mul, 2, 0, 0, true), st(stage_kind::bias, 0), st(stage_kind::relu)});
  CHECK(dq.shape.kind == act::clamp);
  CHECK(dq.shape.scale == 2);
  CHECK(dq.shape.bias == 0);
  CHECK(list_of({st(stage_kind::bias, 0), st(stage_kind::gelu_erf)}).shape.kind == act::gelu_erf);
  CHECK(list_of({st(stage_kind::gelu_tanh)}).shape.kind == act::gelu_tanh);
  CHECK(list_of({st(stage_kind::add, 1), st(stage_kind::silu)}).shape.kind == act::silu);
  const go::chain_list cl = list_of({st(stage_kind::clamp, -1, -1.f, 6.f)});
  CHECK(cl.shape.kind == act::clamp);
  CHECK(cl.shape.bias == -1);
  CHECK(cl.shape.lo == -1.f);
  CHECK(cl.shape.hi == 6.f);
  // Another order, another stage or one stage too many: the stage-by-stage path.
  CHECK(list_of({st(stage_kind::relu), st(stage_kind::bias, 0)}).shape.kind == act::other);
  CHECK(list_of({st(stage_kind::add, 1), st(stage_kind::bias, 0)}).shape.kind == act::other);
  CHECK(list_of({st(stage_kind::bias, 0), st(stage_kind::mul, 1)}).shape.kind == act::other);
  CHECK(list_of({st(stage_kind::mul, 1), st(stage_kind::bias, 0)}).shape.kind == act::other);
  CHECK(list_of({st(stage_kind::bias, 0), st(stage_kind::mul, 1, 0, 0, true)}).shape.kind ==
        act::other);
  CHECK(list_of({st(stage_kind::bias, 0), st(stage_kind::sigmoid)}).shape.kind == act::other);
  CHECK(list_of({st(stage_kind::relu), st(stage_kind::relu)}).shape.kind == act::other);
  CHECK(
      list_of({st(stage_kind::bias, 0), st(stage_kind::relu), st(stage_kind::add, 1)}).shape.kind ==
      act::other);
  CHECK(list_of({st(stage_kind::add, 0, 0, 0, true), st(stage_kind::add, 1, 0, 0, true)})
            .shape.kind == act::other);
}

TEST_CASE("a run-time chain without stages is the identity: kernels run without it",
          "[kernels][register_tile]") {
  const go::chain_list none = list_of({});
  const go::chain_list relu = list_of({st(stage_kind::relu)});
  go::chain c;
  c.list = &none;
  CHECK(kfuse::is_identity(kfuse::epilogue<go::chain>{c}));
  c.list = &relu;
  CHECK_FALSE(kfuse::is_identity(kfuse::epilogue<go::chain>{c}));
  CHECK(kfuse::is_identity(kfuse::epilogue<>{}));
  CHECK_FALSE(kfuse::is_identity(kfuse::epilogue<kfuse::relu>{}));
}
