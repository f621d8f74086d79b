// The conformance suite (conformance.hpp) against storage/cache's CachingStore in front of
// storage/local: the read-through cache must keep every ObjectStore guarantee when all writes go
// through it. Small blocks (64 KiB) and a small cache (4 MiB) make the suite's objects span many
// blocks and force evictions; the cache directory survives reopen() and the kill test's child.
#include <stdlib.h>

#include <filesystem>

#include "conformance.hpp"
#include "storage/cache/caching_store.hpp"
#include "storage/local/local_store.hpp"

namespace objdirect::storage::conformance {
namespace {

Result<std::unique_ptr<ObjectStore>> open_dir(const std::string& dir) {
  LocalStoreOptions o;
  o.data_dir = dir + "/data";
  o.fsync = false;  // a SIGKILL keeps the page cache; fsync is covered by local_store_crash_test
  o.lmdb_map_size_bytes = 1ull << 30;
  auto local = open_local_store(o);
  if (!local.ok()) return local.status();
  cache::CacheOptions c;
  c.dir = dir + "/cache";
  c.block_bytes = cache::cache_limits::block_bytes_min;
  c.bytes_max = 4ull << 20;
  c.ttl_s = 60;
  auto store = cache::CachingStore::open(std::move(*local), c);
  if (!store.ok()) return store.status();
  return std::unique_ptr<ObjectStore>(std::move(*store));
}

class CachedLocalBackend : public TestBackend {
 public:
  explicit CachedLocalBackend(std::string dir) : dir_(std::move(dir)) {}
  ~CachedLocalBackend() override { std::filesystem::remove_all(dir_); }
  Result<std::unique_ptr<ObjectStore>> open() override { return open_dir(dir_); }
  std::string location() const override { return dir_; }

 private:
  std::string dir_;
};

const BackendFactory& cached_local_factory() {
  static const BackendFactory f{"cached_local",
                                []() -> Result<std::unique_ptr<TestBackend>> {
                                  char tmpl[] = "/tmp/objdirect-cache-conformance-XXXXXX";
                                  if (::mkdtemp(tmpl) == nullptr)
                                    return Status(Errc::io_error, "mkdtemp failed");
                                  return std::unique_ptr<TestBackend>(new CachedLocalBackend(tmpl));
                                },
                                open_dir, nullptr};
  return f;
}

INSTANTIATE_TEST_SUITE_P(CachedLocal, Conformance, ::testing::Values(&cached_local_factory()),
                         conformance_name);

}  // namespace
}  // namespace objdirect::storage::conformance
