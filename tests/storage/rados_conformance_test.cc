// The conformance suite (conformance.hpp) against storage/rados, on a single-node Ceph cluster
// that this process starts with scripts/ceph-cluster.sh (or the one named by
// OBJDIRECT_CEPH_CONF). Each test gets its own pools (a random pool prefix).
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <mutex>

#include "ceph_cluster.hpp"
#include "conformance.hpp"
#include "storage/local/meta_codec.hpp"
#include "storage/rados/rados_store.hpp"

namespace objdirect::storage::conformance {
namespace {

RadosStoreOptions options(const std::string& conf, const std::string& prefix) {
  RadosStoreOptions o;
  o.conf_file = conf;
  o.pool_prefix = prefix;
  o.stripe_bytes = 1 << 20;  // small stripes: test objects span several
  o.index_shards = 8;
  o.inflight_writes = 4;
  o.gc = false;  // rados_store_test covers the GC
  o.osd_op_timeout_s = 60;
  return o;
}

// location = "<conf>\n<prefix>"
Result<std::unique_ptr<ObjectStore>> attach(const std::string& location) {
  const auto nl = location.find('\n');
  return open_rados_store(options(location.substr(0, nl), location.substr(nl + 1)));
}

class RadosBackend : public TestBackend {
 public:
  RadosBackend(std::string conf, std::string prefix)
      : conf_(std::move(conf)), prefix_(std::move(prefix)) {}
  ~RadosBackend() override { testing_ceph::remove_pools(conf_, prefix_ + "."); }
  Result<std::unique_ptr<ObjectStore>> open() override {
    return open_rados_store(options(conf_, prefix_));
  }
  std::string location() const override { return conf_ + "\n" + prefix_; }

 private:
  std::string conf_, prefix_;
};

const BackendFactory& rados_factory() {
  static const BackendFactory f{
      "rados",
      []() -> Result<std::unique_ptr<TestBackend>> {
        auto conf = testing_ceph::cluster_conf();
        if (!conf.ok()) return conf.status();
        std::string prefix = local::BlobId::random().hex();
        prefix.resize(12);
        prefix.insert(prefix.begin(), 't');
        return std::unique_ptr<TestBackend>(new RadosBackend(*conf, prefix));
      },
      attach, testing_ceph::missing_binaries};
  return f;
}

INSTANTIATE_TEST_SUITE_P(Rados, Conformance, ::testing::Values(&rados_factory()), conformance_name);

}  // namespace
}  // namespace objdirect::storage::conformance
