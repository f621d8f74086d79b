// Object and bucket tags: the Tagging XML document (PutObjectTagging, GetObjectTagging,
// PutBucketTagging, GetBucketTagging), the x-amz-tagging header (PutObject, CopyObject with
// x-amz-tagging-directive: REPLACE, CreateMultipartUpload) and AWS's limits on both.
//
// <Tagging xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
//   <TagSet><Tag><Key>project</Key><Value>blue</Value></Tag>...</TagSet>
// </Tagging>
//
// Parsing follows xml.hpp (namespace-agnostic, no DOCTYPE, size limit, unknown elements
// ignored); keys and values are taken exactly as sent, never trimmed. The rules AWS applies,
// each answered as AWS answers it (docs/s3-compatibility.md, "Tagging"):
//   - MalformedXML: not a <Tagging> document, no <TagSet>, a <Tag> without exactly one <Key>
//     and one <Value>;
//   - InvalidTag: more than limits::object_tags_max (10) tags on an object or
//     limits::bucket_tags_max (50) on a bucket, an empty key, a key longer than
//     limits::tag_key_chars_max (128) characters or a value longer than
//     limits::tag_value_chars_max (256) characters (counted in Unicode code points), a key or
//     value that is not UTF-8 or holds a character outside letters, digits, spaces and
//     + - = . _ : / @, two tags with the same key, or a key starting with "aws:" (reserved).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.hpp"
#include "storage/object_store.hpp"

namespace objdirect::s3 {

// Checks a tag set against the rules above with at most `max_tags` tags.
Status validate_tags(const storage::TagSet& tags, std::size_t max_tags);

// Parses a Tagging document and validates it (validate_tags with max_tags).
Result<storage::TagSet> parse_tagging(std::string_view body, std::size_t max_tags);

// The Tagging document for `tags` (GetObjectTagging, GetBucketTagging), with the S3 namespace.
std::string tagging_xml(const storage::TagSet& tags);

// Parses x-amz-tagging: URL query encoding, "k1=v1&k2=v2" (percent escapes, '+' is a space, a
// piece without '=' is a key with an empty value) and validates it as an object's tag set.
// InvalidArgument for a malformed escape; an empty header is no tags.
Result<storage::TagSet> parse_tagging_header(std::string_view value);

// The x-amz-tagging form of a tag set (what parse_tagging_header reads back).
std::string tagging_header(const storage::TagSet& tags);

}  // namespace objdirect::s3
