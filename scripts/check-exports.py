#!/usr/bin/env python3
"""The dynamic symbol table of libobjdirect.so holds the public API and nothing else
(docs/architecture.md, "The public API"): the C functions od_* of objdirect.h and the C++ names
that include/objdirect/ marks OBJDIRECT_API (hidden default visibility plus the version script
src/client/libobjdirect.map make it so; this checks the result independently of both). Any other symbol (objdirect::client::..., the
s3/transport/token/cuda layers, Client::Impl, Boost, std:: instantiations over internal types) is
an internal symbol that escaped the hidden default visibility, and is refused.

Usage: check-exports.py LIBRARY         (runs nm -D --defined-only --demangle on it)
       check-exports.py --stdin         (reads "ADDRESS TYPE NAME" lines, as nm prints them)
Exit 1 and one line per refused symbol when refused.
"""
import re
import subprocess
import sys

# The OBJDIRECT_API declarations of include/objdirect/ (namespace objdirect).
PUBLIC_CLASSES = ("Client", "ClientConfig", "ClientStats", "MemoryHandle", "SseCustomerKey",
                  "Status")
PUBLIC_FUNCTIONS = ("s3_code", "http_status", "errc_name", "from_s3_code", "from_http_status",
                    "path_name", "split_range", "plan_upload", "memory_kind_name", "memory_kind",
                    "cuda_memory_status")
# Members of public classes that are implementation details all the same.
PRIVATE_MEMBERS = ("Impl", "Pin")
# What the linker itself defines in every shared object.
LINKER = {"_init", "_fini", "__bss_start", "_edata", "_end"}
# What a sanitizer build (make test-asan, test-tsan) adds: ASan's ODR indicators and module
# bookkeeping, the instrumentation's own globals.
SANITIZER = re.compile(r"^_*(asan|odr_asan|tsan|ubsan|sancov|lsan)")

ABI_TAG = r"(?:\[abi:\w+\])*"
MEMBER = re.compile(r"^objdirect::(%s)::(~?\w+|operator\W.*)%s$" % ("|".join(PUBLIC_CLASSES), ABI_TAG))
FUNCTION = re.compile(r"^objdirect::(%s)%s$" % ("|".join(PUBLIC_FUNCTIONS), ABI_TAG))
C_FUNCTION = re.compile(r"^od_\w+$")
# A weak std:: function-template instance whose return type is a public type, e.g.
# "objdirect::Client::DeleteFailure* std::__relocate_a_1<...>(...)" (clang -O1 leaves this
# vector-growth helper out of line): ld matches the map's extern "C++" globs against the whole
# demangled name, return type first, so "objdirect::Client::*" takes it in. It is vague linkage,
# identical wherever it is instantiated, and no part of the API.
STD_INSTANCE = re.compile(r"^objdirect::[\w:]+[*&]* std::")


def qualified_name(symbol: str) -> str:
    """The demangled name up to its parameter list: "objdirect::Client::get" of
    "objdirect::Client::get(std::basic_string_view<char, ...>, ...)"."""
    depth = 0
    for i, c in enumerate(symbol):
        if c in "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0 and not symbol[:i].endswith("operator"):
            return symbol[:i]
    return symbol


def allowed(symbol: str, kind: str = "T") -> bool:
    if symbol in LINKER or SANITIZER.match(symbol) or C_FUNCTION.match(symbol):
        return True
    name = qualified_name(symbol)
    if kind in ("W", "V") and STD_INSTANCE.match(name):
        return True
    m = MEMBER.match(name)
    if m:
        return m.group(2) not in PRIVATE_MEMBERS
    return FUNCTION.match(name) is not None


def refused(lines):
    for line in lines:
        parts = line.rstrip("\n").split(None, 2)
        if len(parts) < 2:
            continue
        symbol = parts[-1]
        kind = parts[-2] if len(parts) == 3 else "T"
        if not allowed(symbol, kind):
            yield symbol


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    if sys.argv[1] == "--stdin":
        lines = sys.stdin.readlines()
    else:
        out = subprocess.run(["nm", "-D", "--defined-only", "--demangle", sys.argv[1]],
                             check=True, capture_output=True, text=True).stdout
        lines = out.splitlines()
    bad = list(refused(lines))
    for s in bad:
        print(f"exported but not public: {s}")
    if bad:
        print(f"exports: {len(bad)} internal symbol(s) in the dynamic symbol table")
        return 1
    print(f"exports: ok ({len(lines)} symbols, all public)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
