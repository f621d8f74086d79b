#!/usr/bin/env bash
# Runs a command against objdirect-server on the RADOS backend: starts a throw-away single-node
# Ceph cluster (scripts/ceph-cluster.sh), runs CMD with the server arguments in the environment,
# stops the cluster, and exits with CMD's status.
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
dir=$(mktemp -d /tmp/objdirect-ceph-XXXXXX)
trap '"$here/ceph-cluster.sh" stop "$dir"; rm -rf "$dir"' EXIT
conf=$(CEPH_CLUSTER_OWNER_PID=$$ "$here/ceph-cluster.sh" start "$dir")
export OBJDIRECT_CEPH_CONF=$conf
export OBJDIRECT_SERVER_ARGS="--backend rados --rados-conf $conf --rados-pool-prefix itest"
export OBJDIRECT_TEST_SERVER_ARGS="--backend rados --rados-conf $conf --rados-pool-prefix t@UNIQUE@"
set +e
"$@"
rc=$?
exit $rc
