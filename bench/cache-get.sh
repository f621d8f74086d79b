#!/usr/bin/env bash
# Usage: bench/cache-get.sh [BIN_DIR]   (default build/bin)
# GET of a 256 MiB object: local backend alone vs the same behind --cache-dir (miss, then hits).
set -uo pipefail
BIN=${1:-build/bin}
W=$(mktemp -d /tmp/cache-bench-XXXXXX)
export FI_TCP_IFACE=lo AWS_ACCESS_KEY_ID=benchAK AWS_SECRET_ACCESS_KEY=benchSecret AWS_REGION=us-east-1
head -c $((256 << 20)) /dev/urandom > $W/src
run() {  # name, extra server args
  local name=$1; shift
  mkdir -p $W/$name
  $BIN/objdirect-server --listen 127.0.0.1:0 --data $W/$name/data --access-key benchAK --secret-key benchSecret \
    --no-fsync --fabric libfabric:tcp "$@" > $W/$name/log 2>&1 &
  local pid=$!
  for _ in $(seq 100); do grep -q "listening on" $W/$name/log && break; sleep 0.1; done
  export AWS_ENDPOINT_URL=$(grep -o 'http://[0-9.:]*' $W/$name/log | head -1)
  $BIN/objdirect mb s3://bench > /dev/null
  $BIN/objdirect cp --json --fabric none $W/src s3://bench/big > /dev/null
  for fab in none libfabric:tcp; do
    for i in 1 2 3; do
      echo "$name $fab #$i $($BIN/objdirect cp --json --fabric $fab s3://bench/big $W/out)"
      cmp -s $W/src $W/out || echo "BYTES DIFFER"
    done
  done
  curl -s $AWS_ENDPOINT_URL/metrics | grep -E '^objdirect_cache_(hits|misses|inner_requests)_total'
  kill $pid; wait $pid
}
run plain
run cached --cache-dir $W/cached/cache --cache-bytes-max $((1 << 30))
rm -rf $W
