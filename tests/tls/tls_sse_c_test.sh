#!/usr/bin/env bash
# SSE-C over HTTPS (docs/sse-c.md): objdirect-server with --tls-cert/--tls-key and WITHOUT
# --sse-c-over-http accepts customer keys, from the objdirect Python client (the C++ library)
# over HTTP and over libfabric tcp RDMA (the token request is the HTTPS request carrying the key),
# from the objdirect CLI, and from the AWS CLI v2; the objects one wrote the others read, a wrong
# key is 403 and none 400, and the key is not in the server's log. (The refusal over plain HTTP
# without --sse-c-over-http is tested by integration_s3_sse_c and client_sse_c_test.)
# Usage: tls_sse_c_test.sh BIN_DIR PYTHON_DIR
set -uo pipefail
BIN_DIR=$1 PY_DIR=$2
W=$(mktemp -d); trap 'kill $PID 2>/dev/null; rm -rf "$W"' EXIT
cd "$W"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=objdirect test CA" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj "/CN=127.0.0.1" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > san.ext
openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt -days 2 -extfile san.ext 2>/dev/null
mkdir data
export FI_TCP_IFACE=lo
"$BIN_DIR/objdirect-server" --listen 127.0.0.1:0 --data data --access-key tlsAK --secret-key tlsSecret \
  --no-fsync --fabric libfabric:tcp --tls-cert srv.crt --tls-key srv.key > server.log 2>&1 &
PID=$!
for _ in $(seq 100); do grep -q "listening on https://" server.log && break; sleep 0.1; done
EP=$(grep -o 'https://[0-9.:]*' server.log | head -1)
[ -n "$EP" ] || { echo "server did not start"; cat server.log; exit 1; }
for k in $(env | grep -o '^AWS_[A-Z_]*'); do unset "$k"; done
export AWS_ACCESS_KEY_ID=tlsAK AWS_SECRET_ACCESS_KEY=tlsSecret AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1
export AWS_CA_BUNDLE=$W/ca.crt AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
export AWS_ENDPOINT_URL=$EP
head -c 32 /dev/urandom > key.bin
head -c $((11 * 1024 * 1024 + 5)) /dev/urandom > src.bin
PASS=0 FAIL=0
check() { local name=$1; shift; if "$@" > last.log 2>&1; then PASS=$((PASS+1)); echo "PASS $name"; else FAIL=$((FAIL+1)); echo "FAIL $name"; tail -15 last.log; fi; }

check "python client: SSE-C over https, HTTP and libfabric tcp" env PYTHONPATH="$PY_DIR" /usr/bin/python3 - "$EP" "$W" <<'PY'
import sys, objdirect
ep, w = sys.argv[1:]
key = open(f"{w}/key.bin", "rb").read()
src = open(f"{w}/src.bin", "rb").read()
other = bytes(32)
kw = dict(endpoint=ep, access_key="tlsAK", secret_key="tlsSecret",
          part_size_bytes=5 << 20)
with objdirect.Client(fabric="none", **kw) as c:
    c.create_bucket("tls-ssec")
    r = c.put("tls-ssec", "http", src, sse_c_key=key)           # a multipart upload
    assert r.path == "http" and r.etag.endswith("-3"), r
    assert c.get("tls-ssec", "http", sse_c_key=key) == src
    assert c.get("tls-ssec", "http", offset=7, length=100, sse_c_key=key) == src[7:107]
    try:
        c.get("tls-ssec", "http", sse_c_key=other)
        raise SystemExit("a wrong key was accepted")
    except objdirect.AccessDenied:
        pass
    try:
        c.get("tls-ssec", "http")
        raise SystemExit("no key was accepted")
    except objdirect.ObjDirectError as e:
        assert e.code == "InvalidRequest", e
with objdirect.Client(fabric="libfabric:tcp", rdma="required", rdma_min_bytes=0, **kw) as c:
    r = c.put("tls-ssec", "rdma", src, sse_c_key=key)
    assert r.path == "rdma", r
    buf = bytearray(len(src))
    g = c.get_into("tls-ssec", "rdma", buf, sse_c_key=key)
    assert g.path == "rdma" and bytes(buf) == src, g
    assert c.get("tls-ssec", "http", offset=5 << 20, length=9, sse_c_key=key) == src[5 << 20:(5 << 20) + 9]
print("ok")
PY
check "objdirect CLI: cp --sse-c over https" bash -c "
  '$BIN_DIR/objdirect' cp --sse-c AES256 --sse-c-key fileb://key.bin src.bin s3://tls-ssec/cli &&
  '$BIN_DIR/objdirect' cp --sse-c AES256 --sse-c-key fileb://key.bin s3://tls-ssec/rdma dl-cli &&
  cmp src.bin dl-cli && ! '$BIN_DIR/objdirect' cp s3://tls-ssec/cli dl-nokey"
check "awscli2: reads what objdirect wrote, writes what objdirect reads" bash -c "
  /usr/bin/aws --endpoint-url $EP s3 cp --only-show-errors --sse-c AES256 --sse-c-key fileb://key.bin s3://tls-ssec/cli dl-aws &&
  cmp src.bin dl-aws &&
  /usr/bin/aws --endpoint-url $EP s3 cp --only-show-errors --sse-c AES256 --sse-c-key fileb://key.bin src.bin s3://tls-ssec/aws &&
  PYTHONPATH='$PY_DIR' /usr/bin/python3 -c \"
import objdirect
c = objdirect.Client(endpoint='$EP', access_key='tlsAK', secret_key='tlsSecret', fabric='none')
assert c.get('tls-ssec', 'aws', sse_c_key=open('key.bin', 'rb').read()) == open('src.bin', 'rb').read()\""
if ! grep -q "$(base64 -w0 key.bin)" server.log; then PASS=$((PASS+1)); echo "PASS the key is not in the server's log"
else FAIL=$((FAIL+1)); echo "FAIL the key is in the server's log"; fi
if kill $PID 2>/dev/null && wait $PID; then
  PASS=$((PASS+1)); echo "PASS server exits 0 on SIGTERM"
else
  FAIL=$((FAIL+1)); echo "FAIL server died or exited non-zero on SIGTERM"; tail -c 4000 server.log
fi
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
