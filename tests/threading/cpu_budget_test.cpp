// The default pool size: cgroup v1/v2 quota parsing on sample files, physical cores of an
// affinity mask on a sample sysfs tree, KFUSE_NUM_THREADS validation, and the one-line reason.
#include <filesystem>
#include <fstream>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif

#include "support/test_support.hpp"

namespace fs = std::filesystem;
using namespace kfuse;

namespace {

/// A fresh folder under the system temp dir, removed at the end of the test.
struct temp_tree {
  fs::path root;
  explicit temp_tree(const char* name) {
    root = fs::temp_directory_path() /
           (std::string("kfuse_") + name + "_" +
            std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id())));
    fs::remove_all(root);
    fs::create_directories(root);
  }
  ~temp_tree() { fs::remove_all(root); }
  void write(const std::string& rel, const std::string& text) const {
    const fs::path p = root / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string str() const { return root.string(); }
};

}  // namespace

TEST_CASE("cpu budget: cgroup v2 cpu.max and v1 cfs quota parse", "[threads][cpu_budget]") {
  CHECK_FALSE(parse_cgroup2_cpu_max("max 100000\n"));
  CHECK(*parse_cgroup2_cpu_max("50000 100000\n") == 0.5);
  CHECK(*parse_cgroup2_cpu_max("150000 100000") == 1.5);
  CHECK(*parse_cgroup2_cpu_max(" 200000 100000 \n") == 2.0);
  for (const char* bad : {"", "max", "garbage", "50000", "50000 0", "-5 100000", "5x 100000",
                          "50000 100000x", "0 100000"})
    CHECK_FALSE(parse_cgroup2_cpu_max(bad));
  CHECK_FALSE(parse_cgroup1_quota("-1\n", "100000\n"));
  CHECK(*parse_cgroup1_quota("50000\n", "100000\n") == 0.5);
  CHECK(*parse_cgroup1_quota("250000", "100000") == 2.5);
  CHECK_FALSE(parse_cgroup1_quota("", "100000"));
  CHECK_FALSE(parse_cgroup1_quota("50000", ""));
}

TEST_CASE("cpu budget: the tightest quota of a cgroup and its ancestors", "[threads][cpu_budget]") {
  const temp_tree t("cgroup");
  // v2: the process in /a/b; b has no limit, a has 150000/100000, the root none.
  t.write("a/b/cpu.max", "max 100000\n");
  t.write("a/cpu.max", "150000 100000\n");
  auto q = read_cgroup_quota(t.str(), "0::/a/b\n");
  REQUIRE(q);
  CHECK(q->cpus == 1.5);
  CHECK(q->source == "cpu.max 150000 100000");
  // a tighter limit below wins
  t.write("a/b/cpu.max", "50000 100000\n");
  CHECK(read_cgroup_quota(t.str(), "0::/a/b\n")->cpus == 0.5);
  // a container that sees its own cgroup at the root
  t.write("cpu.max", "300000 100000\n");
  CHECK(read_cgroup_quota(t.str(), "0::/\n")->cpus == 3.0);
  // a host path missing from the container's mount: the root's file
  CHECK(read_cgroup_quota(t.str(), "0::/docker/123abc\n")->cpus == 3.0);
  // missing files, no limit, garbage: no quota
  const temp_tree empty("cgroup_empty");
  CHECK_FALSE(read_cgroup_quota(empty.str(), "0::/a/b\n"));
  CHECK_FALSE(read_cgroup_quota(empty.str(), ""));
  CHECK_FALSE(read_cgroup_quota(empty.str(), "not a cgroup line\n"));
  CHECK_FALSE(read_cgroup_quota("/nonexistent/kfuse", "0::/\n"));
  // v1: cpu,cpuacct hierarchy
  const temp_tree v1("cgroup_v1");
  v1.write("cpu,cpuacct/job/cpu.cfs_quota_us", "-1\n");
  v1.write("cpu,cpuacct/job/cpu.cfs_period_us", "100000\n");
  v1.write("cpu,cpuacct/cpu.cfs_quota_us", "200000\n");
  v1.write("cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  const std::string self = "12:memory:/job\n4:cpu,cpuacct:/job\n0::/\n";
  q = read_cgroup_quota(v1.str(), self);
  REQUIRE(q);
  CHECK(q->cpus == 2.0);
  CHECK(q->source == "cpu.cfs_quota_us 200000 / cpu.cfs_period_us 100000");
  // a v1 line without the cpu controller is not read
  CHECK_FALSE(read_cgroup_quota(v1.str(), "12:memory:/job\n"));
}

TEST_CASE("cpu budget: physical cores of an affinity mask", "[threads][cpu_budget]") {
  const temp_tree t("sysfs");
  // 4 logical CPUs, SMT pairs (0,2) and (1,3)
  for (int c = 0; c < 4; ++c)
    t.write("cpu" + std::to_string(c) + "/topology/core_cpus_list", c % 2 == 0 ? "0,2\n" : "1,3\n");
  CHECK(physical_cores_of({0, 1, 2, 3}, t.str()) == 2);
  CHECK(physical_cores_of({0, 2}, t.str()) == 1);
  CHECK(physical_cores_of({0, 1}, t.str()) == 2);
  CHECK(physical_cores_of({3}, t.str()) == 1);
  // older kernels: thread_siblings_list
  const temp_tree old("sysfs_old");
  old.write("cpu0/topology/thread_siblings_list", "0-1\n");
  old.write("cpu1/topology/thread_siblings_list", "0-1\n");
  CHECK(physical_cores_of({0, 1}, old.str()) == 1);
  // unreadable topology: every CPU counts
  CHECK(physical_cores_of({0, 1, 2}, "/nonexistent/kfuse") == 3);
}

TEST_CASE("cpu budget: pool size and its reason", "[threads][cpu_budget]") {
  cpu_budget_inputs in;
  in.online = 2;
  in.affinity_cpus = in.affinity_cores = 1;
  auto b = decide_thread_budget(in);
  CHECK(b.threads == 1);
  CHECK(b.reason == "1 thread: 1 core in the affinity mask of 2 online; no cgroup quota");
  CHECK(b.warning.empty());

  in.affinity_cpus = in.affinity_cores = 2;
  CHECK(decide_thread_budget(in).threads == 2);
  in.affinity_cpus = 4;  // SMT: 4 logical CPUs, 2 cores
  in.online = 4;
  b = decide_thread_budget(in);
  CHECK(b.threads == 2);
  CHECK(b.reason ==
        "2 threads: 4 CPUs (2 cores) in the affinity mask of 4 online; no cgroup quota");

  in.quota = cpu_quota{0.5, "cpu.max 50000 100000"};
  b = decide_thread_budget(in);
  CHECK(b.threads == 1);
  CHECK(b.reason.find("cgroup quota of 0.5 CPUs (cpu.max 50000 100000) caps it at 1") !=
        std::string::npos);
  in.quota = cpu_quota{1.5, "cpu.max 150000 100000"};
  CHECK(decide_thread_budget(in).threads == 2);  // rounded up, capped by the cores
  in.affinity_cpus = in.affinity_cores = 8;
  in.online = 8;
  CHECK(decide_thread_budget(in).threads == 2);
  in.quota.reset();
  CHECK(decide_thread_budget(in).threads == 8);

  // KFUSE_NUM_THREADS: a whole number from 1 to 4 x online overrides; the rest is ignored with
  // a warning, never a pool of 0 or 1000.
  in.env = "3";
  b = decide_thread_budget(in);
  CHECK(b.threads == 3);
  CHECK(b.warning.empty());
  CHECK(b.reason.find("KFUSE_NUM_THREADS=3") != std::string::npos);
  in.env = " 32 ";
  CHECK(decide_thread_budget(in).threads == 32);
  for (const char* bad :
       {"0", "-4", "", "abc", "2x", "1.5", "33", "1000", "99999999999999999999"}) {
    INFO("KFUSE_NUM_THREADS='" << bad << "'");
    in.env = bad;
    b = decide_thread_budget(in);
    CHECK(b.threads == 8);
    CHECK(b.warning.find("is not a whole number from 1 to 32; ignored") != std::string::npos);
  }
  CHECK(max_env_threads(1) == 4);
  CHECK(max_env_threads(100000) == 1024);
}

TEST_CASE("cpu budget: this process's affinity mask is read", "[threads][cpu_budget]") {
  const auto cpus = affinity_cpus();
  REQUIRE(!cpus.empty());
  const auto in = current_cpu_budget_inputs();
  CHECK(in.affinity_cpus == int(cpus.size()));
  CHECK(in.affinity_cores >= 1);
  CHECK(in.affinity_cores <= in.affinity_cpus);
  CHECK(in.online >= in.affinity_cpus);
  const thread_budget b = current_thread_budget();
  CHECK(b.threads >= 1);
  CHECK(!b.reason.empty());
#if defined(__linux__)
  // Pinned to one CPU (this thread; threads it starts inherit it): one core.
  std::thread([&] {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpus.front(), &set);
    REQUIRE(sched_setaffinity(0, sizeof set, &set) == 0);
    const auto pinned = current_cpu_budget_inputs();
    CHECK(pinned.affinity_cpus == 1);
    CHECK(pinned.affinity_cores == 1);
    if (!pinned.env) CHECK(current_thread_budget().threads == 1);
  }).join();
#endif
}
