// The conformance suite (conformance.hpp) against storage/s3 (gateway mode) in front of a real
// second objdirect-server that each test starts on port 0 with its own temporary data dir.
//
// Adaptations (BackendFactory flags, explained in conformance.hpp):
//  - backend_etags: the upstream computes the ETags (MD5), the caller's are replaced.
//  - snapshot_readers = false: a reader pins the ETag it opened (If-Match on every ranged GET),
//    so a replaced object fails the read with precondition_failed instead of being served from
//    an old version the upstream may already have dropped. Never mixed bytes.
//  - owners_and_parts = false: S3 has no place for the gateway users' bucket owners or for a
//    multipart object's parts list on HEAD.
//  - part_bytes_min = 5 MiB, utf8_keys_only: the upstream enforces S3's rules (minimum part
//    size, UTF-8 keys) as the gateway's own S3 layer does for its clients.
// The kill -9 test holds as is: the writer process is an S3Store client whose spool dies with
// it; the upstream commits only a complete PutObject / CompleteMultipartUpload.
#include <memory>

#include "conformance.hpp"
#include "storage/s3/s3_store.hpp"
#include "upstream_server.hpp"

namespace objdirect::storage::conformance {
namespace {

S3StoreOptions options(const std::string& url) {
  S3StoreOptions o;
  o.upstream = url;
  o.access_key = testing_upstream::kAccessKey;
  o.secret_key = testing_upstream::kSecretKey;
  o.spool_memory_bytes = 64 << 10;  // larger objects exercise the spool file
  return o;
}

Result<std::unique_ptr<ObjectStore>> attach(const std::string& location) {
  return open_s3_store(options(location));
}

class GatewayBackend : public TestBackend {
 public:
  Status start() { return upstream_.start(); }
  Result<std::unique_ptr<ObjectStore>> open() override {
    return open_s3_store(options(location()));
  }
  std::string location() const override { return upstream_.url(); }

 private:
  testing_upstream::UpstreamServer upstream_;
};

const BackendFactory& gateway_factory() {
  static const BackendFactory f = [] {
    BackendFactory b;
    b.name = "gateway";
    b.create = []() -> Result<std::unique_ptr<TestBackend>> {
      auto be = std::make_unique<GatewayBackend>();
      OBJDIRECT_RETURN_IF_ERROR(be->start());
      return std::unique_ptr<TestBackend>(std::move(be));
    };
    b.attach = attach;
    b.backend_etags = true;
    b.snapshot_readers = false;
    b.owners_and_parts = false;
    b.part_bytes_min = 5 << 20;
    b.utf8_keys_only = true;
    b.tags = false;
    return b;
  }();
  return f;
}

INSTANTIATE_TEST_SUITE_P(Gateway, Conformance, ::testing::Values(&gateway_factory()),
                         conformance_name);

}  // namespace
}  // namespace objdirect::storage::conformance
