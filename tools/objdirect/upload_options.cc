#include "upload_options.hpp"

#include <openssl/crypto.h>

#include <algorithm>
#include <array>
#include <boost/json.hpp>
#include <cctype>
#include <fstream>
#include <iterator>
#include <utility>

namespace objdirect::cli {

namespace {

// Extension (lower case, no dot) -> media type; sorted by extension for binary search.
constexpr std::array<std::pair<std::string_view, std::string_view>, 48> kTypes{{
    {"7z", "application/x-7z-compressed"},
    {"avif", "image/avif"},
    {"bmp", "image/bmp"},
    {"bz2", "application/x-bzip2"},
    {"c", "text/x-c"},
    {"css", "text/css"},
    {"csv", "text/csv"},
    {"gif", "image/gif"},
    {"gz", "application/gzip"},
    {"h", "text/x-c"},
    {"htm", "text/html"},
    {"html", "text/html"},
    {"ico", "image/vnd.microsoft.icon"},
    {"jpeg", "image/jpeg"},
    {"jpg", "image/jpeg"},
    {"js", "text/javascript"},
    {"json", "application/json"},
    {"md", "text/markdown"},
    {"mjs", "text/javascript"},
    {"mov", "video/quicktime"},
    {"mp3", "audio/mpeg"},
    {"mp4", "video/mp4"},
    {"mpeg", "video/mpeg"},
    {"npy", "application/octet-stream"},
    {"ogg", "audio/ogg"},
    {"otf", "font/otf"},
    {"parquet", "application/vnd.apache.parquet"},
    {"pdf", "application/pdf"},
    {"png", "image/png"},
    {"py", "text/x-python"},
    {"sh", "application/x-sh"},
    {"svg", "image/svg+xml"},
    {"tar", "application/x-tar"},
    {"tif", "image/tiff"},
    {"tiff", "image/tiff"},
    {"tsv", "text/tab-separated-values"},
    {"ttf", "font/ttf"},
    {"txt", "text/plain"},
    {"wasm", "application/wasm"},
    {"wav", "audio/x-wav"},
    {"webm", "video/webm"},
    {"webp", "image/webp"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"xml", "text/xml"},
    {"yaml", "application/yaml"},
    {"yml", "application/yaml"},
    {"zip", "application/zip"},
}};

static_assert(std::is_sorted(kTypes.begin(), kTypes.end()), "kTypes must stay sorted");

Status bad(std::string why) {
  return Status(Errc::invalid_argument, "--metadata: " + std::move(why));
}

}  // namespace

std::string guess_content_type(std::string_view file_name) {
  const auto slash = file_name.find_last_of('/');
  if (slash != std::string_view::npos) file_name.remove_prefix(slash + 1);
  const auto dot = file_name.find_last_of('.');
  // ".bashrc" has no extension; "a." has an empty one
  if (dot == std::string_view::npos || dot == 0 || dot + 1 == file_name.size()) return {};
  std::string ext(file_name.substr(dot + 1));
  for (auto& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  auto it = std::lower_bound(kTypes.begin(), kTypes.end(), ext,
                             [](const auto& row, const std::string& e) { return row.first < e; });
  if (it == kTypes.end() || it->first != ext) return {};
  return std::string(it->second);
}

Status parse_metadata(std::string_view text, PutOptions& out) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '{') {
    boost::system::error_code ec;
    const boost::json::value v = boost::json::parse(text, ec);
    if (ec) return bad("not valid JSON (" + ec.message() + ")");
    const auto* obj = v.if_object();
    if (!obj) return bad("JSON must be an object of strings");
    for (const auto& [name, value] : *obj) {
      const auto* s = value.if_string();
      if (!s) return bad("the value of \"" + std::string(name) + "\" is not a string");
      if (name.empty()) return bad("empty name");
      out.metadata.emplace_back(std::string(name), std::string(*s));
    }
    return Status::Ok();
  }
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    const auto eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return bad("expects KEY=VALUE[,KEY=VALUE...] or a JSON object, got '" + std::string(item) +
                 "'");
    }
    out.metadata.emplace_back(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return Status::Ok();
}

Result<SseCustomerKey> parse_sse_c_key(std::string_view option, std::string_view value) {
  constexpr std::string_view kFile = "fileb://";
  if (!value.starts_with(kFile)) {
    auto k = SseCustomerKey::from_bytes(value);
    if (!k.ok()) {
      return Status(Errc::invalid_argument,
                    std::string(option) + " must be 32 bytes (AES256), got " +
                        std::to_string(value.size()) + "; or fileb://PATH of a 32-byte file");
    }
    return k;
  }
  const std::string path(value.substr(kFile.size()));
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(Errc::invalid_argument, std::string(option) + ": cannot read " + path);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto k = SseCustomerKey::from_bytes(raw);
  const std::size_t n = raw.size();
  OPENSSL_cleanse(raw.data(), raw.size());
  if (!k.ok()) {
    return Status(Errc::invalid_argument, std::string(option) + ": " + path + " holds " +
                                              std::to_string(n) + " bytes, not 32 (AES256)");
  }
  return k;
}

}  // namespace objdirect::cli
