// S3 XML request bodies (parsing) and responses (writing).
//
// Parsing (pugixml) is namespace-agnostic: elements are matched by local name, so bodies with
// xmlns="http://s3.amazonaws.com/doc/2006-03-01/", with a prefix (s3:Part) or with no namespace
// all work. Every parser rejects with Errc::malformed_xml (and a message saying why):
//   - bodies larger than limits::xml_body_bytes_max (checked before parsing);
//   - anything that is not well-formed XML with exactly one root element of the expected name;
//   - any DOCTYPE (so no internal entities, no billion laughs; pugixml never reads external
//     entities) and any entity reference other than the five predefined ones and character
//     references (pugixml would otherwise keep "&foo;" as literal text).
// Parsing is linear in the body size; pugixml's parser is not recursive, so deep nesting is safe.
// Unknown elements are ignored, as AWS does. Text values are taken exactly as sent (after the XML
// decoding of entities and CDATA), except where a field says it is trimmed.
//
// Writing: XmlWriter escapes text and attribute values. '&', '<', '>' and '"' become entities (S3
// itself writes ETags as &quot;...&quot;). TAB, LF and CR become &#x9; &#xA; &#xD; so that they
// survive XML end-of-line and attribute-value normalisation. Characters XML 1.0 forbids even as
// references (other C0 controls, U+FFFE, U+FFFF) are written as &#xN; exactly as S3 does; strict
// XML 1.0 parsers reject those, which is why S3 clients ask for encoding-type=url when keys may
// hold them (the handler then percent-encodes keys before they reach the writer). Bytes that are
// not valid UTF-8 are written as U+FFFD so the document always stays UTF-8, and so is NUL: no XML
// parser (ours included) reads &#x0;, so a NUL echoed from a request (a prefix, a path) would
// otherwise make the whole reply unreadable.
//
// Thread safety: the parse functions and error_xml are pure and thread-safe; an XmlWriter is a
// plain value, one thread at a time.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.hpp"

namespace objdirect::s3 {

// One <Part> of a CompleteMultipartUpload body.
struct CompletePart {
  std::uint32_t part_number = 0;  // 1..limits::parts_max
  std::string etag;               // unquoted (W/ and quotes stripped), trimmed
  // Checksum elements of the part, in document order, by algorithm name without the "Checksum"
  // prefix: <ChecksumCRC32C>b64</ChecksumCRC32C> -> {"CRC32C", "b64"}. Values are trimmed.
  std::vector<std::pair<std::string, std::string>> checksums;
};

// <CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>"..."</ETag>...</Part>...
// Parts are returned in document order; checking the order (InvalidPartOrder) and the ETags
// against the upload is the caller's job. Errc::malformed_xml on bad or empty XML, a wrong root,
// no parts, more than limits::parts_max parts, a Part without exactly one PartNumber and one ETag,
// or a part number that is not a decimal in 1..limits::parts_max (surrounding whitespace allowed).
Result<std::vector<CompletePart>> parse_complete_multipart(std::string_view body);

struct DeleteEntry {
  std::string key;         // exact: never trimmed, never converted ("0", "1e3", " ", "&" stay)
  std::string version_id;  // exact; empty when absent
};
struct DeleteRequest {
  bool quiet = false;
  std::vector<DeleteEntry> objects;  // document order, duplicates kept
};

// <Delete><Quiet>true</Quiet><Object><Key>k</Key><VersionId>v</VersionId></Object>...</Delete>
// Errc::malformed_xml on bad or empty XML, a wrong root, no Object, more than
// limits::delete_keys_max objects, an Object without exactly one Key, or Quiet not
// "true"/"false" (case-insensitive, trimmed). Keys are not validated here: DeleteObjects reports
// a bad key as a per-key error, so the caller runs validate_object_key on each.
Result<DeleteRequest> parse_delete_objects(std::string_view body);

// CreateBucket's optional body:
// <CreateBucketConfiguration><LocationConstraint>us-west-2</LocationConstraint>...
// Returns the trimmed LocationConstraint, or "" when the body is empty/whitespace or has none.
// Errc::malformed_xml on bad XML or a wrong root.
Result<std::string> parse_create_bucket(std::string_view body);

// A small streaming XML writer. Tags are trusted program constants (OBJDIRECT_ASSERTed in every
// build to be plain names); text and attribute values are escaped as described above.
//   XmlWriter w;
//   w.open("ListAllMyBucketsResult", "http://s3.amazonaws.com/doc/2006-03-01/");
//   w.element("Name", name);
//   w.close();
//   std::string body = w.finish();
class XmlWriter {
 public:
  XmlWriter();

  // <tag> or <tag xmlns="...">.
  void open(std::string_view tag, std::string_view xmlns = {});
  // <tag a="v" ...>, attribute values escaped (for xsi:type and the like).
  void open_with_attributes(
      std::string_view tag,
      std::initializer_list<std::pair<std::string_view, std::string_view>> attributes);
  // </tag> for the innermost open element; OBJDIRECT_ASSERTs that one is open.
  void close();
  // <tag>escaped text</tag>.
  void element(std::string_view tag, std::string_view text);
  // <tag>decimal</tag>.
  void element(std::string_view tag, std::uint64_t value);
  // Closes every element still open and returns the document, which starts with
  // <?xml version="1.0" encoding="UTF-8"?> and a newline. The writer is then empty again.
  std::string finish();

 private:
  std::string out_;
  std::vector<std::string> open_;
};

// Appends `text` escaped for use as element text or an attribute value (the same escaping works
// for both).
void append_xml_escaped(std::string& out, std::string_view text);
std::string xml_escape(std::string_view text);

// <?xml ...?>\n<Error><Code/><Message/><Resource/><RequestId/></Error>, all escaped. An empty
// message is replaced by the code (some S3 clients crash on an empty <Message>).
std::string error_xml(std::string_view code, std::string_view message, std::string_view resource,
                      std::string_view request_id);

// The fields of an <Error> reply as error_xml writes them (and S3 services answer): what a client
// or the gateway reads back from a failed request. All empty when `body` is not such a document.
struct ErrorReply {
  std::string code;
  std::string message;
  std::string request_id;
};
ErrorReply parse_error_xml(std::string_view body);

}  // namespace objdirect::s3
