# int8_accuracy: a model's calibrated int8 plan (arch generic: int8 arithmetic on any CPU)
# against its f32 plan (scripts/int8_accuracy.sh runs it on the benchmark models). Needs the
# ONNX importer.
if(TARGET kfuse_onnx)
  add_executable(int8_accuracy int8_accuracy.cpp)
  kfuse_arch_flags(native flags)
  target_compile_options(int8_accuracy PRIVATE ${flags})
  target_link_libraries(int8_accuracy PRIVATE kfuse::kfuse kfuse::onnx)
endif()
