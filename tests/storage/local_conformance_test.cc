// The conformance suite (conformance.hpp) against storage/local.
#include <stdlib.h>

#include <filesystem>

#include "conformance.hpp"
#include "storage/local/local_store.hpp"

namespace objdirect::storage::conformance {
namespace {

Result<std::unique_ptr<ObjectStore>> open_dir(const std::string& dir) {
  LocalStoreOptions o;
  o.data_dir = dir;
  o.fsync = false;  // a SIGKILL keeps the page cache; fsync is covered by local_store_crash_test
  o.lmdb_map_size_bytes = 1ull << 30;
  return open_local_store(o);
}

class LocalBackend : public TestBackend {
 public:
  explicit LocalBackend(std::string dir) : dir_(std::move(dir)) {}
  ~LocalBackend() override { std::filesystem::remove_all(dir_); }
  Result<std::unique_ptr<ObjectStore>> open() override { return open_dir(dir_); }
  std::string location() const override { return dir_; }

 private:
  std::string dir_;
};

const BackendFactory& local_factory() {
  static const BackendFactory f{"local",
                                []() -> Result<std::unique_ptr<TestBackend>> {
                                  char tmpl[] = "/tmp/objdirect-conformance-XXXXXX";
                                  if (::mkdtemp(tmpl) == nullptr)
                                    return Status(Errc::io_error, "mkdtemp failed");
                                  return std::unique_ptr<TestBackend>(new LocalBackend(tmpl));
                                },
                                open_dir, nullptr};
  return f;
}

INSTANTIATE_TEST_SUITE_P(Local, Conformance, ::testing::Values(&local_factory()), conformance_name);

}  // namespace
}  // namespace objdirect::storage::conformance
