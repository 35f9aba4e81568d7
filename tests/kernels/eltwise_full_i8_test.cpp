// eltwise full product (label full) for i8 inputs.
#include "kernels/eltwise_full.hpp"

TEST_CASE("eltwise full: i8 input x every stage x every output type", "[eltwise][full]") {
  kt::full_product<std::int8_t>();
}
