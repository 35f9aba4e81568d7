// The scalar build of the kernels (flags: src/llm/CMakeLists.txt).
#define KFUSE_LLM_TIER_NAME "scalar"
#define KFUSE_LLM_TABLE scalar_kernels
#include "kernels_body.hpp"
