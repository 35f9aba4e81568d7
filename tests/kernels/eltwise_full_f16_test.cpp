// eltwise full product (label full) for f16 inputs.
#include "kernels/eltwise_full.hpp"

TEST_CASE("eltwise full: f16 input x every stage x every output type", "[eltwise][full]") {
  kt::full_product<kfuse::f16_t>();
}
