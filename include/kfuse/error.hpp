#pragma once
// kfuse::error: the one exception type kfuse throws for bad input.
//
// It is the only kfuse type with compiler-generated code outside the per-ISA namespace (its
// vtable, typeinfo and destructor, which contain no ISA-specific instructions). It must be shared
// so that one `catch (const kfuse::error&)` works whichever TU threw.
#include <stdexcept>
#include <string>

namespace kfuse {

class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kfuse
