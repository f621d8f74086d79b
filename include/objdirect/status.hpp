// Status and Result<T>: the one error currency of ObjDirect (public: the client API returns them,
// and the library, the server and the tools use the same types inside).
//
// Every error code lives in the single table below, grouped by subsystem, with the S3 error code
// and HTTP status it becomes at the S3 boundary. Converting a Status into an S3 XML error happens
// in exactly one place, in the server; the client maps S3 codes back with from_s3_code().
//
// Thread safety: Status and Result are plain values; distinct objects may be used concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "objdirect/export.hpp"

namespace objdirect {

// X(name, S3 code, HTTP status)
#define OBJDIRECT_ERRC_TABLE(X)                                                     \
  X(ok, "OK", 200)                                                                  \
  /* generic */                                                                     \
  X(invalid_argument, "InvalidArgument", 400)                                       \
  X(internal, "InternalError", 500)                                                 \
  X(not_implemented, "NotImplemented", 501)                                         \
  X(io_error, "InternalError", 500)                                                 \
  X(no_space, "InsufficientStorage", 507)                                           \
  X(corrupt, "InternalError", 500)                                                  \
  X(timeout, "RequestTimeout", 400)                                                 \
  X(unavailable, "ServiceUnavailable", 503)                                         \
  X(slow_down, "SlowDown", 503)                                                     \
  /* storage: buckets and objects */                                                \
  X(no_such_bucket, "NoSuchBucket", 404)                                            \
  X(no_such_key, "NoSuchKey", 404)                                                  \
  X(no_such_upload, "NoSuchUpload", 404)                                            \
  X(bucket_already_owned_by_you, "BucketAlreadyOwnedByYou", 409)                    \
  X(bucket_already_exists, "BucketAlreadyExists", 409)                              \
  X(bucket_not_empty, "BucketNotEmpty", 409)                                        \
  X(operation_aborted, "OperationAborted", 409)                                     \
  X(invalid_bucket_name, "InvalidBucketName", 400)                                  \
  X(key_too_long, "KeyTooLongError", 400)                                           \
  X(precondition_failed, "PreconditionFailed", 412)                                 \
  X(not_modified, "NotModified", 304)                                               \
  X(conditional_conflict, "ConditionalRequestConflict", 409)                        \
  X(invalid_part, "InvalidPart", 400)                                               \
  X(invalid_part_order, "InvalidPartOrder", 400)                                    \
  X(entity_too_small, "EntityTooSmall", 400)                                        \
  X(entity_too_large, "EntityTooLarge", 400)                                        \
  X(invalid_range, "InvalidRange", 416)                                             \
  X(invalid_tag, "InvalidTag", 400)                                                 \
  X(no_such_tag_set, "NoSuchTagSet", 404)                                           \
  X(no_such_cors_configuration, "NoSuchCORSConfiguration", 404)                     \
  X(cors_forbidden, "AccessForbidden", 403)                                         \
  X(bad_request, "BadRequest", 400)                                                 \
  X(no_such_bucket_policy, "NoSuchBucketPolicy", 404)                               \
  X(malformed_policy, "MalformedPolicy", 400)                                       \
  X(no_such_lifecycle_configuration, "NoSuchLifecycleConfiguration", 404)           \
  X(no_such_version, "NoSuchVersion", 404)                                          \
  X(acl_not_supported, "AccessControlListNotSupported", 400)                        \
  X(invalid_location_constraint, "InvalidLocationConstraint", 400)                  \
  X(invalid_part_number, "InvalidPartNumber", 416)                                  \
  /* request parsing and validation */                                              \
  X(malformed_xml, "MalformedXML", 400)                                             \
  X(bad_digest, "BadDigest", 400)                                                   \
  X(invalid_digest, "InvalidDigest", 400)                                           \
  X(invalid_request, "InvalidRequest", 400)                                         \
  X(incomplete_body, "IncompleteBody", 400)                                         \
  X(missing_content_length, "MissingContentLength", 411)                            \
  X(header_too_large, "RequestHeaderSectionTooLarge", 400)                          \
  X(method_not_allowed, "MethodNotAllowed", 405)                                    \
  X(invalid_uri, "InvalidURI", 400)                                                 \
  X(too_many_keys, "InvalidArgument", 400)                                          \
  X(xamz_content_sha256_mismatch, "XAmzContentSHA256Mismatch", 400)                 \
  X(invalid_encryption, "InvalidArgument", 400)                                     \
  /* authentication */                                                              \
  X(access_denied, "AccessDenied", 403)                                             \
  X(signature_does_not_match, "SignatureDoesNotMatch", 403)                         \
  X(invalid_access_key_id, "InvalidAccessKeyId", 403)                               \
  X(request_time_too_skewed, "RequestTimeTooSkewed", 403)                           \
  X(authorization_header_malformed, "AuthorizationHeaderMalformed", 400)            \
  X(authorization_query_parameters_error, "AuthorizationQueryParametersError", 400) \
  X(expired_token, "AccessDenied", 403)                                             \
  /* RDMA data plane */                                                             \
  X(invalid_rdma_token, "InvalidRDMAToken", 400)                                    \
  X(rdma_transfer_failed, "RDMATransferFailed", 500)                                \
  X(rdma_declined, "RDMANotSupported", 501)                                         \
  X(rdma_token_expired, "InvalidRDMAToken", 400)                                    \
  X(rdma_endpoint_unbound, "RDMAEndpointNotBound", 403)                             \
  X(rdma_token_replayed, "RDMATokenReplayed", 403)                                  \
  X(transport_error, "InternalError", 500)

enum class Errc : std::uint16_t {
#define OBJDIRECT_ERRC_ENUM(name, s3, http) name,
  OBJDIRECT_ERRC_TABLE(OBJDIRECT_ERRC_ENUM)
#undef OBJDIRECT_ERRC_ENUM
};

// The S3 error code string ("NoSuchKey") for an Errc.
OBJDIRECT_API std::string_view s3_code(Errc e) noexcept;
// The HTTP status an Errc becomes at the S3 boundary.
OBJDIRECT_API int http_status(Errc e) noexcept;
// The enum name ("no_such_key"), for logs and metrics labels.
OBJDIRECT_API std::string_view errc_name(Errc e) noexcept;
// Best-effort reverse mapping from an S3 error code; unknown codes map to Errc::internal.
OBJDIRECT_API Errc from_s3_code(std::string_view code) noexcept;
// The Errc of an HTTP error reply that carries no S3 error code (a HEAD's bodiless reply, a
// proxy's page): 304, 400, 403, 404, 405, 409, 411, 412, 416, 501 and 503 map to their S3
// meaning, everything else to Errc::internal.
OBJDIRECT_API Errc from_http_status(int status) noexcept;

// A code plus a human-readable message. The message is never empty for an error: S3 clients
// (Debian's AWS CLI v2) crash on an empty <Message>.
class [[nodiscard]] OBJDIRECT_API Status {
 public:
  Status() = default;
  Status(Errc code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const noexcept { return code_ == Errc::ok; }
  explicit operator bool() const noexcept { return ok(); }
  Errc code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  // "no_such_key: The specified key does not exist."
  std::string to_string() const;

 private:
  Errc code_ = Errc::ok;
  std::string message_;
};

// Either a T or an error Status. A minimal std::expected for C++20.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {}  // NOLINT(google-explicit-constructor)
  Result(Errc code, std::string message) : v_(Status(code, std::move(message))) {}

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // The error; Status::Ok() when a value is held.
  Status status() const { return ok() ? Status() : std::get<1>(v_); }
  Errc code() const noexcept { return ok() ? Errc::ok : std::get<1>(v_).code(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace objdirect
