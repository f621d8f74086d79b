"""The lingering close of the real objdirect-server: a request answered on its header alone (here
an anonymous PUT, 403 AccessDenied before any body byte is read) closes its connection, but the
server first reads and discards the rest of the declared body, at most
--unread-body-drain-bytes-max bytes within unread_body_drain_time_max_ms (5 s), so that a client
that sends its whole body before reading (most do) reads the answer instead of a reset. Beyond the
byte bound the body is cut (the connection closes with the rest unread, the sender gets a reset);
a client that stops sending is closed on at the time bound; a client waiting for
"100 Continue" is closed on at once. A header refused for its size (431) lingers the same way.

The server here: --unread-body-drain-bytes-max 16 MiB.
"""

import socket
import time

import pytest

import objd
from conftest import unique_bucket

DRAIN_MAX = 16 << 20
DRAIN_TIME_MAX_S = 5.0  # limits::unread_body_drain_time_max_ms


@pytest.fixture(scope="module")
def lsrv(tmp_path_factory):
    d = tmp_path_factory.mktemp("linger")
    s = objd.Server(str(d / "data"), str(d / "server.log"),
                    ["--no-fsync", "--unread-body-drain-bytes-max", str(DRAIN_MAX)]).start()
    b = unique_bucket("linger")
    assert objd.request(s, "PUT", "/" + b).status == 200
    s.bucket = b
    yield s
    s.stop()


def header(srv, length, extra=""):
    return (f"PUT /{srv.bucket}/k HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\n"
            f"Content-Length: {length}\r\n{extra}\r\n").encode()


def read_until_close(sock, timeout_s):
    """Everything the server sends until it closes; (bytes, seconds until the close or None)."""
    sock.settimeout(0.25)
    t0 = time.monotonic()
    out = b""
    while time.monotonic() - t0 < timeout_s:
        try:
            c = sock.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return out, time.monotonic() - t0
        if not c:
            return out, time.monotonic() - t0
        out += c
    return out, None


def send_all_counting(sock, total, timeout_s, fill=b"\0"):
    """Sends up to total bytes of fill; returns (bytes sent, the error that stopped it or None)."""
    chunk = fill * (1 << 20)
    sent = 0
    sock.settimeout(timeout_s)
    try:
        while sent < total:
            sent += sock.send(chunk[:min(len(chunk), total - sent)])
    except (BrokenPipeError, ConnectionResetError) as e:
        return sent, e
    return sent, None


def test_a_body_within_the_bound_is_drained_and_the_answer_read(lsrv):
    # 12 MiB: more than the loopback socket buffers hold, so without the drain the send would
    # stop on a reset before the client reads anything.
    n = 12 << 20
    with socket.create_connection(("127.0.0.1", lsrv.port), timeout=10) as s:
        s.sendall(header(lsrv, n))
        sent, err = send_all_counting(s, n, 10)
        assert err is None and sent == n, (sent, err)
        out, closed = read_until_close(s, 10)
    assert out.startswith(b"HTTP/1.1 403"), out[:200]
    assert b"<Code>AccessDenied</Code>" in out
    assert b"Connection: close" in out or b"connection: close" in out.lower()
    assert closed is not None and closed < 2, closed
    assert objd.request(lsrv, "HEAD", objd.opath(lsrv.bucket, "k")).status == 404  # nothing stored


def test_a_body_beyond_the_bound_is_cut(lsrv):
    n = 1 << 30  # declared 1 GiB; the server reads at most DRAIN_MAX of it
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", lsrv.port), timeout=10) as s:
        s.sendall(header(lsrv, n))
        sent, err = send_all_counting(s, n, 10)
    took = time.monotonic() - t0
    assert err is not None, f"the server read all {sent} bytes"
    # What the server read (DRAIN_MAX) plus what the two sockets' buffers hold.
    assert DRAIN_MAX <= sent < DRAIN_MAX + (48 << 20), sent
    assert took < DRAIN_TIME_MAX_S, took
    print(f"cut after {sent / (1 << 20):.1f} MiB sent, {took:.2f} s")


def test_a_client_that_stops_sending_is_closed_on_at_the_time_bound(lsrv):
    with socket.create_connection(("127.0.0.1", lsrv.port), timeout=10) as s:
        s.sendall(header(lsrv, 12 << 20) + b"\0" * (1 << 20))
        out, closed = read_until_close(s, DRAIN_TIME_MAX_S + 5)
    assert out.startswith(b"HTTP/1.1 403"), out[:200]
    assert closed is not None and DRAIN_TIME_MAX_S - 1 < closed < DRAIN_TIME_MAX_S + 3, closed
    print(f"closed {closed:.2f} s after the answer began")


def test_a_client_waiting_for_100_continue_is_not_waited_for(lsrv):
    with socket.create_connection(("127.0.0.1", lsrv.port), timeout=10) as s:
        s.sendall(header(lsrv, 12 << 20, "Expect: 100-continue\r\n"))
        out, closed = read_until_close(s, 5)
    assert out.startswith(b"HTTP/1.1 403"), out[:200]  # the final answer, no 100 Continue
    assert closed is not None and closed < 1, closed


def test_an_oversized_header_is_answered_and_the_rest_drained(lsrv):
    # A 12 MiB header line: refused (431) after --header-bytes-max, before its end arrives. The
    # server answers, sends its FIN, and reads on until the client closes, so the client's
    # whole send completes and the answer is read (a close at once reset the sender).
    with socket.create_connection(("127.0.0.1", lsrv.port), timeout=10) as s:
        s.sendall(f"GET /{lsrv.bucket}/k HTTP/1.1\r\nHost: 127.0.0.1:{lsrv.port}\r\n"
                  "x-amz-meta-big: ".encode())
        sent, err = send_all_counting(s, 12 << 20, 10, fill=b"v")
        assert err is None and sent == 12 << 20, (sent, err)
        out, closed = read_until_close(s, 10)
    assert out.startswith(b"HTTP/1.1 431"), out[:200]
    assert closed is not None and closed < 2, closed
    objd.health(lsrv)
