# kfuse::onnx (the importer, a compiled component: present when KFUSE_ONNX is ON). The model
# tests run real PyTorch exports (tests/onnx/models, committed, a few KB each) against
# PyTorch's outputs; the errors test builds bad models in code; the fuzz test damages the real
# ones. They compile plans through the tests' plan compiler instance, so one arch only.
if(TARGET kfuse_onnx)
  kfuse_arch_set(host onnx_host)
  # The importer takes untrusted bytes: its fuzz, error and conformance tests are sanitized.
  foreach(t importer export_qdq)
    kfuse_add_arch_test(onnx_${t} SOURCES onnx/${t}_test.cpp ARCHS ${onnx_host})
  endforeach()
  foreach(t importer_errors importer_fuzz conformance)
    kfuse_add_arch_test(onnx_${t} SOURCES onnx/${t}_test.cpp ARCHS ${onnx_host} SANITIZE ci)
  endforeach()
  foreach(arch IN LISTS onnx_host)
    foreach(t importer importer_errors importer_fuzz conformance export_qdq)
      if(TARGET onnx_${t}_${arch})
        target_link_libraries(onnx_${t}_${arch} PRIVATE kfuse::onnx)
        target_compile_definitions(onnx_${t}_${arch} PRIVATE
                                   KFUSE_ONNX_TEST_MODELS="${CMAKE_CURRENT_SOURCE_DIR}/onnx/models")
      endif()
    endforeach()
    foreach(t importer importer_errors conformance export_qdq)  # they build or read ModelProtos
      if(TARGET onnx_${t}_${arch})
        target_link_libraries(onnx_${t}_${arch} PRIVATE onnx_proto)
      endif()
    endforeach()
  endforeach()
endif()

# kfuse-run end to end: a model with its input file (output written and read back by the
# accuracy line of --compare-fp32 on an int8 plan), the default --layout auto (both plans
# timed), and a bad argument (one line, exit code 2).
# Label "cli" (the sanitizer builds do not build the command).
if(TARGET kfuse_run)
  set(m ${CMAKE_CURRENT_SOURCE_DIR}/onnx/models/small_cnn_b1)
  add_test(NAME onnx:kfuse_run_int8_compare
           COMMAND kfuse_run ${m}.onnx --input x=${m}.input.npy --prec int8 --compare-fp32
                   --reps 3 --warmup 1 --threads 1 --layout nhwc
                   --output-dir ${CMAKE_CURRENT_BINARY_DIR}/kfuse_run_out)
  set_tests_properties(onnx:kfuse_run_int8_compare PROPERTIES LABELS "ci;cli"
                       PASS_REGULAR_EXPRESSION "latency: median .*top-1 1/1")
  add_test(NAME onnx:kfuse_run_auto_layout
           COMMAND kfuse_run ${m}.onnx --input x=${m}.input.npy --reps 3 --warmup 1 --threads 1)
  set_tests_properties(onnx:kfuse_run_auto_layout PROPERTIES LABELS "ci;cli"
                       PASS_REGULAR_EXPRESSION
                       "layout: auto -> n[ch][hw][wc] \\(f32 trial medians: nchw .* ms, nhwc .* ms\\)")
  # --export-qdq: the model in QDQ form with the run's calibration, then that file run by
  # kfuse-run itself (the importer reads QDQ models: tests/onnx/export_qdq_test.cpp checks the
  # numbers).
  add_test(NAME onnx:kfuse_run_export_qdq
           COMMAND kfuse_run ${m}.onnx --input x=${m}.input.npy --prec int8 --reps 2 --warmup 1
                   --threads 1 --export-qdq ${CMAKE_CURRENT_BINARY_DIR}/small_cnn_b1.qdq.onnx)
  set_tests_properties(onnx:kfuse_run_export_qdq PROPERTIES LABELS "ci;cli"
                       FIXTURES_SETUP qdq_model PASS_REGULAR_EXPRESSION
                       "export-qdq: .*small_cnn_b1.qdq.onnx: 6 nodes with int8 weights, 10 activations quantized.*latency: median")
  add_test(NAME onnx:kfuse_run_qdq_model
           COMMAND kfuse_run ${CMAKE_CURRENT_BINARY_DIR}/small_cnn_b1.qdq.onnx
                   --input x=${m}.input.npy --reps 2 --warmup 1 --threads 1)
  set_tests_properties(onnx:kfuse_run_qdq_model PROPERTIES LABELS "ci;cli"
                       FIXTURES_REQUIRED qdq_model PASS_REGULAR_EXPRESSION
                       "fused .*_quantized \\(quantize u8\\) into .*latency: median")
  # Symbolic batch and sequence bound by the int64 input files' shapes (no --dim).
  set(b ${CMAKE_CURRENT_SOURCE_DIR}/onnx/models/bert_tiny_b2)
  add_test(NAME onnx:kfuse_run_shapes_from_files
           COMMAND kfuse_run ${b}.onnx --input input_ids=${b}.input_ids.npy
                   --input attention_mask=${b}.attention_mask.npy --reps 2 --warmup 1 --threads 1)
  set_tests_properties(onnx:kfuse_run_shapes_from_files PROPERTIES LABELS "ci;cli"
                       PASS_REGULAR_EXPRESSION "latency: median")
  # int8 calibration data for every input, token ids and a mask included (DIR/<input>.npy).
  foreach(in input_ids attention_mask)
    configure_file(${b}.${in}.npy ${CMAKE_CURRENT_BINARY_DIR}/kfuse_run_calib/${in}.npy COPYONLY)
  endforeach()
  add_test(NAME onnx:kfuse_run_calib_inputs
           COMMAND kfuse_run ${b}.onnx --input input_ids=${b}.input_ids.npy
                   --input attention_mask=${b}.attention_mask.npy --prec int8
                   --calib ${CMAKE_CURRENT_BINARY_DIR}/kfuse_run_calib --reps 2 --warmup 1
                   --threads 1)
  set_tests_properties(onnx:kfuse_run_calib_inputs PROPERTIES LABELS "ci;cli"
                       PASS_REGULAR_EXPRESSION "calibration: [0-9]+ tensors over 1 batch .*latency: median")
  # --split auto on 2 threads (KFUSE_NUM_THREADS=2: the pool has them on any runner): a model
  # whose batch is symbolic runs as one-thread parts when they give the whole batch's outputs
  # (timing alone then picks on or off, so both pass); one that mixes samples along axis 0 (it
  # subtracts the batch mean) is never split; a static batch cannot be split and says so.
  set(d ${CMAKE_CURRENT_SOURCE_DIR}/onnx/models)
  add_test(NAME onnx:kfuse_run_split
           COMMAND kfuse_run ${d}/small_cnn_dyn_b4.onnx --dim batch=5 --prec int8 --threads 2
                   --reps 3 --warmup 1 --compare-fp32)
  set_tests_properties(onnx:kfuse_run_split PROPERTIES LABELS "ci;cli"
                       ENVIRONMENT KFUSE_NUM_THREADS=2 PASS_REGULAR_EXPRESSION
                       "split: (on, |off \\()2 parts of batch 3 \\(1 of 2\\) on one thread each \\(trial medians: whole .*latency: median .*top-1 5/5")
  add_test(NAME onnx:kfuse_run_split_mixing
           COMMAND kfuse_run ${d}/batch_centered_dyn_b4.onnx --dim batch=4 --threads 2 --reps 3
                   --warmup 1)
  set_tests_properties(onnx:kfuse_run_split_mixing PROPERTIES LABELS "ci;cli"
                       ENVIRONMENT KFUSE_NUM_THREADS=2 PASS_REGULAR_EXPRESSION
                       "split: off \\(the parts' outputs differ from the whole batch's by .* the model mixes samples along axis 0\\).*latency: median")
  add_test(NAME onnx:kfuse_run_split_static
           COMMAND kfuse_run ${d}/mlp_b3.onnx --threads 2 --reps 3 --warmup 1)
  set_tests_properties(onnx:kfuse_run_split_static PROPERTIES LABELS "ci;cli"
                       ENVIRONMENT KFUSE_NUM_THREADS=2 PASS_REGULAR_EXPRESSION
                       "split: off \\(importing or compiling the model at a share of the batch: .*dimension 0 is 3.*latency: median")
  add_test(NAME onnx:kfuse_run_bad_argument COMMAND kfuse_run ${m}.onnx --reps nope)
  set_tests_properties(onnx:kfuse_run_bad_argument PROPERTIES LABELS "ci;cli" WILL_FAIL TRUE)
  add_test(NAME onnx:kfuse_run_bad_argument_text COMMAND kfuse_run ${m}.onnx --reps nope)
  set_tests_properties(onnx:kfuse_run_bad_argument_text PROPERTIES LABELS "ci;cli"
                       PASS_REGULAR_EXPRESSION "kfuse-run: error: --reps")

  # Run-time dispatch (kfuse-run is built for plain x86-64 on kfuse::runtime): natively the best
  # tier, KFUSE_ARCH's tier, a KFUSE_ARCH that names no tier of the library; under qemu's
  # Nehalem (SSE4.2) and Haswell (AVX2) CPUs the sse4 and avx2 tiers, a CNN and a transformer
  # each checked against PyTorch's outputs (--expect), and a KFUSE_ARCH the CPU lacks.
  set(cnn_args ${m}.onnx --input x=${m}.input.npy --expect y=${m}.output.npy --reps 1
               --warmup 0 --threads 1 --layout nhwc)
  set(bert_args ${b}.onnx --input input_ids=${b}.input_ids.npy
                --input attention_mask=${b}.attention_mask.npy
                --expect hidden=${b}.hidden.npy --expect pooled=${b}.pooled.npy
                --reps 1 --warmup 0 --threads 1)
  add_test(NAME onnx:kfuse_run_dispatch_best COMMAND kfuse_run ${cnn_args})
  set_tests_properties(onnx:kfuse_run_dispatch_best PROPERTIES LABELS "ci;cli"
                       PASS_REGULAR_EXPRESSION "dispatch: [a-z0-9_]+: the best of kfuse::runtime's tiers.*expect: [^\n]*: ok")
  list(GET KFUSE_RUNTIME_TIERS 0 lowest)
  add_test(NAME onnx:kfuse_run_dispatch_override COMMAND kfuse_run ${cnn_args})
  set_tests_properties(onnx:kfuse_run_dispatch_override PROPERTIES LABELS "ci;cli"
                       ENVIRONMENT KFUSE_ARCH=${lowest} PASS_REGULAR_EXPRESSION
                       "arch: ${lowest} .*dispatch: ${lowest}: KFUSE_ARCH=${lowest} .*expect: [^\n]*: ok")
  # The lowest tier has no bf16 dot product: a bf16 plan runs in f32 there and says so, and it
  # holds no emulated bf16 kernels, which --prec bf16-emulated asks for.
  if(NOT lowest MATCHES "bf16|amx")
    add_test(NAME onnx:kfuse_run_dispatch_bf16_lowest COMMAND kfuse_run ${cnn_args} --prec bf16)
    set_tests_properties(onnx:kfuse_run_dispatch_bf16_lowest PROPERTIES LABELS "ci;cli"
                         ENVIRONMENT KFUSE_ARCH=${lowest} PASS_REGULAR_EXPRESSION
                         "bf16: arch ${lowest} has no bf16 dot product .*expect: [^\n]*: ok")
    add_test(NAME onnx:kfuse_run_dispatch_bf16_emulated COMMAND kfuse_run ${cnn_args}
                                                                --prec bf16-emulated)
    set_tests_properties(onnx:kfuse_run_dispatch_bf16_emulated PROPERTIES LABELS "ci;cli"
                         ENVIRONMENT KFUSE_ARCH=${lowest} PASS_REGULAR_EXPRESSION
                         "kfuse-run: error: compile: compile_options::emulated_bf16 on arch ${lowest}, which has no bf16 dot product")
  endif()
  # The avx2 tier, when KFUSE_ARCH=avx2 runs it and it is not the host tier that the graph tests
  # use (under KFUSE_RUNTIME_TEST_FLAGS that one keeps every precision and op family): CI builds it
  # with some of them left out (KFUSE_RUNTIME_PRECISIONS, KFUSE_RUNTIME_OPS), and a plan needing
  # one fails naming the node and the CMake option; without conv2d_gated and conv2d_few_channel
  # the CNN's gate and stem run on the dense kernels, say so, and still match PyTorch; without
  # conv2d_nchw, --layout auto takes the nhwc plan and says why.
  get_property(probed_host GLOBAL PROPERTY KFUSE_PROBED_HOST_ARCH)
  set(avx2_tier_apart OFF)
  if("avx2" IN_LIST KFUSE_RUNTIME_TIERS AND NOT probed_host MATCHES "^(generic|sse4)?$" AND
     NOT (KFUSE_RUNTIME_TEST_FLAGS AND probed_host STREQUAL "avx2"))
    set(avx2_tier_apart ON)
  endif()
  # kfuse_add_avx2_tier_test(NAME REGEX ARGS...): kfuse-run ARGS on the avx2 tier, passing on REGEX.
  function(kfuse_add_avx2_tier_test name regex)
    add_test(NAME onnx:kfuse_run_dispatch_${name} COMMAND kfuse_run ${ARGN})
    set_tests_properties(onnx:kfuse_run_dispatch_${name} PROPERTIES LABELS "ci;cli"
                         ENVIRONMENT KFUSE_ARCH=avx2 PASS_REGULAR_EXPRESSION "${regex}")
  endfunction()
  if(avx2_tier_apart AND NOT "int8" IN_LIST KFUSE_RUNTIME_PRECISIONS)
    kfuse_add_avx2_tier_test(without_int8
      "kfuse-run: error: graph: node '[^']*' \\([a-z0-9_]*\\): runs in int8, which this kfuse::runtime was built without \\(CMake KFUSE_RUNTIME_PRECISIONS\\)"
      ${cnn_args} --prec int8)
  endif()
  if(avx2_tier_apart AND NOT "conv2d_gated" IN_LIST kfuse_runtime_ops AND
     NOT "conv2d_few_channel" IN_LIST kfuse_runtime_ops)
    kfuse_add_avx2_tier_test(without_gated_stem
      "built without conv2d_gated \\(CMake KFUSE_RUNTIME_OPS\\): channel gates run as their own step.*built without conv2d_few_channel.*expect: [^\n]*: ok"
      ${cnn_args})
  endif()
  if(avx2_tier_apart AND NOT "conv2d_nchw" IN_LIST kfuse_runtime_ops)
    kfuse_add_avx2_tier_test(without_nchw
      "layout: auto -> nhwc \\(the nchw plan does not compile: graph: node '[^']*' \\(conv2d\\): needs kfuse::runtime's op family conv2d_nchw.*expect: [^\n]*: ok"
      ${m}.onnx --input x=${m}.input.npy --expect y=${m}.output.npy --reps 1 --warmup 0 --threads 1)
  endif()
  if(avx2_tier_apart AND NOT "image" IN_LIST kfuse_runtime_ops)
    kfuse_add_avx2_tier_test(without_image
      "kfuse-run: error: graph: node '[^']*' \\((resize|conv_transpose2d)\\): needs kfuse::runtime's op family image, which this kfuse::runtime was built without \\(CMake KFUSE_RUNTIME_OPS\\): add image to it"
      ${d}/upsampling_b2.onnx --input x=${d}/upsampling_b2.input.npy --reps 1 --warmup 0 --threads 1)
  endif()
  add_test(NAME onnx:kfuse_run_dispatch_unknown COMMAND kfuse_run ${cnn_args})
  set_tests_properties(onnx:kfuse_run_dispatch_unknown PROPERTIES LABELS "ci;cli"
                       ENVIRONMENT KFUSE_ARCH=nosuchtier PASS_REGULAR_EXPRESSION
                       "kfuse-run: error: runtime: KFUSE_ARCH=nosuchtier: kfuse::runtime has no tier 'nosuchtier' \\(built: ")
  find_program(KFUSE_QEMU_X86 qemu-x86_64-static)
  if(KFUSE_QEMU_X86 AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
    foreach(cpu_tier Nehalem:sse4 Haswell:avx2)
      string(REPLACE ":" ";" pair ${cpu_tier})
      list(GET pair 0 cpu)
      list(GET pair 1 tier)
      if(NOT tier IN_LIST KFUSE_RUNTIME_TIERS)
        continue()
      endif()
      foreach(model cnn bert)
        add_test(NAME onnx:kfuse_run_qemu_${cpu}_${model}
                 COMMAND ${KFUSE_QEMU_X86} -cpu ${cpu} $<TARGET_FILE:kfuse_run> ${${model}_args})
        set_tests_properties(onnx:kfuse_run_qemu_${cpu}_${model} PROPERTIES LABELS "ci;cli"
                             TIMEOUT 600 PASS_REGULAR_EXPRESSION
                             "arch: ${tier} .*dispatch: ${tier}: the best of .*expect: [^\n]*: ok")
      endforeach()
    endforeach()
    if("avx2" IN_LIST KFUSE_RUNTIME_TIERS AND "sse4" IN_LIST KFUSE_RUNTIME_TIERS)
      add_test(NAME onnx:kfuse_run_qemu_Nehalem_lacks_avx2
               COMMAND ${KFUSE_QEMU_X86} -cpu Nehalem $<TARGET_FILE:kfuse_run> ${cnn_args})
      set_tests_properties(onnx:kfuse_run_qemu_Nehalem_lacks_avx2 PROPERTIES LABELS "ci;cli"
                           ENVIRONMENT KFUSE_ARCH=avx2 PASS_REGULAR_EXPRESSION
                           "kfuse-run: error: runtime: KFUSE_ARCH=avx2: this CPU does not run tier 'avx2' \\(it runs: ")
    endif()
  endif()
endif()
