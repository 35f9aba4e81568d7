# kfuse::onnx (the importer, a compiled component: present when KFUSE_ONNX is ON). The model
# tests run real PyTorch exports (tests/onnx/models, committed, a few KB each) against
# PyTorch's outputs; the errors test builds bad models in code; the fuzz test damages the real
# ones. They compile plans through the tests' plan compiler instance, so one arch only.
if(TARGET kfuse_onnx)
  kfuse_arch_set(host onnx_host)
  foreach(t importer importer_errors importer_fuzz conformance)
    kfuse_add_arch_test(onnx_${t} SOURCES onnx/${t}_test.cpp LABELS "ci" ARCHS ${onnx_host})
  endforeach()
  foreach(arch IN LISTS onnx_host)
    foreach(t importer importer_errors importer_fuzz conformance)
      if(TARGET onnx_${t}_${arch})
        target_link_libraries(onnx_${t}_${arch} PRIVATE kfuse::onnx)
        target_compile_definitions(onnx_${t}_${arch} PRIVATE
                                   KFUSE_ONNX_TEST_MODELS="${CMAKE_CURRENT_SOURCE_DIR}/onnx/models")
      endif()
    endforeach()
    foreach(t importer_errors conformance)  # they build or edit ModelProtos themselves
      if(TARGET onnx_${t}_${arch})
        target_link_libraries(onnx_${t}_${arch} PRIVATE onnx_proto)
      endif()
    endforeach()
  endforeach()
endif()
