#include "common/status.hpp"

#include <array>

namespace objdirect {
namespace {

struct ErrcInfo {
  std::string_view name;
  std::string_view s3;
  int http;
};

constexpr std::array kErrcTable = {
#define OBJDIRECT_ERRC_INFO(name, s3, http) ErrcInfo{#name, s3, http},
    OBJDIRECT_ERRC_TABLE(OBJDIRECT_ERRC_INFO)
#undef OBJDIRECT_ERRC_INFO
};

const ErrcInfo& info(Errc e) noexcept {
  auto i = static_cast<std::size_t>(e);
  return i < kErrcTable.size() ? kErrcTable[i]
                               : kErrcTable[static_cast<std::size_t>(Errc::internal)];
}

}  // namespace

std::string_view s3_code(Errc e) noexcept {
  return info(e).s3;
}
int http_status(Errc e) noexcept {
  return info(e).http;
}
std::string_view errc_name(Errc e) noexcept {
  return info(e).name;
}

Errc from_s3_code(std::string_view code) noexcept {
  // The first entry with this S3 code wins; the table lists the canonical Errc first.
  for (std::size_t i = 0; i < kErrcTable.size(); ++i) {
    if (kErrcTable[i].s3 == code) return static_cast<Errc>(i);
  }
  return Errc::internal;
}

Errc from_http_status(int status) noexcept {
  switch (status) {
    case 304:
      return Errc::not_modified;
    case 400:
      return Errc::invalid_request;
    case 403:
      return Errc::access_denied;
    case 404:
      return Errc::no_such_key;
    case 405:
      return Errc::method_not_allowed;
    case 409:
      return Errc::conditional_conflict;
    case 411:
      return Errc::missing_content_length;
    case 412:
      return Errc::precondition_failed;
    case 416:
      return Errc::invalid_range;
    case 501:
      return Errc::not_implemented;
    case 503:
      return Errc::unavailable;
    default:
      return Errc::internal;
  }
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  std::string out(errc_name(code_));
  out += ": ";
  out += message_;
  return out;
}

}  // namespace objdirect
