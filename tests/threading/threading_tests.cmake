# The thread pool and the CPU budget (threading/): plain C++, one executable each, in the
# AddressSanitizer and the ThreadSanitizer builds.
kfuse_add_test(threading_thread_pool SOURCES threading/thread_pool_test.cpp LABELS smoke threads
               SANITIZE ci)
kfuse_add_test(threading_cpu_budget SOURCES threading/cpu_budget_test.cpp LABELS smoke threads
               SANITIZE ci)
