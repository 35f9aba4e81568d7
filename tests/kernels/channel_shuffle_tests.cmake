# channel_shuffle (kernels/channel_shuffle.hpp): element moves, no vector code, so one executable
# for every arch.
kfuse_add_test(kernels_channel_shuffle SOURCES kernels/channel_shuffle_test.cpp )
