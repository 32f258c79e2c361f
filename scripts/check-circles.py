#!/usr/bin/env python3
"""Import circles in every crate of the workspace (issue 24).

A crate's modules form a tree. At every node of that tree, the node's child
modules must import one another in one direction only: an edge A -> B is drawn
when any file in A's subtree names a path into B's subtree (`crate::..`,
`super::..`, `self::..`, or a sibling named from the parent). A parent using
its own children, or a child naming an item its ancestor defines in its own
file, is not an edge between siblings and is allowed. Every strongly connected
set of two or more siblings is a circle; the script prints each one with an
example reference per edge and exits 1 if there is any.

Usage: scripts/check-circles.py [crate_dir ...]   (default: every crates/*)
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rustsrc import code_only  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def modules(src_dir):
    """file path -> module path (tuple), for every .rs file under src_dir."""
    out = {}
    for dirpath, _, files in os.walk(src_dir):
        for f in files:
            if not f.endswith(".rs"):
                continue
            full = os.path.join(dirpath, f)
            rel = os.path.relpath(full, src_dir)[:-3].split(os.sep)
            if rel in (["lib"], ["main"]):
                mod = ()
            elif rel[-1] == "mod":
                mod = tuple(rel[:-1])
            elif rel[0] == "bin":
                continue
            else:
                mod = tuple(rel)
            out[full] = mod
    return out


def paths_in(src):
    """Every path a file names: (`crate`|`super`|`self`|ident, [segments])."""
    found = []
    # grouped uses: expand `a::{b::C, d}` into `a::b::C`, `a::d`
    def expand(prefix, tree):
        tree = tree.strip()
        if not tree.startswith("{"):
            return [prefix + tree]
        depth, part, parts = 0, "", []
        for ch in tree[1:]:
            if ch == "{":
                depth += 1
            if ch == "}":
                if depth == 0:
                    break
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(part)
                part = ""
            else:
                part += ch
        parts.append(part)
        out = []
        for p in parts:
            p = p.strip()
            if not p:
                continue
            m = re.match(r"([\w:]*?)(\{.*)$", p, re.S)
            if m:
                out += expand(prefix + m.group(1), m.group(2))
            else:
                out.append(prefix + p)
        return out

    for m in re.finditer(r"\buse\s+([\w:]*?)(\{)", src):
        start = m.start(2)
        depth, i = 0, start
        while i < len(src):
            if src[i] == "{":
                depth += 1
            elif src[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        for p in expand(m.group(1), src[start:i + 1]):
            found.append(p)
    for m in re.finditer(r"\b((?:crate|super|self)(?:::\w+)+)", src):
        found.append(m.group(1))
    for m in re.finditer(r"\buse\s+(\w+(?:::\w+)+)", src):
        found.append(m.group(1))
    return [re.split(r"\s+as\s+", p)[0].strip() for p in found]


def resolve(cur, path, known):
    """The module (tuple) a path from module `cur` lands in, or None."""
    segs = [s for s in path.split("::") if s]
    if not segs:
        return None
    if segs[0] == "crate":
        base, segs = (), segs[1:]
    elif segs[0] in ("super", "self"):
        base = cur
        while segs and segs[0] in ("super", "self"):
            if segs[0] == "super":
                base = base[:-1]
            segs = segs[1:]
    elif cur + (segs[0],) in known:
        base = cur
    elif (segs[0],) in known and segs[0] not in ("std", "core", "alloc"):
        # a 2018-style path from the crate root only resolves at the root
        base = () if cur == () else None
        if base is None:
            return None
    else:
        return None
    mod = base
    for s in segs:
        if mod + (s,) in known:
            mod = mod + (s,)
        else:
            break
    return mod


def circles(crate_dir):
    src_dir = os.path.join(crate_dir, "src")
    files = modules(src_dir)
    known = set(files.values())
    edges = {}  # (parent, a, b) -> example
    for path, cur in files.items():
        src = code_only(open(path, encoding="utf-8").read())
        for p in paths_in(src):
            target = resolve(cur, p, known)
            if target is None:
                continue
            # the deepest common ancestor, and the two children of it
            n = 0
            while n < len(cur) and n < len(target) and cur[n] == target[n]:
                n += 1
            if n == len(cur) or n == len(target):
                continue  # ancestor/descendant: not a sibling edge
            parent, a, b = cur[:n], cur[n], target[n]
            edges.setdefault((parent, a, b), f"{os.path.relpath(path, ROOT)} names {p}")
    by_parent = {}
    for (parent, a, b), ex in edges.items():
        by_parent.setdefault(parent, {}).setdefault(a, {})[b] = ex
    found = []
    for parent, graph in sorted(by_parent.items()):
        for comp in scc(graph):
            if len(comp) > 1:
                found.append((parent, sorted(comp), graph))
    return found


def scc(graph):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    nodes = set(graph) | {b for bs in graph.values() for b in bs}
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(comp)

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    dirs = sys.argv[1:] or sorted(
        os.path.join(ROOT, "crates", d) for d in os.listdir(os.path.join(ROOT, "crates"))
        if os.path.isdir(os.path.join(ROOT, "crates", d, "src")))
    total = 0
    for d in dirs:
        for parent, comp, graph in circles(d):
            total += 1
            where = "::".join(parent) or "(crate root)"
            print(f"circle in {os.path.basename(d)} under {where}: {' <-> '.join(comp)}")
            for a in comp:
                for b, ex in sorted(graph.get(a, {}).items()):
                    if b in comp:
                        print(f"    {a} -> {b}: {ex}")
    print(f"{total} circle(s)", file=sys.stderr)
    sys.exit(1 if total else 0)


if __name__ == "__main__":
    main()
