// eltwise full product (label full) for u8 inputs.
#include "kernels/eltwise_full.hpp"

TEST_CASE("eltwise full: u8 input x every stage x every output type", "[eltwise][full]") {
  kt::full_product<std::uint8_t>();
}
