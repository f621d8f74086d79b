#!/usr/bin/env bash
# objdirect-bench --endpoint against a RADOS-backed objdirect-server and a local-backend one,
# started here side by side, plus the RADOS ops each request cost (the OSD's op counter around each
# run). Run it under scripts/with-ceph.sh, which provides the
# cluster (OBJDIRECT_CEPH_CONF):
#
#   scripts/with-ceph.sh scripts/bench-rados.sh [objdirect-bench args...]
#   e.g. scripts/with-ceph.sh scripts/bench-rados.sh --sizes 4KiB --concurrency 1,4 --procs 1
#
# Each op (OPS, default "get put") runs as its own objdirect-bench invocation so that the RADOS
# op counts are per op type. Environment: BUILD (build dir, default build), RADOS_SERVER_ARGS
# (extra arguments of the RADOS server, e.g. "--rados-bucket-cache 0"), BACKENDS (default
# "local rados").
set -euo pipefail
build=${BUILD:-build}
conf=${OBJDIRECT_CEPH_CONF:?run under scripts/with-ceph.sh}
tmp=$(mktemp -d /tmp/objdirect-bench-rados-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# start_server NAME ARGS...: starts a server on a free port, sets $url.
start_server() {
  local name=$1
  shift
  "$build/bin/objdirect-server" --listen 127.0.0.1:0 --access-key AK --secret-key SK \
    --no-fsync "$@" >"$tmp/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 300); do
    url=$(sed -n 's/^objdirect-server listening on \(https*:\/\/[^ ]*\).*/\1/p' "$tmp/$name.log")
    [ -n "$url" ] && return 0
    sleep 0.1
  done
  echo "server $name did not start:" >&2
  cat "$tmp/$name.log" >&2
  exit 1
}

# osd_ops: the OSD's op counter so far (reads + writes, both pools; there is no ceph-mgr in the
# test cluster, so `rados df` does not count).
osd_ops() {
  ceph --admin-daemon "$(dirname "$conf")/run/osd.0.asok" perf dump |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["osd"]["op"])'
}

for backend in ${BACKENDS:-local rados}; do
  if [ "$backend" = rados ]; then
    # shellcheck disable=SC2086
    start_server rados --backend rados --rados-conf "$conf" --rados-pool-prefix benchrados \
      ${RADOS_SERVER_ARGS:-}
  else
    mkdir -p "$tmp/data"
    start_server local --data "$tmp/data"
  fi
  for op in ${OPS:-get put}; do
    echo "== $backend backend, $op ($url)"
    before=$(osd_ops)
    "$build/bin/objdirect-bench" --endpoint "$url" --access-key AK --secret-key SK --no-nginx \
      --ops "$op" --csv "$tmp/$backend.$op.csv" "$@"
    after=$(osd_ops)
    if [ "$backend" = rados ]; then
      # Includes the bench's setup and warm-up requests: an upper bound per measured request.
      python3 - "$tmp/$backend.$op.csv" "$before" "$after" <<'PY'
import csv, sys
path, before, after = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
n = sum(int(r["ops"] or 0) for r in csv.DictReader(open(path)) if r["sweep"] != "baseline")
print(f"RADOS ops: {after - before} for {n} measured requests: "
      f"{(after - before) / max(n, 1):.2f} per request (setup and warm-up included)")
PY
    fi
  done
done
