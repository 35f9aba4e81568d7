# workspace (kernels/workspace.hpp): slot arithmetic, no vector code, so one executable.
kfuse_add_test(kernels_workspace SOURCES kernels/workspace_test.cpp LABELS smoke)
