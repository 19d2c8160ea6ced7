#!/usr/bin/env python3
"""Keeps the rate limit engine and servers easy to hold in one's head (CI runs this):

- no import cycle between the top-level modules of a crate (the crate root counts as a
  module when it defines items of its own, such as a struct other modules use);
- for the crates in FILE_LEVEL, no import cycle between any two source files either (a
  `mod.rs` that declares a child and the child that uses the `mod.rs`'s items count);
- for the crates in DATA_LAYER, no file outside the data layer uses the database crate;
- no source file over MAX_LINES lines (or the crate's own limit in LIMITS; generated
  protobuf code excepted).

    scripts/check-shape.py [CRATE_DIR...]   (default: DEFAULT_CRATES)

Module edges are read from `crate::NAME` and `super::` paths and `use crate::{...}` lists;
a `#[cfg(test)]` block at the end of a file is not counted.
"""
import re
import sys
from pathlib import Path

MAX_LINES = 500
DEFAULT_CRATES = [
    "ratelimit-core",
    "ratelimit-backends",
    "servers/ratelimit",
    "ratelimit-tower",
    "servers/trading",
]
# Crates held to another file length.
LIMITS = {"servers/trading": 600}
# Crates checked for cycles between files, not only between top-level modules.
FILE_LEVEL = {"servers/trading"}
# Crates whose SQL belongs to one data layer: no file outside that folder may use the
# database crate.
DATA_LAYER = {"servers/trading": ("src/store/", "rusqlite")}
GENERATED = ("src/pb/",)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def strip_tests(text):
    m = re.search(r"^#\[cfg\(test\)\]\s*\n\s*(pub\s+)?mod \w+\s*\{", text, flags=re.M)
    return text[: m.start()] if m else text


def top_names_in_braces(body):
    """`a::b, c, d::{e, f}` -> [a, c, d]: the first segment of each item at depth 0."""
    names, depth, item = [], 0, ""
    for ch in body + ",":
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            first = re.match(r"\s*(\w+)", item)
            if first:
                names.append(first.group(1))
            item = ""
        else:
            item += ch
    return names


def crate_refs(text):
    """Names reached through `crate::` in `text`."""
    names = re.findall(r"\bcrate::(\w+)", text)
    for m in re.finditer(r"\bcrate::\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        names += top_names_in_braces(text[m.end() : i - 1])
    return names


def super_refs(text, depth):
    """Names reached through `super::` chains that climb to the crate root from a file
    `depth` modules below it."""
    names = []
    for m in re.finditer(r"\b((?:super::)+)(\{|\w+)", text):
        if m.group(1).count("super::") != depth:
            continue
        if m.group(2) == "{":
            depth_b, i = 1, m.end()
            while i < len(text) and depth_b:
                depth_b += {"{": 1, "}": -1}.get(text[i], 0)
                i += 1
            names += top_names_in_braces(text[m.end() : i - 1])
        else:
            names.append(m.group(2))
    return names


def check_crate(crate):
    src = Path(crate) / "src"
    root = src / "lib.rs"
    if not root.exists():
        return [f"{crate}: no src/lib.rs"]
    root_text = strip_tests(strip_comments(root.read_text()))
    modules = set(re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod (\w+)\s*;", root_text, re.M))
    own_lines = [
        l for l in root_text.splitlines()
        if not re.match(r"\s*(pub(\([^)]*\))?\s+)?(mod|use|extern crate)\b", l)
        and not l.strip().startswith("#")
    ]
    root_defs = set(
        re.findall(r"\b(?:struct|enum|fn|trait|type|const|static)\s+(\w+)", "\n".join(own_lines))
    )
    edges = {m: set() for m in modules}
    edges["(crate root)"] = {
        m for m in modules if re.search(rf"\b{m}::", "\n".join(own_lines))
    } | {m for m in modules if m in crate_refs("\n".join(own_lines))}

    def target(name):
        if name in modules:
            return name
        if name in root_defs:
            return "(crate root)"
        return None

    problems = []
    for path in sorted(src.rglob("*.rs")):
        rel = path.relative_to(src)
        if str(path.relative_to(crate)).startswith(GENERATED):
            continue
        lines = path.read_text().count("\n")
        limit = LIMITS.get(crate, MAX_LINES)
        if lines > limit:
            problems.append(f"{path}: {lines} lines (at most {limit})")
        if rel.parts[0] in ("lib.rs", "main.rs", "bin"):
            continue
        top = rel.parts[0].removesuffix(".rs")
        if top not in modules:
            continue
        # src/x.rs is one module below the root; src/x/y.rs two (mod.rs files one less).
        depth = len(rel.parts) - (1 if rel.name == "mod.rs" else 0)
        text = strip_tests(strip_comments(path.read_text()))
        for name in crate_refs(text) + super_refs(text, depth):
            t = target(name)
            if t and t != top:
                edges[top].add(t)

    sccs = cycles(edges)
    for scc in sccs:
        inner = "; ".join(
            f"{a} -> {', '.join(sorted(edges[a] & set(scc)))}" for a in scc
        )
        problems.append(f"{crate}: import cycle among {', '.join(scc)} ({inner})")
    return problems


def cycles(edges):
    """The import cycles of a graph (node -> set of nodes): Tarjan's strongly connected
    components of more than one node, each sorted."""
    index, low, stack, on_stack, sccs = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                sccs.append(sorted(scc))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sccs


def module_files(src):
    """Module path (tuple of names; () for the root) -> file, for every file of `src`."""
    files = {}
    for path in sorted(src.rglob("*.rs")):
        rel = path.relative_to(src)
        if rel.parts[0] in ("main.rs", "bin"):
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] in ("mod", "lib"):
            parts = parts[:-1]
        files[tuple(parts)] = path
    return files


def paths_in(text):
    """Every path written in `text` (`a::b::{c, d::e}` gives a::b::c and a::b::d::e)."""
    out = []
    for m in re.finditer(r"\b((?:\w+::)+)(\{|\w+)", text):
        prefix = m.group(1).split("::")[:-1]
        if m.group(2) != "{":
            out.append(prefix + [m.group(2)])
            continue
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        for item in top_names_in_braces(text[m.end() : i - 1]):
            out.append(prefix + [item])
    return out


def file_cycles(crate):
    """Import cycles between the files of `crate`: a file depends on the deepest module
    file each path it writes reaches (`crate::`, `super::`, `self::` or a child module)."""
    src = Path(crate) / "src"
    files = module_files(src)
    edges = {f: set() for f in files.values()}
    for module, path in files.items():
        text = strip_tests(strip_comments(path.read_text()))
        children = set(re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod (\w+)\s*;", text, re.M))
        for segs in paths_in(text):
            if segs[0] == "crate":
                target, rest = [], segs[1:]
            elif segs[0] in ("super", "self"):
                target, rest = list(module), segs
                while rest and rest[0] in ("super", "self"):
                    if rest[0] == "super":
                        target = target[:-1]
                    rest = rest[1:]
            elif segs[0] in children:
                target, rest = list(module), segs
            else:
                continue
            deepest = files.get(tuple(target))
            for name in rest:
                target = target + [name]
                if tuple(target) not in files:
                    break
                deepest = files[tuple(target)]
            if deepest is not None and deepest != path:
                edges[path].add(deepest)
    problems = []
    for scc in cycles(edges):
        names = sorted(str(f.relative_to(src)) for f in scc)
        inner = "; ".join(
            f"{f.relative_to(src)} -> "
            + ", ".join(sorted(str(t.relative_to(src)) for t in edges[f] if t in scc))
            for f in scc
        )
        problems.append(f"{crate}: import cycle among files {', '.join(names)} ({inner})")
    return problems


def outside_data_layer(crate):
    """Files of `crate` outside its data layer that use the database crate."""
    folder, marker = DATA_LAYER[crate]
    problems = []
    for path in sorted((Path(crate) / "src").rglob("*.rs")):
        rel = str(path.relative_to(crate))
        if rel.startswith(folder):
            continue
        if re.search(rf"\b{marker}\b", strip_comments(path.read_text())):
            problems.append(f"{path}: uses {marker} outside {crate}/{folder}")
    return problems


def main():
    crates = sys.argv[1:] or DEFAULT_CRATES
    problems = [p for c in crates for p in check_crate(c)]
    problems += [p for c in crates if c in FILE_LEVEL for p in file_cycles(c)]
    problems += [p for c in crates if c in DATA_LAYER for p in outside_data_layer(c)]
    for p in problems:
        print(p)
    if problems:
        print(f"check-shape: {len(problems)} problem(s)")
        return 1
    limits = ", ".join(f"{c} {LIMITS.get(c, MAX_LINES)}" for c in crates)
    print(f"check-shape: no import cycles; no file over its crate's limit ({limits} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
