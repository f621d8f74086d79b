#!/usr/bin/env bash
# Fails when a C/C++ source in the tree differs from what clang-format (the repository's
# .clang-format) would write; `make format` rewrites them. Run by ctest as source_format.
# Usage: scripts/check-format.sh [REPO_ROOT]
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
mapfile -t files < <(find src include tools tests bench python \
  \( -name '*.cc' -o -name '*.hpp' -o -name '*.h' -o -name '*.cpp' \) -type f 2>/dev/null | sort)
[ ${#files[@]} -gt 0 ] || { echo "format: no sources found"; exit 1; }
if ! clang-format --dry-run -Werror "${files[@]}" 2> /tmp/check-format.$$; then
  grep -E '^[^ ].*: error:' /tmp/check-format.$$ | cut -d: -f1 | sort | uniq -c |
    sed 's/^/format: not clang-formatted (lines): /'
  rm -f /tmp/check-format.$$
  echo "format: run 'make format' (clang-format -i) on the files above"
  exit 1
fi
rm -f /tmp/check-format.$$
echo "format: ${#files[@]} files ok"
