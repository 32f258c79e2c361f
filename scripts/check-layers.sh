#!/usr/bin/env bash
# The floors of crates/drover (issue 24): every `crate::<module>` path a file
# names (a `use`, a grouped `use crate::{..}`, a path in an expression, a
# crate-root re-export such as `crate::Queue`; comments and strings ignored)
# must name a module on the file's own floor or one below it. Prints each
# upward path and exits 1 if there is any, else prints nothing and exits 0.
#
# The store is a crate of its own (crates/drover-store, on drover-core
# alone), so the compiler keeps that floor; scripts/check-circles.py keeps
# modules on one floor from importing each other in a circle.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
exec python3 - "$root/crates/drover/src" "$root/scripts" <<'PY'
import os, re, sys
sys.path.insert(0, sys.argv[2])
from rustsrc import code_only
FLOORS = [
    # 0: the storage floor and drover-core's re-exports
    {"store", "error", "item", "rules", "trace", "jsonl", "otel"},
    # 1: the API
    {"queue"},
    # 2: the runner (knows no role by name)
    {"worker"},
    # 3: the sweep the roles add steps to
    {"maintenance"},
    # 4: the roles
    {"events", "outbox", "orchestration", "periodic", "projector", "reconcile",
     "vacuum", "lane", "access", "builtin"},
    # 5: the assembly of the default roles, and the test kit
    {"defaults", "testing"},
]
floor_of = {m: i for i, ms in enumerate(FLOORS) for m in ms}
base = sys.argv[1]
lib = open(os.path.join(base, "lib.rs"), encoding="utf-8").read()
# crate-root names re-exported from a module: `pub use queue::{Queue, ..};`
root_names = {}
for m in re.finditer(r"pub use (\w+)::\{([^}]*)\}|pub use (\w+)::(\w+)\s*;", lib):
    mod = m.group(1) or m.group(3)
    names = m.group(2).split(",") if m.group(2) else [m.group(4)]
    mod = {"drover_core": "error", "drover_store": "store"}.get(mod, mod)
    for n in names:
        n = re.split(r"\s+as\s+", n.strip())[-1].strip()
        if n and n not in ("self",):
            root_names[n] = mod
for m in re.finditer(r"macro_rules!\s*(\w+)", "".join(
        open(os.path.join(d, f), encoding="utf-8").read()
        for d, _, fs in os.walk(base) for f in fs if f.endswith(".rs"))):
    root_names.setdefault(m.group(1), None)  # `#[macro_export]` macros: anywhere
def top_modules(tree):
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
        return [re.split(r"::|\s", p.strip())[0] for p in parts if p.strip()]
    return [re.split(r"::|\s|;|,|\)|>|<|\(|!|\.|\]", tree)[0]]
found, unknown = [], set()
for dirpath, _, files in os.walk(base):
    for f in sorted(files):
        if not f.endswith(".rs"): continue
        path = os.path.join(dirpath, f)
        rel = os.path.relpath(path, base)
        top = rel.split(os.sep)[0].removesuffix(".rs")
        if top == "lib": continue
        if top not in floor_of:
            unknown.add(top); continue
        mine = floor_of[top]
        src = code_only(open(path, encoding="utf-8").read())
        for m in re.finditer(r"(?<![\w$])crate::", src):
            line = src.count("\n", 0, m.start()) + 1
            for name in top_modules(src[m.end():m.end() + 2000]):
                target = name if name in floor_of else root_names.get(name, "?")
                if target is None: continue
                if target == "?":
                    unknown.add(f"crate::{name} ({rel}:{line})"); continue
                if floor_of[target] > mine:
                    found.append(f"crates/drover/src/{rel}:{line}: {top} (floor {mine}) names crate::{name} (floor {floor_of[target]})")
for u in sorted(unknown):
    print(f"not on any floor (add it to scripts/check-layers.sh): {u}")
for x in sorted(set(found)):
    print(x)
sys.exit(1 if found or unknown else 0)
PY
