#!/usr/bin/env python3
"""kill -9 fault campaign against the real objdirect-server (driven by scripts/fault-campaign.sh).

Each cycle:
  1. a worker *process* (boto3, 3 threads on disjoint keys) runs a random mix of PutObject,
     multipart (CreateMultipartUpload + UploadPart x2 + CompleteMultipartUpload), DeleteObjects and
     CopyObject, journaling "begin" (key -> new sha256) before each request and "ack" after the
     server's 2xx answer (one with the server's x-amz-request-id and, for a PUT, the body's MD5 as
     ETag: botocore can make up a 200 for a request whose connection died, see
     tests/integration/test_lost_acked_put.py; those count as in flight and are reported);
  2. after a random delay the server is killed with SIGKILL (the worker is usually mid-request;
     sometimes the kill lands while a body is still being sent or a Complete is committing);
  3. the server is restarted on the same data dir and every key is read back:
       - acked ops: the key must be exactly the new version;
       - unacked ops (in flight at the kill): exactly the old or the new version;
       - the body's sha256 must be one of those, and for single-part objects MD5(body) == ETag;
     lost    += keys that are absent or older than allowed;
     partial += keys whose bytes are neither allowed version (or short, or ETag mismatch);
     leaked  += files under DATA/tmp, plus blob files under DATA/blobs that no object segment or
                upload part accounts for (a multipart object "ETag-N" has N blobs, a single-part
                non-empty object 1, an in-progress part 1; see docs/storage.md).
With --versioned the bucket has versioning Enabled and the worker also deletes noncurrent
versions by id (DeleteObject ?versionId=); a delete writes a delete marker. After each restart
every version of every key is checked too (docs/versioning.md: writing a new version never loses
the previous ones):
       - every version known before the cycle, or acknowledged in it, is still listed (unless an
         acknowledged delete removed it, then it is gone): lost += a missing one;
       - a version acknowledged in this cycle reads back exactly its bytes; a listed version
         nobody acknowledged must be one an in-flight op was writing, whole: partial += others;
       - blob files are counted over every version, not just the latest.
On the RADOS backend (OBJDIRECT_SERVER_ARGS holds `--backend rados ...`, as scripts/with-ceph.sh
sets it) the per-cycle checks of keys and versions are the same; there is no data directory, so
the leak check runs once, at the end (docs/scale-out.md, "GC rules"): every version, marker and
upload is deleted through S3, the server restarts with a GC that collects at once
(`--rados-gc-grace-s 0 --rados-gc-interval-s 1 --rados-intent-expire-s 1`), and within
RADOS_GC_WAIT_S the data pool must hold no object and the index no intent or GC record:
     leaked  += data objects (stripes) and intent / GC records still there after that wait.
The last line is exactly `cycles=N lost=N partial=N leaked=N`; the exit status is 1 if any is
non-zero (or the server failed to restart).
"""

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
objd = None  # tests/integration/objd.py, imported by main() once OBJDIRECT_BIN_DIR is set
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "integration"))

MIB = 1 << 20
BUCKET = "faults"
THREADS = 3
KEYS_PER_THREAD = 6


def keys_of(t):
    return [f"t{t}/k{i}" for i in range(KEYS_PER_THREAD)]


ALL_KEYS = [k for t in range(THREADS) for k in keys_of(t)]


def sha(b):
    return hashlib.sha256(b).hexdigest()


# ------------------------------------------------------------------------------------------------
# worker process


def worker_main(endpoint, journal_path, state_path, seed):
    import objd  # noqa: E402  (boto3 import is here, in the child)
    from botocore.config import Config
    import boto3

    with open(state_path) as f:
        st = json.load(f)
    current = st["current"]  # key -> sha or None
    versioned = st["versioned"]
    noncurrent = st["noncurrent"]  # key -> version ids that are not the latest (versioned)
    fd = os.open(journal_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    lock = threading.Lock()
    op_ids = iter(range(1 << 30))

    def journal(rec):
        line = (json.dumps(rec) + "\n").encode()
        with lock:
            os.write(fd, line)  # O_APPEND, one write per line: lines never interleave

    def client():  # boto3 sessions are not thread-safe: one per thread, made here
        cfg = Config(signature_version="s3v4", s3={"addressing_style": "path"},
                     retries={"total_max_attempts": 1}, connect_timeout=5, read_timeout=30)
        return boto3.session.Session().client(
            "s3", endpoint_url=endpoint, aws_access_key_id=objd.ACCESS_KEY,
            aws_secret_access_key=objd.SECRET_KEY, region_name=objd.REGION, config=cfg)

    clients = [client() for _ in range(THREADS)]

    def genuine(r, etag=None):
        """An acknowledgement counts only if the server sent it: every answer carries its
        x-amz-request-id, and a PUT's ETag is the MD5 of the body. botocore can make up a 200
        with no headers at all for a request whose connection died (see
        tests/integration/test_lost_acked_put.py); such an op's outcome is unknown."""
        if not r["ResponseMetadata"].get("RequestId"):
            raise RuntimeError(f"made-up answer without x-amz-request-id: {r['ResponseMetadata']}")
        if etag is not None and r.get("ETag", "").strip('"') != etag:
            raise RuntimeError(f"answer with ETag {r.get('ETag')} for a body with MD5 {etag}")

    def run(t):
        rnd = random.Random(seed * 100 + t)
        s3 = clients[t]
        mine = keys_of(t)
        while True:
            with lock:
                oid = next(op_ids)
            kind = rnd.choices(["put", "multipart", "delete", "copy", "delete-version"],
                               [5, 2, 2, 2, 2 if versioned else 0])[0]
            vid = None
            try:
                if kind == "put":
                    k = rnd.choice(mine)
                    size = rnd.choice([0, 1, 4096, 100_000, MIB, 3 * MIB])
                    body = os.urandom(size)
                    journal({"op": oid, "kind": kind, "set": {k: sha(body)}})
                    r = s3.put_object(Bucket=BUCKET, Key=k, Body=body)
                    genuine(r, hashlib.md5(body).hexdigest())
                    vid = r.get("VersionId")
                    current[k] = sha(body)
                elif kind == "multipart":
                    k = rnd.choice(mine)
                    parts = [os.urandom(5 * MIB), os.urandom(rnd.choice([1, 70_000, MIB]))]
                    new = sha(b"".join(parts))
                    journal({"op": oid, "kind": kind, "set": {k: new}})
                    uid = s3.create_multipart_upload(Bucket=BUCKET, Key=k)["UploadId"]
                    done = []
                    for i, p in enumerate(parts, 1):
                        e = s3.upload_part(Bucket=BUCKET, Key=k, UploadId=uid, PartNumber=i, Body=p)["ETag"]
                        done.append({"PartNumber": i, "ETag": e})
                    r = s3.complete_multipart_upload(Bucket=BUCKET, Key=k, UploadId=uid,
                                                     MultipartUpload={"Parts": done})
                    genuine(r)
                    vid = r.get("VersionId")
                    current[k] = new
                elif kind == "delete":
                    ks = rnd.sample(mine, rnd.choice([1, 2, 3]))
                    journal({"op": oid, "kind": kind, "set": {k: None for k in ks}})
                    r = s3.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": k} for k in ks]})
                    genuine(r)
                    if r.get("Errors"):
                        raise RuntimeError(f"DeleteObjects errors: {r['Errors']}")
                    for k in ks:
                        current[k] = None
                    vid = {d["Key"]: d.get("DeleteMarkerVersionId") for d in r.get("Deleted", [])}
                elif kind == "delete-version":
                    # A noncurrent version goes for good; the latest stays what it is.
                    cands = [(k, v) for k in mine for v in noncurrent.get(k, [])]
                    if not cands:
                        continue
                    k, v = rnd.choice(cands)
                    journal({"op": oid, "kind": kind, "set": {}, "remove": [k, v]})
                    genuine(s3.delete_object(Bucket=BUCKET, Key=k, VersionId=v))
                    noncurrent[k].remove(v)
                else:
                    present = [k for k in mine if current.get(k) is not None]
                    if not present:
                        continue
                    src = rnd.choice(present)
                    dst = rnd.choice([k for k in mine if k != src])
                    journal({"op": oid, "kind": kind, "set": {dst: current[src]}})
                    r = s3.copy_object(Bucket=BUCKET, Key=dst, CopySource={"Bucket": BUCKET, "Key": src})
                    genuine(r)
                    vid = r.get("VersionId")
                    current[dst] = current[src]
                journal({"op": oid, "ack": True, "vid": vid})
            except Exception as e:  # the server was killed (or something is wrong): outcome unknown
                journal({"op": oid, "error": f"{type(e).__name__}: {e}"[:300]})
                return

    threads = [threading.Thread(target=run, args=(t,), daemon=True) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


# ------------------------------------------------------------------------------------------------
# campaign


def blob_files(data_dir):
    out = []
    root = os.path.join(data_dir, "blobs")
    for d, _, files in os.walk(root):
        out += [os.path.join(d, f) for f in files]
    return out


def tmp_files(data_dir):
    out = []
    for d, _, files in os.walk(os.path.join(data_dir, "tmp")):
        out += [os.path.join(d, f) for f in files]
    return out


def expected_blobs(s3):
    """Blob files the metadata references, counted through S3: objects and in-progress parts."""
    n = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for o in page.get("Contents", []):
            etag = o["ETag"].strip('"')
            if "-" in etag:
                n += int(etag.rsplit("-", 1)[1])  # parts of 0 bytes are not expected here
            elif o["Size"] > 0:
                n += 1
    uploads = s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", [])
    for u in uploads:
        parts = s3.list_parts(Bucket=BUCKET, Key=u["Key"], UploadId=u["UploadId"]).get("Parts", [])
        n += sum(1 for p in parts if p["Size"] > 0)
    return n, uploads


def blobs_of(etag, size):
    if "-" in etag:
        return int(etag.rsplit("-", 1)[1])  # parts of 0 bytes are not expected here
    return 1 if size > 0 else 0


def list_versions(s3, key):
    """({version id: (is delete marker, ETag, size)} of exactly this key, the latest's id)."""
    out = {}
    latest = None
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=BUCKET, Prefix=key):
        for v in page.get("Versions", []):
            if v["Key"] == key:
                out[v["VersionId"]] = (False, v["ETag"].strip('"'), v["Size"])
                latest = v["VersionId"] if v["IsLatest"] else latest
        for m in page.get("DeleteMarkers", []):
            if m["Key"] == key:
                out[m["VersionId"]] = (True, "", 0)
                latest = m["VersionId"] if m["IsLatest"] else latest
    return out, latest


def read_version(s3, key, vid):
    """sha256 of one version's bytes, or a problem string."""
    r = s3.get_object(Bucket=BUCKET, Key=key, VersionId=vid)
    body = r["Body"].read()
    if len(body) != r["ContentLength"]:
        return None, f"{key}@{vid}: short body {len(body)} of {r['ContentLength']}"
    etag = r["ETag"].strip('"')
    if "-" not in etag and hashlib.md5(body).hexdigest() != etag:
        return None, f"{key}@{vid}: MD5 of body != ETag {etag}"
    return sha(body), None


def check_versions(s3, versions, ops, order):
    """The versioned checks of one cycle (see the module docstring). versions: key -> {vid: sha
    or None for a marker} known before the cycle; updated in place. Returns (lost, partial,
    blobs referenced, problems)."""
    acked_new = {}    # key -> {vid: sha} acknowledged this cycle
    in_flight = {}    # key -> set of sha (None: a marker) an unacknowledged op may have written
    removed = {}      # key -> {vid: acked?}
    for oid in order:
        op = ops[oid]
        if op.get("remove"):
            k, v = op["remove"]
            removed.setdefault(k, {})[v] = op["state"] == "acked"
            continue
        for k, new in op["set"].items():
            vid = op.get("vid")
            if isinstance(vid, dict):
                vid = vid.get(k)
            if op["state"] == "acked" and vid:
                acked_new.setdefault(k, {})[vid] = new
            else:
                in_flight.setdefault(k, set()).add(new)
    lost = partial = blobs = 0
    problems = []
    for k in ALL_KEYS:
        listed, latest_vid[k] = list_versions(s3, k)
        known = dict(versions.get(k, {}))
        known.update(acked_new.get(k, {}))
        for vid, want in known.items():
            gone_ok = removed.get(k, {}).get(vid)
            if vid not in listed:
                if gone_ok is None:
                    lost += 1
                    problems.append(f"{k}@{vid}: version LOST")
                continue
            if gone_ok:
                partial += 1
                problems.append(f"{k}@{vid}: version removed by an acknowledged delete is back")
        result = {}
        for vid, (marker, etag, size) in listed.items():
            if not marker:
                blobs += blobs_of(etag, size)
            if vid in known and vid not in acked_new.get(k, {}):
                result[vid] = known[vid]  # checked when it was new
                continue
            got = None
            if not marker:
                got, problem = read_version(s3, k, vid)
                if problem:
                    partial += 1
                    problems.append(problem)
                    continue
            allowed = {known[vid]} if vid in known else in_flight.get(k, set())
            if got not in allowed:
                partial += 1
                problems.append(f"{k}@{vid}: PARTIAL version (got {got}, allowed {allowed})")
            result[vid] = got
        versions[k] = result
    return lost, partial, blobs, problems


RADOS_GC_WAIT_S = 120  # the killed servers' GC lease (30 s) must run out before a pass can run


def rados_target(args):
    """(conf, pool prefix) of a `--backend rados` server argument list, or None."""
    if "--backend" not in args[:-1] or args[args.index("--backend") + 1] != "rados":
        return None
    def value(flag, default=None):
        return args[args.index(flag) + 1] if flag in args[:-1] else default
    return value("--rados-conf"), value("--rados-pool-prefix", "objdirect")


def rados_leftovers(conf, prefix):
    """(data pool objects, index intent and GC records) of the pools PREFIX.data / PREFIX.meta."""
    def rados(*a):
        return subprocess.run(["rados", "-c", conf] + list(a), check=True, capture_output=True,
                              text=True, timeout=60).stdout.split()
    data = rados("-p", prefix + ".data", "ls")
    records = []
    for obj in rados("-p", prefix + ".meta", "ls"):
        if obj.startswith("idx."):
            records += [f"{obj}:{k}" for k in rados("-p", prefix + ".meta", "listomapkeys", obj)
                        if k[:1] in ("i", "g")]
    return data, records


def empty_bucket(s3):
    """Deletes every version, delete marker and multipart upload of the campaign's bucket."""
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=BUCKET):
        for v in page.get("Versions", []) + page.get("DeleteMarkers", []):
            s3.delete_object(Bucket=BUCKET, Key=v["Key"], VersionId=v["VersionId"])
    for u in s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []):
        s3.abort_multipart_upload(Bucket=BUCKET, Key=u["Key"], UploadId=u["UploadId"])


def rados_leak_check(data, log, server_args, target):
    """The end-of-campaign leak check on RADOS (module docstring): (leaked, problems)."""
    gc_now = ["--rados-gc-grace-s", "0", "--rados-gc-interval-s", "1", "--rados-intent-expire-s", "1"]
    srv = objd.Server(data, log, extra_args=server_args + gc_now).start()
    try:
        empty_bucket(objd.boto3_client(srv))
        deadline = time.monotonic() + RADOS_GC_WAIT_S
        while True:
            objects, records = rados_leftovers(*target)
            if not objects and not records:
                print(f"rados: the GC left nothing (data pool and index records empty after "
                      f"{RADOS_GC_WAIT_S - (deadline - time.monotonic()):.0f}s)", flush=True)
                return 0, []
            if time.monotonic() > deadline:
                return len(objects) + len(records), [
                    f"rados: after {RADOS_GC_WAIT_S}s {len(objects)} data objects "
                    f"{objects[:8]} and {len(records)} intent/GC records {records[:8]} remain"]
            time.sleep(1)
    finally:
        srv.stop()


def expected_blobs_latest(s3):
    n = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for o in page.get("Contents", []):
            n += blobs_of(o["ETag"].strip('"'), o["Size"])
    return n


def read_key(s3, key):
    """(sha256 or None if absent, problem string or None)."""
    from botocore.exceptions import ClientError
    try:
        r = s3.get_object(Bucket=BUCKET, Key=key)
    except ClientError as e:
        if e.response["ResponseMetadata"]["HTTPStatusCode"] == 404:
            return None, None
        return "error", f"GET {key}: {e}"
    body = r["Body"].read()
    if len(body) != r["ContentLength"]:
        return sha(body), f"{key}: short body {len(body)} of {r['ContentLength']}"
    etag = r["ETag"].strip('"')
    if "-" not in etag and hashlib.md5(body).hexdigest() != etag:
        return sha(body), f"{key}: MD5 of body != ETag {etag}"
    return sha(body), None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=100)
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--work", required=True, help="scratch directory (data dir, journals, server log)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--max-delay", type=float, default=1.5, help="longest wait from the first op to the kill (s)")
    ap.add_argument("--versioned", action="store_true", help="versioning Enabled; check every version")
    ap.add_argument("--worker", nargs=4, metavar=("ENDPOINT", "JOURNAL", "STATE", "SEED"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker_main(a.worker[0], a.worker[1], a.worker[2], int(a.worker[3]))
        return 0

    os.environ["OBJDIRECT_BIN_DIR"] = a.bin_dir
    global objd
    import objd

    seed = a.seed if a.seed is not None else int.from_bytes(os.urandom(4), "little")
    rnd = random.Random(seed)
    print(f"fault campaign: {a.cycles} cycles, seed {seed}, work dir {a.work}", flush=True)
    data = os.path.join(a.work, "data")
    log = os.path.join(a.work, "server.log")
    backend_args = os.environ.get("OBJDIRECT_SERVER_ARGS", "").split()
    target = rados_target(backend_args)
    if backend_args and not target:
        print(f"fault campaign: only the local and RADOS backends keep data ({backend_args})", flush=True)
        return 2
    server_args = ["--fabric", "none", "--access-log", os.path.join(a.work, "access.log")] + backend_args
    srv = objd.Server(data, log, extra_args=server_args).start()
    s3 = objd.boto3_client(srv)
    s3.create_bucket(Bucket=BUCKET)
    if a.versioned:
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
    versions = {}  # versioned: key -> {version id: sha or None (a marker)}
    accept = {k: {None} for k in ALL_KEYS}  # allowed versions per key (sha256; None = absent)
    current = {k: None for k in ALL_KEYS}
    lost = partial = leaked = 0
    stats = {"acked": 0, "in_flight": 0, "new_seen": 0, "old_seen": 0, "made_up": 0, "kinds": {}}
    t_start = time.monotonic()
    cycle = 0
    try:
        for cycle in range(1, a.cycles + 1):
            journal = os.path.join(a.work, f"journal-{cycle}")
            state = os.path.join(a.work, "state.json")
            noncurrent = {k: [v for v in versions.get(k, {}) if v != latest_vid.get(k)]
                          for k in ALL_KEYS} if a.versioned else {}
            with open(state, "w") as f:
                json.dump({"current": current, "versioned": a.versioned, "noncurrent": noncurrent}, f)
            w = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--bin-dir", a.bin_dir, "--work", a.work,
                                  "--worker", srv.endpoint, journal, state, str(seed + cycle)],
                                 stdout=subprocess.DEVNULL, stderr=open(os.path.join(a.work, "worker.err"), "ab"))
            # the worker needs a moment to import boto3: the random delay starts at its first op
            t_wait = time.monotonic() + 60
            while time.monotonic() < t_wait and w.poll() is None and not (
                    os.path.exists(journal) and os.path.getsize(journal) > 0):
                time.sleep(0.01)
            delay = rnd.random() * a.max_delay
            time.sleep(delay)
            srv.kill9()
            w.wait(timeout=60)  # its requests fail at once now

            # what the journal says
            ops = {}
            order = []
            if os.path.exists(journal):
                with open(journal) as f:
                    for line in f:
                        rec = json.loads(line)
                        if "set" in rec:
                            ops[rec["op"]] = dict(rec, state="open")
                            order.append(rec["op"])
                        elif rec.get("ack"):
                            ops[rec["op"]]["state"] = "acked"
                            ops[rec["op"]]["vid"] = rec.get("vid")
                        else:
                            ops[rec["op"]]["state"] = "error"
                            if rec["error"].startswith("RuntimeError: made-up answer"):
                                stats["made_up"] += 1
            for oid in order:
                op = ops[oid]
                stats["kinds"][op["kind"]] = stats["kinds"].get(op["kind"], 0) + 1
                for k, new in op["set"].items():
                    if op["state"] == "acked":
                        accept[k] = {new}
                        stats["acked"] += 1
                    else:
                        accept[k] = accept[k] | {new}
                        stats["in_flight"] += 1

            with open(os.path.join(a.work, "access.log"), "a") as f:
                f.write(f"### cycle {cycle}: killed\n")
            srv = objd.Server(data, log, extra_args=server_args).start()
            s3 = objd.boto3_client(srv)
            problems = []
            leftovers = tmp_files(data)
            for k in ALL_KEYS:
                got, problem = read_key(s3, k)
                if problem:
                    partial += 1
                    problems.append(problem)
                elif got not in accept[k]:
                    mine = [dict(ops[o], set=ops[o]["set"].get(k)) for o in order if k in ops[o]["set"]]
                    if got is None or got in history.get(k, set()):
                        lost += 1
                        problems.append(f"{k}: LOST (got {got}, allowed {accept[k]}, was {current[k]}; "
                                        f"this cycle's ops on it: {mine})")
                    else:
                        partial += 1
                        problems.append(f"{k}: PARTIAL (got {got}, allowed {accept[k]}, was {current[k]}; "
                                        f"this cycle's ops on it: {mine})")
                else:
                    if len(accept[k]) > 1:
                        stats["old_seen" if got == current[k] else "new_seen"] += 1
                history.setdefault(k, set()).add(current[k])
                current[k] = got if not problem else current[k]
                accept[k] = {current[k]}
            want, uploads = expected_blobs(s3)
            if a.versioned:
                v_lost, v_partial, want_v, v_problems = check_versions(s3, versions, ops, order)
                lost += v_lost
                partial += v_partial
                problems += v_problems
                want = want - expected_blobs_latest(s3) + want_v
            # RADOS: blobs are counted at the end (rados_leak_check); small objects are inline there
            have = want if target else len(blob_files(data))
            if leftovers or have != want:
                leaked += len(leftovers) + abs(have - want)
                problems.append(f"tmp files {leftovers}; blob files {have}, metadata references {want}")
            for u in uploads:  # interrupted multipart uploads: abort, so the next count starts clean
                s3.abort_multipart_upload(Bucket=BUCKET, Key=u["Key"], UploadId=u["UploadId"])
            n_ops = len(order)
            n_open = sum(1 for o in ops.values() if o["state"] != "acked")
            print(f"cycle {cycle}: kill after {delay:.2f}s, {n_ops} ops ({n_open} unacked), "
                  f"{len(uploads)} interrupted uploads, {have} blobs" + ("; " + "; ".join(problems) if problems else ""),
                  flush=True)
            if problems:
                os.rename(journal, journal + ".failed")  # kept for the post-mortem
            elif os.path.exists(journal):
                os.unlink(journal)
    finally:
        srv.stop()
    if target:
        n, problems = rados_leak_check(data, log, server_args, target)
        leaked += n
        for p in problems:
            print(p, flush=True)
    print(f"elapsed {time.monotonic() - t_start:.1f}s; versions written acked {stats['acked']}, in flight at the "
          f"kill {stats['in_flight']} (after restart: {stats['old_seen']} old, {stats['new_seen']} new or unchanged); "
          f"ops by kind {stats['kinds']}; made-up 2xx answers (not counted as acks) {stats['made_up']}", flush=True)
    print(f"cycles={cycle} lost={lost} partial={partial} leaked={leaked}", flush=True)
    return 1 if (lost or partial or leaked) else 0


history = {}
latest_vid = {}  # versioned: key -> id of its latest version (never deleted by the worker)

if __name__ == "__main__":
    sys.exit(main())
