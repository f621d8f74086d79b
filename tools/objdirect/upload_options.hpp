// What `objdirect cp/sync/mv` set on an upload besides the bytes, as `aws s3 cp` does: the
// Content-Type guessed from the file name when --content-type is not given, and --metadata in
// either of aws-cli's forms (docs/client.md, "The CLI").
#pragma once

#include <string>
#include <string_view>

#include "objdirect/client.hpp"

namespace objdirect::cli {

// The media type of a file name's extension (case-insensitive: "a.JSON" is application/json),
// from a built-in table of common types (aws-cli asks Python's mimetypes; a table in the code
// gives the same answer on every machine, whatever its /etc/mime.types holds);
// empty for a name without an extension or with an unknown one (the server then stores
// binary/octet-stream, as S3 does for aws-cli's uploads of such files).
std::string guess_content_type(std::string_view file_name);

// --metadata: a JSON object of string values ('{"owner":"alice","tag":"a=b"}', aws-cli's JSON
// form) or KEY=VALUE[,KEY=VALUE...] (its shorthand; split on ',' then on the first '='), appended
// to `out` in order. The names and values are checked later by the upload (PutOptions).
// Errors: invalid_argument naming what is wrong (not JSON, a value that is not a string, an item
// without '=', an empty name).
Status parse_metadata(std::string_view text, PutOptions& out);

// --sse-c-key / --sse-c-copy-source-key, as `aws s3 cp` reads them: the key's bytes as given
// (32 characters), or fileb://PATH: the file's bytes (exactly 32). Errors: invalid_argument
// (another length, a file that cannot be read), naming the option but never the key.
Result<SseCustomerKey> parse_sse_c_key(std::string_view option, std::string_view value);

}  // namespace objdirect::cli
