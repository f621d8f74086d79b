"""Byte-range planning shared by objdirect.fs (cat_ranges), objdirect.dcp (checkpoint loads) and
objdirect.torch: sort the wanted ranges of one object, merge neighbours into fewer GETs, issue
the GETs concurrently and hand every caller its bytes.

Plain functions on plain tuples, unit-tested without a server (python/tests/test_ranges.py) and
with one (the fsspec and DCP tests).

Thread safety: the functions keep no state; fetch_ranges runs its GETs on the given executor.
"""

from __future__ import annotations

from typing import Callable, List, NamedTuple, Optional, Sequence

__all__ = ["Span", "Group", "coalesce", "fetch_ranges", "gap_bytes_default",
           "group_bytes_max_default"]

gap_bytes_default = 1 << 20        # merge two ranges when at most this many bytes lie between
group_bytes_max_default = 64 << 20  # but never into one GET longer than this


class Span(NamedTuple):
    """One wanted range: [offset, offset + length) of an object, with the caller's tag."""

    offset: int
    length: int
    tag: object = None


class Group(NamedTuple):
    """One GET: [offset, offset + length) covering the spans in ``members`` (sorted by offset)."""

    offset: int
    length: int
    members: tuple


def coalesce(spans: Sequence[Span], gap_bytes: int = gap_bytes_default,
             group_bytes_max: int = group_bytes_max_default) -> List[Group]:
    """The fewest GETs that cover every span: spans sorted by offset, a span joins the current
    group when it starts at most gap_bytes after the group's end and the group stays within
    group_bytes_max (a single span longer than that is a group of its own). Overlapping and
    duplicate spans are allowed. Raises ValueError for a negative offset, length or limit."""
    if gap_bytes < 0 or group_bytes_max < 1:
        raise ValueError("gap_bytes must be >= 0 and group_bytes_max positive")
    out: List[Group] = []
    start = end = 0
    members: list = []
    for s in sorted(spans, key=lambda s: (s.offset, s.length)):
        if s.offset < 0 or s.length < 0:
            raise ValueError(f"bad range {s.offset}+{s.length}")
        s_end = s.offset + s.length
        if members and s.offset <= end + gap_bytes and max(end, s_end) - start <= group_bytes_max:
            end = max(end, s_end)
            members.append(s)
            continue
        if members:
            out.append(Group(start, end - start, tuple(members)))
        start, end, members = s.offset, s_end, [s]
    if members:
        out.append(Group(start, end - start, tuple(members)))
    return out


def fetch_ranges(get: Callable[[int, int], bytes], spans: Sequence[Span], executor=None, *,
                 gap_bytes: int = gap_bytes_default,
                 group_bytes_max: int = group_bytes_max_default,
                 size: Optional[int] = None) -> dict:
    """{tag: bytes} for every span, fetched as coalesce()'s groups, concurrently on executor
    (sequentially without one). get(offset, length) returns up to length bytes (fewer at the end
    of the object); a span past the end gets the bytes that exist. size, when known, cuts the
    groups at the end of the object first. Tags must be unique. Raises what get raises (the
    first failure; the other GETs still finish)."""
    groups = coalesce(spans, gap_bytes, group_bytes_max)
    if size is not None:
        groups = [Group(g.offset, max(0, min(g.length, size - g.offset)), g.members)
                  for g in groups]

    def one(g: Group):
        return g, (get(g.offset, g.length) if g.length else b"")

    if executor is None:
        results = [one(g) for g in groups]
    else:
        futures = [executor.submit(one, g) for g in groups]
        for f in futures:
            f.exception()
        results = [f.result() for f in futures]
    out = {}
    for g, data in results:
        view = memoryview(data)
        for s in g.members:
            lo = s.offset - g.offset
            out[s.tag] = bytes(view[lo:lo + s.length])
    return out
