#!/usr/bin/env python3
"""Checks that every limit in the source is spelled one way and indexed in docs/limits.md.

A limit is a `constexpr` (or `static constexpr` / `inline constexpr`) named like `*_max` /
`*_min`, optionally followed by a unit (`_s`, `_ms`, `_us`, `_bytes`), declared in src/ or
include/ outside tests. Each must appear in docs/limits.md as `name` (in backticks). A constexpr
whose name says max/min any other way (`kMaxFoo`, `max_foo`, `foo_limit`, `kFooMax`) is refused:
one spelling, docs/limits.md's first paragraph.

    check-limits.py ROOT          exit 0 when clean, 1 with one line per problem
"""
import pathlib
import re
import sys

DECL = re.compile(r"\bconstexpr\b[^=;(){}]*?\b([A-Za-z_][A-Za-z0-9_]*)\s*(?:=|\{)")
LIMIT = re.compile(r"^[a-z][a-z0-9_]*_(max|min)(_s|_ms|_us|_bytes)?$")
SAYS_LIMIT = re.compile(r"(^|_)(max|min|limit)(_|$)|^k(Max|Min)|(Max|Min|Limit)$", re.I)
WORD = re.compile(r"[A-Za-z0-9]+")


def sources(root):
    for top in ("src", "include"):
        for p in sorted((root / top).rglob("*")):
            if p.suffix in (".hpp", ".cc", ".h") and not p.stem.endswith(("_test", "_fuzz")):
                if "fuzz" in p.stem or "testing" in p.parts:
                    continue
                yield p


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    index = (root / "docs/limits.md").read_text()
    indexed = set(re.findall(r"`(?:[A-Za-z_:]+::)?([a-z][a-z0-9_]*)`", index))
    # "`bucket_name_min` / `_max`" indexes bucket_name_max too.
    for stem, _, other in re.findall(r"`(?:[A-Za-z_:]+::)?([a-z][a-z0-9_]*)_(max|min)` / `_(max|min)`", index):
        indexed.add(f"{stem}_{other}")
    problems, seen = [], 0
    for path in sources(root):
        text = path.read_text()
        for m in DECL.finditer(text):
            name = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            where = f"{path.relative_to(root)}:{line}"
            if LIMIT.match(name):
                seen += 1
                if name not in indexed:
                    problems.append(f"{where}: limit `{name}` is not indexed in docs/limits.md")
            elif SAYS_LIMIT.search(name):
                problems.append(f"{where}: `{name}` names a limit; spell it `*_max` / `*_min`")
    for p in problems:
        print(p)
    print(f"check-limits: {seen} limits, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
