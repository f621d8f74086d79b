// The date formats S3 speaks: SigV4's x-amz-date ("20130524T000000Z"), HTTP dates (RFC 1123 in
// Last-Modified / Date / If-Modified-Since, plus the obsolete RFC 850 and asctime forms HTTP/1.1
// requires a server to accept) and ISO 8601 with milliseconds (XML LastModified, Initiated).
//
// All times are UTC. Formatting truncates towards the past to the unit printed (seconds, or
// milliseconds for iso8601_ms). Parsers are strict about layout and field ranges (a 31 April or a
// 25th hour is rejected) and return std::nullopt on anything else; they accept only years
// 1678-2261, the whole years a system_clock time point (signed 64-bit nanoseconds) can hold.
//
// Thread safety: all functions are pure and thread-safe (no global state, no locale).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace objdirect {

using SysTime = std::chrono::system_clock::time_point;

// "20130524T000000Z" (ISO 8601 basic, as in x-amz-date and X-Amz-Date).
std::string amz_date(SysTime t);
// Inverse of amz_date: exactly 16 characters "YYYYMMDDTHHMMSSZ".
std::optional<SysTime> parse_amz_date(std::string_view s);

// RFC 1123 / RFC 7231 IMF-fixdate: "Wed, 21 Oct 2015 07:28:00 GMT".
std::string http_date(SysTime t);
// Accepts IMF-fixdate, RFC 850 ("Wednesday, 21-Oct-15 07:28:00 GMT"; two-digit years < 70 are
// 20xx) and asctime ("Wed Oct 21 07:28:00 2015", day space-padded). The weekday must be a valid
// name but is not cross-checked against the date.
std::optional<SysTime> parse_http_date(std::string_view s);

// "2009-10-12T17:50:30.000Z" (the XML timestamp format of S3 listings).
std::string iso8601_ms(SysTime t);
// Inverse of iso8601_ms; the fraction is optional and may have 1 to 9 digits (kept to ms).
std::optional<SysTime> parse_iso8601(std::string_view s);

}  // namespace objdirect
