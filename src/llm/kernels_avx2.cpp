// The avx2 build of the kernels (flags: src/llm/CMakeLists.txt).
#define KFUSE_LLM_TIER_NAME "avx2"
#define KFUSE_LLM_TABLE avx2_kernels
#include "kernels_body.hpp"
