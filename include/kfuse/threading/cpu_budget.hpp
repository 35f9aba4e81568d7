#pragma once
// How many threads kfuse may usefully run here: the physical cores in this process's CPU
// affinity mask (taskset, cpusets, container --cpuset-cpus), capped by a cgroup CPU quota
// (container --cpus: cgroup v2 cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us, rounded up),
// or KFUSE_NUM_THREADS. Every decision carries a one-line reason, e.g.
//   "1 thread: 1 core in the affinity mask of 2 online; no cgroup quota".
// A thread more than the cores the process may run on only takes turns with the others, and a
// turn is a scheduler time slice (milliseconds): that is how a pool of 2 on one core became 37x
// slower than 1 thread.
//
// KFUSE_NUM_THREADS must be a whole number from 1 to max_env_threads(); anything else (0,
// negative, not a number, absurdly large) is ignored with one warning on stderr and the default
// is used (documented in docs/executor.md).
//
// The parsing functions take the file contents or a root folder, so tests can feed sample files.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#include <unistd.h>
#endif

#include "kfuse/config/macros.hpp"

KFUSE_BEGIN_NAMESPACE

/// A CPU quota read from a cgroup: `cpus` CPUs' worth of time per period (1.5 = 150%).
struct cpu_quota {
  double cpus = 0;
  std::string source;  // e.g. "cpu.max 150000 100000"
};

/// What the default pool size is based on, and the size it gives.
struct cpu_budget_inputs {
  int online = 1;          // logical CPUs online
  int affinity_cpus = 1;   // logical CPUs in the affinity mask
  int affinity_cores = 1;  // physical cores they belong to
  std::optional<cpu_quota> quota;
  std::optional<std::string> env;  // KFUSE_NUM_THREADS, if set
};

struct thread_budget {
  int threads = 1;
  std::string reason;   // one line: why this many
  std::string warning;  // non-empty when KFUSE_NUM_THREADS was ignored
};

namespace cpu_budget_detail {

inline std::string read_text(const std::string& path) {
  std::ifstream f(path);
  if (!f) return {};
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

inline std::string_view trim(std::string_view s) {
  while (!s.empty() &&
         (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() &&
         (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

/// A whole decimal number (optional leading '-'), nothing else; nullopt otherwise.
inline std::optional<long long> parse_int(std::string_view s) {
  s = trim(s);
  if (s.empty() || s.size() > 18) return std::nullopt;
  bool neg = false;
  if (s.front() == '-') {
    neg = true;
    s.remove_prefix(1);
    if (s.empty()) return std::nullopt;
  }
  long long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return neg ? -v : v;
}

inline std::string plural(long long n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

inline std::string format_cpus(double c) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", c);
  return buf;
}

}  // namespace cpu_budget_detail

/// cgroup v2 `cpu.max` ("QUOTA PERIOD" or "max PERIOD"): the quota in CPUs, nullopt for no
/// limit or text that is not in that form.
inline std::optional<double> parse_cgroup2_cpu_max(std::string_view text) {
  using namespace cpu_budget_detail;
  text = trim(text);
  const auto sp = text.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  const std::string_view q = text.substr(0, sp);
  const auto period = parse_int(text.substr(sp + 1));
  if (q == "max" || !period || *period <= 0) return std::nullopt;
  const auto quota = parse_int(q);
  if (!quota || *quota <= 0) return std::nullopt;
  return double(*quota) / double(*period);
}

/// cgroup v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`: the quota in CPUs, nullopt for -1 (no
/// limit) or unreadable values.
inline std::optional<double> parse_cgroup1_quota(std::string_view quota_us,
                                                 std::string_view period_us) {
  using namespace cpu_budget_detail;
  const auto q = parse_int(quota_us), p = parse_int(period_us);
  if (!q || !p || *q <= 0 || *p <= 0) return std::nullopt;
  return double(*q) / double(*p);
}

/// The tightest CPU quota on this process's cgroup and its ancestors. `self_cgroup` is the text
/// of /proc/self/cgroup; `root` the cgroup mount (v2: cpu.max under root + path; v1: under
/// root/cpu,cpuacct or root/cpu). A container that sees its own cgroup as the root (cgroup
/// namespace) or a host path that does not exist in its mount is read at the root too.
inline std::optional<cpu_quota> read_cgroup_quota(const std::string& root,
                                                  std::string_view self_cgroup) {
  using namespace cpu_budget_detail;
  std::optional<cpu_quota> best;
  auto consider = [&](double cpus, std::string source) {
    if (!best || cpus < best->cpus) best = cpu_quota{cpus, std::move(source)};
  };
  // Every ancestor of `path` (itself first, the root last).
  auto walk = [](std::string path, auto&& visit) {
    for (;;) {
      visit(path);
      if (path.empty() || path == "/") return;
      const auto slash = path.find_last_of('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
  };
  std::istringstream lines{std::string(self_cgroup)};
  for (std::string line; std::getline(lines, line);) {
    const auto a = line.find(':'), b = line.find(':', a == std::string::npos ? a : a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (path.empty()) path.push_back('/');  // (not = "/": g++ 12 -O3 false -Wstringop-overflow)
    if (line.compare(0, a, "0") == 0 && controllers.empty()) {  // v2
      walk(path, [&](const std::string& p) {
        const std::string file = root + (p == "/" ? "" : p) + "/cpu.max";
        const std::string text = read_text(file);
        if (const auto c = parse_cgroup2_cpu_max(text))
          consider(*c, "cpu.max " + std::string(trim(text)));
      });
      continue;
    }
    // v1: the hierarchy whose controller list holds "cpu".
    bool cpu = false;
    std::istringstream cs(controllers);
    for (std::string c; std::getline(cs, c, ',');) cpu |= c == "cpu";
    if (!cpu) continue;
    for (const char* mount : {"/cpu,cpuacct", "/cpu"}) {
      walk(path, [&](const std::string& p) {
        const std::string dir = root + mount + (p == "/" ? "" : p);
        const std::string q = read_text(dir + "/cpu.cfs_quota_us");
        const std::string per = read_text(dir + "/cpu.cfs_period_us");
        if (const auto c = parse_cgroup1_quota(q, per))
          consider(*c, "cpu.cfs_quota_us " + std::string(trim(q)) + " / cpu.cfs_period_us " +
                           std::string(trim(per)));
      });
    }
  }
  return best;
}

/// Physical cores among `cpus`: distinct sibling lists under
/// `sys_cpu`/cpuN/topology/core_cpus_list (or thread_siblings_list); cpus.size() when the
/// topology is unreadable.
inline int physical_cores_of(const std::vector<int>& cpus,
                             const std::string& sys_cpu = "/sys/devices/system/cpu") {
  using namespace cpu_budget_detail;
  std::set<std::string> cores;
  for (int cpu : cpus) {
    const std::string base = sys_cpu + "/cpu" + std::to_string(cpu) + "/topology/";
    std::string siblings(trim(read_text(base + "core_cpus_list")));
    if (siblings.empty()) siblings = std::string(trim(read_text(base + "thread_siblings_list")));
    if (siblings.empty()) return int(std::max<std::size_t>(1, cpus.size()));
    cores.insert(siblings);
  }
  return int(std::max<std::size_t>(1, cores.size()));
}

/// The logical CPUs this process may run on (sched_getaffinity); all of them elsewhere.
inline std::vector<int> affinity_cpus() {
  std::vector<int> cpus;
#if defined(__linux__)
  for (int n = 1024; n <= (1 << 16); n *= 2) {  // masks wider than CPU_SETSIZE need CPU_ALLOC
    cpu_set_t* set = CPU_ALLOC(n);
    if (!set) break;
    const std::size_t bytes = CPU_ALLOC_SIZE(n);
    CPU_ZERO_S(bytes, set);
    if (sched_getaffinity(0, bytes, set) == 0) {
      for (int c = 0; c < n; ++c)
        if (CPU_ISSET_S(c, bytes, set)) cpus.push_back(c);
      CPU_FREE(set);
      return cpus;
    }
    CPU_FREE(set);
    if (errno != EINVAL) break;
  }
#endif
  const int n = int(std::max(1u, std::thread::hardware_concurrency()));
  for (int c = 0; c < n; ++c) cpus.push_back(c);
  return cpus;
}

/// The largest KFUSE_NUM_THREADS accepted: 4 threads per online CPU (deliberate
/// oversubscription stays possible), at most 1024.
inline int max_env_threads(int online) { return std::clamp(4 * online, 4, 1024); }

/// The pool size for these inputs, and why (pure: the tests' entry point).
inline thread_budget decide_thread_budget(const cpu_budget_inputs& in) {
  using namespace cpu_budget_detail;
  thread_budget b;
  std::string mask = in.affinity_cpus == in.affinity_cores
                         ? plural(in.affinity_cores, "core", "cores")
                         : plural(in.affinity_cpus, "CPU", "CPUs") + " (" +
                               plural(in.affinity_cores, "core", "cores") + ")";
  mask += " in the affinity mask of " + std::to_string(in.online) + " online";
  int threads = std::max(1, in.affinity_cores);
  std::string quota = "no cgroup quota";
  if (in.quota) {
    const int q = std::max(1, int(std::ceil(in.quota->cpus - 1e-9)));
    quota = "cgroup quota of " + format_cpus(in.quota->cpus) + " CPUs (" + in.quota->source + ")";
    if (q < threads) {
      threads = q;
      quota += " caps it at " + std::to_string(q);
    }
  }
  b.threads = threads;
  b.reason = plural(threads, "thread", "threads") + ": " + mask + "; " + quota;
  if (in.env) {
    const int limit = max_env_threads(in.online);
    const auto v = parse_int(*in.env);
    if (v && *v >= 1 && *v <= limit) {
      b.threads = int(*v);
      b.reason = plural(*v, "thread", "threads") + ": KFUSE_NUM_THREADS=" + std::to_string(*v) +
                 " (the default would be " + b.reason + ")";
    } else {
      b.warning = "kfuse: KFUSE_NUM_THREADS='" + *in.env + "' is not a whole number from 1 to " +
                  std::to_string(limit) + "; ignored, using " + b.reason;
      b.reason += " (KFUSE_NUM_THREADS='" + *in.env + "' ignored)";
    }
  }
  return b;
}

/// This process's inputs: online CPUs, affinity mask, cgroup quota, KFUSE_NUM_THREADS.
inline cpu_budget_inputs current_cpu_budget_inputs() {
  cpu_budget_inputs in;
  const std::vector<int> cpus = affinity_cpus();
  in.affinity_cpus = int(std::max<std::size_t>(1, cpus.size()));
  in.affinity_cores = physical_cores_of(cpus);
#if defined(__linux__)
  in.online = int(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  in.quota = read_cgroup_quota("/sys/fs/cgroup", cpu_budget_detail::read_text("/proc/self/cgroup"));
#else
  in.online = int(std::max(1u, std::thread::hardware_concurrency()));
#endif
  in.online = std::max(in.online, in.affinity_cpus);
  if (const char* env = std::getenv("KFUSE_NUM_THREADS")) in.env = std::string(env);
  return in;
}

/// The default pool size of this process (KFUSE_NUM_THREADS's warning is the caller's to print).
inline thread_budget current_thread_budget() {
  return decide_thread_budget(current_cpu_budget_inputs());
}

KFUSE_END_NAMESPACE
