// libFuzzer target for the document codecs (built with -DOBJDIRECT_FUZZ=ON; see CMakeLists.txt).
// documents_fuzz_one is also replayed by documents_test.cc so the ordinary build checks it. The
// input is a reply or request body, fed to every decoder. A decoder either refuses it with
// Errc::malformed_xml (or, for the CompleteMultipartUpload reply, the Status of an embedded
// <Error>) or accepts it; then its encoder's output must decode again, and encoding that must give
// the same bytes (encode . decode is a fixpoint after one step: the writer's only lossy steps,
// U+FFFD for invalid UTF-8 and NUL and a non-empty <Message>, are idempotent). Decoded values may
// break the reply encoders' preconditions (a KeyCount that does not count the page), so the
// fixpoint is taken with the unchecked encoders. Failures abort.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "s3/documents.hpp"

namespace objdirect::s3 {
namespace {

bool refused_ok(const Status& st) {
  return !st.ok() && !st.message().empty();
}

// decode -> encode -> decode -> encode; the two encodings must be equal.
template <typename Decode, typename Encode>
bool fixpoint(std::string_view body, Decode decode, Encode encode) {
  auto first = decode(body);
  if (!first.ok()) return first.status().code() == Errc::malformed_xml;
  const std::string once = encode(*first);
  auto second = decode(once);
  if (!second.ok()) return false;
  return encode(*second) == once;
}

}  // namespace

bool documents_fuzz_one(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  bool ok = true;
  ok &= fixpoint(body, decode_list_buckets, encode_list_buckets_unchecked);
  ok &= fixpoint(body, decode_list_objects, encode_list_objects_unchecked);
  ok &= fixpoint(body, decode_initiate_multipart, encode_initiate_multipart_unchecked);
  ok &= fixpoint(body, decode_delete_result, encode_delete_result_unchecked);
  ok &= fixpoint(body, decode_copy_result, encode_copy_result_unchecked);
  ok &= fixpoint(body, decode_list_parts, encode_list_parts_unchecked);
  ok &= fixpoint(body, decode_list_uploads, encode_list_uploads_unchecked);
  ok &= fixpoint(body, decode_error, encode_error_unchecked);
  ok &= fixpoint(body, decode_versioning, encode_versioning_unchecked);
  // The CompleteMultipartUpload reply may decode to an embedded error's Status.
  auto complete = decode_complete_result(body);
  if (complete.ok()) {
    const std::string once = encode_complete_result_unchecked(*complete);
    auto again = decode_complete_result(once);
    ok &= again.ok() && encode_complete_result_unchecked(*again) == once;
  } else {
    ok &= refused_ok(complete.status());
  }
  // The request bodies: what the server's parsers accept, the client's encoders reproduce.
  auto parts = parse_complete_multipart(body);
  if (parts.ok()) {
    const std::string once = encode_complete_multipart(*parts);
    auto again = parse_complete_multipart(once);
    ok &= again.ok() && encode_complete_multipart(*again) == once;
  }
  auto del = parse_delete_objects(body);
  if (del.ok()) {
    const std::string once = encode_delete_objects(*del);
    auto again = parse_delete_objects(once);
    ok &= again.ok() && encode_delete_objects(*again) == once;
  }
  return ok;
}

}  // namespace objdirect::s3

#ifdef OBJDIRECT_FUZZ_MAIN
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (!objdirect::s3::documents_fuzz_one(data, size)) std::abort();
  return 0;
}
#endif
