#!/usr/bin/env bash
# RDMA tokens bound to their requester and used once (docs/rdma_protocol.md, "Threat model"),
# against the real server with separate processes of two users, alice (victim) and mallory
# (attacker): rdma_binding_probe victim binds and does a real RDMA PUT and GET, mallory then uses
# alice's leaked PUT and GET tokens, tokens forged from their fields, a bind attempt on alice's
# endpoint and verbatim replays of alice's requests; every one must be refused, alice's buffer
# and mailbox stay byte-for-byte untouched, mallory's objects never exist, and a second process of
# alice's with its own endpoint still works. The refusals are counted in /metrics by reason.
# Usage: rdma_binding_test.sh BIN_DIR PROBE FABRIC         one host (loopback)
#        rdma_binding_test.sh BIN_DIR PROBE netns FABRIC   server, victim and attacker on three
#                                                          network namespaces joined by a bridge
#        rdma_binding_test.sh BIN_DIR PROBE dcv1           cuObject DC_V1 tokens are declined
# FABRIC: libfabric:tcp | libfabric:shm | ucx. Exit 77: the fabric (or netns) is unavailable.
set -uo pipefail
BIN=$1 PROBE=$2 MODE=$3
FABRIC=${4:-$MODE}
W=$(mktemp -d)
SPID=
NS=()
cleanup() {
  [ -n "$SPID" ] && { kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; }
  jobs -p | xargs -r kill 2>/dev/null
  for n in "${NS[@]}"; do ip netns del "$n" 2>/dev/null; done
  rm -rf "$W"
}
trap cleanup EXIT
PASS=0 FAIL=0
ok() { PASS=$((PASS+1)); echo "PASS $1"; }
bad() { FAIL=$((FAIL+1)); echo "FAIL $1"; }

printf 'alice alice-secret-key\nmallory mallory-secret-key\n' > "$W/creds"
# How each role runs: plain on one host, `ip netns exec NS` across namespaces.
RUN_S=() RUN_V=() RUN_A=()
LISTEN=127.0.0.1:0
if [ "$MODE" = netns ]; then
  command -v ip > /dev/null && [ "$(id -u)" = 0 ] || { echo "SKIP: needs root and ip"; exit 77; }
  # One private /24 per test process; both ends of every veth are in namespaces made here.
  NET="10.$((200 + $$ % 50)).$(($$ % 250))"
  SW=odb$$sw
  ip netns add "$SW" || { echo "SKIP: cannot create network namespaces"; exit 77; }
  NS+=("$SW")
  ip -n "$SW" link add br0 type bridge && ip -n "$SW" link set br0 up
  i=1
  for role in s v a; do
    n=odb$$$role
    ip netns add "$n" && NS+=("$n")
    ip -n "$SW" link add "e$role" type veth peer name eth0 netns "$n"
    ip -n "$SW" link set "e$role" master br0 up
    ip -n "$n" link set lo up
    ip -n "$n" addr add "$NET.$i/24" dev eth0
    ip -n "$n" link set eth0 up
    i=$((i+1))
  done
  # Each host reaches the others only through its eth0: pin both fabrics to it.
  FENV=(env FI_TCP_IFACE=eth0 UCX_NET_DEVICES=eth0 UCX_TLS=tcp)
  RUN_S=(ip netns exec "odb$$s" "${FENV[@]}")
  RUN_V=(ip netns exec "odb$$v" "${FENV[@]}")
  RUN_A=(ip netns exec "odb$$a" "${FENV[@]}")
  LISTEN=$NET.1:0
  case $FABRIC in libfabric:tcp|ucx) ;; *) echo "netns runs tcp fabrics only"; exit 2 ;; esac
fi
SFAB=$FABRIC
[ "$MODE" = dcv1 ] && SFAB=libfabric:tcp

"${RUN_S[@]}" "$BIN/objdirect-server" --listen "$LISTEN" --data "$W/data" --credentials "$W/creds" \
  --no-fsync --fabric "$SFAB" --metrics-allow 10.0.0.0/8 --rdma-op-timeout-ms 5000 \
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
  "${RUN_S[@]}" curl -s "$URL/metrics" | grep -F "$1 " | awk '{print $2}' | head -1
}

if [ "$MODE" = dcv1 ]; then
  "$PROBE" dcv1 "$URL" alice alice-secret-key && ok "DC_V1 tokens declined" || bad "DC_V1"
  d=$(metric 'objdirect_rdma_declines_total{reason="foreign-token"}')
  [ "${d:-0}" -ge 4 ] && ok "declines counted as foreign-token ($d)" || bad "foreign-token declines: ${d:-none}"
  echo "rdma_binding_test $MODE: $PASS passed, $FAIL failed"
  [ $FAIL -eq 0 ]
  exit
fi

mkdir "$W/x"
"${RUN_V[@]}" "$PROBE" victim "$URL" "$FABRIC" alice alice-secret-key "$W/x" > "$W/victim.log" 2>&1 &
VPID=$!
for _ in $(seq 600); do [ -e "$W/x/ready" ] && break; kill -0 $VPID 2>/dev/null || break; sleep 0.1; done
if [ ! -e "$W/x/ready" ]; then
  wait $VPID; rc=$?
  cat "$W/victim.log"
  [ $rc -eq 77 ] && { echo "SKIP: $FABRIC unavailable"; exit 77; }
  echo "victim never became ready"; exit 1
fi
"${RUN_A[@]}" "$PROBE" attack "$URL" "$FABRIC" mallory mallory-secret-key "$W/x" > "$W/attack.log" 2>&1
arc=$?
cat "$W/attack.log"
[ $arc -eq 0 ] && ok "every attack refused ($FABRIC, mode $MODE)" || bad "attacker (exit $arc)"
# A second process of alice's, with its own endpoint (on the attacker's host across namespaces).
"${RUN_A[@]}" "$PROBE" second "$URL" "$FABRIC" alice alice-secret-key "$W/x" > "$W/second.log" 2>&1
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
echo "rdma_binding_test $MODE $FABRIC: $PASS passed, $FAIL failed"
[ $FAIL -eq 0 ]
