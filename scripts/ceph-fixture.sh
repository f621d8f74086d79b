#!/usr/bin/env bash
# One single-node Ceph cluster (and one radosgw) shared by every ctest entry of a run that needs
# one, instead of a cluster per entry (each start costs about 5 s, radosgw about 10 s more).
# ctest runs it as fixtures (tests/CMakeLists.txt): ceph_fixture.start (FIXTURES_SETUP
# ceph_cluster), ceph_fixture.rgw (FIXTURES_SETUP ceph_rgw) and ceph_fixture.stop (cleanup).
#
#   scripts/ceph-fixture.sh start LINK   starts a cluster in a new /tmp directory, LINK -> it
#   scripts/ceph-fixture.sh rgw LINK     starts radosgw on it, writes LINK/rgw.url
#   scripts/ceph-fixture.sh stop LINK    stops the daemons, removes the directory and LINK
#   scripts/ceph-fixture.sh remove-pools CONF PREFIX
#                                        removes every pool whose name starts with PREFIX
#
# The entries find it through OBJDIRECT_CEPH_CONF=LINK/ceph.conf (scripts/with-ceph.sh,
# tests/storage/ceph_cluster.hpp) and OBJDIRECT_RGW_FIXTURE=LINK (scripts/with-upstream.sh). Each
# entry keeps to its own namespace and removes it when it ends: its own pool prefix (RADOS) or
# its own radosgw user (purged with its buckets). Without the Ceph daemons (no bootstrap) start
# and rgw do nothing and the entries skip as before. The cluster is stopped when the ctest that
# started it exits, even if stop never runs (the watcher of scripts/ceph-cluster.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cmd=${1:-}
link=${2:-}
if [ -z "$cmd" ] || [ -z "$link" ]; then
  echo "usage: $0 start|rgw|stop LINK | remove-pools CONF PREFIX" >&2
  exit 2
fi

stop() {
  if [ -L "$link" ]; then
    local real
    real=$(readlink "$link")
    "$here/ceph-cluster.sh" stop "$real" || true
    rm -rf "$real"
  fi
  rm -f "$link"
}

case $cmd in
  start)
    stop  # a cluster left by an interrupted run
    for b in ceph-mon ceph-osd ceph; do
      if ! command -v "$b" >/dev/null; then
        echo "ceph-fixture: $b is not installed (scripts/bootstrap); the RADOS entries skip"
        exit 0
      fi
    done
    real=$(mktemp -d /tmp/objdirect-ceph-fixture-XXXXXX)
    ln -s "$real" "$link"
    # Owner: the ctest that runs this entry (its parent). Room for every entry running at once
    # (-j of the run) plus what radosgw keeps.
    CEPH_CLUSTER_OWNER_PID=$PPID CEPH_MEMSTORE_BYTES=${CEPH_MEMSTORE_BYTES:-$((3 << 30))} \
      "$here/ceph-cluster.sh" start "$real"
    ;;
  rgw)
    if [ ! -f "$link/ceph.conf" ]; then
      echo "ceph-fixture: no cluster (see ceph_fixture.start); the radosgw entries skip"
      exit 0
    fi
    if ! command -v radosgw >/dev/null; then
      echo "ceph-fixture: radosgw is not installed (scripts/bootstrap); the radosgw entries skip"
      exit 0
    fi
    # The user this creates is not used by any entry: each makes its own (with-upstream.sh).
    url=$(CEPH_RGW_ACCESS_KEY=fixtureadminkey CEPH_RGW_SECRET_KEY="$(uuidgen)" \
      "$here/ceph-cluster.sh" rgw "$(readlink -f "$link")")
    echo "$url" >"$link/rgw.url.tmp"
    mv "$link/rgw.url.tmp" "$link/rgw.url"
    echo "$url"
    ;;
  stop)
    stop
    ;;
  remove-pools)
    # One librados connection for all of them (python3-rados, a dependency of ceph-common; the
    # rados tool of Ceph 16 has no rmpool, and each `ceph osd pool rm` costs a second).
    prefix=${3:?usage: $0 remove-pools CONF PREFIX}
    /usr/bin/python3 - "$link" "$prefix" <<'EOF'
import sys

import rados

cluster = rados.Rados(conffile=sys.argv[1])
cluster.connect(timeout=30)
try:
    for pool in cluster.list_pools():
        if pool.startswith(sys.argv[2]):
            cluster.delete_pool(pool)
finally:
    cluster.shutdown()
EOF
    ;;
  *)
    echo "usage: $0 start|rgw|stop LINK" >&2
    exit 2
    ;;
esac
