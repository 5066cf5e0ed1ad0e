#!/usr/bin/env python3
"""tests/arch/rooms.py - no circles among the workbench's files
(docs/architecture.md, "Rooms"; issue 30 item 7).

A file that calls a second file that calls it back is one room split in
two: neither can be read, tested or changed alone. Two views, each
printed as TAP lines ("ok - ..." / "not ok - ..."):
  1. calls: the objects of ROOMS (nm): object A uses object B when A has
     an undefined symbol that B defines. No strongly connected component
     of more than one object (a call cycle), reported with the symbols
     that close it;
  2. includes: no header of ROOMS includes, through other headers, itself
     (a header cycle).
src/router has its own floors (layers.py).
Usage: rooms.py ROOT BUILD   (BUILD: the object directory)."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from layers import nm, tarjan  # noqa: E402

ROOMS = ("core", "lua", "cli", "repl", "client", "tui")
results = []


def report(ok, name, detail=""):
    results.append(ok)
    print(("ok - " if ok else "not ok - ") + name)
    for line in detail.splitlines():
        print("    " + line)


def check_calls(root, build):
    objs = {}
    for room in ROOMS:
        d = os.path.join(root, build, "src", room)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if name.endswith(".o"):
                objs[f"{room}/{name}"] = os.path.join(d, name)
    if not objs:
        report(False, f"calls: no objects under {build}/src (build first)")
        return
    syms = {k: nm(p) for k, p in objs.items()}
    definer = {}
    for k, (defined, _) in syms.items():
        for s in defined:
            definer[s] = k
    edges, why = {}, {}
    for k, (_, undefined) in syms.items():
        for s in sorted(undefined):
            d = definer.get(s)
            if d is None or d == k:
                continue
            edges.setdefault(k, set()).add(d)
            why.setdefault((k, d), []).append(s)
    bad = []
    for comp in tarjan(sorted(objs), edges):
        if len(comp) < 2:
            continue
        comp = sorted(comp)
        bad.append("cycle: " + " <-> ".join(comp))
        for a in comp:
            for b in comp:
                if (a, b) in why:
                    bad.append(f"  {a} uses {', '.join(why[(a, b)][:4])} of {b}")
    n_edges = sum(len(v) for v in edges.values())
    report(not bad, f"calls: {len(objs)} objects of src/{{{','.join(ROOMS)}}}, "
           f"{n_edges} uses, no call cycle", "\n".join(bad))


def check_includes(root):
    headers = {}
    for room in ROOMS:
        d = os.path.join(root, "src", room)
        for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
            if name.endswith(".h"):
                with open(os.path.join(d, name), encoding="utf-8") as f:
                    headers[name] = re.findall(r'^\s*#\s*include\s+"([^"]+)"', f.read(), re.M)
    edges = {h: {os.path.basename(i) for i in incs if os.path.basename(i) in headers
                 and os.path.basename(i) != h}
             for h, incs in headers.items()}
    cycles = [sorted(c) for c in tarjan(sorted(headers), edges) if len(c) > 1]
    report(not cycles, f"includes: {len(headers)} headers, none includes itself",
           "\n".join("cycle: " + " <-> ".join(c) for c in cycles))


def main():
    root, build = sys.argv[1], sys.argv[2]
    check_calls(root, build)
    check_includes(root)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
