// The f32 conv2d tests of conv2d_f32_test.cpp for the NCHW layout (one layout per
// executable keeps each test TU's compile time down).
#define CONV_TEST_LAYOUT kfuse::nchw
#include "kernels/conv/conv2d_f32_test.cpp"
