// The gateway's bucket documents (s3_internal.hpp; docs/scale-out.md, "What the gateway passes
// through" and "Bucket owners and policies"):
//  - lifecycle: Put/Get/DeleteBucketLifecycleConfiguration passed through; the upstream keeps the
//    rules and executes them;
//  - CORS: Put/Get/DeleteBucketCors passed through; the S3 layer applies the rules, read here
//    through the document cache;
//  - owners and policies: objects in the state bucket (S3StoreOptions::state_bucket),
//    buckets/<bucket>/owner (the owner's access key), buckets/<bucket>/owned-by/<owner,
//    percent-encoded> (the owner index: the owner in the key, so that one LIST reads the owners
//    of many buckets) and buckets/<bucket>/policy (the policy as it was put), read through the
//    same cache, each written with one PUT.
#include <unordered_map>

#include "common/checksum.hpp"
#include "s3/cors.hpp"
#include "s3/lifecycle.hpp"
#include "storage/s3/s3_internal.hpp"

namespace objdirect::storage::s3gw {

namespace {

std::string doc_key(std::string_view bucket, std::string_view name) {
  return std::string(bucket) + '\n' + std::string(name);
}

constexpr std::string_view kStatePrefix = "buckets/";
constexpr std::string_view kOwnedBy = "owned-by/";

std::string state_key(std::string_view bucket, std::string_view name) {
  return std::string(kStatePrefix) + std::string(bucket) + "/" + std::string(name);
}

// The name (under buckets/<bucket>/) of the owner index entry of `owner`.
std::string owned_by(std::string_view owner) {
  return std::string(kOwnedBy) + uri_encode(owner, true);
}

// A bucket subresource request (?lifecycle, ?cors) carrying `body` (none when empty).
Request subresource_request(std::string method, std::string_view bucket, std::string_view sub,
                            const std::string& body) {
  Request r;
  r.method = std::move(method);
  r.bucket = std::string(bucket);
  r.query = {{std::string(sub), ""}};
  if (!body.empty()) set_xml_body(r, body);
  return r;
}

}  // namespace

Status S3Store::ensure_state_bucket() {
  Request h;
  h.method = "HEAD";
  h.bucket = core_->opts.state_bucket;
  h.state = true;
  auto resp = core_->call(h);
  if (resp.ok()) return Status::Ok();
  if (resp.code() != Errc::no_such_key && resp.code() != Errc::no_such_bucket) return resp.status();
  Request c;
  c.method = "PUT";
  c.bucket = core_->opts.state_bucket;
  c.state = true;
  const std::string body = create_bucket_configuration(core_->opts.region);
  if (!body.empty()) c.body = Body{body.data(), -1, 0, body.size(), 0, 0};
  auto made = core_->call(std::move(c));
  if (!made.ok() && made.code() != Errc::bucket_already_owned_by_you) return made.status();
  return Status::Ok();
}

Result<std::vector<BucketInfo>> S3Store::upstream_buckets() {
  auto doc = call_xml(Request{}, "ListBuckets", objdirect::s3::decode_list_buckets);
  if (!doc.ok()) return doc.status();
  std::vector<BucketInfo> out;
  for (auto& b : doc->buckets) {
    if (!core_->opts.state_bucket.empty() && b.name == core_->opts.state_bucket) continue;
    BucketInfo info;
    info.name = std::move(b.name);
    if (auto t = parse_iso8601(b.creation_date)) info.ctime_ns = ns_of(*t);
    info.region = core_->opts.region;
    out.push_back(std::move(info));
  }
  return out;
}

// --- lifecycle ---------------------------------------------------------------------------------

Status S3Store::store_lifecycle(std::string_view bucket, const std::string& document) {
  OBJDIRECT_RETURN_IF_ERROR(capability_known_missing(
      &Core::lifecycle,
      "lifecycle configurations (it answered NotImplemented to a lifecycle request)"));
  Request r =
      subresource_request(document.empty() ? "DELETE" : "PUT", bucket, "lifecycle", document);
  return note_capability(&Core::lifecycle, core_->call(std::move(r)).status());
}

Result<std::optional<std::string>> S3Store::fetch_lifecycle(std::string_view bucket) {
  OBJDIRECT_RETURN_IF_ERROR(capability_known_missing(
      &Core::lifecycle,
      "lifecycle configurations (it answered NotImplemented to a lifecycle request)"));
  Request r = subresource_request("GET", bucket, "lifecycle", "");
  r.xml_reply = true;
  auto resp = core_->call(std::move(r));
  if (!resp.ok()) {
    if (resp.code() == Errc::no_such_lifecycle_configuration) {
      (void)note_capability(&Core::lifecycle, Status::Ok());
      return std::optional<std::string>();
    }
    return note_capability(&Core::lifecycle, resp.status());
  }
  (void)note_capability(&Core::lifecycle, Status::Ok());
  auto rules = objdirect::s3::parse_lifecycle(resp->body);
  if (!rules.ok()) {
    return Status(Errc::io_error, "upstream GetBucketLifecycleConfiguration: reply is not valid: " +
                                      rules.status().message());
  }
  return std::optional<std::string>(objdirect::s3::lifecycle_xml(*rules));
}

// --- CORS --------------------------------------------------------------------------------------

Status S3Store::store_cors(std::string_view bucket, const std::string& document) {
  OBJDIRECT_RETURN_IF_ERROR(capability_known_missing(
      &Core::cors, "CORS configurations (it answered NotImplemented to a CORS request)"));
  Request r = subresource_request(document.empty() ? "DELETE" : "PUT", bucket, "cors", document);
  Status st = note_capability(&Core::cors, core_->call(std::move(r)).status());
  forget_documents(bucket);
  return st;
}

Result<std::optional<std::string>> S3Store::fetch_cors(std::string_view bucket) {
  OBJDIRECT_RETURN_IF_ERROR(capability_known_missing(
      &Core::cors, "CORS configurations (it answered NotImplemented to a CORS request)"));
  Request r = subresource_request("GET", bucket, "cors", "");
  r.xml_reply = true;
  auto resp = core_->perform(std::move(r), nullptr, s3_limits::document_bytes_max);
  if (!resp.ok()) return resp.status();
  if (resp->status < 200 || resp->status > 299) {
    Status st = upstream_error(*resp, "GET ?cors");
    if (st.code() == Errc::no_such_cors_configuration) {
      (void)note_capability(&Core::cors, Status::Ok());
      return std::optional<std::string>();
    }
    return note_capability(&Core::cors, st);
  }
  (void)note_capability(&Core::cors, Status::Ok());
  auto rules = objdirect::s3::parse_cors(resp->body);
  if (!rules.ok()) {
    return Status(Errc::io_error,
                  "upstream GetBucketCors: reply is not valid: " + rules.status().message());
  }
  return std::optional<std::string>(objdirect::s3::cors_xml(*rules));
}

// --- the state bucket --------------------------------------------------------------------------

Result<std::optional<std::string>> S3Store::fetch_state(std::string_view bucket,
                                                        std::string_view name) {
  Request r = object_request("GET", core_->opts.state_bucket, state_key(bucket, name));
  r.state = true;
  auto resp = core_->perform(std::move(r), nullptr, s3_limits::document_bytes_max);
  if (!resp.ok()) {
    core_->ctr.state_errors++;
    return resp.status();
  }
  if (resp->status < 200 || resp->status > 299) {
    Status st = upstream_error(*resp, "GET state " + state_key(bucket, name));
    if (st.code() == Errc::no_such_key) return std::optional<std::string>();
    core_->ctr.state_errors++;
    // The state bucket is gone (removed at the upstream): unavailable, never "no policy", so
    // that nothing is opened up by its loss.
    if (st.code() == Errc::no_such_bucket) return Status(Errc::unavailable, st.message());
    return st;
  }
  return std::optional<std::string>(std::move(resp->body));
}

Status S3Store::store_state(std::string_view bucket, std::string_view name,
                            const std::string& document, bool if_absent) {
  Request r = object_request(document.empty() ? "DELETE" : "PUT", core_->opts.state_bucket,
                             state_key(bucket, name));
  r.state = true;
  if (!document.empty()) {
    r.headers.emplace_back("content-type", "application/octet-stream");
    if (if_absent) r.headers.emplace_back("if-none-match", "*");
    r.body = Body{document.data(), -1, 0, document.size(), 0, 0};
  }
  Status st = core_->call(std::move(r)).status();
  if (!st.ok() && st.code() != Errc::precondition_failed) core_->ctr.state_errors++;
  if (st.code() == Errc::no_such_bucket) return Status(Errc::unavailable, st.message());
  return st;
}

// --- the document cache ------------------------------------------------------------------------

Result<std::optional<std::string>> S3Store::cached_document(std::string_view bucket,
                                                            std::string_view name, bool fresh) {
  const std::string key = doc_key(bucket, name);
  const auto ttl = std::chrono::milliseconds(core_->opts.document_cache_ttl_ms);
  std::uint64_t generation;
  {
    std::lock_guard lk(core_->docs_mu);
    generation = core_->docs_generation;
    auto it = core_->docs.find(key);
    if (!fresh && it != core_->docs.end() && Clock::now() - it->second.read_at < ttl) {
      core_->docs_lru.splice(core_->docs_lru.begin(), core_->docs_lru, it->second.lru);
      core_->ctr.document_cache_hits++;
      return it->second.doc;
    }
  }
  if (name == "cors") {
    // An upstream known to keep no CORS: nothing to read (and nothing counted as read).
    OBJDIRECT_RETURN_IF_ERROR(capability_known_missing(
        &Core::cors, "CORS configurations (it answered NotImplemented to a CORS request)"));
  }
  core_->ctr.document_reads++;
  auto doc = name == "cors" ? fetch_cors(bucket) : fetch_state(bucket, name);
  if (!doc.ok()) return doc.status();
  std::lock_guard lk(core_->docs_mu);
  // A write through this gateway since the read began may have changed it: serve what was read
  // (it was current when read), cache it only when nothing was written meanwhile.
  if (core_->docs_generation == generation) remember_document(key, *doc);
  return doc;
}

void S3Store::remember_document(const std::string& key, std::optional<std::string> doc) {
  if (core_->opts.document_cache_ttl_ms == 0) return;
  auto it = core_->docs.find(key);
  if (it == core_->docs.end()) {
    while (core_->docs.size() >= core_->opts.document_cache_entries) {
      core_->docs.erase(core_->docs_lru.back());
      core_->docs_lru.pop_back();
    }
    core_->docs_lru.push_front(key);
    it = core_->docs.emplace(key, Core::CachedDoc{}).first;
    it->second.lru = core_->docs_lru.begin();
  } else {
    core_->docs_lru.splice(core_->docs_lru.begin(), core_->docs_lru, it->second.lru);
  }
  it->second.doc = std::move(doc);
  it->second.read_at = Clock::now();
}

// The owners of `buckets` (list_buckets): fresh cache entries, and for the others one paged LIST
// of buckets/ in the state bucket, whose keys say which buckets have an owner record, which
// owner index entries (owned-by/<owner>) and which a policy. A bucket with no record has no
// owner; one with a record and exactly one index entry is that owner's (the index entry is
// written before the record and removed after it, so a record always has its entry; an extra
// entry is left by a failed removal, or by a race an upstream without If-None-Match let
// through); any other bucket, and any past the first state_list_pages_max pages, reads its record
// through the cache. What the LIST found fills the cache (owners, and the policies known absent).
Status S3Store::fill_owners(std::vector<BucketInfo>& buckets) {
  std::unordered_map<std::string, BucketInfo*> wanted;
  std::uint64_t generation;
  {
    std::lock_guard lk(core_->docs_mu);
    generation = core_->docs_generation;
    const auto ttl = std::chrono::milliseconds(core_->opts.document_cache_ttl_ms);
    for (BucketInfo& b : buckets) {
      auto it = core_->docs.find(doc_key(b.name, "owner"));
      if (it != core_->docs.end() && Clock::now() - it->second.read_at < ttl) {
        core_->docs_lru.splice(core_->docs_lru.begin(), core_->docs_lru, it->second.lru);
        core_->ctr.document_cache_hits++;
        if (it->second.doc) b.owner = *it->second.doc;
      } else {
        wanted.emplace(b.name, &b);
      }
    }
  }
  if (wanted.empty()) return Status::Ok();
  struct Seen {
    bool record = false, policy = false;
    std::vector<std::string> owners;  // the index entries
  };
  std::unordered_map<std::string, Seen> seen;
  std::string token, last_key;
  bool complete = false;
  for (std::uint32_t page = 0; page < s3_limits::state_list_pages_max && !complete; ++page) {
    Request r;
    r.bucket = core_->opts.state_bucket;
    r.state = true;
    r.query = {{"list-type", "2"},
               {"encoding-type", "url"},
               {"max-keys", std::to_string(limits::list_keys_max)},
               {"prefix", std::string(kStatePrefix)}};
    if (!token.empty()) r.query.emplace_back("continuation-token", token);
    auto doc = call_xml(std::move(r), "ListObjectsV2", objdirect::s3::decode_list_objects);
    if (!doc.ok()) {
      core_->ctr.state_errors++;
      if (doc.code() == Errc::no_such_bucket)
        return Status(Errc::unavailable, doc.status().message());
      return doc.status();
    }
    core_->ctr.state_list_pages++;
    const bool url = doc->encoding_type == "url";
    for (const auto& c : doc->objects) {
      std::string key = decoded(c.key, url);
      if (key > last_key) last_key = key;
      if (!key.starts_with(kStatePrefix)) continue;
      const std::string_view rest = std::string_view(key).substr(kStatePrefix.size());
      const std::size_t slash = rest.find('/');
      if (slash == std::string_view::npos) continue;
      const std::string name(rest.substr(0, slash));
      if (!wanted.contains(name)) continue;
      const std::string_view what = rest.substr(slash + 1);
      Seen& s = seen[name];
      if (what == "owner") {
        s.record = true;
      } else if (what == "policy") {
        s.policy = true;
      } else if (what.starts_with(kOwnedBy)) {
        if (auto owner = uri_decode(what.substr(kOwnedBy.size()))) s.owners.push_back(*owner);
      }
    }
    token = doc->next_continuation_token;
    complete = !doc->is_truncated || token.empty();
  }
  std::vector<BucketInfo*> unresolved;
  std::vector<std::pair<std::string, std::optional<std::string>>> found;  // cache key -> doc
  for (auto& [name, b] : wanted) {
    // Every key of the bucket (buckets/<name>/...) sorts before buckets/<name>0.
    if (!complete && last_key < std::string(kStatePrefix) + name + "0") {
      unresolved.push_back(b);
      continue;
    }
    auto it = seen.find(name);
    if (it == seen.end() || !it->second.record) {
      found.emplace_back(doc_key(name, "owner"), std::nullopt);
    } else if (it->second.owners.size() == 1) {
      b->owner = it->second.owners.front();
      found.emplace_back(doc_key(name, "owner"), b->owner);
    } else {
      unresolved.push_back(b);
    }
    if (it == seen.end() || !it->second.policy)
      found.emplace_back(doc_key(name, "policy"), std::nullopt);
  }
  {
    std::lock_guard lk(core_->docs_mu);
    if (core_->docs_generation == generation) {
      for (auto& [key, doc] : found) remember_document(key, std::move(doc));
    }
  }
  for (BucketInfo* b : unresolved) {
    auto owner = cached_document(b->name, "owner");
    if (!owner.ok()) return owner.status();
    if (*owner) b->owner = std::move(**owner);
  }
  return Status::Ok();
}

void S3Store::forget_documents(std::string_view bucket) {
  std::lock_guard lk(core_->docs_mu);
  core_->docs_generation++;
  for (std::string_view name : {"cors", "owner", "policy"}) {
    auto it = core_->docs.find(doc_key(bucket, name));
    if (it == core_->docs.end()) continue;
    core_->docs_lru.erase(it->second.lru);
    core_->docs.erase(it);
  }
}

// --- owners ------------------------------------------------------------------------------------

// The owner record is written before the upstream bucket (if absent: If-None-Match: *, which
// upstreams that enforce write conditions check atomically), so that a bucket created through
// the gateway never exists without its owner. A crash between the two leaves a record without a
// bucket: the name stays its owner's, whose retry of CreateBucket completes it. The owner index
// entry (owned-by/<owner>) is written before the record and removed only after it, so that a
// record always has its entry (fill_owners relies on it).
Status S3Store::create_owned_bucket(const BucketInfo& info) {
  auto current = fetch_state(info.name, "owner");
  if (!current.ok()) return current.status();
  if (*current && **current != info.owner) {
    return Status(Errc::bucket_already_exists,
                  "The requested bucket name is not available. The bucket namespace is shared by "
                  "all users of the system. Please select a different name and try again.");
  }
  const bool wrote = !*current;
  if (wrote) {
    OBJDIRECT_RETURN_IF_ERROR(store_state(info.name, owned_by(info.owner), info.owner));
    Status st = store_state(info.name, "owner", info.owner, true);
    if (st.code() == Errc::precondition_failed) {
      // Another create wrote the record meanwhile (an upstream that checks If-None-Match).
      forget_documents(info.name);
      auto again = fetch_state(info.name, "owner");
      if (!again.ok()) return again.status();
      if (!*again || **again != info.owner) {
        (void)store_state(info.name, owned_by(info.owner), "");
        return Status(Errc::bucket_already_exists,
                      "The requested bucket name is not available (being created by another "
                      "user). Please select a different name and try again.");
      }
      return create_upstream_bucket(info);
    }
    OBJDIRECT_RETURN_IF_ERROR(st);
  } else {
    Request h;
    h.method = "HEAD";
    h.bucket = info.name;
    if (core_->call(std::move(h)).ok()) {
      return Status(Errc::bucket_already_owned_by_you,
                    "Your previous request to create the named bucket succeeded and you already "
                    "own it.");
    }
    // A record of this owner without a bucket (a crash, or a bucket deleted at the upstream):
    // no policy of a former bucket of that name may carry over; the index entry is written
    // again (a DeleteBucket whose record removal failed after the entry's may have left none).
    OBJDIRECT_RETURN_IF_ERROR(store_state(info.name, "policy", ""));
    OBJDIRECT_RETURN_IF_ERROR(store_state(info.name, owned_by(info.owner), info.owner));
  }
  forget_documents(info.name);
  Status st = create_upstream_bucket(info);
  if (!st.ok() && wrote) {
    // Not created (a bucket the upstream already had without a record stays ownerless, as
    // before the state bucket was given; or the upstream refused): the record goes again.
    if (store_state(info.name, "owner", "").ok()) (void)drop_owner_index(info.name);
    forget_documents(info.name);
  }
  return st;
}

// After the upstream removed the bucket: its policy, then its owner record, then its owner index
// entries. A failure is counted (state_errors) and leaves a record for a bucket that no longer
// exists: the name stays its owner's and a re-creation starts without the old policy
// (create_owned_bucket).
void S3Store::drop_bucket_state(std::string_view bucket) {
  if (store_state(bucket, "policy", "").ok() && store_state(bucket, "owner", "").ok())
    (void)drop_owner_index(bucket);
  forget_documents(bucket);
}

// Removes every owner index entry of `bucket` (one LIST of buckets/<bucket>/owned-by/, a DELETE
// each; a bucket has one, a few after failed removals).
Status S3Store::drop_owner_index(std::string_view bucket) {
  Request r;
  r.bucket = core_->opts.state_bucket;
  r.state = true;
  r.query = {{"list-type", "2"},
             {"encoding-type", "url"},
             {"max-keys", std::to_string(limits::list_keys_max)},
             {"prefix", state_key(bucket, kOwnedBy)}};
  auto doc = call_xml(std::move(r), "ListObjectsV2", objdirect::s3::decode_list_objects);
  if (!doc.ok()) {
    core_->ctr.state_errors++;
    return doc.status();
  }
  const bool url = doc->encoding_type == "url";
  const std::string prefix = state_key(bucket, "");
  for (const auto& c : doc->objects) {
    const std::string key = decoded(c.key, url);
    if (!key.starts_with(prefix)) continue;
    OBJDIRECT_RETURN_IF_ERROR(store_state(bucket, key.substr(prefix.size()), ""));
  }
  return Status::Ok();
}

}  // namespace objdirect::storage::s3gw
