#!/usr/bin/env bash
# A throw-away single-node Ceph cluster for tests: one ceph-mon and one ceph-osd on memstore,
# no cephx, pools of size 1, loopback only, no systemd. Everything lives under DIR.
#
#   scripts/ceph-cluster.sh start DIR   starts the cluster, prints the ceph.conf path
#   scripts/ceph-cluster.sh env DIR     prints CEPH_CONF=DIR/ceph.conf (for eval)
#   scripts/ceph-cluster.sh stop DIR    kills (SIGKILL) the daemons started in DIR
#   scripts/ceph-cluster.sh rgw DIR     starts radosgw (Debian `radosgw`) on the running cluster
#                                       in DIR, on a free 127.0.0.1 port, creates an S3 user and
#                                       prints its endpoint URL (http://127.0.0.1:PORT); the user's
#                                       keys are CEPH_RGW_ACCESS_KEY / CEPH_RGW_SECRET_KEY (defaults
#                                       rgwtestkey / rgw-test-secret); stop also stops radosgw
#
# With CEPH_CLUSTER_OWNER_PID=PID set, start also leaves a watcher that stops the cluster when
# that process exits (tests set it to their own pid, so a crashed test leaves no daemons).
#
# Several clusters may run at once: each has its own DIR, a free monitor port and OSD ports
# picked by the OSD from a range (it skips busy ones). The data lives in memory (memstore,
# memstore_device_bytes, default 1 GiB; set CEPH_MEMSTORE_BYTES to change it) and is gone after
# stop. Clients get op timeouts (rados_osd_op_timeout / rados_mon_op_timeout) because a full
# memstore makes writes hang instead of failing.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: $0 start|stop|env|rgw DIR" >&2
  exit 2
fi

stop_cluster() {
  # SIGKILL at once: the data is in memory (memstore) and is thrown away anyway.
  local d=$1 pids=() p
  for f in "$d"/run/*.pid; do
    [ -f "$f" ] || continue
    p=$(cat "$f" 2>/dev/null || true)
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
      pids+=("$p")
      kill -KILL "$p" 2>/dev/null || true
    fi
  done
  for _ in $(seq 50); do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  rm -f "$d"/run/*.pid
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

case "$cmd" in
  env)
    echo "CEPH_CONF=$(cd "$dir" && pwd)/ceph.conf"
    exit 0
    ;;
  stop)
    [ -d "$dir" ] && stop_cluster "$(cd "$dir" && pwd)"
    exit 0
    ;;
  start) ;;
  rgw)
    command -v radosgw >/dev/null || { echo "ceph-cluster: radosgw not installed (scripts/bootstrap)" >&2; exit 3; }
    dir=$(cd "$dir" && pwd)
    conf=$dir/ceph.conf
    ak=${CEPH_RGW_ACCESS_KEY:-rgwtestkey}
    sk=${CEPH_RGW_SECRET_KEY:-rgw-test-secret}
    mkdir -p "$dir/rgw"
    # --rgw-crypt-require-ssl=false: SSE-C over the loopback HTTP (the gateway's SSE-C entries;
    # radosgw refuses SSE-C without TLS otherwise, as AWS does).
    # radosgw daemonises and writes run/rgw.pid (stop kills it with the others). Its first start
    # creates the zone's pools (about 10 s on 2 busy cores). The port is picked free and then
    # bound by radosgw; another process may take it in between, so retry with a new port.
    for attempt in 1 2 3 4 5; do
      port=$(free_port)
      rm -f "$dir/run/rgw.pid"
      radosgw -c "$conf" -n client.rgw --rgw-frontends "beast endpoint=127.0.0.1:$port" \
        --rgw-data "$dir/rgw" --pid-file "$dir/run/rgw.pid" --log-file "$dir/log/rgw.log" \
        --rgw-enable-usage-log=false --rgw-enable-ops-log=false --rgw-crypt-require-ssl=false \
        >>"$dir/log/rgw.out" 2>&1 || continue
      for _ in $(seq 600); do
        if curl -s -o /dev/null -m 2 "http://127.0.0.1:$port/"; then
          radosgw-admin -c "$conf" user create --uid=objdirect-test --display-name=objdirect-test \
            --access-key="$ak" --secret-key="$sk" >>"$dir/log/rgw-admin.out" 2>&1
          echo "http://127.0.0.1:$port"
          exit 0
        fi
        [ -f "$dir/run/rgw.pid" ] && ! kill -0 "$(cat "$dir/run/rgw.pid")" 2>/dev/null && break
        sleep 0.1
      done
      [ -f "$dir/run/rgw.pid" ] && kill -KILL "$(cat "$dir/run/rgw.pid")" 2>/dev/null || true
    done
    echo "ceph-cluster: radosgw did not start; see $dir/log/rgw.log" >&2
    exit 1
    ;;
  *)
    echo "usage: $0 start|stop|env|rgw DIR" >&2
    exit 2
    ;;
esac

for b in ceph-mon ceph-osd monmaptool ceph-authtool ceph; do
  command -v "$b" >/dev/null || { echo "ceph-cluster: $b not installed (scripts/bootstrap)" >&2; exit 3; }
done

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
mkdir -p "$dir/run" "$dir/log" "$dir/mon.a" "$dir/osd.0"
conf=$dir/ceph.conf
fsid=$(uuidgen)
bytes=${CEPH_MEMSTORE_BYTES:-$((1 << 30))}
# Started daemons are killed if this script fails half-way; the logs stay in DIR/log.
trap 'echo "ceph-cluster: failed at line $LINENO: $BASH_COMMAND (logs in $dir/log)" >&2' ERR
trap 'rc=$?; if [ $rc -ne 0 ]; then stop_cluster "$dir"; fi' EXIT

# Retries a monitor command: under load (2 busy cores) one may time out.
retry() {
  local i
  for i in 1 2 3 4 5; do
    if "$@"; then return 0; fi
    sleep 0.5
  done
  return 1
}

start_mon() {
  local port=$1
  cat >"$conf" <<EOF
[global]
fsid = $fsid
mon_host = v1:127.0.0.1:$port
public_addr = 127.0.0.1
cluster_addr = 127.0.0.1
ms_bind_msgr2 = false
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
auth_allow_insecure_global_id_reclaim = true
run_dir = $dir/run
admin_socket = $dir/run/\$name.asok
pid_file = $dir/run/\$name.pid
log_file = $dir/log/\$name.log
keyring = $dir/keyring
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
osd_crush_chooseleaf_type = 0
mon_allow_pool_size_one = true
mon_allow_pool_delete = true
# A shared cluster (scripts/ceph-fixture.sh) holds the pools of the entries running at once and
# radosgw's: well above the default 250 placement groups per OSD.
mon_max_pg_per_osd = 2000
mon_warn_on_pool_no_redundancy = false
mon_data_avail_warn = 1
mon_data_avail_crit = 0
# Clients: fail instead of hanging (a full memstore blocks writes).
rados_osd_op_timeout = 60
rados_mon_op_timeout = 30
client_mount_timeout = 30

[mon]
mon_data = $dir/mon.\$id
mon_cluster_log_file = $dir/log/cluster.log

[osd]
osd_data = $dir/osd.\$id
osd_objectstore = memstore
memstore_device_bytes = $bytes
osd_op_num_shards = 2
osd_op_num_threads_per_shard = 1
ms_bind_port_min = 6800
ms_bind_port_max = 7568
osd_max_object_size = 134217728
# The OSD would send crush commands during init; under load (2 busy cores) it has been seen to
# send them before it has the monmap ("wrong fsid") and exit. The script places it itself.
osd_crush_update_on_start = false
osd_class_update_on_start = false
osd_class_load_list = *
osd_class_default_list = *
EOF
  rm -rf "$dir/mon.a" && mkdir -p "$dir/mon.a"
  ceph-authtool --create-keyring "$dir/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  monmaptool --create --clobber --fsid "$fsid" --addv a "[v1:127.0.0.1:$port]" "$dir/monmap" >/dev/null
  ceph-mon -c "$conf" --mkfs -i a --monmap "$dir/monmap" --keyring "$dir/keyring" >"$dir/log/mkfs-mon.out" 2>&1
  ceph-mon -c "$conf" -i a >>"$dir/log/mon.out" 2>&1
}

# The monitor's port is picked free and then bound by ceph-mon; another process may take it in
# between, so retry with a new port.
ok=0
for attempt in 1 2 3 4 5; do
  port=$(free_port)
  if start_mon "$port"; then
    for _ in $(seq 100); do
      # The fsid check makes sure the monitor that answers is ours, not another cluster's that
      # took the port first.
      if [ "$(timeout 10 ceph -c "$conf" fsid 2>/dev/null)" = "$fsid" ]; then ok=1; break; fi
      [ -f "$dir/run/mon.a.pid" ] && ! kill -0 "$(cat "$dir/run/mon.a.pid")" 2>/dev/null && break
      sleep 0.1
    done
  fi
  [ $ok = 1 ] && break
  stop_cluster "$dir"
done
if [ $ok != 1 ]; then
  echo "ceph-cluster: the monitor did not start; see $dir/log" >&2
  exit 1
fi

uuid=$(uuidgen)
id=$(retry ceph -c "$conf" osd new "$uuid" 2>>"$dir/log/ceph-cli.err")
retry ceph -c "$conf" osd crush add "osd.$id" 1.0 root=default host=localhost >/dev/null \
  2>>"$dir/log/ceph-cli.err"
ceph-osd -c "$conf" -i "$id" --mkfs --osd-uuid "$uuid" >"$dir/log/mkfs-osd.out" 2>&1
# Retried: a failed start leaves nothing behind.
for _ in 1 2 3; do ceph-osd -c "$conf" -i "$id" >>"$dir/log/osd.out" 2>&1 && break; sleep 0.2; done
for _ in $(seq 300); do
  if ceph -c "$conf" osd dump 2>/dev/null | grep -q "^osd.$id up"; then
    if [ -n "${CEPH_CLUSTER_OWNER_PID:-}" ]; then
      # A watcher stops the cluster once the owning process is gone, even if it was killed.
      here=$(cd "$(dirname "$0")" && pwd)
      setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; "$2" stop "$3"' \
        watcher "$CEPH_CLUSTER_OWNER_PID" "$here/ceph-cluster.sh" "$dir" </dev/null >/dev/null 2>&1 &
    fi
    echo "$conf"
    exit 0
  fi
  sleep 0.1
done
echo "ceph-cluster: osd.$id did not come up; see $dir/log" >&2
exit 1
