// Tagging: Get/Put/DeleteObjectTagging and Get/Put/DeleteBucketTagging (tagging.hpp has the
// document, the header form and AWS's limits; docs/s3-compatibility.md, "Tagging").
#include "common/checksum.hpp"
#include "common/limits.hpp"
#include "s3/names.hpp"
#include "s3/tagging.hpp"
#include "server/s3/s3_internal.hpp"

namespace objdirect::s3 {

namespace {}  // namespace

Task<void> S3Service::Impl::tagging(Ctx& c) {
  const auto method = c.req.method();
  using bhttp::verb;
  const bool object = !c.key.empty();
  if (method == verb::get) {
    c.op = object ? "GetObjectTagging" : "GetBucketTagging";
  } else if (method == verb::put) {
    c.op = object ? "PutObjectTagging" : "PutBucketTagging";
  } else if (method == verb::delete_) {
    c.op = object ? "DeleteObjectTagging" : "DeleteBucketTagging";
  } else {
    co_return co_await send_error(
        c, Status(Errc::method_not_allowed,
                  "The specified method is not allowed against this resource"));
  }
  std::optional<std::string> version_id;
  if (object) {
    if (auto st = validate_object_key(c.key); !st.ok()) co_return co_await send_error(c, st);
    auto v = version_id_param(c);
    if (!v.ok()) co_return co_await send_error(c, v.status());
    version_id = std::move(*v);
  }
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  // The object operations answer with the version they read or changed, as AWS does.
  auto version_header = [](const storage::ObjectMeta& m) {
    http::Fields f;
    if (!m.version_id.empty()) f.set("x-amz-version-id", m.version_id);
    return f;
  };

  if (method == verb::get) {
    if (object && !store->tags_in_meta()) {
      // The backend's metadata does not carry the tags (the gateway): it asks where they are.
      auto id = store_version_id(version_id);
      if (!id.ok()) co_return co_await send_error(c, id.status());
      auto m = store->get_object_version_tags(c.bucket, c.key, *id);
      if (!m.ok()) co_return co_await send_error(c, m.status());
      co_return co_await send_xml(c, bhttp::status::ok, tagging_xml(m->tags), version_header(*m));
    }
    if (object) {
      auto m = head_version(c, c.bucket, c.key, version_id);
      if (!m.ok()) co_return co_await send_error(c, m.status());
      co_return co_await send_xml(c, bhttp::status::ok, tagging_xml(m->tags), version_header(*m));
    }
    auto b = store->get_bucket_tags(c.bucket);
    if (!b.ok()) co_return co_await send_error(c, b.status());
    if (b->empty()) {
      co_return co_await send_error(c, Status(Errc::no_such_tag_set, "The TagSet does not exist"));
    }
    co_return co_await send_xml(c, bhttp::status::ok, tagging_xml(*b));
  }

  storage::TagSet tags;
  if (method == verb::put) {
    auto body = co_await c.ex.read_body_string(limits::xml_body_bytes_max);
    if (!body.ok()) co_return co_await send_error(c, body.status());
    if (auto st = check_content_md5(c, *body); !st.ok()) co_return co_await send_error(c, st);
    auto parsed = parse_tagging(*body, object ? limits::object_tags_max : limits::bucket_tags_max);
    if (!parsed.ok()) co_return co_await send_error(c, parsed.status());
    tags = std::move(*parsed);
  }
  if (object) {
    auto id = store_version_id(version_id);
    if (!id.ok()) co_return co_await send_error(c, id.status());
    auto r = store->set_object_version_tags(c.bucket, c.key, *id, std::move(tags));
    if (!r.ok()) {
      note_delete_marker(c, c.bucket, c.key, version_id, r.code());
      co_return co_await send_error(c, r.status());
    }
    co_return co_await send_empty(
        c, method == verb::put ? bhttp::status::ok : bhttp::status::no_content, version_header(*r));
  }
  if (auto st = store->set_bucket_tags(c.bucket, std::move(tags)); !st.ok())
    co_return co_await send_error(c, st);
  co_await send_empty(c, bhttp::status::no_content);
}

}  // namespace objdirect::s3
