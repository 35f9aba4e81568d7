#pragma once
// The machine's streaming read bandwidth (GB/s, 10^9 B/s): what bounds token generation, since
// every token reads every weight once. A probe of ~0.3 s: the best of five passes over 256 MiB.
namespace kfuse::llm {

/// Read bandwidth of `threads` threads (0: kfuse's default thread count).
double probe_read_bandwidth(int threads = 0);

}  // namespace kfuse::llm
