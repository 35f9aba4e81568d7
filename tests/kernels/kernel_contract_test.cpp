// The kernel contract (kernels/kernel_contract.hpp, kernels/workspace.hpp): gemm, conv2d,
// depthwise, pool2d, softmax and the norms meet the concept; the contract forms of gemm, softmax
// and the norms equal their plain functions; can_implement answers without throwing; the workspace
// form of run() gives bitwise the results of the convenience form on every path that uses scratch
// (conv2d NCHW band and panel, NHWC chunked rows, depthwise NCHW, pool2d NCHW), on 1 and 2 threads,
// from a poisoned or reused workspace; a workspace that is too small, misaligned or null is an
// error naming the kernel; fewer slots than threads means fewer threads, not a shared slot.
#include <cstddef>
#include <cstring>

#include "support/test_support.hpp"

using namespace kt;
using kfuse::conv_shape;
using kfuse::dims4;
using kfuse::pool_shape;

namespace {

using A = test_arch;
using conv_f32_nchw = kfuse::conv2d<kfuse::f32, kfuse::nchw, A>;
using conv_f32_nhwc = kfuse::conv2d<kfuse::f32, kfuse::nhwc, A>;
using conv_bf16_nchw = kfuse::conv2d<kfuse::bf16, kfuse::nchw, A>;
using dw_f32_nchw = kfuse::depthwise_conv2d<kfuse::f32, kfuse::nchw, A>;
using pool_f32_nchw = kfuse::pool2d<kfuse::f32, kfuse::nchw, A>;
using gemm_f32 = kfuse::gemm<kfuse::f32, A>;

static_assert(kfuse::kernel_contract<conv_f32_nchw>);
static_assert(kfuse::kernel_contract<conv_f32_nhwc>);
static_assert(kfuse::kernel_contract<conv_bf16_nchw>);
static_assert(kfuse::kernel_contract<dw_f32_nchw>);
static_assert(kfuse::kernel_contract<kfuse::depthwise_conv2d<kfuse::i8, kfuse::nhwc, A>>);
static_assert(kfuse::kernel_contract<pool_f32_nchw>);
static_assert(kfuse::kernel_contract<kfuse::pool2d<kfuse::u8, kfuse::nhwc, A>>);
static_assert(kfuse::kernel_contract<gemm_f32>);
static_assert(kfuse::kernel_contract<kfuse::softmax_kernel<A>>);
static_assert(kfuse::kernel_contract<kfuse::norm_kernel<false, A>>);
static_assert(kfuse::kernel_contract<kfuse::norm_kernel<true, A>>);

conv_shape conv_case(index_t n, index_t c, index_t h, index_t w, index_t k, index_t r,
                     index_t stride, index_t pad, index_t groups = 1) {
  conv_shape s;
  s.n = n, s.c = c, s.h = h, s.w = w, s.k = k, s.r = r, s.s = r;
  s.stride_h = s.stride_w = stride;
  s.pad_top = s.pad_left = s.pad_bottom = s.pad_right = pad;
  s.groups = groups;
  return s;
}

template <class T>
std::vector<T> random_values(index_t n, std::mt19937& rng) {
  std::vector<T> v(static_cast<std::size_t>(n));
  fill_random(v.data(), n, rng, -2.f, 2.f);
  return v;
}

/// The convenience form, then the workspace form on 1 and 2 threads from a poisoned workspace
/// and again from the same one: every output bitwise equal.
template <class K, class TX>
void check_conv_paths(const conv_shape& s, std::mt19937& rng) {
  CAPTURE(s.n, s.c, s.h, s.w, s.k, s.r, s.stride_h, s.pad_top, s.groups);
  REQUIRE(K::can_implement(s).ok());
  const auto x = random_values<TX>(kfuse::numel(s.in_dims()), rng);
  const auto w = random_values<float>(s.weight_count(), rng);
  const auto packed = K::initialize(s, w.data());
  const dims4 od = s.out_dims();
  std::vector<float> ref(std::size_t(kfuse::numel(od)), -1.f);
  using in_view = typename K::template view<const TX>;
  using out_view = typename K::template view<float>;
  K::run(in_view{x.data(), s.in_dims()}, packed, out_view{ref.data(), od});
  for (int threads : {1, 2}) {
    kfuse::workspace_buffer ws(K::workspace_size(s, threads));
    std::memset(ws.view().data, 0xA5, ws.bytes());  // poison: the kernel may not trust it
    for (int rep = 0; rep < 2; ++rep) {
      std::vector<float> y(ref.size(), 7.f);
      const kfuse::run_info info =
          K::run(in_view{x.data(), s.in_dims()}, packed, out_view{y.data(), od}, {}, ws,
                 kfuse::run_options{threads});
      CHECK(info.threads <= threads);
      CHECK(std::memcmp(y.data(), ref.data(), ref.size() * sizeof(float)) == 0);
    }
  }
}

}  // namespace

TEST_CASE("kernel contract: can_implement reports without throwing", "[contract]") {
  conv_shape bad = conv_case(1, 3, 8, 8, 4, 3, 1, 0);
  bad.groups = 2;  // 3 channels do not split into 2 groups
  const kfuse::kernel_status st = conv_f32_nchw::can_implement(bad);
  CHECK_FALSE(st.ok());
  CHECK_FALSE(static_cast<bool>(st));
  CHECK(st.reason.find("group") != std::string::npos);
  CHECK(st.reason.rfind("conv2d:", 0) == std::string::npos);  // the kernel's name is not repeated
  CHECK_THROWS_AS(conv_f32_nchw::workspace_size(bad, 1), kfuse::error);
  CHECK(conv_f32_nchw::can_implement(conv_case(1, 3, 8, 8, 4, 3, 1, 1)).ok());
  CHECK_FALSE(dw_f32_nchw::can_implement(conv_case(1, 4, 8, 8, 8, 3, 1, 1)).ok());  // not dw
  const auto ps = pool_shape::of({1, 2, 4, 4}, {.kind = kfuse::pool_kind::max, .r = 9, .s = 9});
  CHECK_FALSE(pool_f32_nchw::can_implement(ps).ok());  // window larger than the padded input
  CHECK_FALSE(gemm_f32::can_implement({-1, 4, 4}).ok());
  CHECK(gemm_f32::can_implement({3, 4, 5}).ok());
  CHECK(gemm_f32::workspace_size({3, 4, 5}, 8) == 0);
}

TEST_CASE("kernel contract: conv2d workspace form equals the convenience form", "[contract]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(5);
  // f32 NCHW band path (padded, strided, grouped), then unpadded stride 1 (input read in place).
  check_conv_paths<conv_f32_nchw, float>(conv_case(2, 6, 13, 11, 10, 3, 2, 1, 2), rng);
  check_conv_paths<conv_f32_nchw, float>(conv_case(1, 5, 9, 17, 7, 3, 1, 0), rng);
  // NHWC implicit GEMM with padded rows; a weight block over 512 KiB (channel chunks and partial
  // sums in the slot).
  check_conv_paths<conv_f32_nhwc, float>(conv_case(2, 7, 10, 9, 19, 3, 1, 1), rng);
  check_conv_paths<conv_f32_nhwc, float>(conv_case(1, 1100, 5, 5, 8, 3, 1, 1), rng);
  // bf16 NCHW panel path (several panel chunks: partial sums).
  check_conv_paths<conv_bf16_nchw, kfuse::bf16_t>(conv_case(1, 600, 6, 7, 9, 3, 1, 1), rng);
  // the depthwise path of conv2d, and 1x1 (GEMM, no workspace)
  check_conv_paths<conv_f32_nchw, float>(conv_case(2, 8, 12, 10, 8, 5, 2, 2, 8), rng);
  CHECK(conv_f32_nhwc::workspace_size(conv_case(1, 8, 6, 6, 16, 1, 1, 0), 4) == 0);
}

TEST_CASE("kernel contract: depthwise and pool2d NCHW scratch comes from the workspace",
          "[contract]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(9);
  for (const conv_shape& s :
       {conv_case(2, 5, 14, 19, 5, 3, 1, 1, 5), conv_case(1, 3, 9, 8, 3, 5, 2, 2, 3),
        conv_case(1, 2, 1, 1, 2, 3, 1, 1, 2)}) {
    CAPTURE(s.h, s.w, s.r, s.stride_h);
    const auto x = random_values<float>(kfuse::numel(s.in_dims()), rng);
    const auto w = random_values<float>(s.weight_count(), rng);
    const auto p = dw_f32_nchw::initialize(s, w.data());
    std::vector<float> ref(std::size_t(kfuse::numel(s.out_dims())));
    dw_f32_nchw::run(kfuse::view<kfuse::nchw>(x.data(), s.in_dims()), p,
                     kfuse::view<kfuse::nchw>(ref.data(), s.out_dims()));
    REQUIRE(dw_f32_nchw::workspace_size(s, 1) > 0);
    for (int threads : {1, 2}) {
      kfuse::workspace_buffer ws(dw_f32_nchw::workspace_size(s, threads));
      std::memset(ws.view().data, 0, ws.bytes());  // zeros: must not look like a filled slot
      for (int rep = 0; rep < 3; ++rep) {          // later calls reuse the zeroed padding
        std::vector<float> y(ref.size(), 3.f);
        dw_f32_nchw::run(kfuse::view<kfuse::nchw>(x.data(), s.in_dims()), p,
                         kfuse::view<kfuse::nchw>(y.data(), s.out_dims()), {}, ws,
                         kfuse::run_options{threads});
        CHECK(std::memcmp(y.data(), ref.data(), ref.size() * sizeof(float)) == 0);
      }
    }
  }
  for (auto kind : {kfuse::pool_kind::max, kfuse::pool_kind::avg}) {
    // stride 3: the phases path, whose scratch is poisoned
    const auto ps = pool_shape::of({2, 3, 11, 13}, {.kind = kind,
                                                    .r = 3,
                                                    .s = 3,
                                                    .stride_h = 3,
                                                    .stride_w = 3,
                                                    .pad_top = 1,
                                                    .pad_left = 1,
                                                    .pad_bottom = 1,
                                                    .pad_right = 1});
    const auto x = random_values<float>(kfuse::numel(ps.in_dims()), rng);
    std::vector<float> ref(std::size_t(kfuse::numel(ps.out_dims())));
    pool_f32_nchw::run(kfuse::view<kfuse::nchw>(x.data(), ps.in_dims()), ps,
                       kfuse::view<kfuse::nchw>(ref.data(), ps.out_dims()));
    const auto packed = pool_f32_nchw::initialize(ps);
    kfuse::workspace_buffer ws(pool_f32_nchw::workspace_size(ps, 2));
    REQUIRE(ws.bytes() > 0);
    std::memset(ws.view().data, 0xFF, ws.bytes());
    std::vector<float> y(ref.size());
    pool_f32_nchw::run(kfuse::view<kfuse::nchw>(x.data(), ps.in_dims()), packed,
                       kfuse::view<kfuse::nchw>(y.data(), ps.out_dims()), {}, ws,
                       kfuse::run_options{2});
    CHECK(std::memcmp(y.data(), ref.data(), ref.size() * sizeof(float)) == 0);
    // NHWC and global pooling need no workspace.
    CHECK(kfuse::pool2d<kfuse::f32, kfuse::nhwc, A>::workspace_size(ps, 4) == 0);
  }
}

TEST_CASE("kernel contract: a bad workspace is an error naming the kernel", "[contract]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(3);
  const conv_shape s = conv_case(1, 4, 10, 10, 4, 3, 1, 1, 4);
  const auto x = random_values<float>(kfuse::numel(s.in_dims()), rng);
  const auto w = random_values<float>(s.weight_count(), rng);
  const auto p = dw_f32_nchw::initialize(s, w.data());
  std::vector<float> y(std::size_t(kfuse::numel(s.out_dims())));
  auto run = [&](kfuse::workspace ws, int threads = 1) {
    return dw_f32_nchw::run(kfuse::view<kfuse::nchw>(x.data(), s.in_dims()), p,
                            kfuse::view<kfuse::nchw>(y.data(), s.out_dims()), {}, ws,
                            kfuse::run_options{threads});
  };
  const std::size_t one = dw_f32_nchw::workspace_size(s, 1);
  kfuse::workspace_buffer big(2 * one);
  try {
    run({big.view().data, one - 64});
    FAIL("a too small workspace was accepted");
  } catch (const kfuse::error& e) {
    const std::string m = e.what();
    CHECK(m.rfind("depthwise_conv2d: workspace of ", 0) == 0);
    CHECK(m.find(std::to_string(one)) != std::string::npos);
  }
  CHECK_THROWS_AS(run({nullptr, one}), kfuse::error);
  CHECK_THROWS_AS(run({big.view().data + 4, one}), kfuse::error);  // misaligned
  // One slot, two threads asked: it runs, on one thread.
  CHECK(run({big.view().data, one}, 2).threads == 1);
  // conv2d NCHW band path: too small.
  const conv_shape d = conv_case(1, 3, 12, 12, 8, 3, 1, 1);
  const auto wd = random_values<float>(d.weight_count(), rng);
  const auto pd = conv_f32_nchw::initialize(d, wd.data());
  const auto xd = random_values<float>(kfuse::numel(d.in_dims()), rng);
  std::vector<float> yd(std::size_t(kfuse::numel(d.out_dims())));
  CHECK_THROWS_WITH(
      conv_f32_nchw::run(kfuse::view<kfuse::nchw>(xd.data(), d.in_dims()), pd,
                         kfuse::view<kfuse::nchw>(yd.data(), d.out_dims()), {}, kfuse::workspace{}),
      Catch::Contains("conv2d: workspace of 0 bytes"));
}

TEST_CASE("kernel contract: gemm, softmax and norms through their contract forms", "[contract]") {
  if (!cpu_can_run()) return;
  std::mt19937 rng(11);
  const index_t M = 5, K = 19, N = 23;
  const auto a = random_values<float>(M * K, rng), b = random_values<float>(K * N, rng);
  const auto w = gemm_f32::initialize({M, K, N}, b.data(), kfuse::b_layout::kn);
  std::vector<float> c1(std::size_t(M * N)), c2(c1.size());
  gemm_f32::run(a.data(), M, K, w, c1.data(), N);
  gemm_f32::run(kfuse::matrix_view<const float>{a.data(), {M, K}}, w,
                kfuse::matrix_view<float>{c2.data(), {M, N}}, {}, kfuse::workspace{});
  CHECK(c1 == c2);
  CHECK_THROWS_AS(
      gemm_f32::run(kfuse::matrix_view<const float>{a.data(), {M, K - 1}}, w,
                    kfuse::matrix_view<float>{c2.data(), {M, N}}, {}, kfuse::workspace{}),
      kfuse::error);

  using sm = kfuse::softmax_kernel<A>;
  sm::problem sp;
  sp.rank = 3, sp.shape[0] = 2, sp.shape[1] = 7, sp.shape[2] = 5, sp.axis = 1;
  const auto x = random_values<float>(70, rng);
  std::vector<float> s1(70), s2(70);
  const index_t shape[3] = {2, 7, 5};
  kfuse::softmax<A>(x.data(), s1.data(), shape, 1);
  sm::run(kfuse::flat_view<const float>{x.data(), 70}, sm::initialize(sp),
          kfuse::flat_view<float>{s2.data(), 70}, {}, {});
  CHECK(s1 == s2);
  sp.axis = 3;
  CHECK_FALSE(sm::can_implement(sp).ok());

  using ln = kfuse::norm_kernel<false, A>;
  const auto g = random_values<float>(10, rng), bt = random_values<float>(10, rng);
  std::vector<float> n1(70), n2(70);
  kfuse::layer_norm<A>(x.data(), n1.data(), 7, 10, kfuse::layer_norm_params{g, bt, 1e-5f});
  ln::run(kfuse::matrix_view<const float>{x.data(), {7, 10}}, ln::initialize({7, 10}, g, bt, 1e-5f),
          kfuse::matrix_view<float>{n2.data(), {7, 10}}, {}, {});
  CHECK(n1 == n2);
  CHECK_THROWS_AS(ln::initialize({7, 10}, std::span<const float>(g.data(), 9), {}, 1e-5f),
                  kfuse::error);
  using rms = kfuse::norm_kernel<true, A>;
  CHECK_THROWS_AS(rms::initialize({7, 10}, g, bt, 1e-5f), kfuse::error);  // rms takes no beta
}
