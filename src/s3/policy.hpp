// Bucket policies: the AWS policy language for S3 (PutBucketPolicy / GetBucketPolicy) and its
// evaluation for one request (docs/s3-compatibility.md, "Bucket policies").
//
// {"Version": "2012-10-17",                      also "2008-10-17"; optional
//  "Id": "...",                                   optional
//  "Statement": [ {                               one object or an array
//  of 1..policy_statements_max
//     "Sid": "...",                               optional
//     "Effect": "Allow" | "Deny",
//     "Principal": "*" | {"AWS": "*" | "<principal>" | ["<principal>", ...]},
//     "Action": "s3:GetObject" | ["s3:Get*", ...],   or "NotAction"
//     "Resource": "arn:aws:s3:::bucket/prefix/*" | [...],   or "NotResource"
//     "Condition": {"<operator>": {"<key>": "value" | ["value", ...]}, ...}   optional
//  } ]}
//
// A <principal> is an access key of this server, "arn:aws:iam::<access key>:root" or
// "arn:aws:iam::<account>:user/<access key>" (ObjDirect's users are access keys; there are no
// accounts), or "*". Actions are "s3:<name>" with '*' / '?' wildcards (case-insensitive), or "*".
// Resources are "arn:aws:s3:::<bucket>" or "arn:aws:s3:::<bucket>/<key pattern>" with '*' / '?'
// wildcards (case-sensitive), or "*"; every resource must name the policy's own bucket (a bucket
// pattern must match it).
// Conditions: StringEquals, StringNotEquals, StringLike, StringNotLike (keys s3:prefix,
// s3:delimiter, s3:max-keys, aws:username, aws:userid, aws:SourceIp as text), IpAddress and
// NotIpAddress (aws:SourceIp with IPv4/IPv6 CIDRs), Bool (aws:SecureTransport), Null, each with
// an optional "...IfExists" suffix. A condition on a key the request does not carry is false
// (true for the negated operators, the IfExists forms and Null: true).
// Anything else (unknown operators, keys, fields, wrong types) is MalformedPolicy, as AWS answers;
// so is a document above limits::bucket_policy_bytes_max or with more statements than
// limits::policy_statements_max.
//
// Evaluation: a statement applies when its principal, action, resource and every condition
// match. Any applying Deny wins; otherwise any applying Allow allows; otherwise the policy is
// silent (the caller then falls back to ownership).
//
// Thread safety: a parsed Policy is immutable; the functions are pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.hpp"

namespace objdirect::s3 {

struct PolicyCondition {
  std::string op;  // e.g. "StringLike", without "IfExists"
  bool if_exists = false;
  std::string key;  // as written (keys compare case-insensitively)
  std::vector<std::string> values;

  bool operator==(const PolicyCondition&) const = default;
};

struct PolicyStatement {
  std::string sid;
  bool allow = true;
  std::vector<std::string> principals;  // "*" or access keys (ARNs reduced to the key)
  std::vector<std::string> actions;
  bool not_action = false;
  std::vector<std::string> resources;
  bool not_resource = false;
  std::vector<PolicyCondition> conditions;

  bool operator==(const PolicyStatement&) const = default;
};

struct Policy {
  std::string version;
  std::string id;
  std::vector<PolicyStatement> statements;

  bool operator==(const Policy&) const = default;
};

// Parses and validates a policy for `bucket` (resources must name it).
Result<Policy> parse_policy(std::string_view json, std::string_view bucket);

// A canonical JSON document for `policy` (principals as access keys, condition keys lower-case)
// that parse_policy reads back to the same Policy. GetBucketPolicy answers the document as it
// was put, not this.
std::string policy_json(const Policy& policy);

// What one request asks for, as the policy sees it.
struct PolicyRequest {
  std::string principal;  // access key; empty when anonymous
  std::string action;     // "s3:GetObject"
  std::string resource;   // "arn:aws:s3:::bucket" or "arn:aws:s3:::bucket/key"
  std::string source_ip;  // the client's address ("127.0.0.1", "::1")
  bool secure_transport = false;
  // Request-specific condition keys (s3:prefix, s3:delimiter, s3:max-keys), lower-case names.
  std::vector<std::pair<std::string, std::string>> keys;
};

enum class PolicyDecision { none, allow, deny };

PolicyDecision evaluate_policy(const Policy& policy, const PolicyRequest& req);

// '*' matches any run, '?' one byte.
bool policy_glob(std::string_view pattern, std::string_view s, bool case_insensitive);

// Whether `ip` lies in `cidr` ("10.0.0.0/8", "::1/128", or a bare address). False for anything
// unparsable.
bool ip_in_cidr(std::string_view ip, std::string_view cidr);

// "arn:aws:s3:::bucket" or "arn:aws:s3:::bucket/key".
std::string s3_arn(std::string_view bucket, std::string_view key);

}  // namespace objdirect::s3
