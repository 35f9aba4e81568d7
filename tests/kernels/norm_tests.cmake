# Normalization and reduction kernels: softmax, layer_norm / rms_norm, batch_norm, reduce. One TU per kernel family
# (each well under a minute at -O1). CI archs: generic, avx2, avx512_bf16; the others under full.
kfuse_arch_set(width_ci norm_ci_archs)
foreach(t softmax norm batch_norm)
  kfuse_add_arch_test(kernels_${t} SOURCES kernels/${t}_test.cpp CI_ARCHS ${norm_ci_archs}
                      SANITIZE full)
endforeach()
kfuse_add_arch_test(kernels_reduce SOURCES kernels/reduce_test.cpp CI_ARCHS ${norm_ci_archs}
                    SANITIZE ci)  # index walks over any axes
# The softmax and norm tests' 8 MiB outputs take the streaming-store path on every machine (by
# default it starts at a quarter of the machine's L3: simd/stream.hpp).
foreach(t softmax norm)
  foreach(arch IN LISTS archs)
    kfuse_set_discovered(kernels_${t}_${arch} ENVIRONMENT KFUSE_STREAM_MIN_BYTES=8388608)
  endforeach()
endforeach()
