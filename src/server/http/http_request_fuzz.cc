// libFuzzer target for a whole HTTP request through the server's request path (see
// http_request_fuzz.hpp). Build: scripts/fuzz.sh (or cmake -DOBJDIRECT_FUZZ=ON with clang-14).
#include "server/http/http_request_fuzz.hpp"

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "server/s3/s3_service.hpp"
#include "storage/local/local_store.hpp"

namespace objdirect::http {
namespace {

// A small header limit so that the fuzzer reaches the 431 path with short inputs.
constexpr std::size_t kHeaderBytesMax = 4096;

struct Fixture {
  std::filesystem::path dir;
  std::shared_ptr<s3::S3Service> service;
  ServerOptions opts;

  Fixture() {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/objdirect-http-fuzz-XXXXXX";
    if (!::mkdtemp(templ.data())) std::abort();
    dir = templ;
    storage::LocalStoreOptions sopts;
    sopts.data_dir = (dir / "data").string();
    sopts.fsync = false;
    sopts.lmdb_map_size_bytes = 1ull << 30;
    auto store = storage::open_local_store(sopts);
    if (!store.ok()) std::abort();
    std::shared_ptr<storage::ObjectStore> shared(std::move(*store));
    storage::BucketInfo b;
    b.name = kFuzzBucket;
    b.owner = kFuzzAccessKey;
    b.region = "us-east-1";
    if (!shared->create_bucket(b).ok()) std::abort();
    s3::S3Options o;
    o.users[kFuzzAccessKey] = s3::User{kFuzzAccessKey, kFuzzSecretKey};
    o.io_buffer_bytes = 64 * 1024;
    o.auth_clock = [] {
      return std::chrono::system_clock::time_point(std::chrono::seconds(kFuzzClockUnix));
    };
    service = std::make_shared<s3::S3Service>(std::move(o), std::move(shared));
    opts.header_bytes_max = kHeaderBytesMax;
  }
  ~Fixture() {
    service.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

}  // namespace

std::vector<BufferedResponse> http_request_fuzz_run(const std::uint8_t* data, std::size_t size) {
  Fixture& f = fixture();
  return serve_buffer(*f.service, std::string_view(reinterpret_cast<const char*>(data), size),
                      f.opts);
}

bool http_request_fuzz_one(const std::uint8_t* data, std::size_t size) {
  auto responses = http_request_fuzz_run(data, size);
  const std::string_view raw(reinterpret_cast<const char*>(data), size);
  for (const auto& r : responses) {
    if (r.status < 100 || r.status > 599) return false;
    if (r.status >= 400 && !r.body.empty() &&
        (r.body.find("<Error>") == std::string::npos || r.body.find("<Code>") == std::string::npos))
      return false;
    // 431 only when the input holds more header bytes than the limit allows.
    if (r.status == 431 && raw.size() <= kHeaderBytesMax) return false;
  }
  return true;
}

}  // namespace objdirect::http

#ifdef OBJDIRECT_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!objdirect::http::http_request_fuzz_one(data, size)) std::abort();
  return 0;
}
#endif
