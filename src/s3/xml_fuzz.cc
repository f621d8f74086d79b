// libFuzzer target for the XML parsers and XmlWriter (built with -DOBJDIRECT_FUZZ=ON; see
// CMakeLists.txt). xml_fuzz_one is also replayed by xml_test.cc so the ordinary build checks it.
// The input is a request body, fed to all three parsers; accepted Delete bodies are rewritten
// with XmlWriter and must parse back to the same keys, and the input itself, used as element
// text, must survive the writer and the parser. Every invariant failure aborts.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "common/limits.hpp"
#include "s3/names.hpp"
#include "s3/xml.hpp"

namespace objdirect::s3 {
namespace {

bool error_ok(const Status& st) {
  return st.code() == Errc::malformed_xml && !st.message().empty();
}

// Text the writer reproduces exactly: valid UTF-8 without NUL (everything else is replaced or
// cannot be carried by XML at all).
bool writable(std::string_view s) {
  return is_valid_utf8(s) && s.find('\0') == s.npos;
}

}  // namespace

bool xml_fuzz_one(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);

  auto parts = parse_complete_multipart(body);
  if (parts.ok()) {
    if (parts->empty() || parts->size() > limits::parts_max) return false;
    for (const CompletePart& p : *parts) {
      if (p.part_number < 1 || p.part_number > limits::parts_max) return false;
    }
  } else if (!error_ok(parts.status())) {
    return false;
  }

  auto loc = parse_create_bucket(body);
  if (!loc.ok() && !error_ok(loc.status())) return false;

  auto del = parse_delete_objects(body);
  if (del.ok()) {
    if (del->objects.empty() || del->objects.size() > limits::delete_keys_max) return false;
    XmlWriter w;
    w.open("Delete", "http://s3.amazonaws.com/doc/2006-03-01/");
    w.element("Quiet", del->quiet ? "true" : "false");
    for (const DeleteEntry& e : del->objects) {
      w.open("Object");
      w.element("Key", e.key);
      if (!e.version_id.empty()) w.element("VersionId", e.version_id);
      w.close();
    }
    auto back = parse_delete_objects(w.finish());
    if (!back.ok() || back->quiet != del->quiet || back->objects.size() != del->objects.size()) {
      return false;
    }
    for (std::size_t i = 0; i < del->objects.size(); ++i) {
      const DeleteEntry& a = del->objects[i];
      const DeleteEntry& b = back->objects[i];
      if (writable(a.key) && a.key != b.key) return false;
      if (writable(a.version_id) && a.version_id != b.version_id) return false;
    }
  } else if (!error_ok(del.status())) {
    return false;
  }

  // The raw input as a key: escaping must round-trip whatever it is given.
  if (writable(body) && !body.empty() && body.size() <= limits::key_bytes_max) {
    XmlWriter w;
    w.open("Delete");
    w.open("Object");
    w.element("Key", body);
    auto back = parse_delete_objects(w.finish());
    if (!back.ok() || back->objects.size() != 1 || back->objects[0].key != body) return false;
  }
  (void)validate_object_key(body);  // must not crash on anything
  (void)validate_bucket_name(body);
  return true;
}

}  // namespace objdirect::s3

#ifdef OBJDIRECT_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!objdirect::s3::xml_fuzz_one(data, size)) std::abort();
  return 0;
}
#endif
