#!/usr/bin/env bash
# The RDMA data plane at scale, through the objdirect CLI as separate processes against the real
# server: 32 concurrent clients (every byte verified, every transfer on the rdma path), and one
# 3 GiB object up and down over libfabric shm (past cuObject's 1 GiB per-op and 4 GiB
# registration limits, split into parallel parts and ranges).
# Usage: rdma_cli_scale_test.sh BIN_DIR
set -uo pipefail
BIN=$1
W=$(mktemp -d); trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$W"' EXIT
mkdir "$W/data"
"$BIN/objdirect-server" --listen 127.0.0.1:0 --data "$W/data" --access-key scaleAK --secret-key scaleSecret \
  --no-fsync --fabric libfabric:shm,libfabric:tcp > "$W/server.log" 2>&1 &
PID=$!
for _ in $(seq 100); do grep -q "listening on" "$W/server.log" && break; sleep 0.1; done
export AWS_ENDPOINT_URL=$(grep -o 'http://[0-9.:]*' "$W/server.log" | head -1)
[ -n "$AWS_ENDPOINT_URL" ] || { echo "server did not start"; cat "$W/server.log"; exit 1; }
export AWS_ACCESS_KEY_ID=scaleAK AWS_SECRET_ACCESS_KEY=scaleSecret AWS_REGION=us-east-1
OD="$BIN/objdirect"
PASS=0 FAIL=0
ok() { PASS=$((PASS+1)); echo "PASS $1"; }
bad() { FAIL=$((FAIL+1)); echo "FAIL $1"; }
$OD mb s3://scale > /dev/null || { echo "mb failed"; exit 1; }

# --- 32 concurrent clients, each its own process: PUT then GET of a distinct 3 MiB + i object.
client() {
  local i=$1 f="$W/src-$1" o="$W/out-$1"
  head -c $((3 * 1024 * 1024 + i)) /dev/urandom > "$f"
  local up down
  up=$($OD cp --json --fabric libfabric:tcp --part-size $((1024 * 1024 * 5)) "$f" "s3://scale/c-$i") || return 1
  down=$($OD cp --json --fabric libfabric:tcp "s3://scale/c-$i" "$o") || return 1
  cmp -s "$f" "$o" || { echo "client $i: bytes differ"; return 1; }
  [[ $up == *'"path":"rdma"'* && $down == *'"path":"rdma"'* ]] || { echo "client $i: not rdma: $up $down"; return 1; }
}
pids=()
for i in $(seq 1 32); do client "$i" > "$W/client-$i.log" 2>&1 & pids+=($!); done
failed=0
for i in "${!pids[@]}"; do wait "${pids[$i]}" || { failed=$((failed+1)); cat "$W/client-$((i+1)).log"; }; done
[ "$failed" -eq 0 ] && ok "32 concurrent RDMA clients, every byte verified" || bad "$failed of 32 concurrent clients failed"
rm -f "$W"/src-* "$W"/out-*

# --- 3 GiB over libfabric shm.
BIG=$((3 * 1024 * 1024 * 1024))
if [ "$(df --output=avail -B1 "$W" | tail -1)" -lt $((BIG * 3 + (1 << 30))) ]; then
  bad "3 GiB: not enough disk space in $W for the source, the stored object and the copy"
else
  head -c $BIG /dev/urandom > "$W/big"
  up=$($OD cp --json --fabric libfabric:shm --concurrency 8 "$W/big" s3://scale/big) &&
    down=$($OD cp --json --fabric libfabric:shm --concurrency 8 s3://scale/big "$W/big.out") &&
    cmp "$W/big" "$W/big.out" && [[ $up == *'"path":"rdma"'* && $down == *'"path":"rdma"'* ]] &&
    [[ $up == *"\"bytes\":$BIG"* ]] && ok "3 GiB up and down over libfabric shm: $down" || bad "3 GiB: ${up:-} ${down:-}"
fi
curl -s "$AWS_ENDPOINT_URL/metrics" | grep -E '^objdirect_rdma_(buffers_in_use|inflight_bytes|transfers_failed_total) ' |
  tee "$W/metrics" | grep -qE '^objdirect_rdma_buffers_in_use 0$' && ok "server buffers back to 0" || bad "buffers: $(cat "$W/metrics")"
# Alive at the end, and a clean exit on SIGTERM (under a sanitizer a report makes it non-zero).
if kill -0 $PID 2>/dev/null; then
  ok "server alive"
  kill $PID; wait $PID; rc=$?
  [ "$rc" -eq 0 ] && ok "server exits 0 on SIGTERM" || { bad "server exited with $rc on SIGTERM"; tail -c 4000 "$W/server.log"; }
else
  bad "server died"; tail -c 4000 "$W/server.log"
fi
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
