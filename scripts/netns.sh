#!/usr/bin/env bash
# Hosts made from network namespaces, for tests and benchmarks across "machines" on one box.
#
#   scripts/netns.sh up PREFIX N [NET]     N hosts PREFIX-h0 .. PREFIX-h<N-1> on one switched link:
#                                          host i has eth0 = NET.(i+1)/24 (NET defaults to 10.201.0),
#                                          lo up, no default route; the switch is a bridge in its
#                                          own namespace PREFIX-sw, so both ends of every veth pair
#                                          live in namespaces made here (none in the caller's).
#   scripts/netns.sh link PREFIX A B NET   a second, private point-to-point link between hosts A and
#                                          B (indices): interface p<B> = NET.1/24 in A, p<A> = NET.2/24
#                                          in B. Other hosts have no route to NET.
#   scripts/netns.sh down PREFIX           kills the processes left in PREFIX-* namespaces (by pid,
#                                          SIGKILL; not itself or its caller), deletes the
#                                          namespaces; idempotent.
#   scripts/netns.sh run PREFIX I CMD...   runs CMD in host I (ip netns exec PREFIX-hI CMD...).
#
# PREFIX should carry the caller's pid (tests use od<pid><tag>) so that parallel runs never share a
# namespace; an interface name is at most 15 characters, a namespace name has no such limit.
# Needs root (CAP_SYS_ADMIN) and iproute2. Used by tests/integration/netns.py and objdirect-bench
# --netns (docs/BENCHMARKS.md).
set -euo pipefail

die() {
  echo "netns.sh: $*" >&2
  exit 1
}

ns_list() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$1-(sw|h[0-9]+)$" || true; }

cmd_down() {
  local prefix=$1 ns pid
  for ns in $(ns_list "$prefix"); do
    for pid in $(ip netns pids "$ns" 2>/dev/null || true); do
      # not ourselves nor our caller (objdirect-bench --netns lives in a host it made)
      [[ $pid == "$$" || $pid == "$PPID" ]] && continue
      kill -9 "$pid" 2>/dev/null || true
    done
  done
  for ns in $(ns_list "$prefix"); do
    ip netns del "$ns" 2>/dev/null || true
  done
}

cmd_up() {
  local prefix=$1 n=$2 net=${3:-10.201.0} i
  [[ $n =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 8)) || die "N must be 1..8, got '$n'"
  [[ $net =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "NET must look like 10.201.0, got '$net'"
  [[ -z $(ns_list "$prefix") ]] || die "namespaces $prefix-* exist already (scripts/netns.sh down $prefix)"
  # On any failure below, leave nothing behind.
  trap 'cmd_down "$prefix"' ERR
  ip netns add "$prefix-sw"
  ip -n "$prefix-sw" link add br0 type bridge
  ip -n "$prefix-sw" link set br0 up
  for ((i = 0; i < n; i++)); do
    ip netns add "$prefix-h$i"
    ip -n "$prefix-h$i" link set lo up
    # Created inside the switch namespace, the peer goes straight into the host's namespace.
    ip -n "$prefix-sw" link add "h$i" type veth peer name eth0 netns "$prefix-h$i"
    ip -n "$prefix-sw" link set "h$i" master br0
    ip -n "$prefix-sw" link set "h$i" up
    ip -n "$prefix-h$i" addr add "$net.$((i + 1))/24" dev eth0
    ip -n "$prefix-h$i" link set eth0 up
  done
  trap - ERR
}

cmd_link() {
  local prefix=$1 a=$2 b=$3 net=$4
  [[ $net =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "NET must look like 10.202.0, got '$net'"
  ip -n "$prefix-h$a" link add "p$b" type veth peer name "p$a" netns "$prefix-h$b"
  ip -n "$prefix-h$a" addr add "$net.1/24" dev "p$b"
  ip -n "$prefix-h$b" addr add "$net.2/24" dev "p$a"
  ip -n "$prefix-h$a" link set "p$b" up
  ip -n "$prefix-h$b" link set "p$a" up
}

[[ $# -ge 2 ]] || die "usage: netns.sh up PREFIX N [NET] | link PREFIX A B NET | down PREFIX | run PREFIX I CMD..."
case $1 in
  up) cmd_up "$2" "${3:?N}" "${4:-10.201.0}" ;;
  link) cmd_link "$2" "${3:?A}" "${4:?B}" "${5:?NET}" ;;
  down) cmd_down "$2" ;;
  run)
    prefix=$2 i=${3:?I}
    shift 3
    exec ip netns exec "$prefix-h$i" "$@"
    ;;
  *) die "unknown command '$1'" ;;
esac
