#include "common/time.hpp"

#include <array>
#include <cstdio>

namespace objdirect {

namespace {

using namespace std::chrono;

constexpr std::array<std::string_view, 7> kWeekdays = {"Sun", "Mon", "Tue", "Wed",
                                                       "Thu", "Fri", "Sat"};
constexpr std::array<std::string_view, 7> kWeekdaysLong = {
    "Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"};
constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

struct Civil {
  int year;
  unsigned month, day, hour, minute, second;
  unsigned weekday;  // 0 = Sunday
  long long millis;  // 0..999
};

Civil to_civil(SysTime t) {
  auto ms = floor<milliseconds>(t);
  auto day = floor<days>(ms);
  year_month_day ymd{day};
  hh_mm_ss hms{ms - day};
  return Civil{static_cast<int>(ymd.year()),
               static_cast<unsigned>(ymd.month()),
               static_cast<unsigned>(ymd.day()),
               static_cast<unsigned>(hms.hours().count()),
               static_cast<unsigned>(hms.minutes().count()),
               static_cast<unsigned>(hms.seconds().count()),
               weekday{day}.c_encoding(),
               hms.subseconds().count()};
}

// The years SysTime (system_clock: signed 64-bit nanoseconds) holds whole: 1677-09-21 to
// 2262-04-11. A date outside them used to overflow the seconds -> nanoseconds conversion (signed
// overflow, undefined behaviour; found by http_request_fuzz with x-amz-date 40520202T000000Z).
constexpr int year_min = 1678;
constexpr int year_max = 2261;

// Builds a time point from fields; nullopt if any is out of range.
std::optional<SysTime> from_fields(int y, int mo, int d, int h, int mi, int s, long long ms = 0) {
  if (y < year_min || y > year_max || mo < 1 || mo > 12 || d < 1 || d > 31) return std::nullopt;
  if (h < 0 || h > 23 || mi < 0 || mi > 59 || s < 0 || s > 60) return std::nullopt;
  // A leap second (":60") is folded into the next second, as POSIX time does.
  year_month_day ymd{year{y}, month{static_cast<unsigned>(mo)}, day{static_cast<unsigned>(d)}};
  if (!ymd.ok()) return std::nullopt;
  SysTime t = sys_days{ymd} + hours{h} + minutes{mi} + seconds{s};
  return t + milliseconds{ms};
}

// Parses exactly n decimal digits at s[pos]; -1 on failure.
int digits(std::string_view s, std::size_t pos, std::size_t n) {
  if (pos + n > s.size()) return -1;
  int v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    char c = s[pos + i];
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

int month_index(std::string_view m) {
  for (std::size_t i = 0; i < kMonths.size(); ++i) {
    if (kMonths[i] == m) return static_cast<int>(i) + 1;
  }
  return -1;
}

bool is_weekday(std::string_view w, bool long_form) {
  for (std::size_t i = 0; i < 7; ++i) {
    if ((long_form ? kWeekdaysLong[i] : kWeekdays[i]) == w) return true;
  }
  return false;
}

// "HH:MM:SS" at pos.
bool parse_hms(std::string_view s, std::size_t pos, int& h, int& m, int& sec) {
  if (pos + 8 > s.size() || s[pos + 2] != ':' || s[pos + 5] != ':') return false;
  h = digits(s, pos, 2);
  m = digits(s, pos + 3, 2);
  sec = digits(s, pos + 6, 2);
  return h >= 0 && m >= 0 && sec >= 0;
}

// "Sun, 06 Nov 1994 08:49:37 GMT" (29 characters).
std::optional<SysTime> parse_imf(std::string_view s) {
  if (s.size() != 29 || s.substr(3, 2) != ", " || s[7] != ' ' || s[11] != ' ' || s[16] != ' ' ||
      s.substr(25) != " GMT") {
    return std::nullopt;
  }
  if (!is_weekday(s.substr(0, 3), false)) return std::nullopt;
  int d = digits(s, 5, 2);
  int mo = month_index(s.substr(8, 3));
  int y = digits(s, 12, 4);
  int h, mi, sec;
  if (d < 0 || mo < 0 || y < 0 || !parse_hms(s, 17, h, mi, sec)) return std::nullopt;
  return from_fields(y, mo, d, h, mi, sec);
}

// "Sunday, 06-Nov-94 08:49:37 GMT".
std::optional<SysTime> parse_rfc850(std::string_view s) {
  std::size_t comma = s.find(", ");
  if (comma == std::string_view::npos || !is_weekday(s.substr(0, comma), true)) return std::nullopt;
  std::string_view r = s.substr(comma + 2);  // "06-Nov-94 08:49:37 GMT" (22)
  if (r.size() != 22 || r[2] != '-' || r[6] != '-' || r[9] != ' ' || r.substr(18) != " GMT") {
    return std::nullopt;
  }
  int d = digits(r, 0, 2);
  int mo = month_index(r.substr(3, 3));
  int yy = digits(r, 7, 2);
  int h, mi, sec;
  if (d < 0 || mo < 0 || yy < 0 || !parse_hms(r, 10, h, mi, sec)) return std::nullopt;
  int y = yy < 70 ? 2000 + yy : 1900 + yy;
  return from_fields(y, mo, d, h, mi, sec);
}

// "Sun Nov  6 08:49:37 1994" (24 characters).
std::optional<SysTime> parse_asctime(std::string_view s) {
  if (s.size() != 24 || s[3] != ' ' || s[7] != ' ' || s[10] != ' ' || s[19] != ' ') {
    return std::nullopt;
  }
  if (!is_weekday(s.substr(0, 3), false)) return std::nullopt;
  int mo = month_index(s.substr(4, 3));
  int d = s[8] == ' ' ? digits(s, 9, 1) : digits(s, 8, 2);
  int y = digits(s, 20, 4);
  int h, mi, sec;
  if (d < 0 || mo < 0 || y < 0 || !parse_hms(s, 11, h, mi, sec)) return std::nullopt;
  return from_fields(y, mo, d, h, mi, sec);
}

}  // namespace

std::string amz_date(SysTime t) {
  Civil c = to_civil(t);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04d%02u%02uT%02u%02u%02uZ", c.year, c.month, c.day, c.hour,
                c.minute, c.second);
  return buf;
}

std::optional<SysTime> parse_amz_date(std::string_view s) {
  if (s.size() != 16 || s[8] != 'T' || s[15] != 'Z') return std::nullopt;
  int y = digits(s, 0, 4), mo = digits(s, 4, 2), d = digits(s, 6, 2);
  int h = digits(s, 9, 2), mi = digits(s, 11, 2), sec = digits(s, 13, 2);
  if (y < 0 || mo < 0 || d < 0 || h < 0 || mi < 0 || sec < 0) return std::nullopt;
  return from_fields(y, mo, d, h, mi, sec);
}

std::string http_date(SysTime t) {
  Civil c = to_civil(t);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s, %02u %s %04d %02u:%02u:%02u GMT",
                std::string(kWeekdays[c.weekday]).c_str(), c.day,
                std::string(kMonths[c.month - 1]).c_str(), c.year, c.hour, c.minute, c.second);
  return buf;
}

std::optional<SysTime> parse_http_date(std::string_view s) {
  if (auto t = parse_imf(s)) return t;
  if (auto t = parse_rfc850(s)) return t;
  return parse_asctime(s);
}

std::string iso8601_ms(SysTime t) {
  Civil c = to_civil(t);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02u:%02u:%02u.%03lldZ", c.year, c.month, c.day,
                c.hour, c.minute, c.second, c.millis);
  return buf;
}

std::optional<SysTime> parse_iso8601(std::string_view s) {
  // "YYYY-MM-DDTHH:MM:SS" then optional ".fff" then "Z".
  if (s.size() < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s.back() != 'Z') {
    return std::nullopt;
  }
  int y = digits(s, 0, 4), mo = digits(s, 5, 2), d = digits(s, 8, 2);
  int h, mi, sec;
  if (y < 0 || mo < 0 || d < 0 || !parse_hms(s, 11, h, mi, sec)) return std::nullopt;
  std::string_view rest = s.substr(19, s.size() - 20);
  long long ms = 0;
  if (!rest.empty()) {
    if (rest[0] != '.' || rest.size() < 2 || rest.size() > 10) return std::nullopt;
    for (std::size_t i = 1; i < rest.size(); ++i) {
      if (rest[i] < '0' || rest[i] > '9') return std::nullopt;
      if (i <= 3) ms = ms * 10 + (rest[i] - '0');
    }
    for (std::size_t i = rest.size(); i <= 3; ++i) ms *= 10;
  }
  return from_fields(y, mo, d, h, mi, sec, ms);
}

}  // namespace objdirect
