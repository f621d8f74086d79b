// The gateway's buckets (s3_internal.hpp): CreateBucket, DeleteBucket, HeadBucket, ListBuckets.
#include <algorithm>

#include "common/checksum.hpp"
#include "storage/s3/s3_internal.hpp"
#include "storage/s3/s3_spool.hpp"

namespace objdirect::storage::s3gw {

void set_xml_body(Request& r, const std::string& xml) {
  Md5 md5;
  md5.update(xml.data(), xml.size());
  r.headers.emplace_back("content-md5", base64_encode(md5.raw()));
  r.headers.emplace_back("content-type", "application/xml");
  r.body = Body{xml.data(), -1, 0, xml.size(), 0, 0};
}

std::string create_bucket_configuration(const std::string& region) {
  if (region.empty() || region == "us-east-1") return {};
  return "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
         "<LocationConstraint>" +
         region + "</LocationConstraint></CreateBucketConfiguration>";
}

Status S3Store::create_bucket(const BucketInfo& info) {
  if (!core_->opts.state_bucket.empty()) return create_owned_bucket(info);
  return create_upstream_bucket(info);
}

Status S3Store::create_upstream_bucket(const BucketInfo& info) {
  if (core_->opts.region.empty() || core_->opts.region == "us-east-1") {
    // S3 answers a re-create of one's own bucket in us-east-1 with 200; the store contract
    // says bucket_already_owned_by_you, so ask first (another's bucket answers HEAD 403 and
    // the PUT then says BucketAlreadyExists).
    if (head_bucket(info.name).ok()) {
      return Status(Errc::bucket_already_owned_by_you,
                    "Your previous request to create the named bucket succeeded and you "
                    "already own it.");
    }
  }
  Request r;
  r.method = "PUT";
  r.bucket = info.name;
  const std::string body = create_bucket_configuration(core_->opts.region);
  if (!body.empty()) r.body = Body{body.data(), -1, 0, body.size(), 0, 0};
  return core_->call(std::move(r)).status();
}

Status S3Store::delete_bucket(std::string_view bucket) {
  Request r;
  r.method = "DELETE";
  r.bucket = std::string(bucket);
  auto resp = core_->call(r);
  if (resp.ok() && !core_->opts.state_bucket.empty()) drop_bucket_state(bucket);
  if (resp.code() != Errc::bucket_not_empty) return resp.status();
  // In-progress uploads do not keep a bucket alive (ObjectStore contract): abort them, retry.
  bool aborted = false;
  ListUploadsQuery q;
  for (int guard = 0; guard < 10000; ++guard) {
    auto l = list_uploads(bucket, q);
    if (!l.ok()) return l.status();
    for (const auto& u : l->uploads) {
      OBJDIRECT_RETURN_IF_ERROR(abort_upload(bucket, u.key, u.upload_id));
      aborted = true;
    }
    if (!l->truncated) break;
    q.key_marker = l->next_key_marker;
    q.upload_id_marker = l->next_upload_id_marker;
  }
  if (!aborted) return resp.status();
  Status st = core_->call(std::move(r)).status();
  if (st.ok() && !core_->opts.state_bucket.empty()) drop_bucket_state(bucket);
  return st;
}

Result<BucketInfo> S3Store::head_bucket(std::string_view bucket) {
  Request r;
  r.method = "HEAD";
  r.bucket = std::string(bucket);
  auto resp = core_->call(std::move(r));
  if (!resp.ok()) {
    if (resp.code() == Errc::no_such_key)
      return Status(Errc::no_such_bucket, "The specified bucket does not exist (upstream)");
    return resp.status();
  }
  BucketInfo b;
  b.name = std::string(bucket);
  b.region = resp->header("x-amz-bucket-region").value_or(core_->opts.region);
  if (!core_->opts.state_bucket.empty()) {
    // The owner and the policy, from the state bucket through the document cache. A failed read
    // fails the request (never an ownerless, policy-free bucket by accident).
    auto owner = cached_document(bucket, "owner");
    if (!owner.ok()) return owner.status();
    if (*owner) b.owner = std::move(**owner);
    auto policy = cached_document(bucket, "policy");
    if (!policy.ok()) return policy.status();
    if (*policy) b.config.emplace("policy", std::move(**policy));
  }
  return b;
}

Result<std::vector<BucketInfo>> S3Store::list_buckets() {
  auto buckets = upstream_buckets();
  if (!buckets.ok()) return buckets.status();
  std::vector<BucketInfo> out = std::move(*buckets);
  if (!core_->opts.state_bucket.empty()) OBJDIRECT_RETURN_IF_ERROR(fill_owners(out));
  std::sort(out.begin(), out.end(),
            [](const BucketInfo& a, const BucketInfo& b) { return a.name < b.name; });
  return out;
}

Result<std::unique_ptr<BlobWriter>> S3Store::begin_write(std::string_view bucket) {
  auto b = head_bucket(bucket);
  if (!b.ok()) return b.status();
  return std::unique_ptr<BlobWriter>(new SpoolWriter(core_));
}

Status S3Store::set_bucket_config(std::string_view bucket, std::string_view name,
                                  std::string document) {
  if (name == "lifecycle") return store_lifecycle(bucket, document);
  if (name == "cors") return store_cors(bucket, document);
  if (name == "policy") {
    // A policy names the gateway's own principals: kept in the state bucket, evaluated by the
    // S3 layer, never handed to the upstream as its bucket policy.
    if (core_->opts.state_bucket.empty()) {
      return Status(Errc::not_implemented,
                    "The gateway keeps bucket policies in its state bucket: start it with "
                    "--gateway-state-bucket NAME");
    }
    // no_such_bucket for a bucket the upstream does not have (no record for a missing bucket).
    Request h;
    h.method = "HEAD";
    h.bucket = std::string(bucket);
    if (auto there = core_->call(std::move(h)); !there.ok()) {
      if (there.code() == Errc::no_such_key)
        return Status(Errc::no_such_bucket, "The specified bucket does not exist (upstream)");
      return there.status();
    }
    Status st = store_state(bucket, "policy", document);
    forget_documents(bucket);
    return st;
  }
  if (name != versioning_config_name) {
    return Status(Errc::not_implemented, "The gateway does not pass the bucket's " +
                                             std::string(name) +
                                             " configuration through to its upstream");
  }
  OBJDIRECT_RETURN_IF_ERROR(versioning_known_missing());
  if (document.empty())
    return Status(Errc::invalid_argument, "A bucket cannot return to never versioned");
  objdirect::s3::VersioningConfiguration v;
  v.status = std::move(document);
  const std::string body = objdirect::s3::encode_versioning(v);
  Request r;
  r.method = "PUT";
  r.bucket = std::string(bucket);
  r.query = {{"versioning", ""}};
  set_xml_body(r, body);
  return note_versioning(core_->call(std::move(r)).status());
}

Result<std::optional<std::string>> S3Store::bucket_config(std::string_view bucket,
                                                          std::string_view name) {
  if (name == "lifecycle") return fetch_lifecycle(bucket);
  if (name == "cors") return cached_document(bucket, name);
  if (name == "policy") {
    if (core_->opts.state_bucket.empty()) return std::optional<std::string>();
    return cached_document(bucket, name);
  }
  if (name != versioning_config_name) return ObjectStore::bucket_config(bucket, name);
  OBJDIRECT_RETURN_IF_ERROR(versioning_known_missing());
  Request r;
  r.bucket = std::string(bucket);
  r.query = {{"versioning", ""}};
  r.xml_reply = true;
  auto resp = core_->call(std::move(r));
  if (!resp.ok()) return note_versioning(resp.status());
  // moto 5.2 names the root <GetBucketVersioningResponse>; the document is the same.
  constexpr std::string_view kMotoRoot = "GetBucketVersioningResponse";
  for (std::size_t at; (at = resp->body.find(kMotoRoot)) != std::string::npos;)
    resp->body.replace(at, kMotoRoot.size(), "VersioningConfiguration");
  auto doc = decode_reply(*resp, "GetBucketVersioning", objdirect::s3::decode_versioning);
  if (!doc.ok()) return doc.status();
  if (doc->status.empty()) return std::optional<std::string>();
  return std::optional<std::string>(std::move(doc->status));
}

}  // namespace objdirect::storage::s3gw
