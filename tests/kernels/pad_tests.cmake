# pad (kernels/pad.hpp): element moves, no vector code, so one executable for every arch.
kfuse_add_test(kernels_pad SOURCES kernels/pad_test.cpp SANITIZE ci)
