# kfuse::llm: the GGUF loader (with a fuzzed header), the tokenizers against llama.cpp's
# vocabulary test files (scripts/setup.sh fetches them; the test skips without them), whole tiny
# models against an independent fp64 forward pass, every kernel tier against scalar, and
# kfuse-generate on a tiny model the tests write.
if(TARGET kfuse_llm)
  set(kfuse_llm_vocab_dir "$ENV{HOME}/.cache/kfuse/llama/llama.cpp/models" CACHE PATH
      "llama.cpp's models/ directory (ggml-vocab-*.gguf with .inp / .out): the tokenizer tests")
  foreach(t gguf tokenizer model)
    kfuse_add_test(llm_${t} SOURCES llm/${t}_test.cpp SANITIZE ci)
    if(TARGET llm_${t})
      target_link_libraries(llm_${t} PRIVATE kfuse::llm)
      target_compile_definitions(llm_${t} PRIVATE KFUSE_LLAMA_VOCAB_DIR="${kfuse_llm_vocab_dir}")
    endif()
  endforeach()

  # The fixture: a tiny q8_0 llama model for the command-line tests.
  add_executable(llm_write_tiny llm/write_tiny_model.cpp)
  target_link_libraries(llm_write_tiny PRIVATE kfuse::llm)
  set(KFUSE_LLM_TINY_MODEL ${CMAKE_CURRENT_BINARY_DIR}/llm_tiny_q8.gguf CACHE INTERNAL "")
  add_test(NAME llm:write_tiny COMMAND llm_write_tiny ${KFUSE_LLM_TINY_MODEL})
  set_tests_properties(llm:write_tiny PROPERTIES LABELS "ci;cli" FIXTURES_SETUP llm_tiny)
  if(TARGET kfuse_generate)
    set(m ${KFUSE_LLM_TINY_MODEL})
    set(g $<TARGET_FILE:kfuse_generate>)
    function(kfuse_generate_test name expect)
      add_test(NAME llm:kfuse_generate_${name} COMMAND kfuse_generate ${ARGN})
      set_tests_properties(llm:kfuse_generate_${name} PROPERTIES LABELS "ci;cli" FIXTURES_REQUIRED llm_tiny
                           PASS_REGULAR_EXPRESSION "${expect}")
    endfunction()
    kfuse_generate_test(generate "hello world.*decode: 12 tokens, [0-9.]+ tokens/s.*bandwidth: [0-9.]+ GB/s effective"
                        ${m} -p "hello world" -n 12 --temp 0 --ignore-eos -t 2)
    kfuse_generate_test(sampled "decode: [1-8] tokens" ${m} -p hello -n 8 --temp 0.8 --top-k 5 --top-p 0.9
                        --repeat-penalty 1.1 --seed 3 --cache bf16)
    kfuse_generate_test(tokenize "^\\[1, [0-9]+, [0-9]+" ${m} -p "hello world" --tokenize)
    kfuse_generate_test(tokens "^[0-9]+ [0-9]+ [0-9]+ [0-9]+\n" ${m} --tokens -p "1 270 280" -n 4 --temp 0 --ignore-eos)
    kfuse_generate_test(logits "logits: 4 x [0-9]+ written" ${m} --tokens -p "1 5 6 7"
                        --logits ${CMAKE_CURRENT_BINARY_DIR}/llm_logits.npy)
    kfuse_generate_test(bench "pp16 \\| [0-9.]+ \\|.*tg8 \\| [0-9.]+ \\|.*\\| 2 \\| tg8" ${m} --bench -p 16 -n 8 -r 2 -t 1,2)
    kfuse_generate_test(fast_prefill "prefill: 8 tokens.*decode: 4 tokens" ${m} --tokens -p "1 5 6 7 8 9 10 11"
                        -n 4 --temp 0 --ignore-eos --fast-prefill)
    kfuse_generate_test(bad_threads "-t: '-3' is not a valid count" ${m} -p hello -t -3)
    kfuse_generate_test(bad_option "unknown option '--frobnicate'" ${m} --frobnicate)
    kfuse_generate_test(bad_id "token 1 has id 999999, outside the vocabulary" ${m} --tokens -p "1 999999")
    kfuse_generate_test(context_end "decode: 5 tokens" ${m} --tokens -p "1 5" -c 6 -n 100 --ignore-eos)
    kfuse_generate_test(prompt_too_long "context overflow: 0 tokens in the cache \\+ 5 new > n_ctx 4" ${m}
                        --tokens -p "1 5 6 7 8" -c 4)
    kfuse_generate_test(missing_file "cannot open" /nonexistent.gguf -p x)
  endif()
endif()
