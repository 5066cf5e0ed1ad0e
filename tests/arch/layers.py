#!/usr/bin/env python3
"""tests/arch/layers.py - the router's floors and rooms, checked
(docs/architecture.md).

Two views of the same rule, each printed as TAP lines ("ok - ..." or
"not ok - ..."):
  1. includes: every #include "x.h" of a file under src/router/<floor>/
     names a header of src/core or of a floor that floor may use;
  2. objects: every undefined symbol of an eldrd object (nm) that another
     eldrd object defines is defined in a floor the first may use, and no
     object takes part in a link cycle (a strongly connected component of
     more than one object in the "uses a symbol of" graph).
Usage: layers.py ROOT BUILD   (BUILD: the object directory, build or
build-asan)."""
import os
import re
import subprocess
import sys

# Each floor and the floors (besides src/core and itself) it may use.
# The engine knows no transport: it may not use net. The front ends (api,
# pdproxy) use the floors below and never each other.
ALLOWED = {
    "base": set(),
    "net": {"base"},
    "engine": {"base"},
    "api": {"base", "net", "engine"},
    "pdproxy": {"base", "net", "engine"},
    "extproc": {"base", "net", "engine"},
    "main": {"base", "net", "engine", "api", "pdproxy", "extproc"},
}

results = []


def report(ok, name, detail=""):
    results.append(ok)
    print(("ok - " if ok else "not ok - ") + name)
    if detail:
        for line in detail.splitlines():
            print("    " + line)


def sources(root):
    """floor -> list of (path, text) of its .c and .h files."""
    out = {}
    for floor in ALLOWED:
        d = os.path.join(root, "src/router", floor)
        files = []
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if name.endswith((".c", ".h", ".proto")):
                p = os.path.join(d, name)
                with open(p, encoding="utf-8") as f:
                    files.append((p, f.read() if not name.endswith(".proto") else ""))
        out[floor] = files
    return out


def check_includes(root, srcs):
    owner = {}   # header name -> floor ("core" for src/core)
    for name in os.listdir(os.path.join(root, "src/core")):
        if name.endswith(".h"):
            owner[name] = "core"
    for floor, files in srcs.items():
        for p, _ in files:
            if p.endswith(".h"):
                name = os.path.basename(p)
                if name in owner:
                    report(False, f"header {name} is in two floors ({owner[name]}, {floor})")
                owner[name] = floor
            if p.endswith(".proto"):   # protoc-c's header, generated at build time
                owner[os.path.basename(p)[:-6] + ".pb-c.h"] = floor
    stray = [d for d in os.listdir(os.path.join(root, "src/router"))
             if d not in ALLOWED]
    report(not stray, "src/router holds the floors only",
           "not a floor: " + ", ".join(sorted(stray)) if stray else "")
    bad = []
    n = 0
    for floor, files in srcs.items():
        for p, text in files:
            for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
                n += 1
                name = os.path.basename(inc)
                f = owner.get(name)
                if inc != name:
                    bad.append(f"{p}: includes \"{inc}\" by a path (name the header alone)")
                elif f is None:
                    bad.append(f"{p}: includes \"{inc}\", which no floor holds")
                elif f != "core" and f != floor and f not in ALLOWED[floor]:
                    bad.append(f"{p}: {floor} includes {inc} of {f}")
    report(not bad, f"includes: {n} in src/router, each from an allowed floor",
           "\n".join(bad))
    # the workbench (eldr) and its client use the core only
    bad = []
    for sub in ("cli", "lua", "repl", "tui", "client"):
        d = os.path.join(root, "src", sub)
        for name in sorted(os.listdir(d)):
            if not name.endswith((".c", ".h")):
                continue
            with open(os.path.join(d, name), encoding="utf-8") as f:
                for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', f.read(), re.M):
                    if "router" in inc or owner.get(os.path.basename(inc)) in ALLOWED:
                        bad.append(f"src/{sub}/{name}: includes {inc}")
    report(not bad, "the workbench includes no router header", "\n".join(bad))


def nm(path):
    out = subprocess.run(["nm", "-P", path], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        sym, kind = parts[0], parts[1]
        if kind == "U":
            undefined.add(sym)
        elif kind in "TDBRVWGSC" or kind in "tdbr":
            if kind.isupper():
                defined.add(sym)
    return defined, undefined


def tarjan(nodes, edges):
    index, low, on, stack, comps = {}, {}, set(), [], []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
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
            comps.append(comp)

    for v in nodes:
        if v not in index:
            visit(v)
    return comps


def check_objects(root, build):
    objs = {}
    for floor in ALLOWED:
        d = os.path.join(root, build, "src/router", floor)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if name.endswith(".o"):
                objs[f"{floor}/{name}"] = (floor, os.path.join(d, name))
    if not objs:
        report(False, f"objects: none under {build}/src/router (build first)")
        return
    syms = {k: nm(p) for k, (_, p) in objs.items()}
    definer = {}
    for k, (defined, _) in syms.items():
        for s in defined:
            definer[s] = k
    edges, bad = {}, []
    for k, (_, undefined) in syms.items():
        floor = objs[k][0]
        for s in sorted(undefined):
            d = definer.get(s)
            if d is None or d == k:
                continue
            edges.setdefault(k, set()).add(d)
            f = objs[d][0]
            if f != floor and f not in ALLOWED[floor]:
                bad.append(f"{k} uses {s} of {d}")
    n_edges = sum(len(v) for v in edges.values())
    report(not bad, f"objects: {len(objs)} objects, {n_edges} uses, each of an allowed floor",
           "\n".join(bad))
    cycles = [sorted(c) for c in tarjan(sorted(objs), edges) if len(c) > 1]
    report(not cycles, "objects: no link cycle",
           "\n".join("cycle: " + " <-> ".join(c) for c in cycles))


def check_b64(root):
    with open(os.path.join(root, "Makefile"), encoding="utf-8") as f:
        mk = f.read()
    ok = os.path.exists(os.path.join(root, "src/core/b64.c")) and "b64" not in mk
    report(ok, "b64 is in the core and the Makefile names it nowhere")


def main():
    root, build = sys.argv[1], sys.argv[2]
    srcs = sources(root)
    check_includes(root, srcs)
    check_objects(root, build)
    check_b64(root)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
