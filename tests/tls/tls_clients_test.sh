#!/usr/bin/env bash
# Real clients over HTTPS with a test CA: objdirect-server --tls-cert/--tls-key, then the AWS CLI
# (v2 and the pyenv v1 if present), boto3, rclone, s3cmd and @aws-sdk/client-s3 each create a
# bucket, upload a multipart object, download it and compare, then clean up.
# Usage: tls_clients_test.sh SERVER_BIN NODE_DIR
set -uo pipefail
BIN=$1 NODE_DIR=${2:-}
W=$(mktemp -d); trap 'kill $PID 2>/dev/null; rm -rf "$W"' EXIT
cd "$W"
# A CA and a server certificate for 127.0.0.1 signed by it.
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=objdirect test CA" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj "/CN=127.0.0.1" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > san.ext
openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt -days 2 -extfile san.ext 2>/dev/null
openssl req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other.crt -days 2 -subj "/CN=unrelated CA" 2>/dev/null
mkdir data
"$BIN" --listen 127.0.0.1:0 --data data --access-key tlsAK --secret-key tlsSecret --fabric none \
  --tls-cert srv.crt --tls-key srv.key > server.log 2>&1 &
PID=$!
for _ in $(seq 100); do grep -q "listening on https://" server.log && break; sleep 0.1; done
EP=$(grep -o 'https://[0-9.:]*' server.log | head -1)
[ -n "$EP" ] || { echo "server did not start"; cat server.log; exit 1; }
export AWS_ACCESS_KEY_ID=tlsAK AWS_SECRET_ACCESS_KEY=tlsSecret AWS_DEFAULT_REGION=us-east-1
export AWS_CA_BUNDLE=$W/ca.crt AWS_CONFIG_FILE=$W/aws.cfg AWS_SHARED_CREDENTIALS_FILE=/dev/null
printf '[default]\ns3 =\n  addressing_style = path\n  multipart_threshold = 5MB\n  multipart_chunksize = 5MB\n' > aws.cfg
head -c $((12 * 1024 * 1024)) /dev/urandom > src.bin
PASS=0 FAIL=0
check() { local name=$1; shift; if "$@" > last.log 2>&1; then PASS=$((PASS+1)); echo "PASS $name"; else FAIL=$((FAIL+1)); echo "FAIL $name"; tail -5 last.log; fi; }
aws_round() {
  local AWS=$1 b=$2
  $AWS --endpoint-url "$EP" s3 mb "s3://$b" && $AWS --endpoint-url "$EP" s3 cp --only-show-errors src.bin "s3://$b/o" &&
  $AWS --endpoint-url "$EP" s3 cp --only-show-errors "s3://$b/o" "dl-$b" && cmp src.bin "dl-$b" &&
  $AWS --endpoint-url "$EP" s3 rm --only-show-errors "s3://$b/o" && $AWS --endpoint-url "$EP" s3 rb "s3://$b"
}
# An unverified certificate must be refused: TLS is real.
check "untrusted CA is refused" bash -c "! AWS_CA_BUNDLE=$W/other.crt /usr/bin/aws --endpoint-url $EP s3 ls"
check "awscli2 over https" aws_round /usr/bin/aws tls-awscli2
PYENV_AWS=$(a=$(command -v aws); [ -n "$a" ] && [ "$(readlink -f "$a")" != /usr/bin/aws ] && echo "$a")
[ -n "$PYENV_AWS" ] && check "awscli1 over https" aws_round "$PYENV_AWS" tls-awscli1
check "boto3 over https" /usr/bin/python3 - "$EP" "$W/ca.crt" <<'PY'
import sys, boto3, hashlib
from botocore.config import Config
from boto3.s3.transfer import TransferConfig
ep, ca = sys.argv[1:]
s3 = boto3.client('s3', endpoint_url=ep, verify=ca, config=Config(s3={'addressing_style': 'path'}))
s3.create_bucket(Bucket='tls-boto3')
tc = TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20)
s3.upload_file('src.bin', 'tls-boto3', 'o', Config=tc)
s3.download_file('tls-boto3', 'o', 'dl-boto3', Config=tc)
assert open('src.bin', 'rb').read() == open('dl-boto3', 'rb').read()
s3.delete_object(Bucket='tls-boto3', Key='o'); s3.delete_bucket(Bucket='tls-boto3')
PY
rclone_round() {
  export RCLONE_CONFIG=/dev/null RCLONE_CONFIG_T_TYPE=s3 RCLONE_CONFIG_T_PROVIDER=Other RCLONE_CONFIG_T_ENDPOINT=$EP \
    RCLONE_CONFIG_T_ACCESS_KEY_ID=tlsAK RCLONE_CONFIG_T_SECRET_ACCESS_KEY=tlsSecret RCLONE_CONFIG_T_FORCE_PATH_STYLE=true
  # aws-sdk-go (rclone) fails on AWS_CA_BUNDLE with its own transport: pass the CA by flag.
  unset AWS_CA_BUNDLE
  local R="rclone --ca-cert $W/ca.crt --retries 1 --s3-upload-cutoff 5M --s3-chunk-size 5M"
  $R mkdir t:tls-rclone && $R copyto src.bin t:tls-rclone/o && $R copyto t:tls-rclone/o dl-rclone && cmp src.bin dl-rclone &&
  $R deletefile t:tls-rclone/o && $R rmdir t:tls-rclone
}
check "rclone over https" bash -c "$(declare -f rclone_round); EP=$EP W=$W rclone_round"
s3cmd_round() {
  local hp=${EP#https://}
  printf '[default]\naccess_key = tlsAK\nsecret_key = tlsSecret\nhost_base = %s\nhost_bucket = %s\nbucket_location = us-east-1\nuse_https = True\nca_certs_file = %s\ncheck_ssl_certificate = True\nsignature_v2 = False\nmultipart_chunk_size_mb = 5\n' "$hp" "$hp" "$W/ca.crt" > s3cmd.cfg
  local S="s3cmd -c s3cmd.cfg --no-progress"
  $S mb s3://tls-s3cmd && $S put src.bin s3://tls-s3cmd/o && $S get s3://tls-s3cmd/o dl-s3cmd && cmp src.bin dl-s3cmd &&
  $S del s3://tls-s3cmd/o && $S rb s3://tls-s3cmd
}
check "s3cmd over https" s3cmd_round
if [ -d "$NODE_DIR/node_modules/@aws-sdk/client-s3" ]; then
  cat > round.mjs <<'JS'
import { S3Client, CreateBucketCommand, PutObjectCommand, GetObjectCommand, DeleteObjectCommand, DeleteBucketCommand } from '@aws-sdk/client-s3';
import { readFileSync } from 'node:fs';
const [ep] = process.argv.slice(2);
const s3 = new S3Client({ endpoint: ep, region: 'us-east-1', forcePathStyle: true,
  credentials: { accessKeyId: 'tlsAK', secretAccessKey: 'tlsSecret' } });
const body = readFileSync('src.bin');
await s3.send(new CreateBucketCommand({ Bucket: 'tls-node' }));
await s3.send(new PutObjectCommand({ Bucket: 'tls-node', Key: 'o', Body: body }));
const r = await s3.send(new GetObjectCommand({ Bucket: 'tls-node', Key: 'o' }));
const got = Buffer.from(await r.Body.transformToByteArray());
if (!got.equals(body)) throw new Error('mismatch');
await s3.send(new DeleteObjectCommand({ Bucket: 'tls-node', Key: 'o' }));
await s3.send(new DeleteBucketCommand({ Bucket: 'tls-node' }));
JS
  cp round.mjs "$NODE_DIR/tls-round-$$.mjs"
  check "@aws-sdk/client-s3 over https" env NODE_EXTRA_CA_CERTS="$W/ca.crt" node "$NODE_DIR/tls-round-$$.mjs" "$EP"
  rm -f "$NODE_DIR/tls-round-$$.mjs"
else
  FAIL=$((FAIL+1)); echo "FAIL node: @aws-sdk/client-s3 not installed in $NODE_DIR (scripts/bootstrap installs it)"
fi
# A clean exit on SIGTERM (under a sanitizer a report makes it non-zero).
if kill $PID 2>/dev/null && wait $PID; then
  PASS=$((PASS+1)); echo "PASS server exits 0 on SIGTERM"
else
  FAIL=$((FAIL+1)); echo "FAIL server died or exited non-zero on SIGTERM"; tail -c 4000 server.log
fi
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
