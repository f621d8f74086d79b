#!/usr/bin/env bash
# Builds every libFuzzer target (clang-14, -DOBJDIRECT_FUZZ=ON, in build-asan: scripts/configure-asan)
# and runs each for FUZZ_SECONDS (default 30) starting from its checked-in seeds. Crash inputs land in build-asan/crashes/.
# Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER=${1:-${FUZZ_SECONDS:-30}}
B=${FUZZ_BUILD_DIR:-build-asan}
# The build the ASan+UBSan tests use (scripts/configure-asan): when make ci-sanitize has built it,
# the targets are already there.
scripts/configure-asan "$B"
mapfile -t targets < <(ninja -C "$B" -t targets all | grep -oE '(^|/)[a-z0-9_]+_fuzz: ' |
                       sed 's#.*/##; s#: ##' | grep -v '^cmake_' | sort -u)
[ ${#targets[@]} -gt 0 ] || { echo "fuzz: no *_fuzz targets found"; exit 1; }
ninja -C "$B" -j "${FUZZ_JOBS:-$(nproc)}" "${targets[@]}"
mkdir -p "$B/crashes" "$B/corpus"
status=0
for t in "${targets[@]}"; do
  bin=$(find "$B" -type f -name "$t" -perm -u+x | head -1)
  corpus="$B/corpus/$t"; mkdir -p "$corpus"
  # Seeds checked in beside the target, when there are any.
  for seeds in $(find src -type d \( -name "${t%_fuzz}*corpus*" -o -name "fuzz_corpus" \) 2>/dev/null); do
    cp -n "$seeds"/* "$corpus"/ 2>/dev/null || true
  done
  echo "== $t (${SECONDS_PER}s)"
  if ! "$bin" -max_total_time="$SECONDS_PER" -artifact_prefix="$B/crashes/$t-" -print_final_stats=1 \
       "$corpus" 2>&1 | tail -n 4; then
    echo "fuzz: $t FAILED (crash input in $B/crashes/)"; status=1
  fi
done
exit $status
