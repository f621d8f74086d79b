// The ObjectStore conformance suite: one set of tests (conformance.cc) that every backend must
// pass. A backend's test binary links conformance.cc and instantiates the suite with a factory:
//
//   INSTANTIATE_TEST_SUITE_P(Local, Conformance, ::testing::Values(&my_factory()),
//                            conformance_name);
//
// The suite covers buckets, objects across many appends and reads at random offsets, snapshot
// readers, concurrent overwriters of one key, conditional writes (alone and racing), multipart
// uploads, listing (prefix, delimiter, continuation, more than 1,024 keys) and a SIGKILL of a
// writer process between its data writes and its commit.
//
// The kill test re-executes the test binary (/proc/self/exe) with
// OBJDIRECT_CONFORMANCE_CHILD=<location> so that the writer runs in a fresh process that opens
// the backend with attach(); a forked copy of a multi-threaded client library is not safe to use.
//
// Thread safety: factories are immutable after construction; the tests use them from one thread.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "common/status.hpp"
#include "storage/object_store.hpp"

namespace objdirect::storage::conformance {

// The data behind one test: a temporary directory, a set of pools in a test cluster.
// Destroying it deletes the data.
class TestBackend {
 public:
  virtual ~TestBackend() = default;
  // Opens a store on the data. Only one store from open() is alive at a time (the suite drops
  // the previous one first), since some backends allow one owner per data set.
  virtual Result<std::unique_ptr<ObjectStore>> open() = 0;
  // A string from which BackendFactory::attach opens the same data in another process.
  virtual std::string location() const = 0;
};

struct BackendFactory {
  std::string name;  // test name suffix: letters, digits, underscore
  // A fresh, empty backend. May return an error to fail the test.
  std::function<Result<std::unique_ptr<TestBackend>>()> create;
  // Opens the data named by TestBackend::location() (in the kill test's child process).
  std::function<Result<std::unique_ptr<ObjectStore>>(const std::string& location)> attach;
  // Non-empty: every test is skipped with this message (e.g. the Ceph binaries are missing).
  std::function<std::string()> skip_reason;

  // What a backend in front of another S3 service (storage/s3, the gateway) cannot do; the
  // tests check the weaker promise instead (see each use in conformance.cc):
  //  - backend_etags: the backend stores the ETag its upstream computes (MD5 of the data;
  //    md5-of-part-md5s "-N" for multipart), not the caller's meta.etag.
  bool backend_etags = false;
  //  - snapshot_readers false: a reader whose object is replaced or deleted fails with
  //    precondition_failed / no_such_key instead of returning the version it opened. It never
  //    returns bytes of another version.
  bool snapshot_readers = true;
  //  - owners_and_parts false: bucket owners and an object's parts list are not kept (all
  //    buckets belong to the upstream account; S3 HEAD has no parts list).
  bool owners_and_parts = true;
  //  - part_bytes_min: the upstream enforces S3's minimum part size (5 MiB) for all parts but
  //    the last; multipart tests use parts at least this large. 0: no minimum.
  std::uint64_t part_bytes_min = 0;
  //  - utf8_keys_only: keys must be valid UTF-8 (S3 rejects others); the listing test's
  //    high-byte key becomes the highest UTF-8 character instead of 0xff 0xfe.
  bool utf8_keys_only = false;
  //  - tags false: the object and bucket tags are kept elsewhere (the gateway's upstream:
  //    tags_in_meta() false, read with get_object_version_tags and get_bucket_tags, never in
  //    head_object or head_bucket); the Tags test then checks the pass-through.
  bool tags = true;
  // The S3 service behind a gateway backend other than ObjDirect ("radosgw", "moto"; empty
  // otherwise): where that upstream answers otherwise than S3 and the gateway cannot hide it,
  // the tests check that upstream's answer and say why.
  std::string upstream_kind;
};

class Conformance : public ::testing::TestWithParam<const BackendFactory*> {
 protected:
  void SetUp() override;
  void TearDown() override;
  // Drops the current store and opens a new one on the same data.
  void reopen();
  void make_bucket(const std::string& name);

  std::unique_ptr<TestBackend> backend_;
  std::unique_ptr<ObjectStore> store_;
  bool child_ = false;  // running as the kill test's writer process
};

inline std::string conformance_name(const ::testing::TestParamInfo<const BackendFactory*>& info) {
  return info.param->name;
}

}  // namespace objdirect::storage::conformance
