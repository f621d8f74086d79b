#!/usr/bin/env bash
# RDMA admission control against the real server with separate CLI processes: with a staging
# budget of one chunk, 8 concurrent GETs of a 32 MiB object (each cut by the client into ranged
# requests, 8 in flight per process) must all stay on RDMA: transfers that find no staging buffer
# wait for one (--rdma-admission-wait-ms) instead of being refused with 503 SlowDown, which the
# client would retry for 310 ms and then serve over HTTP. Also: --rdma-admission-waiters-max above
# half of --threads is refused at startup.
# Usage: rdma_admission_test.sh BIN_DIR
set -uo pipefail
BIN=$1
W=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && { kill $PID 2>/dev/null; wait $PID 2>/dev/null; }; rm -rf "$W"' EXIT
PASS=0 FAIL=0
ok() { PASS=$((PASS+1)); echo "PASS $1"; }
bad() { FAIL=$((FAIL+1)); echo "FAIL $1"; }

# --- the waiter limit must leave I/O threads free
"$BIN/objdirect-server" --listen 127.0.0.1:0 --data "$W/d0" --access-key a --secret-key b --fabric none \
  --threads 4 --rdma-admission-waiters-max 3 > "$W/s0.log" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "at most half of --threads" "$W/s0.log" &&
  ok "--rdma-admission-waiters-max above half of --threads refused (exit 2)" ||
  bad "waiters-max vs threads: exit $rc: $(cat "$W/s0.log")"

# --- one chunk of staging budget, 8 client processes
mkdir "$W/data"
"$BIN/objdirect-server" --listen 127.0.0.1:0 --data "$W/data" --access-key admAK --secret-key admSecret \
  --no-fsync --fabric libfabric:tcp --rdma-inflight-bytes-max 4194304 \
  --rdma-admission-wait-ms 60000 > "$W/server.log" 2>&1 &
PID=$!
for _ in $(seq 100); do grep -q "listening on" "$W/server.log" && break; sleep 0.1; done
export AWS_ENDPOINT_URL=$(grep -o 'http://[0-9.:]*' "$W/server.log" | head -1)
[ -n "$AWS_ENDPOINT_URL" ] || { echo "server did not start"; cat "$W/server.log"; exit 1; }
export AWS_ACCESS_KEY_ID=admAK AWS_SECRET_ACCESS_KEY=admSecret AWS_REGION=us-east-1
OD="$BIN/objdirect"
$OD mb s3://adm > /dev/null || { echo "mb failed"; exit 1; }
head -c $((32 * 1024 * 1024)) /dev/urandom > "$W/src"
$OD cp --fabric none "$W/src" s3://adm/o > /dev/null || { echo "put failed"; exit 1; }

client() {
  local out
  out=$($OD cp --json --fabric libfabric:tcp "s3://adm/o" "$W/out-$1") || return 1
  cmp -s "$W/src" "$W/out-$1" || { echo "client $1: bytes differ"; return 1; }
  [[ $out == *'"path":"rdma"'* ]] || { echo "client $1: not rdma: $out"; return 1; }
}
pids=()
for i in $(seq 1 8); do client "$i" > "$W/client-$i.log" 2>&1 & pids+=($!); done
failed=0
for i in "${!pids[@]}"; do wait "${pids[$i]}" || { failed=$((failed+1)); cat "$W/client-$((i+1)).log"; }; done
[ "$failed" -eq 0 ] && ok "8 concurrent GETs through one staging chunk, all over RDMA, every byte verified" ||
  bad "$failed of 8 clients failed or fell back"
metric() { curl -s "$AWS_ENDPOINT_URL/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
waited=$(metric objdirect_rdma_admissions_waited_total)
refused=$(metric objdirect_rdma_admissions_refused_total)
waiters=$(metric objdirect_rdma_admission_waiters)
wait_s=$(metric objdirect_rdma_admission_wait_seconds_total)
[ "${refused:-x}" = 0 ] && [ "${waiters:-x}" = 0 ] && [ "${waited:-0}" -gt 0 ] 2>/dev/null &&
  ok "metrics: waited $waited, refused 0, waiting now 0, waited ${wait_s} s in all" ||
  bad "metrics: waited=$waited refused=$refused waiters=$waiters wait_s=$wait_s"
kill -0 $PID 2>/dev/null && ok "server alive" || bad "server died"
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
