// An application of the installed client library: creates a bucket, PUTs an object and GETs it
// back through the public API only. Usage: consumer ENDPOINT ACCESS_KEY SECRET_KEY BUCKET
#include <cstdio>
#include <cstring>
#include <objdirect/client.hpp>
#include <objdirect/plan.hpp>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: consumer ENDPOINT ACCESS_KEY SECRET_KEY BUCKET\n");
    return 2;
  }
  objdirect::ClientConfig cfg;
  cfg.endpoint = argv[1];
  cfg.access_key = argv[2];
  cfg.secret_key = argv[3];
  cfg.fabric = "none";
  auto client = objdirect::Client::create(cfg);
  if (!client.ok()) {
    std::fprintf(stderr, "create: %s\n", client.status().message().c_str());
    return 1;
  }
  const std::string bucket = argv[4];
  if (auto st = (*client)->create_bucket(bucket); !st.ok()) {
    std::fprintf(stderr, "create_bucket: %s\n", st.message().c_str());
    return 1;
  }
  const std::string payload = "installed package says hello";
  auto put = (*client)->put(bucket, "hello.txt", std::as_bytes(std::span(payload)));
  if (!put.ok()) {
    std::fprintf(stderr, "put: %s\n", put.status().message().c_str());
    return 1;
  }
  std::vector<std::byte> got(payload.size());
  auto get = (*client)->get(bucket, "hello.txt", got);
  if (!get.ok()) {
    std::fprintf(stderr, "get: %s\n", get.status().message().c_str());
    return 1;
  }
  if (get->bytes != payload.size() || std::memcmp(got.data(), payload.data(), got.size()) != 0) {
    std::fprintf(stderr, "get: wrong bytes (%llu)\n", static_cast<unsigned long long>(get->bytes));
    return 1;
  }
  // The public plan (objdirect/plan.hpp) cuts as put did: one PutObject for this payload (its
  // ETag has no "-N"), and 3 parts of 5 MiB for 12 MiB.
  auto single =
      objdirect::plan_upload(payload.size(), cfg.part_size_bytes, cfg.multipart_threshold_bytes);
  auto multi = objdirect::plan_upload(12u << 20, 5u << 20);
  if (!single.ok() || single->multipart || put->etag.find('-') != std::string::npos ||
      !multi.ok() || !multi->multipart || multi->parts.size() != 3 ||
      multi->parts[2].offset != (10u << 20) || multi->parts[2].part_number != 3) {
    std::fprintf(stderr, "plan_upload: not the plan put used\n");
    return 1;
  }
  std::printf("GET %s/hello.txt: %llu bytes, etag %s\n", bucket.c_str(),
              static_cast<unsigned long long>(get->bytes), get->etag.c_str());
  return 0;
}
