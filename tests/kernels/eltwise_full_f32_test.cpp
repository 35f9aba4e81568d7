// eltwise full product (label full) for f32 inputs.
#include "kernels/eltwise_full.hpp"

TEST_CASE("eltwise full: f32 input x every stage x every output type", "[eltwise][full]") {
  kt::full_product<float>();
}
