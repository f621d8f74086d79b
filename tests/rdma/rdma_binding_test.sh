#!/usr/bin/env bash
# RDMA tokens bound to their requester and used once (docs/rdma_protocol.md, "Threat model"),
# against the real server with separate processes of two users, alice (victim) and mallory
# (attacker): rdma_binding_probe victim binds and does a real RDMA PUT and GET, mallory then uses
# alice's leaked PUT and GET tokens, tokens forged from their fields, a bind attempt on alice's
# endpoint and verbatim replays of alice's requests; every one must be refused, alice's buffer
# and mailbox stay byte-for-byte untouched, mallory's objects never exist, and a second process of
# alice's with its own endpoint still works. The refusals are counted in /metrics by reason.
# Across three network-namespace hosts: tests/integration/test_rdma_binding_netns.py.
# Usage: rdma_binding_test.sh BIN_DIR PROBE FABRIC   FABRIC: libfabric:tcp | libfabric:shm | ucx
#        rdma_binding_test.sh BIN_DIR PROBE dcv1     cuObject DC_V1 tokens are declined
#        rdma_binding_test.sh BIN_DIR PROBE ssec     SSE-C over RDMA (libfabric tcp, docs/sse-c.md)
# Exit 77: the fabric is unavailable.
set -uo pipefail
BIN=$1 PROBE=$2 MODE=$3
FABRIC=$MODE
W=$(mktemp -d)
SPID=
cleanup() {
  [ -n "$SPID" ] && { kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; }
  jobs -p | xargs -r kill 2>/dev/null
  rm -rf "$W"
}
trap cleanup EXIT
PASS=0 FAIL=0
ok() { PASS=$((PASS+1)); echo "PASS $1"; }
bad() { FAIL=$((FAIL+1)); echo "FAIL $1"; }

printf 'alice alice-secret-key\nmallory mallory-secret-key\n' > "$W/creds"
SFAB=$FABRIC
EXTRA=
[ "$MODE" = dcv1 ] && SFAB=libfabric:tcp
[ "$MODE" = ssec ] && { SFAB=libfabric:tcp FABRIC=libfabric:tcp EXTRA=--sse-c-over-http; }

"$BIN/objdirect-server" --listen 127.0.0.1:0 --data "$W/data" --credentials "$W/creds" \
  --no-fsync --fabric "$SFAB" --rdma-op-timeout-ms 5000 $EXTRA \
  > "$W/server.log" 2>&1 &
SPID=$!
URL=
for _ in $(seq 150); do
  URL=$(grep -o 'http://[0-9.:]*' "$W/server.log" | head -1)
  [ -n "$URL" ] && break
  kill -0 "$SPID" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$URL" ]; then
  if grep -qi "unavailable\|not available\|fi_getinfo\|ucp_init" "$W/server.log"; then
    echo "SKIP: $SFAB unavailable: $(tail -3 "$W/server.log")"; exit 77
  fi
  echo "server did not start"; cat "$W/server.log"; exit 1
fi
metric() {
  curl -s "$URL/metrics" | grep -F "$1 " | awk '{print $2}' | head -1
}

if [ "$MODE" = ssec ]; then
  "$PROBE" ssec "$URL" "$FABRIC" alice alice-secret-key && ok "SSE-C over RDMA" || bad "SSE-C over RDMA"
  echo "rdma_binding_test $MODE: $PASS passed, $FAIL failed"
  [ $FAIL -eq 0 ]
  exit
fi

if [ "$MODE" = dcv1 ]; then
  "$PROBE" dcv1 "$URL" alice alice-secret-key && ok "DC_V1 tokens declined" || bad "DC_V1"
  d=$(metric 'objdirect_rdma_declines_total{reason="foreign-token"}')
  [ "${d:-0}" -ge 4 ] && ok "declines counted as foreign-token ($d)" || bad "foreign-token declines: ${d:-none}"
  echo "rdma_binding_test $MODE: $PASS passed, $FAIL failed"
  [ $FAIL -eq 0 ]
  exit
fi

mkdir "$W/x"
"$PROBE" victim "$URL" "$FABRIC" alice alice-secret-key "$W/x" > "$W/victim.log" 2>&1 &
VPID=$!
for _ in $(seq 600); do [ -e "$W/x/ready" ] && break; kill -0 $VPID 2>/dev/null || break; sleep 0.1; done
if [ ! -e "$W/x/ready" ]; then
  wait $VPID; rc=$?
  cat "$W/victim.log"
  [ $rc -eq 77 ] && { echo "SKIP: $FABRIC unavailable"; exit 77; }
  echo "victim never became ready"; exit 1
fi
"$PROBE" attack "$URL" "$FABRIC" mallory mallory-secret-key "$W/x" > "$W/attack.log" 2>&1
arc=$?
cat "$W/attack.log"
[ $arc -eq 0 ] && ok "every attack refused ($FABRIC)" || bad "attacker (exit $arc)"
# A second process of alice's, with its own endpoint.
"$PROBE" second "$URL" "$FABRIC" alice alice-secret-key "$W/x" > "$W/second.log" 2>&1
src=$?
cat "$W/second.log"
[ $src -eq 0 ] && ok "a second process of the victim's principal works" || bad "second process (exit $src)"
touch "$W/x/check"
wait $VPID; vrc=$?
cat "$W/victim.log"
[ $vrc -eq 0 ] && ok "victim untouched and still served" || bad "victim (exit $vrc)"

# The refusals by reason (docs/rdma_protocol.md, "Refusals").
for want in 'replayed-nonce 4' 'bound-to-other-principal 6' 'expired 1' 'unbound-endpoint 3'; do
  set -- $want
  v=$(metric "objdirect_rdma_token_refusals_total{reason=\"$1\"}")
  [ "${v:-0}" -ge "$2" ] && ok "refusals{$1} = $v (>= $2)" || bad "refusals{$1} = ${v:-none}, want >= $2"
done
echo "rdma_binding_test $FABRIC: $PASS passed, $FAIL failed"
[ $FAIL -eq 0 ]
