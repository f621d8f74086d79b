// Bucket lifecycle: the LifecycleConfiguration document (PutBucketLifecycleConfiguration,
// GetBucketLifecycleConfiguration) and which rules apply to an object or an upload.
//
// <LifecycleConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
//   <Rule>
//     <ID>optional, at most 255 bytes, unique</ID>
//     <Filter>                          or a legacy <Prefix> in the rule itself; or neither
//       <Prefix>logs/</Prefix> | <Tag><Key/><Value/></Tag> | <ObjectSizeGreaterThan>n</...> |
//       <ObjectSizeLessThan>n</...> | <And>any of those, tags repeated</And>
//     </Filter>
//     <Status>Enabled | Disabled</Status>
//     <Expiration><Days>n</Days> | <Date>2026-01-01T00:00:00Z</Date> |
//                 <ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>
//     <NoncurrentVersionExpiration><NoncurrentDays>n</NoncurrentDays>
//       <NewerNoncurrentVersions>n</NewerNoncurrentVersions></NoncurrentVersionExpiration>
//     <AbortIncompleteMultipartUpload><DaysAfterInitiation>n</DaysAfterInitiation>
//     </AbortIncompleteMultipartUpload>
//   </Rule>...
// </LifecycleConfiguration>
//
// As AWS answers: MalformedXML for a bad document, no rule, more than limits::lifecycle_rules_max
// rules, a missing or bad Status, both Filter and Prefix, Days and Date together, a
// non-decimal number, a Date that is not ISO 8601 or an ExpiredObjectDeleteMarker with Days or
// Date; InvalidArgument for an ID above 255 bytes, duplicate IDs, a Days / NoncurrentDays /
// DaysAfterInitiation that is not positive, a Date not at midnight UTC, ObjectSizeGreaterThan >=
// ObjectSizeLessThan; InvalidRequest for a rule without an action, or
// AbortIncompleteMultipartUpload with a tag or size filter; NotImplemented for Transition /
// NoncurrentVersionTransition (there is one storage class).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"
#include "storage/object_store.hpp"

namespace objdirect::s3 {

struct LifecycleRule {
  std::string id;
  bool enabled = false;
  bool has_filter = false;  // <Filter> (else legacy <Prefix> or nothing)
  bool legacy_prefix = false;
  std::string prefix;
  storage::TagSet tags;  // all must match
  std::optional<std::uint64_t> size_greater_than, size_less_than;
  std::optional<std::uint32_t> expiration_days;
  std::optional<std::int64_t> expiration_date_s;  // seconds since the epoch, at midnight UTC
  bool expired_object_delete_marker = false;
  std::optional<std::uint32_t> noncurrent_days;
  std::optional<std::uint32_t> newer_noncurrent_versions;
  std::optional<std::uint32_t> abort_days;

  bool operator==(const LifecycleRule&) const = default;
};

Result<std::vector<LifecycleRule>> parse_lifecycle(std::string_view body);
// The document GetBucketLifecycleConfiguration answers; parse_lifecycle reads it back unchanged.
std::string lifecycle_xml(const std::vector<LifecycleRule>& rules);

// Whether `rule`'s filter selects an object with this key, size and tags.
bool lifecycle_matches(const LifecycleRule& rule, std::string_view key, std::uint64_t size,
                       const storage::TagSet& tags);

}  // namespace objdirect::s3
