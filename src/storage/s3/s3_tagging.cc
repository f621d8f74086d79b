// The gateway's tagging (s3_internal.hpp): Put/Get/DeleteObjectTagging and
// Put/Get/DeleteBucketTagging passed through to the upstream, which keeps the tags
// (docs/scale-out.md, "What the gateway passes through").
#include "common/checksum.hpp"
#include "common/limits.hpp"
#include "s3/tagging.hpp"
#include "storage/s3/s3_internal.hpp"

namespace objdirect::storage::s3gw {

namespace {

Request tagging_request(std::string method, std::string_view bucket, std::string_view key,
                        std::string_view version_id) {
  Request r = object_request(std::move(method), bucket, key);
  r.query = {{"tagging", ""}};
  if (!version_id.empty()) r.query.emplace_back("versionId", std::string(version_id));
  return r;
}

}  // namespace

Status S3Store::note_tagging(Status st) {
  return note_capability(&Core::tagging, st);
}

Status S3Store::tagging_available(std::string_view bucket) {
  {
    std::lock_guard lk(core_->caps_mu);
    if (core_->tagging == true) return Status::Ok();
  }
  OBJDIRECT_RETURN_IF_ERROR(tagging_known_missing());
  core_->ctr.capability_probes++;
  Request r;
  r.bucket = std::string(bucket);
  r.query = {{"tagging", ""}};
  auto resp = core_->call(std::move(r));
  const Status st = resp.ok() ? Status::Ok() : resp.status();
  if (st.ok() || st.code() == Errc::no_such_tag_set) {
    (void)note_tagging(Status::Ok());
    (void)note_bucket_tagging(Status::Ok());
    return Status::Ok();
  }
  if (st.code() == Errc::not_implemented) return note_tagging(note_bucket_tagging(st));
  return Status::Ok();  // not known (the write itself will tell)
}

Result<ObjectMeta> S3Store::set_object_tags(std::string_view bucket, std::string_view key,
                                            TagSet tags) {
  return set_object_version_tags(bucket, key, "", std::move(tags));
}

Result<ObjectMeta> S3Store::set_object_version_tags(std::string_view bucket, std::string_view key,
                                                    std::string_view version_id, TagSet tags) {
  OBJDIRECT_RETURN_IF_ERROR(tagging_known_missing());
  if (!version_id.empty()) OBJDIRECT_RETURN_IF_ERROR(versioning_known_missing());
  // An empty set is DeleteObjectTagging (what the S3 layer asks for DeleteObjectTagging).
  Request r = tagging_request(tags.empty() ? "DELETE" : "PUT", bucket, key, version_id);
  const std::string body = tags.empty() ? std::string() : objdirect::s3::tagging_xml(tags);
  if (!body.empty()) set_xml_body(r, body);
  const bool deleting = tags.empty();
  auto resp = core_->call(std::move(r));
  if (!resp.ok()) {
    const Errc code = resp.code();
    if (deleting && code != Errc::not_implemented && code != Errc::no_such_key &&
        code != Errc::no_such_version && code != Errc::no_such_bucket) {
      // moto 5 answers DeleteObjectTagging of a missing key 500 (S3: 404 NoSuchKey). On that
      // error path only, a HEAD tells a missing key apart (docs/scale-out.md).
      auto h = version_id.empty() ? head_object(bucket, key)
                                  : head_object_version(bucket, key, version_id);
      if (h.code() == Errc::no_such_key || h.code() == Errc::no_such_version) return h.status();
    }
    return note_tagging(resp.status());
  }
  (void)note_tagging(Status::Ok());
  ObjectMeta m;
  m.key = std::string(key);
  m.version_id = resp->header("x-amz-version-id").value_or("");
  m.tags = std::move(tags);
  return m;
}

Result<ObjectMeta> S3Store::get_object_version_tags(std::string_view bucket, std::string_view key,
                                                    std::string_view version_id) {
  OBJDIRECT_RETURN_IF_ERROR(tagging_known_missing());
  if (!version_id.empty()) OBJDIRECT_RETURN_IF_ERROR(versioning_known_missing());
  Request r = tagging_request("GET", bucket, key, version_id);
  r.xml_reply = true;
  auto resp = core_->call(std::move(r));
  if (!resp.ok()) return note_tagging(resp.status());
  (void)note_tagging(Status::Ok());
  // Read as a bucket's set: an upstream's object may carry more tags than AWS allows here.
  // radosgw 16 answers an object completed by a multipart upload with an empty 200 body: no tags.
  auto tags = resp->body.empty()
                  ? Result<TagSet>(TagSet{})
                  : objdirect::s3::parse_tagging(resp->body, limits::bucket_tags_max);
  if (!tags.ok()) {
    return Status(Errc::io_error,
                  "upstream GetObjectTagging: reply is not valid: " + tags.status().message());
  }
  ObjectMeta m;
  m.key = std::string(key);
  m.version_id = resp->header("x-amz-version-id").value_or("");
  m.tags = std::move(*tags);
  return m;
}

Status S3Store::tagging_known_missing() {
  return capability_known_missing(&Core::tagging,
                                  "object tags (it answered NotImplemented to a tagging request)");
}

Status S3Store::note_bucket_tagging(Status st) {
  return note_capability(&Core::bucket_tagging, st);
}

Status S3Store::bucket_tagging_known_missing() {
  return capability_known_missing(
      &Core::bucket_tagging,
      "bucket tags (it answered NotImplemented to a bucket tagging request)");
}

Status S3Store::set_bucket_tags(std::string_view bucket, TagSet tags) {
  OBJDIRECT_RETURN_IF_ERROR(bucket_tagging_known_missing());
  // An empty set is DeleteBucketTagging (what the S3 layer asks for DeleteBucketTagging).
  Request r;
  r.method = tags.empty() ? "DELETE" : "PUT";
  r.bucket = std::string(bucket);
  r.query = {{"tagging", ""}};
  const std::string body = tags.empty() ? std::string() : objdirect::s3::tagging_xml(tags);
  if (!body.empty()) set_xml_body(r, body);
  return note_bucket_tagging(core_->call(std::move(r)).status());
}

Result<TagSet> S3Store::get_bucket_tags(std::string_view bucket) {
  OBJDIRECT_RETURN_IF_ERROR(bucket_tagging_known_missing());
  Request r;
  r.bucket = std::string(bucket);
  r.query = {{"tagging", ""}};
  r.xml_reply = true;
  auto resp = core_->call(std::move(r));
  if (!resp.ok()) {
    if (resp.code() == Errc::no_such_tag_set) {
      (void)note_bucket_tagging(Status::Ok());
      return TagSet{};
    }
    return note_bucket_tagging(resp.status());
  }
  (void)note_bucket_tagging(Status::Ok());
  auto tags = resp->body.empty()
                  ? Result<TagSet>(TagSet{})
                  : objdirect::s3::parse_tagging(resp->body, limits::bucket_tags_max);
  if (!tags.ok()) {
    return Status(Errc::io_error,
                  "upstream GetBucketTagging: reply is not valid: " + tags.status().message());
  }
  return std::move(*tags);
}

}  // namespace objdirect::storage::s3gw
