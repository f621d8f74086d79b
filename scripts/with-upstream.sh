#!/usr/bin/env bash
# Runs a command against objdirect-server in gateway mode (--backend s3): starts a throw-away
# upstream S3 service, runs CMD with the gateway's server arguments and the upstream's
# credentials in the environment, stops the upstream, and exits with CMD's status.
#
#   OBJDIRECT_BIN_DIR=<build>/bin [OBJDIRECT_UPSTREAM_KIND=K] scripts/with-upstream.sh CMD [ARGS...]
#
# K (default objdirect) picks the upstream (docs/scale-out.md, "Verified upstreams"):
#   objdirect  a second objdirect-server (local backend, its own temporary data dir, port 0);
#   radosgw    Ceph's radosgw (Debian `radosgw`) on a throw-away single-node cluster
#              (scripts/ceph-cluster.sh start + rgw), loopback only; or, when
#              OBJDIRECT_RGW_FIXTURE names the ctest run's shared one (scripts/ceph-fixture.sh),
#              a user of its own there;
#   moto       moto_server (the AWS emulator of Python's moto package, not a Debian package) on
#              a free loopback port; where it is not installed the script prints the reason and
#              exits 77, which the ctest entries declare as SKIP_RETURN_CODE.
#
# OBJDIRECT_UPSTREAM_SSE_C_OVER_HTTP, when set, starts the objdirect upstream with
# --sse-c-over-http (radosgw: rgw_crypt_require_ssl = false, see ceph-cluster.sh).
# OBJDIRECT_GATEWAY_STATE_BUCKET, when set, is passed to the gateway as --gateway-state-bucket.
# Sets OBJDIRECT_SERVER_ARGS (read by tests/integration/conftest.py), OBJDIRECT_TEST_SERVER_ARGS
# (read by tests/rdma/rdma_server_test.cc), OBJDIRECT_UPSTREAM_URL, OBJDIRECT_UPSTREAM_KIND, and
# AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY: the upstream's credentials, which the gateway reads
# the standard AWS way. The test clients pass their own (the gateway's users) explicitly.
set -euo pipefail
if [ $# -eq 0 ]; then
  echo "usage: OBJDIRECT_BIN_DIR=<build>/bin $0 CMD [ARGS...]" >&2
  exit 2
fi
bin=${OBJDIRECT_BIN_DIR:?OBJDIRECT_BIN_DIR must name the bin directory of the build}/objdirect-server
here=$(cd "$(dirname "$0")" && pwd)
kind=${OBJDIRECT_UPSTREAM_KIND:-objdirect}
dir=$(mktemp -d /tmp/objdirect-upstream-XXXXXX)
ak=gwupstreamkey
sk=gw-upstream-secret/0123456789
pid=
cleanup() {
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  if [ -n "${rgw_uid:-}" ]; then
    radosgw-admin -c "$rgw_conf" user rm --uid="$rgw_uid" --purge-data >/dev/null 2>&1 ||
      echo "with-upstream.sh: could not remove radosgw user $rgw_uid" >&2
  elif [ "$kind" = radosgw ]; then
    "$here/ceph-cluster.sh" stop "$dir/ceph"
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
case $kind in
  objdirect)
    # OBJDIRECT_UPSTREAM_SSE_C_OVER_HTTP=1: the upstream accepts SSE-C over the loopback HTTP
    # between it and the gateway (--sse-c-over-http), for the SSE-C entries.
    "$bin" --listen 127.0.0.1:0 --data "$dir/data" --access-key "$ak" --secret-key "$sk" \
      --fabric none --no-fsync ${OBJDIRECT_UPSTREAM_SSE_C_OVER_HTTP:+--sse-c-over-http} \
      >"$dir/stdout" 2>"$dir/server.log" </dev/null &
    pid=$!
    port=
    for _ in $(seq 1 300); do
      line=$(head -n 1 "$dir/stdout" 2>/dev/null || true)
      case $line in
        *"listening on http://127.0.0.1:"*) port=${line##*:}; break ;;
      esac
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if [ -z "$port" ]; then
      echo "with-upstream.sh: the upstream objdirect-server did not start; log:" >&2
      cat "$dir/server.log" >&2
      exit 1
    fi
    url="http://127.0.0.1:$port"
    ;;
  radosgw)
    if [ -n "${OBJDIRECT_RGW_FIXTURE:-}" ] && [ -f "$OBJDIRECT_RGW_FIXTURE/rgw.url" ]; then
      # The radosgw the ctest run shares (scripts/ceph-fixture.sh): a user of this entry's own,
      # so that it sees only its own buckets; purged with them when the entry ends.
      rgw_conf=$OBJDIRECT_RGW_FIXTURE/ceph.conf
      rgw_uid=gw$$x
      ak=gw$$key
      if ! radosgw-admin -c "$rgw_conf" user create --uid="$rgw_uid" --display-name="$rgw_uid" \
        --access-key="$ak" --secret-key="$sk" >"$dir/rgw-admin.out" 2>&1; then
        echo "with-upstream.sh: radosgw-admin user create failed:" >&2
        cat "$dir/rgw-admin.out" >&2
        exit 1
      fi
      url=$(cat "$OBJDIRECT_RGW_FIXTURE/rgw.url")
    else
      mkdir -p "$dir/ceph"
      CEPH_CLUSTER_OWNER_PID=$$ "$here/ceph-cluster.sh" start "$dir/ceph" >/dev/null
      url=$(CEPH_RGW_ACCESS_KEY=$ak CEPH_RGW_SECRET_KEY=$sk "$here/ceph-cluster.sh" rgw "$dir/ceph")
    fi
    ;;
  moto)
    moto=${OBJDIRECT_MOTO_SERVER:-$(command -v moto_server || true)}
    if [ -z "$moto" ] && [ -x /root/.pyenv/shims/moto_server ]; then moto=/root/.pyenv/shims/moto_server; fi
    if [ -z "$moto" ]; then
      echo "with-upstream.sh: SKIP: moto_server is not installed (pip install 'moto[server]'); the moto upstream entries need it" >&2
      exit 77
    fi
    url=
    for _ in 1 2 3 4 5; do
      port=$(free_port)
      "$moto" -H 127.0.0.1 -p "$port" >"$dir/moto.log" 2>&1 </dev/null &
      pid=$!
      for _ in $(seq 1 300); do
        if curl -s -o /dev/null -m 2 "http://127.0.0.1:$port/"; then url="http://127.0.0.1:$port"; break; fi
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      [ -n "$url" ] && break
      kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      pid=
    done
    if [ -z "$url" ]; then
      echo "with-upstream.sh: moto_server did not start; log:" >&2
      cat "$dir/moto.log" >&2
      exit 1
    fi
    ;;
  *)
    echo "with-upstream.sh: OBJDIRECT_UPSTREAM_KIND must be objdirect, radosgw or moto, got '$kind'" >&2
    exit 2
    ;;
esac
export OBJDIRECT_UPSTREAM_URL=$url OBJDIRECT_UPSTREAM_KIND=$kind
export AWS_ACCESS_KEY_ID=$ak AWS_SECRET_ACCESS_KEY=$sk
unset AWS_SESSION_TOKEN AWS_PROFILE
export OBJDIRECT_SERVER_ARGS="--backend s3 --upstream $OBJDIRECT_UPSTREAM_URL"
# OBJDIRECT_GATEWAY_STATE_BUCKET (the policy entries): the gateway keeps owners and policies
# there (--gateway-state-bucket). radosgw's bucket names are shared by all its users: on the
# ctest run's shared radosgw each entry's state bucket carries the entry's user id, or two
# entries running at once would find the other's bucket (403 to the second one's HEAD).
if [ -n "${OBJDIRECT_GATEWAY_STATE_BUCKET:-}" ]; then
  state_bucket=$OBJDIRECT_GATEWAY_STATE_BUCKET
  if [ -n "${rgw_uid:-}" ]; then state_bucket=$state_bucket-$rgw_uid; fi
  OBJDIRECT_SERVER_ARGS="$OBJDIRECT_SERVER_ARGS --gateway-state-bucket $state_bucket"
fi
export OBJDIRECT_TEST_SERVER_ARGS="$OBJDIRECT_SERVER_ARGS"
set +e
"$@"
rc=$?
# An objdirect upstream must still be running and exit 0 on SIGTERM, as the test harnesses
# require of the server under test: under a sanitizer a report makes it exit non-zero, which
# would otherwise go unseen here (its log is thrown away with $dir). Other upstreams must still
# be running.
if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
  wait "$pid"
  echo "with-upstream.sh: the $kind upstream died during the run (status $?); log:" >&2
  tail -c 4000 "$dir"/*.log >&2
  [ "$rc" -ne 0 ] || rc=1
elif [ "$kind" = objdirect ]; then
  kill "$pid"
  wait "$pid"
  urc=$?
  pid=
  if [ "$urc" -ne 0 ]; then
    echo "with-upstream.sh: the upstream objdirect-server exited with $urc on SIGTERM; log:" >&2
    tail -c 4000 "$dir/server.log" >&2
    [ "$rc" -ne 0 ] || rc=1
  fi
fi
exit $rc
