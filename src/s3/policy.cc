#include "s3/policy.hpp"

#include <arpa/inet.h>

#include <array>
#include <boost/json.hpp>
#include <cstring>

#include "common/limits.hpp"

namespace objdirect::s3 {
namespace {

namespace json = boost::json;

Status malformed(std::string why) {
  return Status(Errc::malformed_policy, std::move(why));
}

char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

std::string lowered(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

// A string or an array of strings (at least one).
Result<std::vector<std::string>> strings(const json::value& v, std::string_view what) {
  std::vector<std::string> out;
  if (v.is_string()) {
    out.emplace_back(v.as_string());
  } else if (v.is_array()) {
    for (const json::value& e : v.as_array()) {
      if (!e.is_string()) return malformed(std::string(what) + " must be strings");
      out.emplace_back(e.as_string());
    }
  } else {
    return malformed(std::string(what) + " must be a string or an array of strings");
  }
  if (out.empty()) return malformed(std::string(what) + " must not be empty");
  return out;
}

Result<std::string> principal_of(std::string_view p) {
  if (p == "*") return std::string("*");
  if (p.starts_with("arn:")) {
    constexpr std::string_view kIam = "arn:aws:iam::";
    if (!p.starts_with(kIam)) return malformed("Invalid principal in policy");
    std::string_view rest = p.substr(kIam.size());
    const std::size_t colon = rest.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return malformed("Invalid principal in policy");
    }
    const std::string_view account = rest.substr(0, colon);
    const std::string_view what = rest.substr(colon + 1);
    if (what == "root") return std::string(account);
    if (what.starts_with("user/") && what.size() > 5) return std::string(what.substr(5));
    return malformed("Invalid principal in policy");
  }
  if (p.empty()) return malformed("Invalid principal in policy");
  return std::string(p);
}

Status parse_principal(const json::value& v, PolicyStatement& st) {
  if (v.is_string()) {
    if (v.as_string() != "*") return malformed("Invalid principal in policy");
    st.principals = {"*"};
    return Status::Ok();
  }
  if (!v.is_object()) return malformed("Invalid principal in policy");
  for (const auto& [k, val] : v.as_object()) {
    if (k != "AWS") return malformed("Invalid principal in policy: only \"AWS\" principals");
    auto list = strings(val, "Principal");
    if (!list.ok()) return list.status();
    for (const auto& p : *list) {
      auto who = principal_of(p);
      if (!who.ok()) return who.status();
      st.principals.push_back(std::move(*who));
    }
  }
  if (st.principals.empty()) return malformed("Invalid principal in policy");
  return Status::Ok();
}

bool valid_action(std::string_view a) {
  if (a == "*") return true;
  if (a.size() < 4 || lowered(a.substr(0, 3)) != "s3:") return false;
  for (char c : a.substr(3)) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '*' || c == '?')) return false;
  }
  return true;
}

Status check_resource(std::string_view r, std::string_view bucket) {
  if (r == "*") return Status::Ok();
  constexpr std::string_view kArn = "arn:aws:s3:::";
  if (!r.starts_with(kArn) || r.size() == kArn.size()) {
    return malformed("Policy has invalid resource");
  }
  std::string_view rest = r.substr(kArn.size());
  const std::string_view bucket_part = rest.substr(0, rest.find('/'));
  if (!policy_glob(bucket_part, bucket, false)) {
    return malformed("Policy has invalid resource");
  }
  return Status::Ok();
}

constexpr std::array<std::string_view, 11> kOperators = {"StringEquals",
                                                         "StringNotEquals",
                                                         "StringLike",
                                                         "StringNotLike",
                                                         "IpAddress",
                                                         "NotIpAddress",
                                                         "Bool",
                                                         "Null",
                                                         "StringEqualsIgnoreCase",
                                                         "StringNotEqualsIgnoreCase",
                                                         "ArnLike"};

constexpr std::array<std::string_view, 8> kKeys = {
    "aws:sourceip", "aws:securetransport", "s3:prefix",  "s3:delimiter",
    "s3:max-keys",  "aws:username",        "aws:userid", "aws:principaltype"};

Status parse_conditions(const json::value& v, PolicyStatement& st) {
  if (!v.is_object()) return malformed("Condition must be an object");
  for (const auto& [op_raw, body] : v.as_object()) {
    std::string op(op_raw);
    bool if_exists = false;
    if (op.ends_with("IfExists")) {
      if_exists = true;
      op.resize(op.size() - 8);
    }
    bool known = false;
    for (auto k : kOperators) known = known || k == op;
    if (!known || op == "ArnLike") {
      return malformed("Policy has an invalid condition operator: " + std::string(op_raw));
    }
    if (!body.is_object() || body.as_object().empty()) {
      return malformed("Condition " + std::string(op_raw) + " must map keys to values");
    }
    for (const auto& [key, vals] : body.as_object()) {
      const std::string lk = lowered(std::string_view(key));
      bool key_ok = false;
      for (auto k : kKeys) key_ok = key_ok || k == lk;
      if (!key_ok) {
        return malformed("Policy has an invalid condition key: " + std::string(key));
      }
      PolicyCondition c{op, if_exists, lk, {}};
      if (vals.is_bool()) {
        c.values = {vals.as_bool() ? "true" : "false"};
      } else if (vals.is_number()) {
        c.values = {json::serialize(vals)};
      } else {
        auto list = strings(vals, "Condition values");
        if (!list.ok()) return list.status();
        c.values = std::move(*list);
      }
      if (op == "IpAddress" || op == "NotIpAddress") {
        if (lk != "aws:sourceip") return malformed("IpAddress conditions need aws:SourceIp");
        for (const auto& cidr : c.values) {
          // A valid network matches its own base address.
          const std::string base = cidr.substr(0, cidr.find('/'));
          if (!ip_in_cidr(base, cidr)) return malformed("Invalid IP address or CIDR: " + cidr);
        }
      }
      if (op == "Bool" || op == "Null") {
        for (auto& val : c.values) {
          val = lowered(val);
          if (val != "true" && val != "false") {
            return malformed("Condition " + std::string(op_raw) + " takes true or false");
          }
        }
      }
      st.conditions.push_back(std::move(c));
    }
  }
  return Status::Ok();
}

Result<PolicyStatement> parse_statement(const json::value& v, std::string_view bucket) {
  if (!v.is_object()) return malformed("Statement must be an object");
  PolicyStatement st;
  bool effect = false, principal = false, action = false, resource = false;
  for (const auto& [k, val] : v.as_object()) {
    if (k == "Sid") {
      if (!val.is_string()) return malformed("Sid must be a string");
      st.sid = std::string(val.as_string());
    } else if (k == "Effect") {
      if (!val.is_string() || (val.as_string() != "Allow" && val.as_string() != "Deny")) {
        return malformed("Invalid effect: must be Allow or Deny");
      }
      st.allow = val.as_string() == "Allow";
      effect = true;
    } else if (k == "Principal") {
      OBJDIRECT_RETURN_IF_ERROR(parse_principal(val, st));
      principal = true;
    } else if (k == "Action" || k == "NotAction") {
      if (action) return malformed("Statement has both Action and NotAction");
      auto list = strings(val, "Action");
      if (!list.ok()) return list.status();
      for (const auto& a : *list) {
        if (!valid_action(a)) return malformed("Policy has invalid action");
      }
      st.actions = std::move(*list);
      st.not_action = k == "NotAction";
      action = true;
    } else if (k == "Resource" || k == "NotResource") {
      if (resource) return malformed("Statement has both Resource and NotResource");
      auto list = strings(val, "Resource");
      if (!list.ok()) return list.status();
      for (const auto& r : *list) OBJDIRECT_RETURN_IF_ERROR(check_resource(r, bucket));
      st.resources = std::move(*list);
      st.not_resource = k == "NotResource";
      resource = true;
    } else if (k == "Condition") {
      OBJDIRECT_RETURN_IF_ERROR(parse_conditions(val, st));
    } else if (k == "NotPrincipal") {
      return malformed("NotPrincipal is not supported");
    } else {
      return malformed("Unknown field in statement: " + std::string(k));
    }
  }
  if (!effect) return malformed("Missing required field Effect");
  if (!principal) return malformed("Missing required field Principal");
  if (!action) return malformed("Missing required field Action");
  if (!resource) return malformed("Missing required field Resource");
  return st;
}

// The request's value of a condition key; nullopt when it carries none.
std::optional<std::string> key_value(const PolicyRequest& r, std::string_view key) {
  if (key == "aws:sourceip") return r.source_ip;
  if (key == "aws:securetransport") return std::string(r.secure_transport ? "true" : "false");
  if (key == "aws:username" || key == "aws:userid") {
    if (r.principal.empty()) return std::nullopt;
    return r.principal;
  }
  if (key == "aws:principaltype") {
    return std::string(r.principal.empty() ? "Anonymous" : "User");
  }
  for (const auto& [k, v] : r.keys) {
    if (k == key) return v;
  }
  return std::nullopt;
}

bool condition_holds(const PolicyCondition& c, const PolicyRequest& r) {
  const auto v = key_value(r, c.key);
  if (c.op == "Null") {
    // "true": the key must be absent; "false": present.
    return (c.values.front() == "true") == !v.has_value();
  }
  const bool negated = c.op == "StringNotEquals" || c.op == "StringNotLike" ||
                       c.op == "NotIpAddress" || c.op == "StringNotEqualsIgnoreCase";
  if (!v) return c.if_exists || negated;
  bool any = false;
  for (const auto& want : c.values) {
    bool m = false;
    if (c.op == "StringEquals" || c.op == "StringNotEquals") {
      m = *v == want;
    } else if (c.op == "StringEqualsIgnoreCase" || c.op == "StringNotEqualsIgnoreCase") {
      m = lowered(*v) == lowered(want);
    } else if (c.op == "StringLike" || c.op == "StringNotLike") {
      m = policy_glob(want, *v, false);
    } else if (c.op == "IpAddress" || c.op == "NotIpAddress") {
      m = ip_in_cidr(*v, want);
    } else if (c.op == "Bool") {
      m = lowered(*v) == want;
    }
    if (m) {
      any = true;
      break;
    }
  }
  return negated ? !any : any;
}

bool applies(const PolicyStatement& st, const PolicyRequest& r) {
  bool who = false;
  for (const auto& p : st.principals)
    who = who || p == "*" || (!r.principal.empty() && p == r.principal);
  if (!who) return false;
  bool act = false;
  for (const auto& a : st.actions) act = act || policy_glob(a, r.action, true);
  if (act == st.not_action) return false;
  bool res = false;
  for (const auto& p : st.resources) res = res || policy_glob(p, r.resource, false);
  if (res == st.not_resource) return false;
  for (const auto& c : st.conditions) {
    if (!condition_holds(c, r)) return false;
  }
  return true;
}

// Parses an IPv4 or IPv6 address into 16 bytes (IPv4 as ::ffff:a.b.c.d); returns the prefix
// offset in bits of the address family (96 for IPv4, 0 for IPv6), or -1.
int parse_ip(std::string_view s, std::array<unsigned char, 16>& out) {
  if (s.empty() || s.size() > 45) return -1;
  std::string str(s);
  if (str.front() == '[' && str.back() == ']') str = str.substr(1, str.size() - 2);
  out.fill(0);
  in_addr v4{};
  if (inet_pton(AF_INET, str.c_str(), &v4) == 1) {
    out[10] = out[11] = 0xff;
    std::memcpy(out.data() + 12, &v4, 4);
    return 96;
  }
  in6_addr v6{};
  if (inet_pton(AF_INET6, str.c_str(), &v6) == 1) {
    std::memcpy(out.data(), &v6, 16);
    return 0;
  }
  return -1;
}

}  // namespace

bool policy_glob(std::string_view pattern, std::string_view s, bool case_insensitive) {
  // Iterative wildcard matching with one backtrack point: linear in practice, never recursive.
  std::size_t p = 0, i = 0, star = std::string_view::npos, mark = 0;
  auto eq = [&](char a, char b) { return case_insensitive ? lower(a) == lower(b) : a == b; };
  while (i < s.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || (pattern[p] != '*' && eq(pattern[p], s[i])))) {
      ++p;
      ++i;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = i;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      i = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool ip_in_cidr(std::string_view ip, std::string_view cidr) {
  std::array<unsigned char, 16> a{}, net{};
  const std::size_t slash = cidr.find('/');
  const int fa = parse_ip(
      ip.starts_with("::ffff:") && ip.find('.') != std::string_view::npos ? ip.substr(7) : ip, a);
  const int fn = parse_ip(cidr.substr(0, slash), net);
  if (fa < 0 || fn < 0 || fa != fn) return false;
  int bits = fn == 96 ? 32 : 128;
  if (slash != std::string_view::npos) {
    const std::string_view len = cidr.substr(slash + 1);
    if (len.empty() || len.size() > 3) return false;
    int n = 0;
    for (char c : len) {
      if (c < '0' || c > '9') return false;
      n = n * 10 + (c - '0');
    }
    if (n > bits) return false;
    bits = n;
  }
  const int total = fn + bits;
  for (int b = 0; b < total; ++b) {
    const unsigned mask = 0x80u >> (b % 8);
    if ((a[static_cast<std::size_t>(b / 8)] & mask) !=
        (net[static_cast<std::size_t>(b / 8)] & mask)) {
      return false;
    }
  }
  return true;
}

std::string s3_arn(std::string_view bucket, std::string_view key) {
  std::string out = "arn:aws:s3:::";
  out += bucket;
  if (!key.empty()) {
    out += '/';
    out += key;
  }
  return out;
}

Result<Policy> parse_policy(std::string_view text, std::string_view bucket) {
  if (text.size() > limits::bucket_policy_bytes_max) {
    return malformed("Policies must be no larger than " +
                     std::to_string(limits::bucket_policy_bytes_max) + " bytes");
  }
  boost::system::error_code ec;
  json::parse_options opt;
  opt.max_depth = 16;
  json::value doc = json::parse(json::string_view(text.data(), text.size()), ec, {}, opt);
  if (ec) return malformed("This policy contains invalid Json");
  if (!doc.is_object()) return malformed("This policy contains invalid Json");
  Policy p;
  bool have_statement = false;
  for (const auto& [k, v] : doc.as_object()) {
    if (k == "Version") {
      if (!v.is_string() || (v.as_string() != "2012-10-17" && v.as_string() != "2008-10-17")) {
        return malformed("The policy must contain a valid version string");
      }
      p.version = std::string(v.as_string());
    } else if (k == "Id") {
      if (!v.is_string()) return malformed("Id must be a string");
      p.id = std::string(v.as_string());
    } else if (k == "Statement") {
      have_statement = true;
      if (v.is_object()) {
        auto st = parse_statement(v, bucket);
        if (!st.ok()) return st.status();
        p.statements.push_back(std::move(*st));
      } else if (v.is_array()) {
        if (v.as_array().size() > limits::policy_statements_max) {
          return malformed("Policies may have at most " +
                           std::to_string(limits::policy_statements_max) + " statements");
        }
        for (const json::value& e : v.as_array()) {
          auto st = parse_statement(e, bucket);
          if (!st.ok()) return st.status();
          p.statements.push_back(std::move(*st));
        }
      } else {
        return malformed("Statement must be an object or an array");
      }
    } else {
      return malformed("Unknown field in policy: " + std::string(k));
    }
  }
  if (!have_statement || p.statements.empty()) return malformed("Missing required field Statement");
  return p;
}

namespace {

json::array string_array(const std::vector<std::string>& v) {
  json::array a;
  for (const auto& s : v) a.emplace_back(json::string(s));
  return a;
}

}  // namespace

std::string policy_json(const Policy& policy) {
  json::object doc;
  if (!policy.version.empty()) doc["Version"] = policy.version;
  if (!policy.id.empty()) doc["Id"] = policy.id;
  json::array statements;
  for (const PolicyStatement& st : policy.statements) {
    json::object o;
    if (!st.sid.empty()) o["Sid"] = st.sid;
    o["Effect"] = st.allow ? "Allow" : "Deny";
    if (st.principals == std::vector<std::string>{"*"}) {
      o["Principal"] = "*";
    } else {
      json::object pr;
      pr["AWS"] = string_array(st.principals);
      o["Principal"] = std::move(pr);
    }
    o[st.not_action ? "NotAction" : "Action"] = string_array(st.actions);
    o[st.not_resource ? "NotResource" : "Resource"] = string_array(st.resources);
    if (!st.conditions.empty()) {
      json::object cond;
      for (const PolicyCondition& c : st.conditions) {
        const std::string op = c.op + (c.if_exists ? "IfExists" : "");
        json::value& slot = cond[op];
        if (!slot.is_object()) slot = json::object();
        slot.as_object()[c.key] = string_array(c.values);
      }
      o["Condition"] = std::move(cond);
    }
    statements.emplace_back(std::move(o));
  }
  doc["Statement"] = std::move(statements);
  return json::serialize(doc);
}

PolicyDecision evaluate_policy(const Policy& policy, const PolicyRequest& req) {
  bool allowed = false;
  for (const PolicyStatement& st : policy.statements) {
    if (!applies(st, req)) continue;
    if (!st.allow) return PolicyDecision::deny;
    allowed = true;
  }
  return allowed ? PolicyDecision::allow : PolicyDecision::none;
}

}  // namespace objdirect::s3
