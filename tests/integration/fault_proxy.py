"""A fault-injecting HTTP/1.1 proxy in front of the real objdirect-server (tests of the client's
retries, docs/client.md "Retries").

Each client connection gets its own upstream connection (keep-alive on both sides). Every request
is read whole (headers and Content-Length body) and then, by a seeded random draw, either passed
through or answered with one fault:

  slowdown      503 with an S3 <Error><Code>SlowDown</Code>, not forwarded
  internal      500 with <Code>InternalError</Code>, not forwarded
  cut_before    the connection is closed before the request is forwarded
  cut_mid_body  forwarded; the reply's header and half its body are sent, then the connection
                is closed (a reply without a body: the connection is closed instead of sending
                the header, "lost_answer": the server did the work, the answer never came)
  truncated_xml forwarded; a 2xx XML reply's body (Content-Type application/xml) is cut in half
                and Content-Length made to match (a well-framed reply whose XML does not
                parse); other replies pass
  short_range   forwarded; a 206 reply's body is cut in half and Content-Length made to match,
                so that the body is shorter than its Content-Range says (a well-framed reply
                that is not the range it claims); other replies pass

force() makes the next matching request (method, a substring of the target and, optionally, of
the Range header) take a given fault (also "lost_answer": forwarded, and the connection closed
without any reply byte), whatever the rates.

A request identity (method, target and Range) is never faulted more than `consecutive_max` times in a
row, so that a client with that many retries always gets through: the test then asserts that
every operation succeeded, not that the dice were kind. `counts` holds what was injected, by kind.

RDMA payloads do not pass through the proxy (they go between the client's and the server's
fabric endpoints); only the HTTP control plane does, so token requests get faults too.
"""

import random
import socket
import threading

FAULTS = ("slowdown", "internal", "cut_before", "cut_mid_body", "truncated_xml", "short_range")

SLOWDOWN_BODY = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
                 b'<Message>Please reduce your request rate (injected by fault_proxy).</Message>'
                 b'<RequestId>FAULTPROXY</RequestId></Error>')
INTERNAL_BODY = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code>'
                 b'<Message>We encountered an internal error (injected by fault_proxy).</Message>'
                 b'<RequestId>FAULTPROXY</RequestId></Error>')


class _Conn:
    """Buffered reads on a socket."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def read_until(self, marker, limit=1 << 20):
        while marker not in self.buf:
            if len(self.buf) > limit:
                raise ConnectionError("header too large")
            chunk = self.sock.recv(65536)
            if not chunk:
                if not self.buf:
                    return None
                raise ConnectionError("closed mid-header")
            self.buf += chunk
        i = self.buf.index(marker) + len(marker)
        out, self.buf = self.buf[:i], self.buf[i:]
        return out

    def read_exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buf)))
            if not chunk:
                raise ConnectionError("closed mid-body")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_chunked(self):
        """A chunked body, raw (sizes, data and trailer), as received."""
        raw = b""
        while True:
            line = self.read_until(b"\r\n")
            if line is None:
                raise ConnectionError("closed in chunked body")
            raw += line
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:
                while True:
                    t = self.read_until(b"\r\n")
                    raw += t
                    if t == b"\r\n":
                        return raw
            raw += self.read_exact(size + 2)


def _parse_head(head):
    lines = head.split(b"\r\n")
    first = lines[0].decode("latin-1")
    headers = []
    for line in lines[1:]:
        if not line:
            continue
        k, _, v = line.partition(b":")
        headers.append((k.decode("latin-1").strip(), v.decode("latin-1").strip()))
    return first, headers


def _header(headers, name):
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


def _build_head(first, headers):
    out = first + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return out.encode("latin-1")


class FaultProxy:
    """Listens on 127.0.0.1:0 and forwards to upstream (host, port). Thread-safe counters."""

    def __init__(self, upstream_host, upstream_port, rates=None, seed=1, consecutive_max=2):
        self.upstream = (upstream_host, upstream_port)
        self.rates = dict(rates or {"slowdown": 0.10, "internal": 0.03, "cut_before": 0.03,
                                    "cut_mid_body": 0.03, "truncated_xml": 0.10,
                                    "short_range": 0.03})
        self.rng = random.Random(seed)
        self.consecutive_max = consecutive_max
        self.lock = threading.Lock()
        self.counts = {k: 0 for k in FAULTS + ("lost_answer",)}
        self.requests = 0
        self.streak = {}  # (method, target) -> faults in a row
        self.forced = []  # [method, target substring, kind, retry_after, range substring]
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._stop = False
        self._threads = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()

    # -- bookkeeping -----------------------------------------------------------------------------

    def snapshot(self):
        with self.lock:
            return dict(self.counts)

    def reset(self):
        with self.lock:
            for k in self.counts:
                self.counts[k] = 0
            self.requests = 0
            self.streak.clear()

    def set_rates(self, rates):
        with self.lock:
            self.rates = dict(rates)

    def force(self, method, target_part, kind, retry_after=None, range_part=None):
        """One-shot: the next request of `method` whose target contains target_part (and whose
        Range header contains range_part, when given) takes fault `kind`."""
        with self.lock:
            self.forced.append([method, target_part, kind, retry_after, range_part])

    def _draw(self, ident):
        """(fault, retry_after) for this request (None: pass), honouring consecutive_max."""
        with self.lock:
            self.requests += 1
            for f in self.forced:
                if (f[0] == ident[0] and f[1] in ident[1]
                        and (f[4] is None or f[4] in (ident[2] or ""))):
                    self.forced.remove(f)
                    return f[2], f[3]
            if self.streak.get(ident, 0) >= self.consecutive_max:
                self.streak[ident] = 0
                return None, None
            x = self.rng.random()
            acc = 0.0
            for kind in FAULTS:
                acc += self.rates.get(kind, 0.0)
                if x < acc:
                    return kind, None
            return None, None

    def _record(self, ident, kind):
        with self.lock:
            if kind is None:
                self.streak[ident] = 0
            else:
                self.counts[kind] += 1
                self.streak[ident] = self.streak.get(ident, 0) + 1

    # -- serving ---------------------------------------------------------------------------------

    def close(self):
        self._stop = True
        try:
            self.sock.close()
        except OSError:
            pass

    def _accept(self):
        while not self._stop:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, client):
        cl = _Conn(client)
        up = None
        try:
            while True:
                head = cl.read_until(b"\r\n\r\n")
                if head is None:
                    return
                first, headers = _parse_head(head)
                method, target = first.split(" ")[0], first.split(" ")[1]
                n = int(_header(headers, "content-length") or 0)
                body = cl.read_exact(n) if n else b""
                # concurrent ranged GETs of one object are different requests
                ident = (method, target, _header(headers, "range"))
                kind, retry_after = self._draw(ident)
                if kind in ("slowdown", "internal"):
                    self._record(ident, kind)
                    payload = SLOWDOWN_BODY if kind == "slowdown" else INTERNAL_BODY
                    status = "503 Slow Down" if kind == "slowdown" else "500 Internal Server Error"
                    hdrs = [("Content-Type", "application/xml"),
                            ("Content-Length", str(len(payload))), ("x-amz-request-id", "FAULTPROXY")]
                    if retry_after is not None:
                        hdrs.append(("Retry-After", retry_after))
                    # a reply to HEAD has no body (its Content-Length still says how long it is)
                    client.sendall(_build_head(f"HTTP/1.1 {status}", hdrs)
                                   + (b"" if method == "HEAD" else payload))
                    continue
                if kind == "cut_before":
                    self._record(ident, kind)
                    return
                if up is None:
                    s = socket.create_connection(self.upstream)
                    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    up = _Conn(s)
                up.sock.sendall(head + body)
                rhead = up.read_until(b"\r\n\r\n")
                if rhead is None:
                    return
                rfirst, rheaders = _parse_head(rhead)
                status = int(rfirst.split(" ")[1])
                rlen = _header(rheaders, "content-length")
                chunked = (_header(rheaders, "transfer-encoding") or "").lower() == "chunked"
                if method == "HEAD" or status in (204, 304) or (rlen is None and not chunked):
                    rbody = b""
                elif chunked:
                    rbody = up.read_chunked()
                else:
                    rbody = up.read_exact(int(rlen))
                if kind == "lost_answer":
                    self._record(ident, "lost_answer")
                    return
                if kind == "cut_mid_body":
                    if len(rbody) >= 2 and not chunked:
                        self._record(ident, "cut_mid_body")
                        client.sendall(rhead + rbody[: len(rbody) // 2])
                    else:
                        self._record(ident, "lost_answer")
                    return
                ctype = (_header(rheaders, "content-type") or "").lower()
                if kind == "short_range" and status == 206 and not chunked and len(rbody) >= 2:
                    self._record(ident, kind)
                    cut = rbody[: len(rbody) // 2]
                    rheaders = [(k, str(len(cut)) if k.lower() == "content-length" else v)
                                for k, v in rheaders]
                    client.sendall(_build_head(rfirst, rheaders) + cut)
                    continue
                # only XML replies: an object body that happens to start with "<" is not one
                if (kind == "truncated_xml" and 200 <= status < 300 and not chunked
                        and "xml" in ctype and rbody.lstrip().startswith(b"<")
                        and len(rbody) >= 16):
                    self._record(ident, kind)
                    cut = rbody[: len(rbody) // 2]
                    rheaders = [(k, str(len(cut)) if k.lower() == "content-length" else v)
                                for k, v in rheaders]
                    client.sendall(_build_head(rfirst, rheaders) + cut)
                    continue
                self._record(ident, None)
                client.sendall(rhead + rbody)
                conn_hdr = (_header(rheaders, "connection") or "").lower()
                if conn_hdr == "close":
                    return
        except (ConnectionError, OSError, ValueError, IndexError):
            return
        finally:
            try:
                client.close()
            except OSError:
                pass
            if up is not None:
                try:
                    up.sock.close()
                except OSError:
                    pass
