// Client's calls that move no object bytes and need no fabric: HEAD, ListBuckets, ListObjectsV2,
// DeleteObject and the bucket operations (plain HTTP through Client::Impl::http).
#include "client/client_impl.hpp"
#include "client/s3_xml.hpp"
#include "common/uri.hpp"

namespace objdirect {

using client::HttpClient;
using client::HttpRequest;
using client::HttpResponse;
using client::Piece;

using client::parse_u64;

Result<std::vector<std::string>> Client::list_buckets() {
  auto body = impl_->xml_call("GET", "/");
  if (!body.ok()) return body.status();
  auto doc = s3::decode_list_buckets(*body);
  if (!doc.ok()) return client::reply_error(doc.status(), "ListBuckets");
  std::vector<std::string> names;
  names.reserve(doc->buckets.size());
  for (auto& b : doc->buckets) names.push_back(std::move(b.name));
  return names;
}

Result<ObjectInfo> Client::Impl::head(std::string_view bucket, std::string_view key,
                                      const client::Headers& sse) {
  HttpRequest req;
  client::HeadersWiper wipe{req.headers};
  req.method = "HEAD";
  req.target = client::object_target(bucket, key);
  req.headers = sse;
  auto r = http->execute(req);
  if (!r.ok()) return r.status();
  if (!r->ok()) {
    Status st = client::status_from_response(*r);
    if (r->status == 404)
      return Status(Errc::no_such_key, "no such object s3://" + std::string(bucket) + "/" +
                                           std::string(key) + client::request_id_note(*r));
    return st;
  }
  ObjectInfo info;
  if (!parse_u64(r->header("content-length").value_or(""), info.size)) {
    return Status(Errc::io_error, "HEAD reply without Content-Length");
  }
  info.etag = s3::unquote_etag(r->header("etag").value_or(""));
  info.last_modified = std::string(r->header("last-modified").value_or(""));
  info.content_type = std::string(r->header("content-type").value_or(""));
  for (const auto& [name, value] : r->headers) {
    if (name.size() > 11 && name.starts_with("x-amz-meta-")) info.metadata[name.substr(11)] = value;
  }
  return info;
}

Result<ObjectInfo> Client::head(std::string_view bucket, std::string_view key) {
  return impl_->head(bucket, key);
}

Result<ObjectInfo> Client::head(std::string_view bucket, std::string_view key,
                                const SseCustomerKey& sse_c) {
  client::SecretHeaders sse(client::sse_c_headers(sse_c));
  return impl_->head(bucket, key, sse.h);
}

Result<ListPage> Client::list(std::string_view bucket, const ListOptions& o) {
  std::string target = client::object_target(bucket, "") + "?list-type=2";
  if (!o.prefix.empty()) target += "&prefix=" + uri_encode(o.prefix, true);
  if (!o.delimiter.empty()) target += "&delimiter=" + uri_encode(o.delimiter, true);
  if (!o.continuation_token.empty()) {
    target += "&continuation-token=" + uri_encode(o.continuation_token, true);
  }
  target += "&max-keys=" + std::to_string(o.max_keys);
  auto body = impl_->xml_call("GET", target);
  if (!body.ok()) return body.status();
  auto doc = s3::decode_list_objects(*body);
  if (!doc.ok()) return client::reply_error(doc.status(), "ListObjectsV2");
  ListPage page;
  page.objects.reserve(doc->objects.size());
  for (auto& o : doc->objects) {
    ListEntry e;
    e.key = std::move(o.key);
    e.size = o.size;
    e.etag = std::move(o.etag);
    e.last_modified = std::move(o.last_modified);
    page.objects.push_back(std::move(e));
  }
  page.common_prefixes = std::move(doc->common_prefixes);
  page.is_truncated = doc->is_truncated;
  page.next_continuation_token = std::move(doc->next_continuation_token);
  return page;
}

Status Client::delete_object(std::string_view bucket, std::string_view key) {
  auto r = impl_->xml_call("DELETE", client::object_target(bucket, key));
  return r.status();
}

Status Client::create_bucket(std::string_view bucket) {
  std::string body;
  if (impl_->cfg.region != "us-east-1") {
    body = "<CreateBucketConfiguration><LocationConstraint>" + impl_->cfg.region +
           "</LocationConstraint></CreateBucketConfiguration>";
  }
  auto r = impl_->xml_call("PUT", client::object_target(bucket, ""), std::move(body));
  return r.status();
}

Status Client::delete_bucket(std::string_view bucket) {
  auto r = impl_->xml_call("DELETE", client::object_target(bucket, ""));
  return r.status();
}
}  // namespace objdirect
