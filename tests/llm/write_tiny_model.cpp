// Writes the tiny q8_0 llama model of tiny_model.hpp to argv[1]: the fixture of the
// kfuse-generate and example tests.
#include <cstdio>
#include <filesystem>

#include "tiny_model.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.gguf\n", argv[0]);
    return 2;
  }
  kfuse::llm::test::tiny_shape s;
  s.type = 8;
  const auto m = kfuse::llm::test::make_tiny_model(s, "kfuse_llm_fixture.gguf");
  std::filesystem::copy_file(m.path, argv[1], std::filesystem::copy_options::overwrite_existing);
  std::filesystem::remove(m.path);
  return 0;
}
