#pragma once
// Per-node profiler: timing records, a roofline verdict per node against the machine's limits,
// a text table sorted by time, and Chrome trace JSON (chrome://tracing, Perfetto).
//
// Usage: describe each node once (add_node: name, op, FLOPs and bytes of one run), then time runs
// with begin(node) / end(node), or record(node, start_ns, end_ns) from an executor hook. Records
// are PODs appended to a reserved vector, so a profiled run allocates only when it outgrows the
// reservation. When no profiler is attached nothing here runs (the executor checks one pointer).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "kfuse/config/macros.hpp"
#include "kfuse/error.hpp"
#include "kfuse/simd/target.hpp"
#include "kfuse/tools/machine_limits.hpp"

namespace kfuse {

/// What a node does per run, as the executor (or the user) describes it.
struct profile_node {
  std::string name;  // "fc1", "block.conv1"
  std::string op;    // "gemm+bias+relu", "conv2d", "softmax"
  double flops = 0;  // per run (kfuse convention: GEMM 2MNK, conv 2*N*OH*OW*K*C/g*R*S)
  double bytes = 0;  // per run: one read of each input and weight, one write of each output
  compute_kind kind = compute_kind::f32;
  int threads = 1;
};

/// One timed execution of a node.
struct profile_event {
  std::int32_t node = 0;
  std::int32_t tid = 0;  // trace lane (0: the thread that replays)
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

/// A node's totals over every recorded run, with its roofline verdict.
struct profile_row {
  std::int32_t node = 0;
  std::int64_t calls = 0;
  double total_s = 0;
  double mean_s = 0;
  double share = 0;      // of the summed time of all nodes, 0..1
  double gflops = 0;     // achieved
  double gbs = 0;        // achieved
  double intensity = 0;  // flops per byte (0 for pure data movement)
  bool compute_bound = false;
  double roofline = 0;  // achieved / attainable at this intensity, 0..1 (can exceed 1 in cache)
  /// Mean time beyond the roofline bound max(bytes / bandwidth, flops / peak), >= 0: what a
  /// node costs over its memory traffic or arithmetic (per-node overhead, a kernel's slack).
  double excess_s = 0;
};

}  // namespace kfuse

KFUSE_BEGIN_NAMESPACE

class profiler {
 public:
  /// Limits are probed lazily (cached_machine_limits) the first time a verdict is needed, so the
  /// probe never runs inside a timed region.
  profiler() = default;
  explicit profiler(machine_limits limits) : limits_(std::move(limits)), have_limits_(true) {}

  /// Registers a node; returns its id (dense, from 0).
  std::int32_t add_node(profile_node n) {
    nodes_.push_back(std::move(n));
    return std::int32_t(nodes_.size() - 1);
  }
  const std::vector<profile_node>& nodes() const noexcept { return nodes_; }
  profile_node& node(std::int32_t id) { return nodes_.at(std::size_t(id)); }

  /// Room for `n` events without allocation during profiled runs.
  void reserve(std::size_t n) { events_.reserve(n); }
  /// Forgets the events (keeps the nodes and the reservation).
  void clear_events() noexcept { events_.clear(); }
  const std::vector<profile_event>& events() const noexcept { return events_; }

  /// Nanoseconds since this profiler was created (the trace's time origin).
  std::int64_t now_ns() const noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - origin_).count();
  }
  /// Converts an absolute steady_clock reading to this profiler's time base.
  std::int64_t to_ns(std::chrono::steady_clock::time_point t) const noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - origin_).count();
  }

  /// Converts nanoseconds since the steady clock's epoch (what an executor hook passes).
  std::int64_t from_steady_ns(std::int64_t t) const noexcept {
    return t -
           std::chrono::duration_cast<std::chrono::nanoseconds>(origin_.time_since_epoch()).count();
  }

  /// Appends one event. `continues` extends the previous event instead when it belongs to the
  /// same node and lane: a node that runs as several commands is one event per run.
  KFUSE_INLINE void record(std::int32_t node, std::int64_t start_ns, std::int64_t end_ns,
                           std::int32_t tid = 0, bool continues = false) {
    if (continues && !events_.empty() && events_.back().node == node && events_.back().tid == tid) {
      events_.back().end_ns = end_ns;
      return;
    }
    events_.push_back(profile_event{node, tid, start_ns, end_ns});
  }
  /// begin/end pair for one node at a time on one thread (op-by-op use).
  KFUSE_INLINE void begin(std::int32_t node) noexcept {
    open_node_ = node;
    open_start_ = now_ns();
  }
  KFUSE_INLINE void end(std::int32_t node) {
    const std::int64_t t = now_ns();
    if (node != open_node_) detail_fail("end(" + std::to_string(node) + ") without begin");
    record(node, open_start_, t);
    open_node_ = -1;
  }
  /// Times a callable as one event of `node`.
  template <class F>
  void time(std::int32_t node, F&& f) {
    const std::int64_t t0 = now_ns();
    f();
    record(node, t0, now_ns());
  }

  const machine_limits& limits() {
    if (!have_limits_) {
      limits_ = cached_machine_limits();
      have_limits_ = true;
    }
    return limits_;
  }
  void set_limits(machine_limits m) {
    limits_ = std::move(m);
    have_limits_ = true;
  }

  /// The arch and vector impl the table names. Default: what this translation unit's default
  /// kernels run on (target_of<arch::native, backend::xsimd>(), marked "this TU's default
  /// kernels"); replay_profiler sets the plan's (step_info::target).
  const target_info& target() const noexcept { return target_; }
  void set_target(target_info t) {
    target_ = std::move(t);
    target_given_ = true;
  }
  bool target_given() const noexcept { return target_given_; }

  /// Per-node totals, sorted by total time (largest first).
  std::vector<profile_row> rows() {
    const machine_limits& lim = limits();
    std::vector<profile_row> r(nodes_.size());
    for (std::size_t i = 0; i < r.size(); ++i) r[i].node = std::int32_t(i);
    for (const profile_event& e : events_) {
      if (e.node < 0 || std::size_t(e.node) >= nodes_.size())
        detail_fail("event for unknown node " + std::to_string(e.node));
      auto& row = r[std::size_t(e.node)];
      row.calls += 1;
      row.total_s += double(e.end_ns - e.start_ns) * 1e-9;
    }
    double sum = 0;
    for (const auto& row : r) sum += row.total_s;
    for (auto& row : r) {
      const profile_node& n = nodes_[std::size_t(row.node)];
      if (row.calls == 0) continue;
      row.mean_s = row.total_s / double(row.calls);
      row.share = sum > 0 ? row.total_s / sum : 0;
      const double t = std::max(row.mean_s, 1e-12);
      row.gflops = n.flops / t * 1e-9;
      row.gbs = n.bytes / t * 1e-9;
      row.intensity = n.bytes > 0 ? n.flops / n.bytes : 0;
      const double peak = lim.peak(n.kind, n.threads), bw = lim.bandwidth(n.threads);
      // Ridge point: intensities above peak/bw cannot be fed faster than the FMA units run.
      row.compute_bound = n.flops > 0 && (n.bytes <= 0 || row.intensity >= peak / bw);
      const double bound_s =
          std::max(bw > 0 ? n.bytes / (bw * 1e9) : 0.0, peak > 0 ? n.flops / (peak * 1e9) : 0.0);
      row.excess_s = std::max(0.0, row.mean_s - bound_s);
      if (n.flops > 0) {
        const double attainable = n.bytes > 0 ? std::min(peak, row.intensity * bw) : peak;
        row.roofline = attainable > 0 ? row.gflops / attainable : 0;
      } else {
        row.roofline = bw > 0 ? row.gbs / bw : 0;
      }
    }
    r.erase(std::remove_if(r.begin(), r.end(), [](const profile_row& x) { return x.calls == 0; }),
            r.end());
    std::stable_sort(r.begin(), r.end(), [](const profile_row& a, const profile_row& b) {
      return a.total_s > b.total_s;
    });
    return r;
  }

  /// The table: one line per node, sorted by time, then the total and the limits used.
  std::string table() {
    const auto r = rows();
    const machine_limits& lim = limits();
    std::size_t wname = 4, wop = 2;
    for (const auto& row : r) {
      wname = std::max(wname, nodes_[std::size_t(row.node)].name.size());
      wop = std::max(wop, nodes_[std::size_t(row.node)].op.size());
    }
    std::string out;
    char buf[512];
    // "over us": the time per call beyond the roofline bound (traffic or arithmetic).
    std::snprintf(buf, sizeof buf, "%-*s  %-*s %6s %10s %8s %6s %8s %7s %7s  %-13s %6s %3s\n",
                  int(wname), "node", int(wop), "op", "calls", "us/call", "over us", "%time",
                  "GFLOP/s", "GB/s", "flop/B", "bound", "%roof", "thr");
    out += buf;
    double total = 0;
    for (const auto& row : r) {
      const profile_node& n = nodes_[std::size_t(row.node)];
      total += row.total_s;
      std::snprintf(buf, sizeof buf,
                    "%-*s  %-*s %6lld %10.2f %8.2f %5.1f%% %8.1f %7.1f %7.2f  %-13s %5.0f%% %3d\n",
                    int(wname), n.name.c_str(), int(wop), n.op.c_str(), (long long)row.calls,
                    row.mean_s * 1e6, row.excess_s * 1e6, 100.0 * row.share, row.gflops, row.gbs,
                    row.intensity, row.compute_bound ? "compute-bound" : "memory-bound",
                    100.0 * row.roofline, n.threads);
      out += buf;
    }
    const double runs = r.empty() ? 0 : double(r.front().calls);
    std::snprintf(buf, sizeof buf,
                  "total %.1f us per run (%g runs); limits (%s): f32 %.0f, bf16 %.0f, int8 %.0f "
                  "G/s per core, memory %.1f GB/s (1 thread) / %.1f GB/s (%d threads)\n",
                  runs > 0 ? total / runs * 1e6 : 0.0, runs, lim.source.c_str(), lim.f32_gflops,
                  lim.bf16_gflops, lim.int8_gops, lim.mem_gbs_1t, lim.mem_gbs_all, lim.cores);
    out += buf;
    // What the nodes ran on; the scalar fallback says so ("arch: generic (scalar) -- scalar ...").
    out += std::string(target_given_ ? "arch: " : "arch (this TU's default kernels): ") +
           target_.text() + "\n";
    if (!target_.dispatch.empty()) out += "dispatch: " + target_.dispatch + "\n";
    // Why the pool has its size ("1 thread: 1 core in the affinity mask of 2 online; ...").
    out += "pool: " + default_pool().size_reason() + "\n";
    return out;
  }

  /// Chrome trace JSON ("traceEvents" of "X" complete events, microseconds), loadable by
  /// chrome://tracing and ui.perfetto.dev.
  std::string chrome_trace() const {
    std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
    char buf[256];
    bool first = true;
    for (const profile_event& e : events_) {
      if (e.node < 0 || std::size_t(e.node) >= nodes_.size()) continue;
      const profile_node& n = nodes_[std::size_t(e.node)];
      out += first ? "\n" : ",\n";
      first = false;
      out += "{\"name\":";
      append_json_string(out, n.name);
      out += ",\"cat\":";
      append_json_string(out, n.op);
      std::snprintf(buf, sizeof buf,
                    ",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":1,\"tid\":%d,\"args\":{"
                    "\"flops\":%.17g,\"bytes\":%.17g,\"threads\":%d,\"compute\":\"%s\"}}",
                    double(e.start_ns) * 1e-3, double(e.end_ns - e.start_ns) * 1e-3, int(e.tid),
                    n.flops, n.bytes, n.threads, compute_kind_name(n.kind));
      out += buf;
    }
    out += "\n]}\n";
    return out;
  }
  /// Writes chrome_trace() to `path`; throws kfuse::error when the file cannot be written.
  void write_chrome_trace(const std::string& path) const {
    std::ofstream f(path, std::ios::binary);
    if (!f) detail_fail("cannot open '" + path + "' for writing");
    const std::string s = chrome_trace();
    f.write(s.data(), std::streamsize(s.size()));
    if (!f) detail_fail("writing '" + path + "' failed");
  }

 private:
  using clock = std::chrono::steady_clock;

  [[noreturn]] static void detail_fail(const std::string& what) {
    throw error("profiler: " + what);
  }

  static void append_json_string(std::string& out, std::string_view s) {
    out += '"';
    for (const char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      if (c == '"' || c == '\\') {
        out += '\\';
        out += ch;
      } else if (c < 0x20) {
        char esc[8];
        std::snprintf(esc, sizeof esc, "\\u%04x", unsigned(c));
        out += esc;
      } else {
        out += ch;
      }
    }
    out += '"';
  }

  std::vector<profile_node> nodes_;
  std::vector<profile_event> events_;
  machine_limits limits_{};
  bool have_limits_ = false;
  target_info target_ = target_of<arch::native, backend::xsimd>();
  bool target_given_ = false;
  clock::time_point origin_ = clock::now();
  std::int32_t open_node_ = -1;
  std::int64_t open_start_ = 0;
};

KFUSE_END_NAMESPACE
