#include "s3/lifecycle.hpp"

#include <set>

#include "common/limits.hpp"
#include "common/time.hpp"
#include "s3/names.hpp"
#include "s3/xml.hpp"
#include "s3/xml_internal.hpp"

namespace objdirect::s3 {
namespace {

using detail::local_name;
using detail::malformed;
using detail::trim;

Status invalid(std::string why) {
  return Status(Errc::invalid_argument, std::move(why));
}

std::optional<std::string> leaf(const pugi::xml_node& n) {
  auto s = detail::text_of(n);
  if (!s) return s;
  return std::string(trim(*s));
}

std::optional<std::uint64_t> decimal(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

// A positive day count (at most 2^31 - 1).
Result<std::uint32_t> days(const std::string& text, std::string_view what) {
  auto v = decimal(text);
  if (!v) return malformed(detail::about(what, "must be a decimal integer"));
  if (*v == 0 || *v > 0x7fffffff) {
    std::string msg = "'";
    msg += what;
    msg += "' must be a positive integer";
    return invalid(std::move(msg));
  }
  return static_cast<std::uint32_t>(*v);
}

// Children of `n` by local name; an error if a name appears twice and `unique`.
Result<std::vector<pugi::xml_node>> children(const pugi::xml_node& n, std::string_view name) {
  std::vector<pugi::xml_node> out;
  for (pugi::xml_node c : n.children()) {
    if (c.type() == pugi::node_element && local_name(c) == name) out.push_back(c);
  }
  return out;
}

Result<std::optional<std::string>> one(const pugi::xml_node& n, std::string_view name) {
  std::optional<std::string> out;
  for (pugi::xml_node c : n.children()) {
    if (c.type() != pugi::node_element || local_name(c) != name) continue;
    if (out) return malformed(detail::about(name, "appears more than once"));
    out = leaf(c);
    if (!out) return malformed(detail::about(name, "must contain only text"));
  }
  return out;
}

Status parse_tag(const pugi::xml_node& t, storage::TagSet& tags) {
  auto k = one(t, "Key");
  if (!k.ok()) return k.status();
  auto v = one(t, "Value");
  if (!v.ok()) return v.status();
  if (!*k) return malformed("<Tag> without <Key>");
  tags.emplace_back(std::move(**k), v->value_or(""));
  return Status::Ok();
}

// Prefix / Tag / ObjectSize* of a <Filter> or its <And>.
Status parse_filter_parts(const pugi::xml_node& f, LifecycleRule& r, bool in_and) {
  auto prefix = one(f, "Prefix");
  if (!prefix.ok()) return prefix.status();
  if (*prefix) r.prefix = **prefix;
  auto tags = children(f, "Tag");
  if (!tags.ok()) return tags.status();
  if (!in_and && tags->size() > 1)
    return malformed("<Filter> holds more than one <Tag>: use <And>");
  for (const auto& t : *tags) OBJDIRECT_RETURN_IF_ERROR(parse_tag(t, r.tags));
  for (const char* name : {"ObjectSizeGreaterThan", "ObjectSizeLessThan"}) {
    auto v = one(f, name);
    if (!v.ok()) return v.status();
    if (!*v) continue;
    auto n = decimal(**v);
    if (!n) return malformed(detail::about(name, "must be a decimal integer"));
    (std::string_view(name) == "ObjectSizeGreaterThan" ? r.size_greater_than : r.size_less_than) =
        *n;
  }
  return Status::Ok();
}

Result<LifecycleRule> parse_rule(const pugi::xml_node& n) {
  LifecycleRule r;
  auto id = one(n, "ID");
  if (!id.ok()) return id.status();
  if (*id) {
    if ((*id)->size() > 255) return invalid("ID length should not exceed allowed limit of 255");
    r.id = **id;
  }
  auto status = one(n, "Status");
  if (!status.ok()) return status.status();
  if (!*status || (**status != "Enabled" && **status != "Disabled")) {
    return malformed("<Status> must be Enabled or Disabled");
  }
  r.enabled = **status == "Enabled";
  auto legacy = one(n, "Prefix");
  if (!legacy.ok()) return legacy.status();
  auto filters = children(n, "Filter");
  if (filters->size() > 1) return malformed("<Filter> appears more than once");
  if (*legacy && !filters->empty()) return malformed("a rule has both <Filter> and <Prefix>");
  if (*legacy) {
    r.legacy_prefix = true;
    r.prefix = **legacy;
  }
  if (!filters->empty()) {
    r.has_filter = true;
    const pugi::xml_node f = filters->front();
    auto ands = children(f, "And");
    if (ands->size() > 1) return malformed("<And> appears more than once");
    OBJDIRECT_RETURN_IF_ERROR(parse_filter_parts(f, r, false));
    if (!ands->empty()) {
      if (!r.prefix.empty() || !r.tags.empty() || r.size_greater_than || r.size_less_than) {
        return malformed("<Filter> has both <And> and other conditions");
      }
      OBJDIRECT_RETURN_IF_ERROR(parse_filter_parts(ands->front(), r, true));
    }
    if (r.size_greater_than && r.size_less_than && *r.size_greater_than >= *r.size_less_than) {
      return invalid("ObjectSizeGreaterThan must be less than ObjectSizeLessThan");
    }
    std::set<std::string_view> keys;
    for (const auto& [k, v] : r.tags) {
      if (!keys.insert(k).second) return invalid("Duplicate Tag Keys are not allowed.");
    }
  }
  if (!children(n, "Transition")->empty() || !children(n, "NoncurrentVersionTransition")->empty()) {
    return Status(Errc::not_implemented,
                  "Transitions are not supported: ObjDirect has one storage class");
  }
  auto exps = children(n, "Expiration");
  if (exps->size() > 1) return malformed("<Expiration> appears more than once");
  if (!exps->empty()) {
    const pugi::xml_node e = exps->front();
    auto d = one(e, "Days");
    auto date = one(e, "Date");
    auto marker = one(e, "ExpiredObjectDeleteMarker");
    if (!d.ok()) return d.status();
    if (!date.ok()) return date.status();
    if (!marker.ok()) return marker.status();
    if ((*d ? 1 : 0) + (*date ? 1 : 0) + (*marker ? 1 : 0) != 1) {
      return malformed("<Expiration> needs exactly one of Days, Date, ExpiredObjectDeleteMarker");
    }
    if (*d) {
      auto v = days(**d, "Days");
      if (!v.ok()) return v.status();
      r.expiration_days = *v;
    } else if (*date) {
      auto t = parse_iso8601(**date);
      if (!t) return malformed("<Date> must be an ISO 8601 date");
      const std::int64_t s =
          std::chrono::duration_cast<std::chrono::seconds>(t->time_since_epoch()).count();
      if (s % 86400 != 0) return invalid("'Date' must be at midnight GMT");
      r.expiration_date_s = s;
    } else {
      if (**marker != "true" && **marker != "false") {
        return malformed("<ExpiredObjectDeleteMarker> must be true or false");
      }
      r.expired_object_delete_marker = **marker == "true";
    }
  }
  auto nve = children(n, "NoncurrentVersionExpiration");
  if (nve->size() > 1) return malformed("<NoncurrentVersionExpiration> appears more than once");
  if (!nve->empty()) {
    auto d = one(nve->front(), "NoncurrentDays");
    if (!d.ok()) return d.status();
    if (!*d) return malformed("<NoncurrentVersionExpiration> needs <NoncurrentDays>");
    auto v = days(**d, "NoncurrentDays");
    if (!v.ok()) return v.status();
    r.noncurrent_days = *v;
    auto newer = one(nve->front(), "NewerNoncurrentVersions");
    if (!newer.ok()) return newer.status();
    if (*newer) {
      auto nv = days(**newer, "NewerNoncurrentVersions");
      if (!nv.ok()) return nv.status();
      r.newer_noncurrent_versions = *nv;
    }
  }
  auto abort = children(n, "AbortIncompleteMultipartUpload");
  if (abort->size() > 1)
    return malformed("<AbortIncompleteMultipartUpload> appears more than once");
  if (!abort->empty()) {
    auto d = one(abort->front(), "DaysAfterInitiation");
    if (!d.ok()) return d.status();
    if (!*d) return malformed("<AbortIncompleteMultipartUpload> needs <DaysAfterInitiation>");
    auto v = days(**d, "DaysAfterInitiation");
    if (!v.ok()) return v.status();
    r.abort_days = *v;
    if (!r.tags.empty() || r.size_greater_than || r.size_less_than) {
      return Status(Errc::invalid_request,
                    "AbortIncompleteMultipartUpload cannot be specified with Tags or object "
                    "size filters");
    }
  }
  if (!r.expiration_days && !r.expiration_date_s && !r.expired_object_delete_marker &&
      !r.noncurrent_days && !r.abort_days) {
    return Status(Errc::invalid_request, "At least one action needs to be specified in a rule");
  }
  return r;
}

void write_filter_parts(XmlWriter& w, const LifecycleRule& r) {
  if (!r.prefix.empty() || (r.tags.empty() && !r.size_greater_than && !r.size_less_than)) {
    w.element("Prefix", r.prefix);
  }
  for (const auto& [k, v] : r.tags) {
    w.open("Tag");
    w.element("Key", k);
    w.element("Value", v);
    w.close();
  }
  if (r.size_greater_than) w.element("ObjectSizeGreaterThan", *r.size_greater_than);
  if (r.size_less_than) w.element("ObjectSizeLessThan", *r.size_less_than);
}

}  // namespace

Result<std::vector<LifecycleRule>> parse_lifecycle(std::string_view body) {
  if (!is_valid_utf8(body)) return malformed("the document is not UTF-8");
  pugi::xml_document doc;
  auto root = detail::load(doc, body, "LifecycleConfiguration");
  if (!root.ok()) return root.status();
  std::vector<LifecycleRule> rules;
  std::set<std::string> ids;
  for (pugi::xml_node c : root->children()) {
    if (c.type() != pugi::node_element || local_name(c) != "Rule") continue;
    if (rules.size() == limits::lifecycle_rules_max) {
      return malformed("more than " + std::to_string(limits::lifecycle_rules_max) + " rules");
    }
    auto r = parse_rule(c);
    if (!r.ok()) return r.status();
    if (!r->id.empty() && !ids.insert(r->id).second) {
      return invalid("Rule ID must be unique. Found same ID for more than one rule");
    }
    rules.push_back(std::move(*r));
  }
  if (rules.empty()) return malformed("no <Rule>");
  return rules;
}

std::string lifecycle_xml(const std::vector<LifecycleRule>& rules) {
  XmlWriter w;
  w.open("LifecycleConfiguration", "http://s3.amazonaws.com/doc/2006-03-01/");
  for (const LifecycleRule& r : rules) {
    w.open("Rule");
    if (!r.id.empty()) w.element("ID", r.id);
    if (r.legacy_prefix) {
      w.element("Prefix", r.prefix);
    } else if (r.has_filter) {
      w.open("Filter");
      const int parts = (r.prefix.empty() ? 0 : 1) + static_cast<int>(r.tags.size()) +
                        (r.size_greater_than ? 1 : 0) + (r.size_less_than ? 1 : 0);
      if (parts > 1) {
        w.open("And");
        write_filter_parts(w, r);
        w.close();
      } else {
        write_filter_parts(w, r);
      }
      w.close();
    }
    w.element("Status", r.enabled ? "Enabled" : "Disabled");
    if (r.expiration_days || r.expiration_date_s || r.expired_object_delete_marker) {
      w.open("Expiration");
      if (r.expiration_days) w.element("Days", static_cast<std::uint64_t>(*r.expiration_days));
      if (r.expiration_date_s) {
        w.element("Date", iso8601_ms(std::chrono::system_clock::time_point(
                              std::chrono::seconds(*r.expiration_date_s))));
      }
      if (r.expired_object_delete_marker) w.element("ExpiredObjectDeleteMarker", "true");
      w.close();
    }
    if (r.noncurrent_days) {
      w.open("NoncurrentVersionExpiration");
      w.element("NoncurrentDays", static_cast<std::uint64_t>(*r.noncurrent_days));
      if (r.newer_noncurrent_versions) {
        w.element("NewerNoncurrentVersions",
                  static_cast<std::uint64_t>(*r.newer_noncurrent_versions));
      }
      w.close();
    }
    if (r.abort_days) {
      w.open("AbortIncompleteMultipartUpload");
      w.element("DaysAfterInitiation", static_cast<std::uint64_t>(*r.abort_days));
      w.close();
    }
    w.close();
  }
  w.close();
  return w.finish();
}

bool lifecycle_matches(const LifecycleRule& rule, std::string_view key, std::uint64_t size,
                       const storage::TagSet& tags) {
  if (!key.starts_with(rule.prefix)) return false;
  if (rule.size_greater_than && !(size > *rule.size_greater_than)) return false;
  if (rule.size_less_than && !(size < *rule.size_less_than)) return false;
  for (const auto& want : rule.tags) {
    bool found = false;
    for (const auto& t : tags) found = found || t == want;
    if (!found) return false;
  }
  return true;
}

}  // namespace objdirect::s3
