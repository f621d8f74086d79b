// An application of the installed client library: creates a bucket, PUTs an object and GETs it
// back through the public API only. Usage: consumer ENDPOINT ACCESS_KEY SECRET_KEY BUCKET
#include <cstdio>
#include <cstring>
#include <objdirect/client.hpp>
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
  std::printf("GET %s/hello.txt: %llu bytes, etag %s\n", bucket.c_str(),
              static_cast<unsigned long long>(get->bytes), get->etag.c_str());
  return 0;
}
