#!/usr/bin/env bash
# Usage: bench/gateway-cache-get.sh [BIN_DIR] [RUNS]   (default build/bin, 3)
# GET through the gateway (--backend s3) in front of an upstream objdirect-server, side by side in
# one run: without cache; with --cache-dir, first GET (miss) and repeat GETs (hits); 16 MiB and
# 256 MiB; HTTP (objdirect cp --fabric none) and RDMA (--fabric libfabric:tcp). Every GET is a
# separate `objdirect cp` process; the figure is its own transfer time (after its HeadObject).
# Each (size, path) pair has its own key, so the miss of one is not the hit of another. Bytes are
# compared after every GET. Prints one line per GET and a table (best and median GB/s).
set -uo pipefail
BIN=${1:-build/bin}
RUNS=${2:-3}
W=$(mktemp -d /tmp/gwcache-bench-XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null && wait "$p" 2> /dev/null; done
  rm -rf "$W"
}
trap cleanup EXIT
export FI_TCP_IFACE=lo AWS_REGION=us-east-1
export AWS_ACCESS_KEY_ID=benchAK AWS_SECRET_ACCESS_KEY=benchSecret  # upstream and gateway alike
for s in 16 256; do head -c $((s << 20)) /dev/urandom > "$W/src$s"; done

start() {  # name, server args...; sets URL
  local name=$1
  shift
  mkdir -p "$W/$name"
  "$BIN/objdirect-server" --listen 127.0.0.1:0 --data "$W/$name/data" --access-key benchAK \
    --secret-key benchSecret --no-fsync "$@" > "$W/$name/log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 200); do grep -qs "listening on" "$W/$name/log" && break; sleep 0.05; done
  URL=$(grep -o 'http://[0-9.:]*' "$W/$name/log" | head -1)
}

start up --fabric none
UP=$URL
export AWS_ENDPOINT_URL=$UP
"$BIN/objdirect" mb s3://bench > /dev/null
for s in 16 256; do
  for p in http rdma; do
    "$BIN/objdirect" cp --fabric none "$W/src$s" "s3://bench/o$s-$p" > /dev/null || exit 1
  done
done

get() {  # mode label, size, path
  local fab=none
  [ "$3" = rdma ] && fab=libfabric:tcp
  local j
  j=$("$BIN/objdirect" cp --json --fabric $fab "s3://bench/o$2-$3" "$W/out")
  cmp -s "$W/src$2" "$W/out" || echo "BYTES DIFFER: $1 $2 $3"
  echo "$1 ${2}MiB $3 $j" | tee -a "$W/results"
}

start gw --fabric libfabric:tcp --backend s3 --upstream "$UP"
export AWS_ENDPOINT_URL=$URL
for s in 16 256; do for p in http rdma; do
  for i in $(seq "$RUNS"); do get no-cache $s $p; done
done; done
kill "${PIDS[-1]}"; wait "${PIDS[-1]}" 2> /dev/null; unset 'PIDS[-1]'

start gwc --fabric libfabric:tcp --backend s3 --upstream "$UP" --cache-dir "$W/cache" \
  --cache-bytes-max $((1 << 30)) --cache-ttl-s 600
export AWS_ENDPOINT_URL=$URL
for s in 16 256; do for p in http rdma; do
  get cache-miss $s $p
  for i in $(seq "$RUNS"); do get cache-hit $s $p; done
done; done
curl -s "$URL/metrics" | grep -E '^objdirect_(cache_(hits|misses)_total|upstream_(get_)?requests_total) '

python3 - "$W/results" << 'EOF'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    mode, size, path, j = line.split(" ", 3)
    r = json.loads(j)
    assert path != "rdma" or r["path"] == "rdma", r
    rows.setdefault((size, path, mode), []).append(r["gbytes_per_s"])
print("| size | path | no cache GB/s (best / median) | cache miss GB/s | cache hit GB/s (best / median) |")
print("|---:|---|---:|---:|---:|")
for size in ("16MiB", "256MiB"):
    for path in ("http", "rdma"):
        f = lambda m: rows.get((size, path, m), [0])
        nc, miss, hit = f("no-cache"), f("cache-miss"), f("cache-hit")
        print(f"| {size} | {'lf-tcp' if path == 'rdma' else 'http'} | {max(nc):.2f} / {statistics.median(nc):.2f} "
              f"| {miss[0]:.2f} | {max(hit):.2f} / {statistics.median(hit):.2f} |")
EOF
