#include "auth/sigv4_fuzz.hpp"

#include <cstdlib>
#include <string>
#include <string_view>

#include "auth/sigv4.hpp"
#include "common/time.hpp"

namespace objdirect::sigv4 {
namespace {

bool documented(Errc e) {
  switch (e) {
    case Errc::access_denied:
    case Errc::invalid_argument:
    case Errc::authorization_header_malformed:
    case Errc::authorization_query_parameters_error:
    case Errc::invalid_access_key_id:
    case Errc::request_time_too_skewed:
    case Errc::signature_does_not_match:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool fuzz_one(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> lines;
  while (!in.empty() && lines.size() < 32) {
    std::size_t nl = in.find('\n');
    lines.push_back(in.substr(0, nl));
    in = nl == std::string_view::npos ? std::string_view{} : in.substr(nl + 1);
  }
  std::string target = lines.empty() ? "/" : std::string(lines[0]);
  RequestView req{"GET", target, {}};
  if (lines.size() > 1 && !lines[1].empty()) req.headers.emplace_back("authorization", lines[1]);
  for (std::size_t i = 2; i < lines.size(); ++i) {
    std::size_t colon = lines[i].find(':');
    if (colon == std::string_view::npos) continue;
    req.headers.emplace_back(std::string(lines[i].substr(0, colon)),
                             std::string(lines[i].substr(colon + 1)));
  }
  auto now = std::chrono::system_clock::time_point{} + std::chrono::seconds{1'369'353'600};
  SecretLookup secrets = [](std::string_view ak) -> std::optional<std::string> {
    if (ak == "AKIAIOSFODNN7EXAMPLE")
      return std::string("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
    return std::nullopt;
  };
  auto r = verify(req, secrets, "us-east-1", now);
  if (!r.ok() && (!documented(r.code()) || r.status().message().empty())) return false;

  // presign -> verify round trip over the fuzzed path.
  std::string path = target.substr(0, target.find('?'));
  if (path.empty() || path[0] != '/') path.insert(path.begin(), '/');
  Credentials c{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"};
  std::string url =
      presign("PUT", path, "h.example", c, "us-east-1", std::chrono::seconds{60}, now);
  RequestView pre{"PUT", url, {{"host", "h.example"}}};
  auto ok = verify(pre, secrets, "us-east-1", now);
  return ok.ok() && ok->presigned;
}

}  // namespace objdirect::sigv4

#ifdef OBJDIRECT_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!objdirect::sigv4::fuzz_one(data, size)) std::abort();
  return 0;
}
#endif
