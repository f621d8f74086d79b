// libFuzzer target for evaluate_read/parse_write_conditions/unquote_etag (built with
// -DOBJDIRECT_FUZZ=ON; see CMakeLists.txt). conditional_fuzz_one is also replayed by
// conditional_test.cc so the ordinary build checks it.
// Input: 8 bytes of mtime (ns), then up to five '\n'-separated fields: If-Match, If-None-Match,
// If-Modified-Since, If-Unmodified-Since, object ETag. A field "-" means the header is absent.
// Every invariant failure aborts.
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "s3/conditional.hpp"

namespace objdirect::s3 {

bool conditional_fuzz_one(const std::uint8_t* data, std::size_t size) {
  std::int64_t mtime_ns = 0;
  if (size >= 8) {
    std::memcpy(&mtime_ns, data, 8);
    data += 8;
    size -= 8;
  }
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::array<std::optional<std::string>, 5> f;
  for (auto& field : f) {
    const std::size_t nl = in.find('\n');
    const std::string_view v = in.substr(0, nl);
    if (v != "-") field = std::string(v);
    if (nl == std::string_view::npos) {
      in = {};
      break;
    }
    in.remove_prefix(nl + 1);
  }
  Conditions c;
  c.if_match = f[0];
  c.if_none_match = f[1];
  c.if_modified_since = f[2];
  c.if_unmodified_since = f[3];
  const std::string etag = f[4].value_or("0123456789abcdef0123456789abcdef");

  const Status st = evaluate_read(c, etag, mtime_ns);
  if (st.code() != Errc::ok && st.code() != Errc::precondition_failed &&
      st.code() != Errc::not_modified) {
    return false;
  }
  if (!st.ok() && st.message().empty()) return false;
  if (evaluate_read(c, etag, mtime_ns).code() != st.code()) return false;  // pure

  // Model checks that do not depend on date parsing.
  const std::string bare = unquote_etag(etag);
  const bool plain_tag =
      !bare.empty() && bare.find_first_of("\", \t") == std::string::npos && !bare.starts_with("W/");
  if (plain_tag) {
    Conditions m;
    m.if_match = "\"" + bare + "\"";
    if (!evaluate_read(m, etag, mtime_ns).ok()) return false;
    m.if_none_match = "W/\"" + bare + "\"";
    if (evaluate_read(m, etag, mtime_ns).code() != Errc::not_modified) return false;
    m.if_match = "\"" + bare + "x\"";
    if (evaluate_read(m, etag, mtime_ns).code() != Errc::precondition_failed) return false;
  }

  auto w = parse_write_conditions(c.if_match, c.if_none_match);
  if (w.ok()) {
    if (w->kind == WriteConditionSpec::Kind::etag_must_match && w->etag.empty()) return false;
    if (w->kind != WriteConditionSpec::Kind::etag_must_match && !w->etag.empty()) return false;
  } else if (w.code() != Errc::not_implemented && w.code() != Errc::invalid_argument) {
    return false;
  } else if (w.status().message().empty()) {
    return false;
  }
  // unquote_etag only ever removes characters.
  return unquote_etag(etag).size() <= etag.size();
}

}  // namespace objdirect::s3

#ifdef OBJDIRECT_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!objdirect::s3::conditional_fuzz_one(data, size)) std::abort();
  return 0;
}
#endif
