#!/usr/bin/env bash
# Runs a command against objdirect-server on the RADOS backend: starts a throw-away single-node
# Ceph cluster (scripts/ceph-cluster.sh), runs CMD with the server arguments in the environment,
# stops the cluster, and exits with CMD's status. When OBJDIRECT_CEPH_CONF names the cluster of
# the ctest run (scripts/ceph-fixture.sh), it uses that one with pools of its own instead.
#
#   scripts/with-ceph.sh CMD [ARGS...]
#
# Sets OBJDIRECT_SERVER_ARGS (read by tests/integration/conftest.py) and
# OBJDIRECT_TEST_SERVER_ARGS (read by tests/rdma/rdma_server_test.cc, which replaces @UNIQUE@ by
# a per-server id so that each server it starts gets its own pools), and OBJDIRECT_CEPH_CONF.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -eq 0 ]; then
  echo "usage: $0 CMD [ARGS...]" >&2
  exit 2
fi
if [ -n "${OBJDIRECT_CEPH_CONF:-}" ] && [ -f "$OBJDIRECT_CEPH_CONF" ]; then
  # The cluster the ctest run shares (scripts/ceph-fixture.sh): this entry's pools carry its own
  # prefix (the x ends it, so that no other entry's prefix starts with it) and are removed when
  # it ends, so that entries running at once never meet and the memstore does not fill.
  conf=$OBJDIRECT_CEPH_CONF
  prefix=w$$x
  remove_pools() {
    "$here/ceph-fixture.sh" remove-pools "$conf" "$prefix" ||
      echo "with-ceph.sh: could not remove the pools named $prefix*" >&2
  }
  trap remove_pools EXIT
else
  dir=$(mktemp -d /tmp/objdirect-ceph-XXXXXX)
  trap '"$here/ceph-cluster.sh" stop "$dir"; rm -rf "$dir"' EXIT
  conf=$(CEPH_CLUSTER_OWNER_PID=$$ "$here/ceph-cluster.sh" start "$dir")
  prefix=
fi
export OBJDIRECT_CEPH_CONF=$conf
export OBJDIRECT_SERVER_ARGS="--backend rados --rados-conf $conf --rados-pool-prefix ${prefix}itest"
export OBJDIRECT_TEST_SERVER_ARGS="--backend rados --rados-conf $conf --rados-pool-prefix ${prefix}t@UNIQUE@"
set +e
"$@"
rc=$?
exit $rc
