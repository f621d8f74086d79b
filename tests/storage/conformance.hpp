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
