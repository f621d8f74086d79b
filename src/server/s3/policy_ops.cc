// Authorisation of every S3 request (bucket ownership plus the bucket's policy), the bucket
// policy calls (Get/Put/DeleteBucketPolicy) and the ACL calls as AWS answers them under
// BucketOwnerEnforced (policy.hpp has the language; docs/s3-compatibility.md, "Bucket
// policies").
#include "common/limits.hpp"
#include "s3/documents.hpp"
#include "s3/policy.hpp"
#include "s3/xml.hpp"
#include "server/s3/s3_internal.hpp"

namespace objdirect::s3 {

namespace {

constexpr std::string_view kPolicyKey = "policy";

struct OpAction {
  std::string_view op;
  std::string_view action;
};
// The IAM action of each S3 operation (AWS's "Actions, resources, and condition keys for S3").
constexpr OpAction kActions[] = {
    {"GetObject", "s3:GetObject"},
    {"HeadObject", "s3:GetObject"},
    {"GetObjectVersion", "s3:GetObjectVersion"},
    {"HeadObjectVersion", "s3:GetObjectVersion"},
    {"DeleteObjectVersion", "s3:DeleteObjectVersion"},
    {"GetObjectAttributes", "s3:GetObjectAttributes"},
    {"PutObject", "s3:PutObject"},
    {"CopyObject", "s3:PutObject"},
    {"CreateMultipartUpload", "s3:PutObject"},
    {"UploadPart", "s3:PutObject"},
    {"UploadPartCopy", "s3:PutObject"},
    {"CompleteMultipartUpload", "s3:PutObject"},
    {"AbortMultipartUpload", "s3:AbortMultipartUpload"},
    {"ListParts", "s3:ListMultipartUploadParts"},
    {"DeleteObject", "s3:DeleteObject"},
    {"DeleteObjects", "s3:DeleteObject"},
    {"GetObjectTagging", "s3:GetObjectTagging"},
    {"PutObjectTagging", "s3:PutObjectTagging"},
    {"DeleteObjectTagging", "s3:DeleteObjectTagging"},
    {"GetObjectAcl", "s3:GetObjectAcl"},
    {"PutObjectAcl", "s3:PutObjectAcl"},
    {"ListObjects", "s3:ListBucket"},
    {"ListObjectsV2", "s3:ListBucket"},
    {"HeadBucket", "s3:ListBucket"},
    {"ListObjectVersions", "s3:ListBucketVersions"},
    {"ListMultipartUploads", "s3:ListBucketMultipartUploads"},
    {"GetBucketLocation", "s3:GetBucketLocation"},
    {"GetBucketVersioning", "s3:GetBucketVersioning"},
    {"PutBucketVersioning", "s3:PutBucketVersioning"},
    {"DeleteBucket", "s3:DeleteBucket"},
    {"GetBucketTagging", "s3:GetBucketTagging"},
    {"PutBucketTagging", "s3:PutBucketTagging"},
    {"DeleteBucketTagging", "s3:PutBucketTagging"},
    {"GetBucketCors", "s3:GetBucketCORS"},
    {"PutBucketCors", "s3:PutBucketCORS"},
    {"DeleteBucketCors", "s3:PutBucketCORS"},
    {"GetBucketPolicy", "s3:GetBucketPolicy"},
    {"PutBucketPolicy", "s3:PutBucketPolicy"},
    {"DeleteBucketPolicy", "s3:DeleteBucketPolicy"},
    {"GetBucketAcl", "s3:GetBucketAcl"},
    {"PutBucketAcl", "s3:PutBucketAcl"},
    {"GetBucketOwnershipControls", "s3:GetBucketOwnershipControls"},
    {"GetBucketLifecycleConfiguration", "s3:GetLifecycleConfiguration"},
    {"PutBucketLifecycleConfiguration", "s3:PutLifecycleConfiguration"},
    {"DeleteBucketLifecycle", "s3:PutLifecycleConfiguration"},
};

Status access_denied() {
  return Status(Errc::access_denied, "Access Denied");
}

bool is_policy_op(std::string_view op) {
  return op == "GetBucketPolicy" || op == "PutBucketPolicy" || op == "DeleteBucketPolicy";
}

// <AccessControlPolicy> granting the owner FULL_CONTROL: the only ACL under BucketOwnerEnforced.
std::string owner_acl(std::string_view owner) {
  XmlWriter w;
  w.open("AccessControlPolicy", kS3Xmlns);
  w.open("Owner");
  w.element("ID", owner);
  w.element("DisplayName", owner);
  w.close();
  w.open("AccessControlList");
  w.open("Grant");
  w.open_with_attributes("Grantee", {{"xmlns:xsi", "http://www.w3.org/2001/XMLSchema-instance"},
                                     {"xsi:type", "CanonicalUser"}});
  w.element("ID", owner);
  w.element("DisplayName", owner);
  w.close();
  w.element("Permission", "FULL_CONTROL");
  w.close();
  w.close();
  w.close();
  return w.finish();
}

}  // namespace

std::string_view s3_action_of(std::string_view op) {
  for (const auto& a : kActions) {
    if (a.op == op) return a.action;
  }
  return "s3:*";  // unknown operations match only wildcard statements
}

std::shared_ptr<const Policy> S3Service::Impl::bucket_policy_of(const storage::BucketInfo& b) {
  auto it = b.config.find(std::string(kPolicyKey));
  if (it == b.config.end()) return nullptr;
  std::lock_guard lock(policy_mu);
  auto c = policy_cache.find(b.name);
  if (c != policy_cache.end() && c->second.first == it->second) return c->second.second;
  auto parsed = parse_policy(it->second, b.name);
  // A stored policy was valid when it was put; should it not parse now, nothing is allowed by it
  // and, fail-safe, everything is denied to everyone but the owner.
  std::shared_ptr<const Policy> p;
  if (parsed.ok()) {
    p = std::make_shared<const Policy>(std::move(*parsed));
  } else {
    Policy deny_all;
    PolicyStatement st;
    st.allow = false;
    st.principals = {"*"};
    st.actions = {"*"};
    st.resources = {"*"};
    deny_all.statements.push_back(std::move(st));
    p = std::make_shared<const Policy>(std::move(deny_all));
  }
  if (policy_cache.size() >= 1024) policy_cache.clear();
  policy_cache[b.name] = {it->second, p};
  return p;
}

Status S3Service::Impl::authorize(const Ctx& c, const storage::BucketInfo& b, std::string_view key,
                                  std::string_view action) {
  const bool owner = !c.auth.anonymous && (b.owner.empty() || b.owner == c.auth.access_key);
  auto policy = bucket_policy_of(b);
  if (!policy) return owner ? Status::Ok() : access_denied();
  PolicyRequest r;
  r.principal = c.auth.anonymous ? std::string() : c.auth.access_key;
  r.action = std::string(action);
  r.resource = s3_arn(b.name, key);
  r.source_ip = c.ex.remote_address();
  r.secure_transport = opts.secure_transport;
  if (action == "s3:ListBucket" || action == "s3:ListBucketVersions" ||
      action == "s3:ListBucketMultipartUploads") {
    for (const char* k : {"prefix", "delimiter", "max-keys"}) {
      if (auto v = c.query_value(k)) r.keys.emplace_back(std::string("s3:") + k, *v);
    }
  }
  const PolicyDecision d = evaluate_policy(*policy, r);
  // The owner can always manage the policy itself (as the account root can on AWS), so that a
  // policy denying everything cannot lock the bucket for good.
  if (d == PolicyDecision::deny && !(owner && is_policy_op(c.op))) return access_denied();
  if (owner || d == PolicyDecision::allow) return Status::Ok();
  return access_denied();
}

Status S3Service::Impl::check_bucket_access(const Ctx& c) {
  auto b = store->head_bucket(c.bucket);
  if (!b.ok()) return b.status();
  return authorize(c, *b, c.key, s3_action_of(c.op));
}

Status S3Service::Impl::check_acl_headers(const Ctx& c) {
  if (auto acl = c.header("x-amz-acl")) {
    if (*acl != "private" && *acl != "bucket-owner-full-control") {
      return Status(Errc::acl_not_supported, "The bucket does not allow ACLs");
    }
  }
  for (const auto& f : c.req) {
    std::string name(f.name_string());
    for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (name.starts_with("x-amz-grant-")) {
      return Status(Errc::acl_not_supported, "The bucket does not allow ACLs");
    }
  }
  return Status::Ok();
}

Status S3Service::Impl::begin_bucket_document(Ctx& c, const char* get_op, const char* put_op,
                                              const char* delete_op) {
  const auto method = c.req.method();
  using bhttp::verb;
  c.op = method == verb::get ? get_op : method == verb::put ? put_op : delete_op;
  if (!c.key.empty() || (method != verb::get && method != verb::put && method != verb::delete_)) {
    return Status(Errc::method_not_allowed,
                  "The specified method is not allowed against this resource");
  }
  return check_bucket_access(c);
}

Result<std::string> S3Service::Impl::stored_bucket_document(const Ctx& c, std::string_view name,
                                                            Status missing) {
  auto doc = store->bucket_config(c.bucket, name);
  if (!doc.ok()) return doc.status();
  if (!*doc) return missing;
  return std::move(**doc);
}

Task<void> S3Service::Impl::bucket_policy(Ctx& c) {
  const auto method = c.req.method();
  using bhttp::verb;
  if (auto st =
          begin_bucket_document(c, "GetBucketPolicy", "PutBucketPolicy", "DeleteBucketPolicy");
      !st.ok())
    co_return co_await send_error(c, st);
  if (method == verb::get) {
    auto doc = stored_bucket_document(
        c, kPolicyKey, Status(Errc::no_such_bucket_policy, "The bucket policy does not exist"));
    if (!doc.ok()) co_return co_await send_error(c, doc.status());
    http::Fields f = base_headers(c);
    f.set(bhttp::field::content_type, "application/json");
    (void)co_await c.ex.send(bhttp::status::ok, std::move(f), std::move(*doc));
    co_return;
  }
  std::string document;
  if (method == verb::put) {
    auto body = co_await c.ex.read_body_string(limits::bucket_policy_bytes_max + 1);
    if (!body.ok()) {
      if (body.code() == Errc::entity_too_large || body.code() == Errc::invalid_argument) {
        co_return co_await send_error(
            c, Status(Errc::malformed_policy, "Policies must be no larger than " +
                                                  std::to_string(limits::bucket_policy_bytes_max) +
                                                  " bytes"));
      }
      co_return co_await send_error(c, body.status());
    }
    auto parsed = parse_policy(*body, c.bucket);
    if (!parsed.ok()) co_return co_await send_error(c, parsed.status());
    document = std::move(*body);  // GetBucketPolicy answers it as it was put
  }
  if (auto st = store->set_bucket_config(c.bucket, kPolicyKey, std::move(document)); !st.ok())
    co_return co_await send_error(c, st);
  co_await send_empty(c, bhttp::status::no_content);
}

Task<void> S3Service::Impl::acl(Ctx& c) {
  const auto method = c.req.method();
  using bhttp::verb;
  const bool object = !c.key.empty();
  if (method == verb::get) {
    c.op = object ? "GetObjectAcl" : "GetBucketAcl";
  } else if (method == verb::put) {
    c.op = object ? "PutObjectAcl" : "PutBucketAcl";
  } else {
    co_return co_await send_error(
        c, Status(Errc::method_not_allowed,
                  "The specified method is not allowed against this resource"));
  }
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  auto b = store->head_bucket(c.bucket);
  if (!b.ok()) co_return co_await send_error(c, b.status());
  if (object) {
    auto m = store->head_object(c.bucket, c.key);
    if (!m.ok()) co_return co_await send_error(c, m.status());
  }
  if (method == verb::get) co_return co_await send_xml(c, bhttp::status::ok, owner_acl(b->owner));
  // PUT: only what BucketOwnerEnforced keeps anyway (the owner's full control) is accepted.
  if (auto st = check_acl_headers(c); !st.ok()) co_return co_await send_error(c, st);
  auto body = co_await c.ex.read_body_string(limits::xml_body_bytes_max);
  if (!body.ok()) co_return co_await send_error(c, body.status());
  const bool canned = c.header("x-amz-acl").has_value();
  if (!canned && body->find_first_not_of(" \t\r\n") != std::string::npos &&
      !objdirect::s3::acl_is_owner_full_control(*body, b->owner)) {
    co_return co_await send_error(
        c, Status(Errc::acl_not_supported, "The bucket does not allow ACLs"));
  }
  if (!canned && body->find_first_not_of(" \t\r\n") == std::string::npos) {
    co_return co_await send_error(c, Status(Errc::malformed_xml,
                                            "The XML you provided was not well-formed or did not "
                                            "validate against our published schema"));
  }
  co_await send_empty(c, bhttp::status::ok);
}

Task<void> S3Service::Impl::ownership_controls(Ctx& c) {
  c.op = "GetBucketOwnershipControls";
  if (!c.key.empty() || c.req.method() != bhttp::verb::get) {
    co_return co_await send_error(
        c, Status(Errc::not_implemented,
                  "Object ownership is fixed to BucketOwnerEnforced (ACLs disabled)"));
  }
  if (auto st = check_bucket_access(c); !st.ok()) co_return co_await send_error(c, st);
  XmlWriter w;
  w.open("OwnershipControls", kS3Xmlns);
  w.open("Rule");
  w.element("ObjectOwnership", "BucketOwnerEnforced");
  w.close();
  w.close();
  co_await send_xml(c, bhttp::status::ok, w.finish());
}

}  // namespace objdirect::s3
