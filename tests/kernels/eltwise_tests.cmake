# eltwise (kernels/eltwise.hpp) runs in CI on the generic, avx2 and avx512_bf16 vector code (~60 s
# per TU): avx2_vnni compiles avx2's vector code and avx512 / avx512_vnni avx512_bf16's, so those
# three run under full, and so does sse4 (128-bit: CI's budget; its unit tests and the x86-64-v2
# examples of the -march matrix stay in CI).
kfuse_arch_set(eltwise_full_only eltwise_same_code)
set(eltwise_ci_archs ${archs})
list(REMOVE_ITEM eltwise_ci_archs ${eltwise_same_code})
kfuse_add_arch_test(kernels_eltwise SOURCES kernels/eltwise_test.cpp CI_ARCHS ${eltwise_ci_archs}
                    LABELS smoke SANITIZE ci)
# Every stage for every input dtype, one TU per dtype: the whole product, under full.
foreach(in f32 f16 bf16 i8 u8)
  kfuse_add_arch_test(kernels_eltwise_full_${in} SOURCES kernels/eltwise_full_${in}_test.cpp
                      FULL_ONLY)
endforeach()
