#!/usr/bin/env bash
# Builds every libFuzzer target (clang-14, -DOBJDIRECT_FUZZ=ON) and runs each for FUZZ_SECONDS
# (default 30) starting from its checked-in seeds. Crash inputs land in build-fuzz/crashes/.
# Usage: scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER=${1:-${FUZZ_SECONDS:-30}}
B=${FUZZ_BUILD_DIR:-build-fuzz}
if [ ! -f "$B/build.ninja" ]; then
  # -O1 with line tables only: the optimisation libFuzzer recommends, symbolised stacks, and a
  # build of the in-process HTTP target (Beast, Asio coroutines, the S3 service) that is several
  # times cheaper than -O2 -g.
  CC=clang-14 CXX=clang++-14 cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" \
    -DOBJDIRECT_FUZZ=ON -DOBJDIRECT_WERROR=OFF > /dev/null
fi
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
