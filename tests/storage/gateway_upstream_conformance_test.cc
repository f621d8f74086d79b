// The conformance suite (conformance.hpp) against storage/s3 (gateway mode) in front of the
// upstream that scripts/with-upstream.sh started: radosgw or moto_server (OBJDIRECT_UPSTREAM_URL,
// OBJDIRECT_UPSTREAM_KIND, credentials in AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY). The
// ctest entries gateway_radosgw.conformance and gateway_moto.conformance run this binary whole;
// gateway.Gateway/Conformance.* (gateway_conformance_test.cc) is the same suite in front of a
// second objdirect-server. Without OBJDIRECT_UPSTREAM_URL every test is skipped.
//
// One upstream serves the whole run, so each test starts on an emptied account instead of a
// fresh server: every bucket of the upstream user is emptied (uploads aborted, versions and
// objects deleted) and removed before the test and after it. with-upstream.sh gives each entry
// an upstream user (radosgw) or a moto_server of its own, so nothing else lives there.
//
// Adaptations: those of gateway_conformance_test.cc (backend ETags, readers that pin their
// ETag instead of snapshots, no owners or parts lists, S3's 5 MiB minimum part size, UTF-8
// keys, no tags). Where radosgw or moto answer otherwise than S3 and the gateway cannot hide it,
// conformance.cc checks that upstream's answer where it differs and says why (see the uses of
// BackendFactory::upstream_kind there).
#include <cstdlib>
#include <memory>
#include <string>

#include "conformance.hpp"
#include "storage/s3/s3_store.hpp"

namespace objdirect::storage::conformance {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

S3StoreOptions options(const std::string& url) {
  S3StoreOptions o;
  o.upstream = url;
  o.access_key = env("AWS_ACCESS_KEY_ID");
  o.secret_key = env("AWS_SECRET_ACCESS_KEY");
  o.spool_memory_bytes = 64 << 10;  // larger objects exercise the spool file
  return o;
}

Result<std::unique_ptr<ObjectStore>> attach(const std::string& location) {
  return open_s3_store(options(location));
}

// Removes every bucket of the upstream account with everything in it.
Status empty_account(ObjectStore& s) {
  auto buckets = s.list_buckets();
  if (!buckets.ok()) return buckets.status();
  for (const BucketInfo& b : *buckets) {
    for (int guard = 0; guard < 1000; ++guard) {
      auto ups = s.list_uploads(b.name, {});
      if (!ups.ok()) return ups.status();
      for (const UploadInfo& u : ups->uploads) {
        OBJDIRECT_RETURN_IF_ERROR(s.abort_upload(b.name, u.key, u.upload_id));
      }
      if (!ups->truncated) break;
    }
    for (int guard = 0; guard < 1000; ++guard) {
      auto vs = s.list_object_versions(b.name, {});
      if (!vs.ok() && vs.code() != Errc::not_implemented) return vs.status();
      if (!vs.ok() || vs->versions.empty()) break;
      for (const ObjectVersion& v : vs->versions) {
        auto d = s.delete_object_version(b.name, v.meta.key,
                                         v.meta.version_id.empty() ? "null" : v.meta.version_id);
        if (!d.ok()) return d.status();
      }
    }
    for (int guard = 0; guard < 1000; ++guard) {
      auto l = s.list_objects(b.name, {});
      if (!l.ok()) return l.status();
      if (l->objects.empty()) break;
      for (const ObjectMeta& m : l->objects) {
        OBJDIRECT_RETURN_IF_ERROR(s.delete_object(b.name, m.key));
      }
    }
    OBJDIRECT_RETURN_IF_ERROR(s.delete_bucket(b.name));
  }
  return Status::Ok();
}

class UpstreamBackend : public TestBackend {
 public:
  ~UpstreamBackend() override {
    if (auto s = open(); s.ok()) (void)empty_account(**s);
  }
  Status start() {
    auto s = open();
    if (!s.ok()) return s.status();
    return empty_account(**s);
  }
  Result<std::unique_ptr<ObjectStore>> open() override {
    return open_s3_store(options(location()));
  }
  std::string location() const override { return env("OBJDIRECT_UPSTREAM_URL"); }
};

const BackendFactory& upstream_factory() {
  static const BackendFactory f = [] {
    BackendFactory b;
    const std::string kind = env("OBJDIRECT_UPSTREAM_KIND");
    b.name = "gateway_" + (kind == "radosgw" || kind == "moto" ? kind : std::string("upstream"));
    b.upstream_kind = kind;
    b.skip_reason = [] {
      return env("OBJDIRECT_UPSTREAM_URL").empty()
                 ? std::string("run by scripts/with-upstream.sh (OBJDIRECT_UPSTREAM_URL)")
                 : std::string();
    };
    b.create = []() -> Result<std::unique_ptr<TestBackend>> {
      auto be = std::make_unique<UpstreamBackend>();
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

INSTANTIATE_TEST_SUITE_P(Upstream, Conformance, ::testing::Values(&upstream_factory()),
                         conformance_name);

}  // namespace
}  // namespace objdirect::storage::conformance
