"""objdirect.ranges: coalescing and fetching of byte ranges (plain functions, no server)."""

import concurrent.futures
import random

import pytest

from objdirect.ranges import Group, Span, coalesce, fetch_ranges


def test_coalesce_sorts_merges_within_the_gap_and_caps_group_size():
    spans = [Span(100, 10, "c"), Span(0, 10, "a"), Span(15, 5, "b"), Span(1000, 1, "d")]
    assert coalesce(spans, gap_bytes=5) == [
        Group(0, 20, (Span(0, 10, "a"), Span(15, 5, "b"))),
        Group(100, 10, (Span(100, 10, "c"),)), Group(1000, 1, (Span(1000, 1, "d"),))]
    assert [g.offset for g in coalesce(spans, gap_bytes=4)] == [0, 15, 100, 1000]
    assert len(coalesce(spans, gap_bytes=1000)) == 1
    assert [(g.offset, g.length) for g in coalesce(spans, gap_bytes=1000,
                                                   group_bytes_max=110)] == [(0, 110), (1000, 1)]
    # Overlaps and duplicates are one group; a span longer than the cap is alone.
    assert coalesce([Span(0, 10, 1), Span(5, 10, 2), Span(5, 10, 3)], 0) == [
        Group(0, 15, (Span(0, 10, 1), Span(5, 10, 2), Span(5, 10, 3)))]
    assert [(g.offset, g.length) for g in coalesce([Span(0, 500, 1), Span(500, 5, 2)], 0, 100)
            ] == [(0, 500), (500, 5)]
    assert coalesce([], 10) == []
    with pytest.raises(ValueError):
        coalesce([Span(-1, 3)])
    with pytest.raises(ValueError):
        coalesce([Span(0, 3)], gap_bytes=-1)


def test_fetch_ranges_returns_every_span_exactly_with_random_plans():
    data = bytes(random.Random(1).randrange(256) for _ in range(50000))
    calls = []

    def get(offset, length):
        calls.append((offset, length))
        return data[offset:offset + length]

    rng = random.Random(2)
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        for trial in range(200):
            spans = []
            for i in range(rng.randint(1, 30)):
                off = rng.randrange(0, 52000)
                spans.append(Span(off, rng.randrange(0, 3000), i))
            calls.clear()
            gap = rng.choice([0, 16, 4096, 1 << 20])
            got = fetch_ranges(get, spans, ex if trial % 2 else None, gap_bytes=gap,
                               size=len(data))
            assert got == {s.tag: data[s.offset:s.offset + s.length] for s in spans}
            # One GET per group that holds bytes of the object, no more.
            assert len(calls) == sum(1 for g in coalesce(spans, gap) if g.offset < len(data))
            assert all(o + n <= len(data) for o, n in calls)


def test_fetch_ranges_raises_the_first_failure():
    def get(offset, length):
        if offset >= 100:
            raise OSError("boom")
        return bytes(length)
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        with pytest.raises(OSError, match="boom"):
            fetch_ranges(get, [Span(0, 5, 1), Span(200, 5, 2)], ex, gap_bytes=0)
