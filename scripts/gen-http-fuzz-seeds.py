#!/usr/bin/env python3
"""Writes the seed corpus of the whole-HTTP-request fuzz target (src/server/http/http_request_corpus).

Each seed is the raw bytes of one connection: one or more SigV4-signed requests (pipelined), signed
at 2026-01-01T00:00:00Z with the fuzz fixture's credentials (http_request_fuzz.hpp), whose auth
clock is pinned one minute later so that the signatures stay valid forever. Seeds named ok-* must
be answered with 2xx/3xx only; http_request_fuzz_test checks that, which proves the harness gets
past authentication into the operations.
Usage: scripts/gen-http-fuzz-seeds.py [OUT_DIR]
"""
import base64
import hashlib
import hmac
import os
import sys
import urllib.parse
import zlib

ACCESS = "fuzzaccesskey"
SECRET = "fuzz-secret-key/0123456789+abcdef"
REGION = "us-east-1"
AMZ_DATE = "20260101T000000Z"
DATE8 = AMZ_DATE[:8]
HOST = "127.0.0.1:9000"
BUCKET = "fuzz"


def q(s, safe="-_.~"):
    return urllib.parse.quote(s, safe=safe)


def signing_key():
    k = hmac.new(("AWS4" + SECRET).encode(), DATE8.encode(), hashlib.sha256).digest()
    for part in (REGION, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


def canonical_query(query):
    return "&".join(f"{q(k)}={q(v)}" for k, v in sorted(query))


def sign(method, path, query, headers, payload_hash):
    names = sorted(h.lower() for h in headers)
    lower = {k.lower(): v.strip() for k, v in headers.items()}
    canon = "\n".join([method, path, canonical_query(query),
                       "".join(f"{n}:{lower[n]}\n" for n in names), ";".join(names), payload_hash])
    scope = f"{DATE8}/{REGION}/s3/aws4_request"
    sts = "\n".join(["AWS4-HMAC-SHA256", AMZ_DATE, scope, hashlib.sha256(canon.encode()).hexdigest()])
    sig = hmac.new(signing_key(), sts.encode(), hashlib.sha256).hexdigest()
    return scope, ";".join(names), sig


def request(method, path, query=(), headers=None, body=b"", payload_hash=None, unsigned=()):
    """Header-signed request bytes. `unsigned` headers are sent but not signed."""
    query = list(query)
    hdrs = {"Host": HOST, "x-amz-date": AMZ_DATE}
    hdrs.update(headers or {})
    if payload_hash is None:
        payload_hash = hashlib.sha256(body).hexdigest()
    hdrs["x-amz-content-sha256"] = payload_hash
    scope, signed, sig = sign(method, path, query, hdrs, payload_hash)
    hdrs["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={ACCESS}/{scope}, SignedHeaders={signed}, "
                             f"Signature={sig}")
    for k, v in unsigned:
        hdrs[k] = v
    if body or method in ("PUT", "POST"):
        if "Transfer-Encoding" not in hdrs:
            hdrs.setdefault("Content-Length", str(len(body)))
    target = path + ("?" + "&".join(k if v == "" and k in ("uploads", "delete") else f"{q(k)}={q(v)}"
                                    for k, v in query) if query else "")
    head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
    return head.encode() + body


def presigned(method, path, expires=3600):
    query = [("X-Amz-Algorithm", "AWS4-HMAC-SHA256"),
             ("X-Amz-Credential", f"{ACCESS}/{DATE8}/{REGION}/s3/aws4_request"),
             ("X-Amz-Date", AMZ_DATE), ("X-Amz-Expires", str(expires)),
             ("X-Amz-SignedHeaders", "host")]
    _, _, sig = sign(method, path, query, {"Host": HOST}, "UNSIGNED-PAYLOAD")
    query.append(("X-Amz-Signature", sig))
    target = path + "?" + "&".join(f"{q(k)}={q(v)}" for k, v in query)
    return f"{method} {target} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode()


def seeds():
    data = b"hello fuzz world\n" * 4
    yield "ok-list-buckets", request("GET", "/")
    yield "ok-put-object", request("PUT", f"/{BUCKET}/a", body=data,
                                   headers={"Content-Type": "text/plain", "x-amz-meta-k": "v"})
    yield "ok-put-get-range-head", (
        request("PUT", f"/{BUCKET}/b", body=data, payload_hash="UNSIGNED-PAYLOAD",
                headers={"Content-MD5": base64.b64encode(hashlib.md5(data).digest()).decode()}) +
        request("GET", f"/{BUCKET}/b", headers={"Range": "bytes=2-9"}) +
        request("HEAD", f"/{BUCKET}/b") +
        request("GET", f"/{BUCKET}/b", headers={"If-None-Match": "\"nomatch\""}))
    yield "ok-put-delete", (request("PUT", f"/{BUCKET}/c", body=data) +
                            request("DELETE", f"/{BUCKET}/c"))
    crc = base64.b64encode(zlib.crc32(b"hello").to_bytes(4, "big")).decode()
    chunked = f"5\r\nhello\r\n0\r\nx-amz-checksum-crc32:{crc}\r\n\r\n".encode()
    yield "ok-aws-chunked-trailer", request(
        "PUT", f"/{BUCKET}/chunked", body=chunked, payload_hash="STREAMING-UNSIGNED-PAYLOAD-TRAILER",
        headers={"Content-Encoding": "aws-chunked", "x-amz-decoded-content-length": "5",
                 "x-amz-trailer": "x-amz-checksum-crc32"})
    yield "ok-list-v2", request("GET", f"/{BUCKET}", query=[("list-type", "2"), ("prefix", "")])
    yield "ok-list-v1-delimiter", request("GET", f"/{BUCKET}", query=[("delimiter", "/"), ("max-keys", "5")])
    yield "ok-create-multipart", request("POST", f"/{BUCKET}/mp", query=[("uploads", "")])
    dbody = (b'<?xml version="1.0" encoding="UTF-8"?><Delete><Quiet>false</Quiet>'
             b'<Object><Key>x1</Key></Object><Object><Key>x2</Key></Object></Delete>')
    yield "ok-delete-objects", request(
        "POST", f"/{BUCKET}", query=[("delete", "")], body=dbody,
        headers={"Content-MD5": base64.b64encode(hashlib.md5(dbody).digest()).decode()})
    # An empty constraint is us-east-1 (naming us-east-1 is refused, as by AWS: err- seed below).
    cbody = (b'<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
             b'<LocationConstraint></LocationConstraint></CreateBucketConfiguration>')
    yield "ok-create-delete-bucket", (request("PUT", "/fuzz2", body=cbody) +
                                      request("HEAD", "/fuzz2") + request("DELETE", "/fuzz2"))
    yield "ok-copy-object", (request("PUT", f"/{BUCKET}/src", body=data) +
                             request("PUT", f"/{BUCKET}/dst", headers={"x-amz-copy-source": f"/{BUCKET}/src"}))
    yield "ok-presigned-put-get", (
        presigned("PUT", f"/{BUCKET}/ps")[:-2] + f"Content-Length: {len(data)}\r\n\r\n".encode() + data +
        presigned("GET", f"/{BUCKET}/ps"))
    yield "ok-location-versioning", (request("GET", f"/{BUCKET}", query=[("location", "")]) +
                                     request("GET", f"/{BUCKET}", query=[("versioning", "")]))
    # Not ok-*: errors the fuzzer should keep exploring.
    ubody = (b'<CreateBucketConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
             b'<LocationConstraint>us-east-1</LocationConstraint></CreateBucketConfiguration>')
    yield "err-location-us-east-1", request("PUT", "/fuzz3", body=ubody)
    yield "err-bad-signature", request("GET", "/", unsigned=[("x-amz-date", "20260101T000001Z")])
    yield "err-te-chunked", request("PUT", f"/{BUCKET}/te", body=b"4\r\nabcd\r\n0\r\n\r\n",
                                    payload_hash="UNSIGNED-PAYLOAD", headers={"Transfer-Encoding": "chunked"})
    yield "err-truncated-body", request("PUT", f"/{BUCKET}/t", body=data,
                                        headers={"Content-Length": str(len(data) * 2)})


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "src", "server", "http", "http_request_corpus")
    os.makedirs(out, exist_ok=True)
    for name, raw in seeds():
        with open(os.path.join(out, name), "wb") as f:
            f.write(raw)
        print(name, len(raw))


if __name__ == "__main__":
    main()
