// The S3 XML documents ObjDirect exchanges, each as a plain struct with a paired encoder and
// decoder. The server encodes the replies and decodes the request bodies (xml.hpp); the client and
// the gateway encode the request bodies and decode the replies; all three use only these, so they
// cannot drift apart. The formats are described in docs/s3-documents.md.
//
// Fields hold the wire text: a key is what the element carries (already percent-encoded when the
// request asked for encoding-type=url; encoding and decoding it is the caller's job), a time is
// the ISO 8601 text. ETags are held unquoted; the encoder writes them quoted ("..."), the decoder
// strips quotes and W/ (unquote_etag). Numbers and booleans are typed.
//
// Encoders write with XmlWriter (xml.hpp): the declaration, the 2006-03-01 namespace on the root,
// elements in the order S3 writes them, optional elements only when set. Decoders parse with the
// same hardened loader as the request parsers (no DOCTYPE, no unknown entities, no NUL, bounded
// size: limits::xml_reply_bytes_max for replies), match elements by local name (any namespace or
// prefix), ignore unknown elements, take text exactly as sent (no trimming, except numbers and
// booleans, which may carry surrounding whitespace) and fail with Errc::malformed_xml naming what
// was wrong. For every value v a decoder accepts, decode(encode(v)) == v when v's strings are
// valid UTF-8 (the writer replaces invalid bytes and NUL by U+FFFD).
//
// The reply encoders (the documents a server sends) are checked in every build (OBJDIRECT_ASSERT,
// docs/s3-documents.md "Checked encoders"): each document's preconditions, listed beside it, then
// that its bytes decode and encode back to themselves. A failure is a programmer error and
// aborts. encode_*_unchecked (at the end) write the same bytes without the checks, for tests that
// need a document the checks refuse and for the fuzz target's arbitrary decoded values. The two
// request encoders (CompleteMultipartUpload, Delete) are not checked: their values come from the
// client library's callers, whose mistakes are answered by the server, not by an abort.
//
// Thread safety: free functions without shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/limits.hpp"
#include "common/status.hpp"
#include "s3/xml.hpp"

namespace objdirect::limits {
// An XML reply a client or the gateway reads: a full ListObjects page of percent-encoded maximal
// keys fits. (Beside common/limits.hpp's request limits because only these decoders use it.)
inline constexpr std::size_t xml_reply_bytes_max = 16 * 1024 * 1024;
static_assert(xml_reply_bytes_max >= list_keys_max * (3 * key_bytes_max + 1024),
              "a ListObjects page of 1000 url-encoded 1024-byte keys must fit in one reply");
static_assert(xml_reply_bytes_max >= xml_body_bytes_max);
// ListBuckets' max-buckets: AWS accepts 1..10000. A full page of maximal names fits a reply.
inline constexpr std::uint32_t list_buckets_max = 10'000;
static_assert(xml_reply_bytes_max >= list_buckets_max * (bucket_name_max + 128));
}  // namespace objdirect::limits

namespace objdirect::s3 {

// The namespace every S3 reply's root element carries.
inline constexpr std::string_view kDocumentXmlns = "http://s3.amazonaws.com/doc/2006-03-01/";

// (algorithm, value) pairs as <Checksum{ALGO}>value</Checksum{ALGO}>, e.g. {"CRC32C", "b64=="}.
using ChecksumList = std::vector<std::pair<std::string, std::string>>;

struct Owner {
  std::string id;
  std::string display_name;
  bool operator==(const Owner&) const = default;
};

// --- ListBuckets: <ListAllMyBucketsResult>
// --------------------------------------------------------
struct BucketEntry {
  std::string name;
  std::string creation_date;
  bool operator==(const BucketEntry&) const = default;
};
struct ListBucketsResult {
  Owner owner;
  std::vector<BucketEntry> buckets;
  std::string continuation_token;  // <ContinuationToken>, when more buckets follow
  std::optional<std::string> prefix;
  bool operator==(const ListBucketsResult&) const = default;
};
// Precondition: every bucket has a name.
std::string encode_list_buckets(const ListBucketsResult& r);
Result<ListBucketsResult> decode_list_buckets(std::string_view body);

// --- ListObjects v1, ListObjectsV2, ListObjectVersions: <ListBucketResult>/<ListVersionsResult> --
enum class ListKind : std::uint8_t { v1, v2, versions };
struct ObjectEntry {
  std::string key;
  std::string version_id;  // versions only
  bool is_latest = false;  // versions only
  // versions only: a <DeleteMarker> (Key, VersionId, IsLatest, LastModified, Owner) rather than
  // a <Version>; entries keep their order, markers among versions.
  bool delete_marker = false;
  std::string last_modified;
  std::string etag;  // unquoted
  std::vector<std::string> checksum_algorithms;
  std::uint64_t size = 0;
  std::string storage_class;
  std::optional<Owner> owner;
  bool operator==(const ObjectEntry&) const = default;
};
struct ListObjectsResult {
  ListKind kind = ListKind::v2;
  std::string name;
  std::string prefix;
  std::optional<std::string> continuation_token;  // v2
  std::string start_after;                        // v2, written when non-empty
  std::uint64_t key_count = 0;                    // v2
  std::string marker;                             // v1
  std::string key_marker;                         // versions
  std::string version_id_marker;                  // versions
  std::uint64_t max_keys = 0;
  std::string delimiter;      // written when non-empty
  std::string encoding_type;  // written when non-empty ("url")
  bool is_truncated = false;
  std::string next_marker;              // v1, written when non-empty
  std::string next_continuation_token;  // v2, written when non-empty
  std::string next_key_marker;          // versions, written when non-empty
  std::string next_version_id_marker;   // versions, written when non-empty
  std::vector<ObjectEntry> objects;
  std::vector<std::string> common_prefixes;
  bool operator==(const ListObjectsResult&) const = default;
};
// Preconditions: every object has a key; v2: key_count == objects + common prefixes; v1 and v2
// list no delete markers.
std::string encode_list_objects(const ListObjectsResult& r);
// Accepts either root; kind is v2 when <KeyCount> or a continuation element is present, versions
// for <ListVersionsResult>, v1 otherwise.
Result<ListObjectsResult> decode_list_objects(std::string_view body);

// --- CreateMultipartUpload: <InitiateMultipartUploadResult>
// ---------------------------------------
struct InitiateMultipartResult {
  std::string bucket;
  std::string key;
  std::string upload_id;
  bool operator==(const InitiateMultipartResult&) const = default;
};
// Precondition: upload_id is not empty.
std::string encode_initiate_multipart(const InitiateMultipartResult& r);
// Errc::malformed_xml also when <UploadId> is missing or empty.
Result<InitiateMultipartResult> decode_initiate_multipart(std::string_view body);

// --- CompleteMultipartUpload request: <CompleteMultipartUpload> (decoder: xml.hpp) --------------
std::string encode_complete_multipart(const std::vector<CompletePart>& parts);

// --- CompleteMultipartUpload reply: <CompleteMultipartUploadResult>
// -------------------------------
struct CompleteMultipartResult {
  std::string location;
  std::string bucket;
  std::string key;
  std::string etag;  // unquoted
  ChecksumList checksums;
  std::string checksum_type;  // written when non-empty
  bool operator==(const CompleteMultipartResult&) const = default;
};
// Preconditions: etag is not empty; checksum algorithms are plain element names (not
// "Algorithm" or "Type").
std::string encode_complete_result(const CompleteMultipartResult& r);
// S3 may report a failed completion inside a 200 reply: an <Error> document becomes its Status
// (from_s3_code of its Code, its Message). Errc::malformed_xml when neither root is present.
Result<CompleteMultipartResult> decode_complete_result(std::string_view body);

// --- DeleteObjects request: <Delete> (decoder: xml.hpp)
// -------------------------------------------
std::string encode_delete_objects(const DeleteRequest& r);

// --- DeleteObjects reply: <DeleteResult> ---------------------------------------------------------
struct DeletedEntry {
  std::string key;
  std::string version_id;  // written when non-empty
  // A delete marker was written or removed (<DeleteMarker>true</DeleteMarker>), and the marker
  // written (<DeleteMarkerVersionId>, when non-empty).
  bool delete_marker = false;
  std::string delete_marker_version_id;
  bool operator==(const DeletedEntry&) const = default;
};
struct DeleteErrorEntry {
  std::string key;
  std::string code;
  std::string message;
  bool operator==(const DeleteErrorEntry&) const = default;
};
struct DeleteResult {
  std::vector<DeletedEntry> deleted;
  std::vector<DeleteErrorEntry> errors;
  bool operator==(const DeleteResult&) const = default;
};
// Deleted entries first, then errors (the order is not significant to S3 clients).
// Precondition: every error entry has a code.
std::string encode_delete_result(const DeleteResult& r);
Result<DeleteResult> decode_delete_result(std::string_view body);

// --- CopyObject and UploadPartCopy replies: <CopyObjectResult>/<CopyPartResult> -----------------
struct CopyResult {
  bool part = false;  // CopyPartResult
  std::string last_modified;
  std::string etag;  // unquoted
  ChecksumList checksums;
  bool operator==(const CopyResult&) const = default;
};
// Preconditions: etag is not empty; checksum algorithms as for the Complete result.
std::string encode_copy_result(const CopyResult& r);
// Errc::malformed_xml also when <ETag> is missing or empty.
Result<CopyResult> decode_copy_result(std::string_view body);

// --- ListParts: <ListPartsResult> ----------------------------------------------------------------
struct PartEntry {
  std::uint32_t part_number = 0;
  std::string last_modified;
  std::string etag;  // unquoted
  std::uint64_t size = 0;
  ChecksumList checksums;
  bool operator==(const PartEntry&) const = default;
};
struct ListPartsResult {
  std::string bucket;
  std::string key;
  std::string upload_id;
  Owner initiator;
  Owner owner;
  std::string storage_class;
  std::uint32_t part_number_marker = 0;
  std::optional<std::uint32_t> next_part_number_marker;
  std::uint32_t max_parts = 0;
  bool is_truncated = false;
  std::string checksum_algorithm;  // written when non-empty
  std::vector<PartEntry> parts;
  bool operator==(const ListPartsResult&) const = default;
};
// Preconditions: part numbers ascending within 1..limits::parts_max; checksum algorithms as above.
std::string encode_list_parts(const ListPartsResult& r);
Result<ListPartsResult> decode_list_parts(std::string_view body);

// --- ListMultipartUploads: <ListMultipartUploadsResult>
// -------------------------------------------
struct UploadEntry {
  std::string key;
  std::string upload_id;
  Owner initiator;
  Owner owner;
  std::string storage_class;
  std::string initiated;
  std::string checksum_algorithm;  // written when non-empty
  bool operator==(const UploadEntry&) const = default;
};
struct ListUploadsResult {
  std::string bucket;
  std::string key_marker;
  std::string upload_id_marker;
  std::optional<std::string> next_key_marker;
  std::optional<std::string> next_upload_id_marker;
  std::string prefix;     // written when non-empty
  std::string delimiter;  // written when non-empty
  std::uint32_t max_uploads = 0;
  std::string encoding_type;  // written when non-empty
  bool is_truncated = false;
  std::vector<UploadEntry> uploads;
  std::vector<std::string> common_prefixes;
  bool operator==(const ListUploadsResult&) const = default;
};
// Precondition: every upload has a key and an upload id.
std::string encode_list_uploads(const ListUploadsResult& r);
Result<ListUploadsResult> decode_list_uploads(std::string_view body);

// --- Put/GetBucketVersioning: <VersioningConfiguration> ------------------------------------------
struct VersioningConfiguration {
  std::string status;      // "", "Enabled" or "Suspended"; <Status> written when non-empty
  std::string mfa_delete;  // "", "Enabled" or "Disabled"; <MfaDelete> written when non-empty
  bool operator==(const VersioningConfiguration&) const = default;
};
// Precondition: status and mfa_delete are empty or one of the values above.
std::string encode_versioning(const VersioningConfiguration& v);
// Errc::malformed_xml on bad XML, a wrong root, a repeated element, or a Status / MfaDelete
// other than the values above (an empty document is a configuration with neither).
Result<VersioningConfiguration> decode_versioning(std::string_view body);

// --- Error replies: <Error>
// -----------------------------------------------------------------------
struct ErrorDocument {
  std::string code;
  std::string message;  // never written empty (error_xml's rule)
  std::string resource;
  std::string request_id;
  // Further elements after <Message>, in order (ActualPartCount, PartNumberRequested, ...).
  std::vector<std::pair<std::string, std::string>> details;
  bool operator==(const ErrorDocument&) const = default;
};
// Preconditions: code is not empty; details are plain element names other than Code, Message,
// Resource and RequestId.
std::string encode_error(const ErrorDocument& e);
Result<ErrorDocument> decode_error(std::string_view body);
// A reply body's shape, for deciding whether to retry: whether it parses as one XML document
// (a cut connection leaves a truncated one), and the <Code> of an <Error> root ("" otherwise).
struct ReplyShape {
  bool well_formed = false;
  std::string error_code;
};
ReplyShape reply_shape(std::string_view body);
// Whether an AccessControlPolicy body grants nothing but FULL_CONTROL to `owner_id` (what a
// bucket with ACLs disabled, BucketOwnerEnforced, accepts: clients such as s3cmd send the ACL
// they read back, in their own spelling). False for anything else, or a body that does not parse.
bool acl_is_owner_full_control(std::string_view body, std::string_view owner_id);

// The reply encoders without their checks (see the file comment): tests and the fuzz target only.
std::string encode_list_buckets_unchecked(const ListBucketsResult& r);
std::string encode_list_objects_unchecked(const ListObjectsResult& r);
std::string encode_initiate_multipart_unchecked(const InitiateMultipartResult& r);
std::string encode_complete_result_unchecked(const CompleteMultipartResult& r);
std::string encode_delete_result_unchecked(const DeleteResult& r);
std::string encode_copy_result_unchecked(const CopyResult& r);
std::string encode_list_parts_unchecked(const ListPartsResult& r);
std::string encode_list_uploads_unchecked(const ListUploadsResult& r);
std::string encode_versioning_unchecked(const VersioningConfiguration& v);
std::string encode_error_unchecked(const ErrorDocument& e);

}  // namespace objdirect::s3
