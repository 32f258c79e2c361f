#!/usr/bin/env python3
"""Sizes the code is held to (issue 24): every non-test source file of the
workspace at most 800 lines, every function at most 120 lines (from its `fn`
line to its closing brace; test modules, tests/ and benches excluded).
Prints each file or function over its limit and the largest of each, and
exits 1 if any is over.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rustsrc import code_only  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILE_MAX, FN_MAX = 800, 120


def test_spans(src):
    """Line ranges of `#[cfg(test)] mod x { .. }` blocks."""
    spans = []
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*mod\s+\w+\s*\{", src):
        end = match_brace(src, m.end() - 1)
        spans.append((src.count("\n", 0, m.start()) + 1, src.count("\n", 0, end) + 1))
    return spans


def match_brace(src, i):
    depth = 0
    while i < len(src):
        if src[i] == "{":
            depth += 1
        elif src[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(src) - 1


def functions(src):
    for m in re.finditer(r"\bfn\s+(\w+)[^;{]*\{", src):
        start = src.count("\n", 0, m.start()) + 1
        end = src.count("\n", 0, match_brace(src, m.end() - 1)) + 1
        yield m.group(1), start, end


def main():
    over, big_file, big_fn = [], (0, ""), (0, "")
    for dirpath, dirs, files in os.walk(os.path.join(ROOT, "crates")):
        dirs[:] = [d for d in dirs if d not in ("tests", "benches", "node_modules", "target")]
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, ROOT)
            raw = open(path, encoding="utf-8").read()
            src = code_only(raw)
            spans = test_spans(src)
            in_test = lambda line: any(a <= line <= b for a, b in spans)
            lines = raw.count("\n") + (0 if raw.endswith("\n") else 1)
            test_lines = sum(b - a + 1 for a, b in spans)
            n = lines - test_lines
            big_file = max(big_file, (n, rel))
            if n > FILE_MAX:
                over.append(f"{rel}: {n} lines outside its tests (max {FILE_MAX})")
            for name, a, b in functions(src):
                if in_test(a):
                    continue
                length = b - a + 1
                big_fn = max(big_fn, (length, f"{rel}:{a} fn {name}"))
                if length > FN_MAX:
                    over.append(f"{rel}:{a}: fn {name} is {length} lines (max {FN_MAX})")
    for o in over:
        print(o)
    print(f"largest file: {big_file[1]} ({big_file[0]} lines); "
          f"longest function: {big_fn[1]} ({big_fn[0]} lines)", file=sys.stderr)
    sys.exit(1 if over else 0)


if __name__ == "__main__":
    main()
