// eltwise full product (label full) for bf16 inputs.
#include "kernels/eltwise_full.hpp"

TEST_CASE("eltwise full: bf16 input x every stage x every output type", "[eltwise][full]") {
  kt::full_product<kfuse::bf16_t>();
}
