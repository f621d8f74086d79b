#!/usr/bin/env bash
# Runs a command against objdirect-server in gateway mode (--backend s3): starts a throw-away
# upstream objdirect-server (local backend, its own temporary data dir, port 0), runs CMD with
# the gateway's server arguments and the upstream's credentials in the environment, stops the
# upstream, and exits with CMD's status.
#
#   OBJDIRECT_BIN_DIR=<build>/bin scripts/with-upstream.sh CMD [ARGS...]
#
# Sets OBJDIRECT_SERVER_ARGS (read by tests/integration/conftest.py), OBJDIRECT_TEST_SERVER_ARGS
# (read by tests/rdma/rdma_server_test.cc), OBJDIRECT_UPSTREAM_URL, and AWS_ACCESS_KEY_ID /
# AWS_SECRET_ACCESS_KEY: the upstream's credentials, which the gateway reads the standard AWS
# way. The test clients pass their own (the gateway's users) explicitly.
set -euo pipefail
if [ $# -eq 0 ]; then
  echo "usage: OBJDIRECT_BIN_DIR=<build>/bin $0 CMD [ARGS...]" >&2
  exit 2
fi
bin=${OBJDIRECT_BIN_DIR:?OBJDIRECT_BIN_DIR must name the bin directory of the build}/objdirect-server
dir=$(mktemp -d /tmp/objdirect-upstream-XXXXXX)
ak=gwupstreamkey
sk=gw-upstream-secret/0123456789
"$bin" --listen 127.0.0.1:0 --data "$dir/data" --access-key "$ak" --secret-key "$sk" \
  --fabric none --no-fsync >"$dir/stdout" 2>"$dir/server.log" </dev/null &
pid=$!
cleanup() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
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
export OBJDIRECT_UPSTREAM_URL="http://127.0.0.1:$port"
export AWS_ACCESS_KEY_ID=$ak AWS_SECRET_ACCESS_KEY=$sk
unset AWS_SESSION_TOKEN AWS_PROFILE
export OBJDIRECT_SERVER_ARGS="--backend s3 --upstream $OBJDIRECT_UPSTREAM_URL"
export OBJDIRECT_TEST_SERVER_ARGS="$OBJDIRECT_SERVER_ARGS"
set +e
"$@"
rc=$?
# The upstream must still be running and exit 0 on SIGTERM, as the test harnesses require of the
# server under test: under a sanitizer a report makes it exit non-zero, which would otherwise go
# unseen here (its log is thrown away with $dir).
if ! kill -0 "$pid" 2>/dev/null; then
  wait "$pid"
  echo "with-upstream.sh: the upstream objdirect-server died during the run (status $?); log:" >&2
  tail -c 4000 "$dir/server.log" >&2
  [ "$rc" -ne 0 ] || rc=1
else
  kill "$pid"
  wait "$pid"
  urc=$?
  if [ "$urc" -ne 0 ]; then
    echo "with-upstream.sh: the upstream objdirect-server exited with $urc on SIGTERM; log:" >&2
    tail -c 4000 "$dir/server.log" >&2
    [ "$rc" -ne 0 ] || rc=1
  fi
fi
exit $rc
