// Compile-time probe: the umbrella header alone.
#include "kfuse/kfuse.hpp"
int main() { return 0; }
