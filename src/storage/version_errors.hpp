// The errors of a request that names an object version (docs/versioning.md), as AWS words them,
// shared by the backends that keep versions (local, RADOS).
//
// Thread safety: pure functions.
#pragma once

#include "common/status.hpp"

namespace objdirect::storage {

// A versionId that no backend could have made (400 InvalidArgument).
inline Status invalid_version_id() {
  return Status(Errc::invalid_argument, "Invalid version id specified");
}
// A well-formed versionId the key does not have (404 NoSuchVersion).
inline Status no_such_version() {
  return Status(Errc::no_such_version, "The specified version does not exist.");
}
// A delete marker named by its version id, for an operation it cannot serve (GET, tagging):
// 405 MethodNotAllowed.
inline Status delete_marker_not_allowed() {
  return Status(Errc::method_not_allowed,
                "The specified method is not allowed against this resource.");
}

}  // namespace objdirect::storage
