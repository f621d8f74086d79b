#include "s3/conditional.hpp"

#include <chrono>
#include <vector>

#include "common/time.hpp"

namespace objdirect::s3 {
namespace {

bool is_ows(char c) {
  return c == ' ' || c == '\t';
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && is_ows(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ows(s.back())) s.remove_suffix(1);
  return s;
}

// A header that is absent, empty or only whitespace imposes no condition.
std::optional<std::string_view> present(const std::optional<std::string>& h) {
  if (!h) return std::nullopt;
  std::string_view v = trim_ows(*h);
  if (v.empty()) return std::nullopt;
  return v;
}

struct EntityTag {
  bool weak = false;
  std::string_view value;
};

// One parsed If-Match / If-None-Match value: "*" or a list of entity-tags. Parsing stops at the
// first malformed element (an unterminated quote, junk after a tag); the tags before it still
// count, and nothing after it matches.
struct TagList {
  bool any = false;
  std::vector<EntityTag> tags;
  bool complete = true;  // false when parsing stopped at a malformed element
};

TagList parse_tag_list(std::string_view v) {
  TagList out;
  std::size_t i = 0;
  const std::size_t n = v.size();
  while (i < n) {
    while (i < n && (is_ows(v[i]) || v[i] == ',')) ++i;
    if (i == n) break;
    if (v[i] == '*') {
      ++i;
      if (i < n && !is_ows(v[i]) && v[i] != ',') {  // "*abc" is not "*"
        out.complete = false;
        break;
      }
      out.any = true;
    } else {
      EntityTag tag;
      if (v.substr(i).starts_with("W/")) {
        tag.weak = true;
        i += 2;
      }
      if (i < n && v[i] == '"') {
        const std::size_t close = v.find('"', i + 1);
        if (close == std::string_view::npos) {  // unterminated quote
          out.complete = false;
          break;
        }
        tag.value = v.substr(i + 1, close - i - 1);
        i = close + 1;
      } else {
        // Bare tag (S3 accepts If-Match: abc without quotes).
        const std::size_t start = i;
        while (i < n && !is_ows(v[i]) && v[i] != ',' && v[i] != '"') ++i;
        if (i == start) {
          out.complete = false;
          break;
        }
        tag.value = v.substr(start, i - start);
      }
      out.tags.push_back(tag);
    }
    while (i < n && is_ows(v[i])) ++i;
    if (i < n && v[i] != ',') {  // junk after an element
      out.complete = false;
      break;
    }
  }
  return out;
}

// RFC 9110 8.8.3.2: strong comparison needs both tags strong; weak comparison ignores W/.
bool list_matches(const TagList& list, std::string_view etag, bool strong) {
  if (list.any) return true;
  for (const EntityTag& t : list.tags) {
    if (strong && t.weak) continue;
    if (t.value == etag) return true;
  }
  return false;
}

// Floor division, so that objects modified before 1970 still round down.
std::int64_t seconds_of(std::int64_t ns) {
  std::int64_t s = ns / 1'000'000'000;
  if (ns % 1'000'000'000 < 0) --s;
  return s;
}

// Seconds since the epoch for an HTTP-date in any of the three formats RFC 9110 requires a
// server to accept; nullopt when unparsable (and then the condition is ignored).
std::optional<std::int64_t> http_date_s(std::string_view v) {
  const std::optional<SysTime> t = parse_http_date(v);
  if (!t) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::seconds>(t->time_since_epoch()).count();
}

}  // namespace

Status evaluate_read(const Conditions& c, std::string_view etag_arg, std::int64_t mtime_ns) {
  const std::string etag = unquote_etag(etag_arg);
  const std::int64_t mtime_s = seconds_of(mtime_ns);

  if (const auto im = present(c.if_match)) {
    if (!list_matches(parse_tag_list(*im), etag, /*strong=*/true)) {
      return Status(Errc::precondition_failed,
                    "At least one of the pre-conditions you specified did not hold (If-Match)");
    }
  } else if (const auto ius = present(c.if_unmodified_since)) {
    if (const auto t = http_date_s(*ius); t && mtime_s > *t) {
      return Status(
          Errc::precondition_failed,
          "At least one of the pre-conditions you specified did not hold (If-Unmodified-Since)");
    }
  }

  if (const auto inm = present(c.if_none_match)) {
    if (list_matches(parse_tag_list(*inm), etag, /*strong=*/false)) {
      return Status(Errc::not_modified, "Not Modified (If-None-Match)");
    }
  } else if (const auto ims = present(c.if_modified_since)) {
    if (const auto t = http_date_s(*ims); t && mtime_s <= *t) {
      return Status(Errc::not_modified, "Not Modified (If-Modified-Since)");
    }
  }
  return Status::Ok();
}

Result<WriteConditionSpec> parse_write_conditions(const std::optional<std::string>& if_match,
                                                  const std::optional<std::string>& if_none_match) {
  const auto im = present(if_match);
  const auto inm = present(if_none_match);
  WriteConditionSpec spec;
  if (im && inm) {
    return Status(Errc::not_implemented,
                  "If-Match and If-None-Match together are not supported on writes");
  }
  if (inm) {
    if (*inm != "*") {
      return Status(Errc::not_implemented,
                    "A header you provided implies functionality that is not implemented: "
                    "If-None-Match on writes supports only '*'");
    }
    spec.kind = WriteConditionSpec::Kind::must_be_absent;
    return spec;
  }
  if (im) {
    const TagList list = parse_tag_list(*im);
    const bool single = list.complete && !list.any && list.tags.size() == 1;
    if (list.any) {
      return Status(Errc::not_implemented,
                    "A header you provided implies functionality that is not implemented: "
                    "If-Match: * on writes");
    }
    if (!single || list.tags[0].weak) {
      return Status(Errc::not_implemented,
                    "A header you provided implies functionality that is not implemented: "
                    "If-Match on writes takes exactly one strong ETag");
    }
    if (list.tags[0].value.empty()) {
      return Status(Errc::invalid_argument, "If-Match: the ETag must not be empty");
    }
    spec.kind = WriteConditionSpec::Kind::etag_must_match;
    spec.etag = std::string(list.tags[0].value);
  }
  return spec;
}

std::string unquote_etag(std::string_view etag) {
  std::string_view v = trim_ows(etag);
  if (v.starts_with("W/")) v.remove_prefix(2);
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') {
    v.remove_prefix(1);
    v.remove_suffix(1);
  }
  return std::string(v);
}

}  // namespace objdirect::s3
