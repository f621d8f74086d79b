#!/usr/bin/env bash
# binding_latency.sh SERVER_BIN BINDING_LATENCY_BIN LABEL ROUNDS: first and steady-state GET latency
# per fabric at 4 KiB and 1 MiB against a fresh server (docs/BENCHMARKS.md, "Endpoint binding").
set -u
SB=$1 FG=$2 LABEL=$3 ROUNDS=${4:-5}
D=$(mktemp -d /tmp/binding-lat.XXXX)
FI_TCP_IFACE=lo "$SB" --listen 127.0.0.1:0 --data "$D/d" --access-key ak --secret-key sk --no-fsync \
  --fabric libfabric:tcp,libfabric:shm,ucx > "$D/s.log" 2>&1 &
SP=$!
for _ in $(seq 300); do URL=$(grep -o 'http://[0-9.:]*' "$D/s.log" | head -1); [ -n "$URL" ] && break; sleep 0.1; done
for f in libfabric:tcp libfabric:shm ucx; do
  for sz in 4096 1048576; do
    echo "$LABEL $(FI_TCP_IFACE=lo UCX_TLS=tcp,sm,self timeout 120 "$FG" "$URL" ak sk $f $sz $ROUNDS)"
  done
done
kill $SP; wait $SP 2>/dev/null; rm -rf "$D"
