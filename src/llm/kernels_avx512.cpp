// The avx512_vnni build of the kernels (flags: src/llm/CMakeLists.txt).
#define KFUSE_LLM_TIER_NAME "avx512_vnni"
#define KFUSE_LLM_TABLE avx512_kernels
#include "kernels_body.hpp"
