// Lifecycle: Get/Put/DeleteBucketLifecycleConfiguration and the background worker that applies
// the rules (lifecycle.hpp has the document; docs/s3-compatibility.md, "Lifecycle").
//
// The worker runs one pass every S3Options::lifecycle_interval_ms: for each bucket with a
// configuration and each enabled rule it lists the rule's prefix and deletes the objects whose
// filter matches and whose age (since Last-Modified, in lifecycle "days" of
// lifecycle_day_seconds) reaches Expiration Days, or all of them once Expiration Date has
// passed; it aborts the rule's multipart uploads initiated DaysAfterInitiation days ago. Work per
// pass is bounded: at most lifecycle_actions_per_pass_max deletions and aborts and ten times as
// many listed entries; a rule's listing resumes where the previous pass stopped. Before deleting,
// the worker re-reads the object and skips it if its ETag or Last-Modified changed since the
// listing (an overwrite in between is kept; one in the microseconds between that check and the
// delete is not, as on AWS where lifecycle actions are asynchronous).
#include "common/checksum.hpp"
#include "common/limits.hpp"
#include "s3/lifecycle.hpp"
#include "server/s3/s3_internal.hpp"

namespace objdirect::s3 {

namespace {

constexpr std::string_view kLifecycleKey = "lifecycle";

}  // namespace

Task<void> S3Service::Impl::bucket_lifecycle(Ctx& c) {
  const auto method = c.req.method();
  using bhttp::verb;
  if (auto st = begin_bucket_document(c, "GetBucketLifecycleConfiguration",
                                      "PutBucketLifecycleConfiguration", "DeleteBucketLifecycle");
      !st.ok())
    co_return co_await send_error(c, st);
  if (method == verb::get) {
    auto doc = stored_bucket_document(c, kLifecycleKey,
                                      Status(Errc::no_such_lifecycle_configuration,
                                             "The lifecycle configuration does not exist"));
    if (!doc.ok()) co_return co_await send_error(c, doc.status());
    co_return co_await send_xml(c, bhttp::status::ok, *doc);
  }
  std::string document;
  if (method == verb::put) {
    auto body = co_await c.ex.read_body_string(limits::xml_body_bytes_max);
    if (!body.ok()) co_return co_await send_error(c, body.status());
    if (auto st = check_content_md5(c, *body); !st.ok()) co_return co_await send_error(c, st);
    auto rules = parse_lifecycle(*body);
    if (!rules.ok()) co_return co_await send_error(c, rules.status());
    document = lifecycle_xml(*rules);
  }
  if (auto st = store->set_bucket_config(c.bucket, kLifecycleKey, std::move(document)); !st.ok())
    co_return co_await send_error(c, st);
  co_await send_empty(c, method == verb::put ? bhttp::status::ok : bhttp::status::no_content);
}

void S3Service::Impl::lifecycle_loop() {
  std::unique_lock lock(lc_mu);
  while (!lc_stop) {
    lc_cv.wait_for(lock, std::chrono::milliseconds(opts.lifecycle_interval_ms),
                   [this] { return lc_stop; });
    if (lc_stop) break;
    lock.unlock();
    lifecycle_pass();
    lock.lock();
  }
}

// NoncurrentVersionExpiration (NoncurrentDays counted from when the next newer version was
// written, sparing the NewerNoncurrentVersions newest noncurrent ones) and
// ExpiredObjectDeleteMarker (a delete marker that is the only version left of its key). The
// walk resumes where the last pass stopped (cursor: key '\0' version id).
void S3Service::Impl::lifecycle_versions(const std::string& bucket, const LifecycleRule& rule,
                                         const std::string& cursor_key, std::int64_t now,
                                         std::int64_t day_ns, std::uint64_t& actions_left,
                                         std::uint64_t& scan_left) {
  storage::ListVersionsQuery q;
  q.prefix = rule.prefix;
  q.max_keys = limits::list_keys_max;
  if (const std::string& c = lc_cursor[cursor_key]; !c.empty()) {
    const auto nul = c.find('\0');
    q.key_marker = c.substr(0, nul);
    if (nul != std::string::npos) q.version_id_marker = c.substr(nul + 1);
  }
  std::string key;               // the key whose versions are being walked
  std::uint32_t noncurrent = 0;  // its noncurrent versions seen so far, newest first
  bool finished = false;
  while (actions_left > 0 && scan_left > 0) {
    auto page = store->list_object_versions(bucket, q);
    if (!page.ok()) break;
    const auto& vs = page->versions;
    for (std::size_t i = 0; i < vs.size(); ++i) {
      if (scan_left == 0 || actions_left == 0) break;
      --scan_left;
      const storage::ObjectVersion& v = vs[i];
      const storage::ObjectMeta& m = v.meta;
      q.key_marker = m.key;
      q.version_id_marker = m.version_id;
      if (m.key != key) {
        key = m.key;
        noncurrent = 0;
      }
      if (!v.is_latest) ++noncurrent;
      if (!v.is_latest && rule.noncurrent_days) {
        const bool due = now - v.noncurrent_since_ns >=
                         static_cast<std::int64_t>(*rule.noncurrent_days) * day_ns;
        const bool spared =
            rule.newer_noncurrent_versions && noncurrent <= *rule.newer_noncurrent_versions;
        if (due && !spared && lifecycle_matches(rule, m.key, m.size, m.tags) &&
            store->delete_object_version(bucket, m.key, m.version_id).ok()) {
          lc_expired++;
          --actions_left;
        }
        continue;
      }
      if (v.is_latest && m.delete_marker && rule.expired_object_delete_marker) {
        // The only version left: nothing follows it under its key (looked up, as the next
        // version may sit on the next page).
        storage::ListVersionsQuery next;
        next.key_marker = m.key;
        next.version_id_marker = m.version_id;
        next.max_keys = 1;
        auto after = store->list_object_versions(bucket, next);
        if (!after.ok()) continue;
        if (!after->versions.empty() && after->versions[0].meta.key == m.key) continue;
        if (store->delete_object_version(bucket, m.key, m.version_id).ok()) {
          lc_expired++;
          --actions_left;
        }
      }
    }
    if (!page->truncated) {
      finished = scan_left > 0 && actions_left > 0;
      break;
    }
    q.key_marker = page->next_key_marker;
    q.version_id_marker = page->next_version_id_marker;
  }
  // Next pass: from the top once the walk reached the end, else where it stopped.
  lc_cursor[cursor_key] = finished ? std::string() : q.key_marker + '\0' + q.version_id_marker;
}

void S3Service::Impl::lifecycle_pass() {
  lc_passes++;
  std::uint64_t actions_left = opts.lifecycle_actions_per_pass_max;
  std::uint64_t scan_left = 10 * std::max<std::uint64_t>(actions_left, 1);
  auto buckets = store->list_buckets();
  if (!buckets.ok()) return;
  const std::int64_t now = now_ns();
  const std::int64_t day_ns = static_cast<std::int64_t>(opts.lifecycle_day_seconds) * 1'000'000'000;
  for (const storage::BucketInfo& b : *buckets) {
    auto it = b.config.find(std::string(kLifecycleKey));
    if (it == b.config.end()) continue;
    auto rules = parse_lifecycle(it->second);
    if (!rules.ok()) continue;
    for (std::size_t ri = 0; ri < rules->size(); ++ri) {
      const LifecycleRule& rule = (*rules)[ri];
      if (!rule.enabled) continue;
      const std::string cursor_key = b.name + '\n' + std::to_string(ri);
      if (rule.expiration_days || rule.expiration_date_s) {
        storage::ListQuery q;
        q.prefix = rule.prefix;
        q.start_after = lc_cursor[cursor_key];
        q.max_keys = limits::list_keys_max;
        while (actions_left > 0 && scan_left > 0) {
          auto page = store->list_objects(b.name, q);
          if (!page.ok()) break;
          for (const storage::ObjectMeta& m : page->objects) {
            if (scan_left == 0 || actions_left == 0) break;
            --scan_left;
            q.start_after = m.key;
            const bool due =
                rule.expiration_days
                    ? now - m.mtime_ns >= static_cast<std::int64_t>(*rule.expiration_days) * day_ns
                    : now / 1'000'000'000 >= *rule.expiration_date_s;
            if (!due || !lifecycle_matches(rule, m.key, m.size, m.tags)) continue;
            auto cur = store->head_object(b.name, m.key);
            if (!cur.ok() || cur->etag != m.etag || cur->mtime_ns != m.mtime_ns) continue;
            if (store->delete_object(b.name, m.key).ok()) {
              lc_expired++;
              --actions_left;
            }
          }
          if (!page->truncated) {
            if (scan_left > 0 && actions_left > 0)
              q.start_after.clear();  // next pass: from the top
            break;
          }
          q.start_after = page->next_marker;
        }
        lc_cursor[cursor_key] = q.start_after;
      }
      // Versioned buckets: noncurrent versions and expired delete markers.
      if ((rule.noncurrent_days || rule.expired_object_delete_marker) &&
          store->supports_versioning() &&
          b.config.contains(std::string(storage::versioning_config_name))) {
        lifecycle_versions(b.name, rule, cursor_key + "\nv", now, day_ns, actions_left, scan_left);
      }
      if (rule.abort_days) {
        storage::ListUploadsQuery uq;
        uq.prefix = rule.prefix;
        auto ups = store->list_uploads(b.name, uq);
        if (!ups.ok()) continue;
        for (const storage::UploadInfo& u : ups->uploads) {
          if (actions_left == 0) break;
          if (now - u.initiated_ns < static_cast<std::int64_t>(*rule.abort_days) * day_ns) continue;
          if (store->abort_upload(b.name, u.key, u.upload_id).ok()) {
            lc_aborted++;
            --actions_left;
          }
        }
      }
    }
  }
}

}  // namespace objdirect::s3
