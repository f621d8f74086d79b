#include "server/s3/conditional.hpp"

#include <array>
#include <vector>

namespace objdirect::s3 {
namespace {

bool is_ows(char c) {
  return c == ' ' || c == '\t';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
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

// Days since 1970-01-01 for a proleptic Gregorian date (H. Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

std::optional<int> parse_int(std::string_view s, std::size_t min_digits, std::size_t max_digits) {
  if (s.size() < min_digits || s.size() > max_digits) return std::nullopt;
  int v = 0;
  for (char c : s) {
    if (!is_digit(c)) return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

std::optional<unsigned> parse_month(std::string_view s) {
  static constexpr std::array<std::string_view, 12> kMonths = {
      "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (unsigned i = 0; i < kMonths.size(); ++i) {
    if (s == kMonths[i]) return i + 1;
  }
  return std::nullopt;
}

bool is_alpha_word(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'))) return false;
  }
  return true;
}

// "HH:MM:SS" -> seconds of the day.
std::optional<std::int64_t> parse_time_of_day(std::string_view s) {
  if (s.size() != 8 || s[2] != ':' || s[5] != ':') return std::nullopt;
  const auto h = parse_int(s.substr(0, 2), 2, 2);
  const auto m = parse_int(s.substr(3, 2), 2, 2);
  const auto sec = parse_int(s.substr(6, 2), 2, 2);
  if (!h || !m || !sec || *h > 23 || *m > 59 || *sec > 60) return std::nullopt;
  // A leap second (60) is accepted and counted as the last second of the minute.
  return *h * 3600 + *m * 60 + (*sec == 60 ? 59 : *sec);
}

bool is_leap(int y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

unsigned days_in_month(int y, unsigned m) {
  static constexpr std::array<unsigned, 12> kDays = {31, 28, 31, 30, 31, 30,
                                                     31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap(y) ? 29 : kDays[m - 1];
}

}  // namespace

namespace detail {

std::optional<std::int64_t> parse_http_date_s(std::string_view s) {
  if (s.size() > 64) return std::nullopt;
  // Split on the separators of all three formats: ' ' and ',' (IMF-fixdate, asctime) and '-'
  // (RFC 850's "06-Nov-94").
  std::array<std::string_view, 8> tok;
  std::size_t count = 0;
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == ',' || s[i] == '-')) ++i;
    if (i == s.size()) break;
    const std::size_t start = i;
    while (i < s.size() && !(s[i] == ' ' || s[i] == '\t' || s[i] == ',' || s[i] == '-')) ++i;
    if (count == tok.size()) return std::nullopt;
    tok[count++] = s.substr(start, i - start);
  }
  std::optional<int> day, year;
  std::optional<unsigned> month;
  std::optional<std::int64_t> tod;
  if (count == 6 && is_alpha_word(tok[0]) && (tok[5] == "GMT" || tok[5] == "UTC")) {
    // IMF-fixdate or RFC 850: wkday, DD Mon YYYY HH:MM:SS GMT
    day = parse_int(tok[1], 1, 2);
    month = parse_month(tok[2]);
    year = parse_int(tok[3], 2, 4);
    if (tok[3].size() == 3) return std::nullopt;
    if (year && tok[3].size() == 2) *year += *year < 70 ? 2000 : 1900;
    tod = parse_time_of_day(tok[4]);
  } else if (count == 5 && is_alpha_word(tok[0])) {
    // asctime: wkday Mon D HH:MM:SS YYYY
    month = parse_month(tok[1]);
    day = parse_int(tok[2], 1, 2);
    tod = parse_time_of_day(tok[3]);
    year = parse_int(tok[4], 4, 4);
  } else {
    return std::nullopt;
  }
  if (!day || !month || !year || !tod || *year < 1 || *day < 1 ||
      static_cast<unsigned>(*day) > days_in_month(*year, *month)) {
    return std::nullopt;
  }
  return days_from_civil(*year, *month, static_cast<unsigned>(*day)) * 86400 + *tod;
}

}  // namespace detail

Status evaluate_read(const Conditions& c, std::string_view etag_arg, std::int64_t mtime_ns) {
  const std::string etag = unquote_etag(etag_arg);
  const std::int64_t mtime_s = seconds_of(mtime_ns);

  if (const auto im = present(c.if_match)) {
    if (!list_matches(parse_tag_list(*im), etag, /*strong=*/true)) {
      return Status(Errc::precondition_failed,
                    "At least one of the pre-conditions you specified did not hold (If-Match)");
    }
  } else if (const auto ius = present(c.if_unmodified_since)) {
    if (const auto t = detail::parse_http_date_s(*ius); t && mtime_s > *t) {
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
    if (const auto t = detail::parse_http_date_s(*ims); t && mtime_s <= *t) {
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
