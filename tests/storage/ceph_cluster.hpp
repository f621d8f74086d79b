// A single-node Ceph cluster for a test process: started on first use with
// scripts/ceph-cluster.sh in a temporary directory, stopped when the process exits (a watcher
// started by the script stops it even if the process is killed). OBJDIRECT_CEPH_CONF names an
// existing cluster to use instead (the ctest run's shared one, scripts/ceph-fixture.sh): a test
// on it keeps to pools of its own prefix and removes them when it ends (remove_pools).
//
// Thread safety: cluster_conf() may be called from any thread (it starts the cluster once).
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <list>
#include <mutex>
#include <rados/librados.hpp>
#include <string>

#include "common/status.hpp"

namespace objdirect::storage::testing_ceph {

// Non-empty when the Ceph daemons are not installed: tests skip with this message.
// The shared cluster's ceph.conf, or null when none is named or its file is gone.
inline const char* shared_conf() {
  const char* c = std::getenv("OBJDIRECT_CEPH_CONF");
  return c != nullptr && ::access(c, R_OK) == 0 ? c : nullptr;
}

inline std::string missing_binaries() {
  if (shared_conf() != nullptr) return "";
  for (const char* b : {"/usr/bin/ceph-mon", "/usr/bin/ceph-osd", "/usr/bin/ceph"}) {
    if (::access(b, X_OK) != 0) {
      return std::string("Ceph is not installed (") + b +
             " missing): run scripts/bootstrap to test the RADOS backend";
    }
  }
  return "";
}

namespace detail {
struct Cluster {
  std::string dir, conf;
  Status status;
  bool keep = false;
  ~Cluster() {
    if (dir.empty()) return;
    const std::string cmd = std::string(OBJDIRECT_CEPH_CLUSTER_SCRIPT) + " stop " + dir;
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "ceph-cluster stop failed\n");
    if (!keep) std::filesystem::remove_all(dir);
  }
};
}  // namespace detail

// The ceph.conf of the cluster, starting it on first call.
inline Result<std::string> cluster_conf() {
  if (const char* c = shared_conf()) return std::string(c);
  static detail::Cluster cluster;
  static std::once_flag once;
  std::call_once(once, [] {
    char tmpl[] = "/tmp/objdirect-ceph-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      cluster.status = Status(Errc::io_error, "mkdtemp failed");
      return;
    }
    cluster.dir = tmpl;
    const std::string cmd = "CEPH_CLUSTER_OWNER_PID=" + std::to_string(::getpid()) + " " +
                            OBJDIRECT_CEPH_CLUSTER_SCRIPT + " start " + cluster.dir +
                            " >/dev/null 2>" + cluster.dir + ".err";
    if (std::system(cmd.c_str()) != 0) {
      cluster.status =
          Status(Errc::unavailable, "scripts/ceph-cluster.sh start failed; see " + cluster.dir +
                                        ".err and " + cluster.dir + "/log");
      cluster.keep = true;  // the logs explain the failure
      return;
    }
    std::filesystem::remove(cluster.dir + ".err");
    cluster.conf = cluster.dir + "/ceph.conf";
  });
  if (!cluster.status.ok()) return cluster.status;
  return cluster.conf;
}

// Removes every pool whose name starts with `prefix` (a store's "<prefix>.meta" and
// "<prefix>.data"), so that tests on a shared cluster leave it as they found it. Only on the
// shared cluster: a cluster of the test's own is thrown away whole. Best effort: a test's result
// does not depend on it.
inline void remove_pools(const std::string& conf, const std::string& prefix) {
  if (shared_conf() == nullptr || prefix.empty()) return;
  librados::Rados rados;
  if (rados.init2("client.admin", "ceph", 0) != 0) return;
  if (rados.conf_read_file(conf.c_str()) != 0 || rados.connect() != 0) {
    rados.shutdown();
    return;
  }
  std::list<std::string> pools;
  if (rados.pool_list(pools) == 0) {
    for (const auto& p : pools) {
      if (p.starts_with(prefix) && rados.pool_delete(p.c_str()) != 0) {
        std::fprintf(stderr, "could not remove pool %s\n", p.c_str());
      }
    }
  }
  rados.shutdown();
}

}  // namespace objdirect::storage::testing_ceph
