#!/usr/bin/env python3
"""Checks that every limit in the source is spelled one way and indexed in docs/limits.md.

A limit is a `constexpr` (or `static constexpr` / `inline constexpr`) named like `*_max` /
`*_min`, optionally followed by a unit (`_s`, `_ms`, `_us`, `_bytes`), declared in src/,
include/ or python/src/ outside tests, or a constant so named in the Python package
(python/objdirect/: a module attribute, or an unannotated class attribute, set to a number; an
annotated class attribute is a dataclass or NamedTuple field, an option). Each must appear in
docs/limits.md as `name` (in backticks). A Python `*_max_default` / `*_min_default` is the
default of the option (a keyword argument) named by its stem, which is then the limit indexed.
A name that says max/min any other way (`kMaxFoo`, `max_foo`, `foo_limit`, `kFooMax`,
`MAX_FOO`) is refused: one spelling, docs/limits.md's first paragraph. Every limit of the
Python package (python/src/ and python/objdirect/) must also be named by a test: a word of a
.py file under python/tests/ or tests/.

    check-limits.py ROOT          exit 0 when clean, 1 with one line per problem
"""
import ast
import pathlib
import re
import sys

DECL = re.compile(r"\bconstexpr\b[^=;(){}]*?\b([A-Za-z_][A-Za-z0-9_]*)\s*(?:=|\{)")
LIMIT = re.compile(r"^[a-z][a-z0-9_]*_(max|min)(_s|_ms|_us|_bytes)?$")
SAYS_LIMIT = re.compile(r"(^|_)(max|min|limit)(_|$)|^k(Max|Min)|(Max|Min|Limit)$", re.I)
WORD = re.compile(r"[A-Za-z0-9]+")
PY_DEFAULT = re.compile(r"^([a-z][a-z0-9_]*_(?:max|min)(?:_s|_ms|_us|_bytes)?)_default$")


def sources(root):
    for top in ("src", "include"):
        for p in sorted((root / top).rglob("*")):
            if p.suffix in (".hpp", ".cc", ".h") and not p.stem.endswith(("_test", "_fuzz")):
                if "fuzz" in p.stem or "testing" in p.parts:
                    continue
                yield p


def python_sources(root):
    """The Python package's own files: the extension's C++ (python/src/) and the modules."""
    for p in sorted((root / "python/src").rglob("*")):
        if p.suffix in (".hpp", ".cc", ".h"):
            yield p
    for p in sorted((root / "python/objdirect").rglob("*.py")):
        yield p


def test_words(root):
    words = set()
    for top in ("python/tests", "tests"):
        for p in sorted((root / top).rglob("*.py")):
            words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", p.read_text()))
    return words


def number(node) -> bool:
    """Whether an expression is arithmetic on number literals alone."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.BinOp):
        return number(node.left) and number(node.right)
    if isinstance(node, ast.UnaryOp):
        return number(node.operand)
    return False


def declarations(path, text):
    """(name as declared, limit name or None, line) of each constant declared in the file."""
    if path.suffix == ".py":
        # Assignments of a number (`name = 5 << 20`, `name: int = 30 + 0xFFFF`) at module
        # level, and unannotated ones in a class body: the constants. An annotated class
        # attribute is a field of its instances (dataclass, NamedTuple): an option, not a limit.
        tree = ast.parse(text, str(path))
        bodies = [(tree.body, (ast.Assign, ast.AnnAssign))] + [
            (n.body, (ast.Assign,)) for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
        for body, kinds in bodies:
            for node in body:
                if not isinstance(node, kinds) or not number(node.value):
                    continue
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            d = PY_DEFAULT.match(n.id)
                            yield n.id, d.group(1) if d else (
                                n.id if LIMIT.match(n.id) else None), node.lineno
        return
    for m in DECL.finditer(text):
        name = m.group(1)
        yield name, name if LIMIT.match(name) else None, text.count("\n", 0, m.start()) + 1


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    index = (root / "docs/limits.md").read_text()
    indexed = set(re.findall(r"`(?:[A-Za-z_:]+::)?([a-z][a-z0-9_]*)`", index))
    # "`bucket_name_min` / `_max`" indexes bucket_name_max too.
    for stem, _, other in re.findall(r"`(?:[A-Za-z_:]+::)?([a-z][a-z0-9_]*)_(max|min)` / `_(max|min)`", index):
        indexed.add(f"{stem}_{other}")
    problems, seen, seen_py = [], 0, 0
    python = set(python_sources(root)) if (root / "python").is_dir() else set()
    tested = test_words(root) if python else set()
    for path in list(sources(root)) + sorted(python):
        text = path.read_text()
        for name, limit, line in declarations(path, text):
            where = f"{path.relative_to(root)}:{line}"
            if limit:
                seen += 1
                if limit not in indexed:
                    problems.append(f"{where}: limit `{limit}` is not indexed in docs/limits.md")
                if path in python:
                    seen_py += 1
                    if limit not in tested:
                        problems.append(f"{where}: limit `{limit}` is named by no test "
                                        f"(python/tests/, tests/)")
            elif SAYS_LIMIT.search(name):
                problems.append(f"{where}: `{name}` names a limit; spell it `*_max` / `*_min`")
    for p in problems:
        print(p)
    print(f"check-limits: {seen} limits ({seen_py} in the Python package), "
          f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
