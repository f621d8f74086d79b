// What the gateway's upstream can do (s3_internal.hpp), probed rather than assumed: write
// conditions on PutObject and CompleteMultipartUpload; the gateway checks them itself where not.
#include <cstdio>
#include <random>

#include "s3/conditional.hpp"
#include "storage/s3/s3_internal.hpp"

namespace objdirect::storage::s3gw {

// Whether the upstream enforces write conditions on PutObject (complete = false) or
// CompleteMultipartUpload (true). In "auto" mode the first call probes the upstream in
// `bucket` and remembers the answer; a failed probe answers false (the gateway checks: safe)
// and is repeated next time.
bool S3Store::upstream_checks(std::string_view bucket, bool complete) {
  const std::string& mode = core_->opts.conditional_writes;
  if (mode == "upstream") return true;
  if (mode == "gateway") return false;
  {
    std::lock_guard lk(core_->caps_mu);
    const auto& known = complete ? core_->complete_conditions : core_->put_conditions;
    if (known) return *known;
  }
  auto probed = complete ? probe_complete_conditions(bucket) : probe_put_conditions(bucket);
  if (!probed.ok()) return false;
  std::lock_guard lk(core_->caps_mu);
  (complete ? core_->complete_conditions : core_->put_conditions) = *probed;
  return *probed;
}

std::string S3Store::probe_key() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return ".objdirect-gateway-probe/" + std::string(buf);
}

// PUT a scratch key, then PUT it again with If-None-Match: * and with a wrong If-Match (an
// upstream that enforces conditions answers 412 to both) and with its right If-Match (200;
// radosgw 16 answers 412 to the quoted ETag and 200 to the bare one, which is then used). The
// key is deleted afterwards.
Result<bool> S3Store::probe_put_conditions(std::string_view bucket) {
  core_->ctr.capability_probes++;
  const std::string key = probe_key();
  auto first = core_->call(object_request("PUT", bucket, key));
  if (!first.ok()) return first.status();
  const std::string etag = objdirect::s3::unquote_etag(first->header("etag").value_or(""));
  auto put_with = [&](std::string name, std::string value) {
    Request r = object_request("PUT", bucket, key);
    r.headers.emplace_back(std::move(name), std::move(value));
    return core_->perform(std::move(r));
  };
  auto a = put_with("if-none-match", "*");
  auto b = put_with("if-match", quote("00000000000000000000000000000000"));
  auto c = put_with("if-match", quote(etag));
  bool unquoted = false;
  if (c.ok() && c->status == 412) {
    auto d = put_with("if-match", etag);
    unquoted = d.ok() && d->status == 200;
    if (!unquoted) c = std::move(d);
  }
  (void)core_->call(object_request("DELETE", bucket, key));
  for (const auto* r : {&a, &b, &c})
    if (!r->ok()) return r->status();
  const bool enforced = a->status == 412 && b->status == 412 && (unquoted || c->status == 200);
  if (enforced) {
    std::lock_guard lk(core_->caps_mu);
    core_->put_if_match_unquoted = unquoted;
  }
  return enforced;
}

// PUT a scratch key, then complete a one-part upload of it with If-None-Match: *: an upstream
// that enforces conditions on Complete answers 412 (radosgw 16 overwrites). Cleaned up after.
Result<bool> S3Store::probe_complete_conditions(std::string_view bucket) {
  core_->ctr.capability_probes++;
  const std::string key = probe_key();
  auto first = core_->call(object_request("PUT", bucket, key));
  if (!first.ok()) return first.status();
  UploadInfo info;
  info.key = key;
  Result<bool> out = Status(Errc::internal, "probe not run");
  auto id = create_upload(bucket, info);
  if (id.ok()) {
    const std::string byte = "p";
    Request part = part_request(bucket, key, *id, 1);
    part.body = Body{byte.data(), -1, 0, byte.size(), 0, 0};
    auto pr = core_->call(std::move(part));
    if (!pr.ok()) {
      out = pr.status();
    } else {
      const std::string etag = objdirect::s3::unquote_etag(pr->header("etag").value_or(""));
      auto done =
          complete(bucket, key, *id, {{1, etag}}, {}, {WriteCondition::Kind::must_be_absent, ""});
      if (done.ok()) {
        out = false;
      } else if (done.code() == Errc::precondition_failed) {
        out = true;
      } else {
        out = done.status();
      }
    }
    (void)abort_upload(bucket, key, *id);  // completed already where the upstream overwrote
    core_->forget_template(*id);
  } else {
    out = id.status();
  }
  (void)core_->call(object_request("DELETE", bucket, key));
  return out;
}

// A write condition checked by the gateway (the caller holds the key's lock): a HEAD. S3's
// answers: If-None-Match: * on an existing key and a different ETag are 412; If-Match on a
// missing key is 404 NoSuchKey.
Status S3Store::check_condition(std::string_view bucket, std::string_view key,
                                const WriteCondition& cond) {
  core_->ctr.gateway_checked_conditions++;
  auto h = head_object(bucket, key);
  if (cond.kind == WriteCondition::Kind::must_be_absent) {
    if (h.ok())
      return Status(Errc::precondition_failed,
                    "At least one of the pre-conditions you specified did not hold (the key "
                    "exists; checked by the gateway)");
    return h.code() == Errc::no_such_key ? Status::Ok() : h.status();
  }
  if (!h.ok()) return h.status();
  if (h->etag != cond.etag)
    return Status(Errc::precondition_failed,
                  "At least one of the pre-conditions you specified did not hold (ETag is " +
                      h->etag + "; checked by the gateway)");
  return Status::Ok();
}

Status S3Store::note_capability(std::optional<bool> Core::*cap, Status st) {
  if (st.ok() || st.code() == Errc::not_implemented) {
    std::lock_guard lk(core_->caps_mu);
    auto& known = (*core_).*cap;
    if (!known || st.ok()) known = st.ok();
  }
  return st;
}

Status S3Store::capability_known_missing(std::optional<bool> Core::*cap,
                                         std::string_view what) const {
  std::lock_guard lk(core_->caps_mu);
  if ((*core_).*cap == false) {
    return Status(Errc::not_implemented,
                  "The gateway's upstream does not keep " + std::string(what));
  }
  return Status::Ok();
}

Status S3Store::versioning_known_missing() const {
  return capability_known_missing(&Core::versioning,
                                  "object versions (it answered NotImplemented to a versioning "
                                  "request)");
}

Status S3Store::note_versioning(Status st) {
  return note_capability(&Core::versioning, st);
}

bool S3Store::passes_sse_c() const {
  std::lock_guard lk(core_->caps_mu);
  return core_->sse_c != false;
}

Status S3Store::sse_c_known_missing(const SseCKeyHeaders& sse) const {
  if (!sse.present()) return Status::Ok();
  return capability_known_missing(&Core::sse_c,
                                  "SSE-C (it answered NotImplemented to a request with SSE-C "
                                  "headers, or stored an object without confirming its "
                                  "encryption)");
}

Status S3Store::note_sse_c(const SseCKeyHeaders& sse, Status st) {
  if (!sse.present() || st.code() != Errc::not_implemented) return st;
  return note_capability(&Core::sse_c, st);
}

Status S3Store::sse_c_confirmed(const SseCKeyHeaders& sse, const Response& r,
                                std::string_view what) {
  if (!sse.present()) return Status::Ok();
  const bool confirmed = sse_c_of_reply(r).enabled();
  {
    std::lock_guard lk(core_->caps_mu);
    if (!core_->sse_c || confirmed) core_->sse_c = confirmed;
  }
  if (confirmed) return Status::Ok();
  return Status(Errc::not_implemented,
                "The gateway's upstream does not keep SSE-C: its " + std::string(what) +
                    " answer did not confirm the encryption with the customer's key");
}

}  // namespace objdirect::storage::s3gw
