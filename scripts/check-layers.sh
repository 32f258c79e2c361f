#!/usr/bin/env bash
# Layer check for the store (issue 24): files under crates/drover/src/store/
# may import only the store itself and drover-core's re-exports (error, item,
# rules, trace, jsonl). Prints every other `crate::<module>` path a store file
# names in code (a `use` line, a grouped `use crate::{..}` or a path in an
# expression; comments are ignored) and exits 1 if there is any, else prints
# nothing and exits 0.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
exec python3 - "$root/crates/drover/src/store" <<'PY'
import os, re, sys
allowed = {"store", "error", "item", "rules", "trace", "jsonl"}
# the crate root's re-exports of drover-core names (lib.rs: `pub use error::..`, `item::..`)
allowed |= {"Error", "ErrorKind", "Result", "InsertResult", "Inserted", "Item", "NewItem", "Status"}
base = sys.argv[1]
# `#[macro_export]` macros land at the crate root: allowed when the store defines them
for dirpath, _, files in os.walk(base):
    for f in files:
        if f.endswith(".rs"):
            for m in re.finditer(r"macro_rules!\s*(\w+)", open(os.path.join(dirpath, f), encoding="utf-8").read()):
                allowed.add(m.group(1))
found = []
def top_modules(tree):
    # `tree` is what follows `crate::`: `a::b::C`, `{a::X, b}`, `a::{..}`
    tree = tree.strip()
    if tree.startswith("{"):
        depth, part, parts = 0, "", []
        for ch in tree[1:]:
            if ch == "{": depth += 1
            if ch == "}":
                if depth == 0: break
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(part); part = ""
            else:
                part += ch
        parts.append(part)
        out = []
        for p in parts:
            p = p.strip()
            if p: out.append(re.split(r"::|\s", p)[0])
        return out
    return [re.split(r"::|\s|;|,|\)|>|<|\(|!", tree)[0]]
for dirpath, _, files in os.walk(base):
    for f in sorted(files):
        if not f.endswith(".rs"): continue
        path = os.path.join(dirpath, f)
        src = open(path, encoding="utf-8").read()
        # drop comments (line and block) but keep line numbers
        src = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), src, flags=re.S)
        src = re.sub(r"//[^\n]*", "", src)
        src = re.sub(r'"(?:\\.|[^"\\])*"', '""', src)
        for m in re.finditer(r"\bcrate::", src):
            rest = src[m.end():m.end() + 2000]
            line = src.count("\n", 0, m.start()) + 1
            for mod in top_modules(rest):
                if mod and mod not in allowed:
                    found.append(f"{os.path.relpath(path, os.path.dirname(os.path.dirname(os.path.dirname(base))))}:{line}: crate::{mod}")
for x in sorted(set(found)):
    print(x)
sys.exit(1 if found else 0)
PY
