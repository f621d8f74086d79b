"""boto3 as a command-line client, run under either Debian's python (boto3 1.26) or the pyenv
python (boto3 1.4x, which sends CRC checksums with aws-chunked STREAMING-UNSIGNED-PAYLOAD-TRAILER).

Usage: boto3_driver.py ENDPOINT AK SK PART_MB OP ARGS...
Exit 0 on success; on an S3 error prints 'ERROR <http status> <code> <message>' to stderr, exit 3.
"""

import json
import sys

import boto3
import botocore
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError


def main():
    ep, ak, sk, part_mb, op, *args = sys.argv[1:]
    part = int(part_mb) << 20
    s3 = boto3.client("s3", endpoint_url=ep, aws_access_key_id=ak, aws_secret_access_key=sk,
                      region_name="us-east-1",
                      config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                    retries={"total_max_attempts": 1}))
    tc = TransferConfig(multipart_threshold=part, multipart_chunksize=part, max_concurrency=4)
    if op == "create-bucket":
        s3.create_bucket(Bucket=args[0])
    elif op == "upload":
        s3.upload_file(args[0], args[1], args[2], Config=tc)
    elif op == "download":
        s3.download_file(args[0], args[1], args[2], Config=tc)
    elif op == "list":
        sizes = {}
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=args[0]):
            for o in page.get("Contents", []):
                sizes[o["Key"]] = o["Size"]
        print(json.dumps(sizes))
    elif op == "range":
        b, k, first, last, dst = args
        r = s3.get_object(Bucket=b, Key=k, Range=f"bytes={first}-{last}")
        assert r["ResponseMetadata"]["HTTPStatusCode"] == 206, r["ResponseMetadata"]
        with open(dst, "wb") as f:
            f.write(r["Body"].read())
    elif op == "presign":
        method, b, k = args
        print(s3.generate_presigned_url(method, Params={"Bucket": b, "Key": k}, ExpiresIn=600))
    elif op == "put-if-none-match":
        src, b, k = args
        with open(src, "rb") as f:
            body = f.read()
        shape = s3.meta.service_model.operation_model("PutObject").input_shape
        if "IfNoneMatch" in shape.members:
            s3.put_object(Bucket=b, Key=k, Body=body, IfNoneMatch="*")
        else:
            # boto3 < 1.35 has no IfNoneMatch parameter: add the header before signing
            def add(request, **_):
                request.headers["If-None-Match"] = "*"
            s3.meta.events.register("before-sign.s3.PutObject", add)
            s3.put_object(Bucket=b, Key=k, Body=body)
    elif op == "delete-objects":
        b, *keys = args
        r = s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": k} for k in keys]})
        assert not r.get("Errors"), r
        assert sorted(d["Key"] for d in r.get("Deleted", [])) == sorted(keys), r
    elif op == "copy":
        b, src, dst = args
        s3.copy({"Bucket": b, "Key": src}, b, dst, Config=tc)
    elif op == "delete":
        s3.delete_object(Bucket=args[0], Key=args[1])
    elif op == "delete-bucket":
        s3.delete_bucket(Bucket=args[0])
    else:
        raise SystemExit(f"unknown op {op}")


if __name__ == "__main__":
    try:
        main()
    except ClientError as e:
        md = e.response.get("ResponseMetadata", {})
        err = e.response.get("Error", {})
        print(f"ERROR {md.get('HTTPStatusCode')} {err.get('Code')} {err.get('Message')} "
              f"(boto3 {boto3.__version__}, botocore {botocore.__version__})", file=sys.stderr)
        sys.exit(3)
