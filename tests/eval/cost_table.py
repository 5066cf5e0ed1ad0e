#!/usr/bin/env python3
"""tests/eval/cost_table.py - one markdown table from cost_grid.sh's runs.

For each trace, fleet size K and rate: the lowest TPOT p50 of the four
balancers (random, rr, jsq, p2c; 20-seed means), then the band rule's and
the cost rule's p50 against it in percent with a 95% interval over the
20 seeds (paired: seed s of a policy against seed s of that balancer;
each seed draws its arrivals and its calibration split), and the cost
rule's p99 against the lowest balancer p99 (means)."""
import glob, json, math, os, sys

BAL = ["random", "rr", "jsq", "p2c"]
T975 = {19: 2.093}


def paired(a, b):
    d = [100.0 * (x / y - 1) for x, y in zip(a, b)]
    n = len(d)
    m = sum(d) / n
    sd = math.sqrt(sum((x - m) ** 2 for x in d) / (n - 1)) if n > 1 else 0.0
    return m, T975.get(n - 1, 1.96) * sd / math.sqrt(n)


def key(f):
    b = os.path.basename(f)[1:-5].split("_r")
    return int(b[0]), float(b[1])


out = sys.argv[1]
print("| trace | K | rate (req/s) | best balancer p50 (ms) | band vs it | cost vs it | "
      "cost p99 vs best p99 |")
print("|---|---|---|---|---|---|---|")
for d in sorted(glob.glob(os.path.join(out, "*/"))):
    for f in sorted(glob.glob(os.path.join(d, "k*_r*.json")), key=key):
        j = json.load(open(f))
        P = {p["name"]: p for p in j["policies"]}
        best = min(BAL, key=lambda p: P[p]["tpot_p50_ms"])
        b99 = min(P[p]["tpot_p99_ms"] for p in BAL)
        base = P[best]["tpot_p50_ms_per_seed"]
        bm, bh = paired(P["eldr"]["tpot_p50_ms_per_seed"], base)
        cm, ch = paired(P["eldr-cost"]["tpot_p50_ms_per_seed"], base)
        K, r = key(f)
        print(f"| {os.path.basename(d.rstrip('/'))} | {K} | {r:g} | {P[best]['tpot_p50_ms']:.3f} "
              f"({best}) | {bm:+.2f}% ±{bh:.2f} | {cm:+.2f}% ±{ch:.2f} | "
              f"{100 * (P['eldr-cost']['tpot_p99_ms'] / b99 - 1):+.2f}% |")
