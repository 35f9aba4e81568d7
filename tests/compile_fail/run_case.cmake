# cmake -DCXX=<compiler> -DSOURCE=cases.cpp -DINCLUDE=<kfuse include dir> -DCASE=<case>
#       -DFLAGS=<flags separated by |> [-DNARROW_FLAGS=<flags separated by |>] -P run_case.cmake
#
# Compiles SOURCE with -DKFUSE_CF_<CASE> (syntax and template instantiation only). Case "ok" must
# compile; every other case must fail AND its output must match each of the case's expected
# regexes: the text of the static_assert kfuse promises, and where it matters the type the
# diagnostic must name. Any other error does not count as the expected failure.
set(sa "static.assert[^\n]*failed[^\n]*")  # g++: "static assertion failed: ...", clang: "static_assert failed ..."
set(expect_scalar_only_stage
    "${sa}kfuse: this epilogue stage has no vector operator\\(\\) for the SIMD target"
    "epilogue_stage_has_no_vector_path<cf::scalar_only_stage>")
set(expect_int_output_without_quantize
    "${sa}kfuse::eltwise: the output holds integers but the epilogue does not produce them")
set(expect_output_type_mismatch
    "${sa}kfuse::eltwise: the epilogue's last type-changing stage .cast / quantize / requantize. produces a different element type")
set(expect_bias_flat "${sa}kfuse::eltwise: a stage needs a channel axis")
set(expect_non_native_arch
    "${sa}kfuse: code for this arch must be compiled in a translation unit built for it"
    "impl_for<kfuse::arch::avx512, kfuse::backend::xsimd>")
set(expect_cast_i8 "${sa}kfuse::cast<E> is for float types" "cast<kfuse::i8>")
set(expect_quantize_f32 "${sa}kfuse::quantize<E> needs E = i8 or u8" "quantize<kfuse::f32>")
set(expect_batched_i8_float_b "${sa}kfuse::batched_gemm<i8>: B is int8_t")
set(expect_batched_i8_7bit "${sa}kfuse::batched_gemm<i8>: this arch has no vpdpbusd")
set(expect_hwy_too_narrow
    "${sa}kfuse: Highway's static target in this TU is narrower than the arch[^\n]*docs/toolchain.md")

set(expect_selective_empty_set "${sa}kfuse::ops<...> needs at least one op_kind")
set(expect_selective_no_precision "${sa}kfuse::ops<...>::in<...> needs at least one precision")
set(expect_selective_inherit "${sa}kfuse::ops<...>::in<...>: name f32, bf16 or int8")
set(expect_compile_not_arch_or_ops
    "${sa}kfuse::compile<T>: T must be an arch tag[^\n]*or an op set" "with T = float")

foreach(v CXX SOURCE INCLUDE CASE FLAGS)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "run_case: -D${v}=... is required")
  endif()
endforeach()
if(NOT CASE STREQUAL "ok" AND NOT DEFINED expect_${CASE})
  message(FATAL_ERROR "run_case: unknown case '${CASE}'")
endif()

set(flags "${FLAGS}")
if(CASE STREQUAL "hwy_too_narrow")
  set(flags "${NARROW_FLAGS}")
endif()
string(REPLACE "|" ";" flags "${flags}")
string(TOUPPER "${CASE}" upper)
set(cmd ${CXX} -std=c++20 -fsyntax-only -I${INCLUDE} ${flags} -DKFUSE_CF_${upper}=1 ${SOURCE})
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
string(REPLACE ";" " " shown "${cmd}")

if(CASE STREQUAL "ok")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the valid code of cases.cpp does not compile:\n${shown}\n${out}")
  endif()
  message(STATUS "OK: the valid neighbour of every case compiles")
  return()
endif()

if(rc EQUAL 0)
  message(FATAL_ERROR "case '${CASE}' compiled, but it must not:\n${shown}")
endif()
set(missing "")
foreach(re IN LISTS expect_${CASE})
  if(NOT out MATCHES "${re}")
    list(APPEND missing "${re}")
  endif()
endforeach()
if(missing)
  string(LENGTH "${out}" len)
  if(len GREATER 6000)
    string(SUBSTRING "${out}" 0 6000 out)
    set(out "${out}\n[... ${len} characters in all]")
  endif()
  string(REPLACE ";" "\n  " missing "${missing}")
  message(FATAL_ERROR "case '${CASE}' failed to compile, but not with the expected diagnostic; "
                      "missing:\n  ${missing}\n${shown}\n${out}")
endif()
message(STATUS "OK: case '${CASE}' fails with the expected diagnostic")
