"""verdict_oracle.py - the rule of docs/advise.md ("How it decides"),
written again in Python with scipy's Student t, from a grid's per-seed
values (the JSON rows of eldr advise / eldr sweep). Tests compare the
workbench's verdict with this one; nothing here is read from eldr's
verdict itself.

decide(grid, K, n_seeds, p50=1.0, p99=5.0, tps=1.0) -> dict(answer, why,
row, setting, baseline, m): K 0 compares every K."""
import math

from scipy import stats

CANDIDATES = ("eldr", "eldr-online", "eldr-cost")


def _interval(x, y, m):
    d = [100.0 * (a - b) / b for a, b in zip(x, y)]
    n = len(d)
    mean = sum(d) / n
    if n < 2:
        return mean, float("nan"), float("nan")
    sd = math.sqrt(sum((v - mean) ** 2 for v in d) / (n - 1))
    half = stats.t.ppf(1 - 0.025 / max(m, 1), n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def _why(g, c, bases, m, p50, p99, tps):
    r = g[c]
    cmp50 = [_interval(r["tpot_p50_ms_per_seed"], g[b]["tpot_p50_ms_per_seed"], m) for b in bases]
    if len(r["tpot_p50_ms_per_seed"]) < 2:
        return "one_seed", max(cmp50, key=lambda s: s[0])
    worst = max(cmp50, key=lambda s: s[2])
    if not (worst[2] < 0 and worst[2] <= -p50):
        return ("no_gain" if worst[1] >= 0 or worst[1] > -p50 else "unsure"), worst
    up99 = max(_interval(r["tpot_p99_ms_per_seed"], g[b]["tpot_p99_ms_per_seed"], m)[2]
               for b in bases)
    if not up99 <= p99:
        return "p99_loss", worst
    lotps = min(_interval(r["tokens_per_s_per_seed"], g[b]["tokens_per_s_per_seed"], m)[1]
                for b in bases)
    if not lotps >= -tps:
        return "tps_loss", worst
    for b in bases:
        if any(not a < x for a, x in zip(r["tpot_p50_ms_per_seed"], g[b]["tpot_p50_ms_per_seed"])):
            return "flips", worst
    return "ok", worst


def decide(grid, K, p50=1.0, p99=5.0, tps=1.0):
    def in_fleet(r):
        return K == 0 or r["workers"] == K

    def cell(r):
        return [i for i, b in enumerate(grid) if b["policy"] not in CANDIDATES
                and b["workers"] == r["workers"] and b["rate"] == r["rate"]]

    cands = [i for i, r in enumerate(grid) if r["policy"] in CANDIDATES and in_fleet(r)]
    m = len(cands)
    scored = []
    for c in cands:
        why, worst = _why(grid, c, cell(grid[c]), m, p50, p99, tps)
        hi = worst[2] if not math.isnan(worst[2]) else float("inf")
        scored.append((why != "ok", hi, worst[0], c, why))
    if not scored:
        base = min((i for i, r in enumerate(grid) if in_fleet(r)),
                   key=lambda i: grid[i]["tpot_p50_ms"])
        return dict(answer="keep", why="no_setting", row=base, setting=None, m=0)
    scored.sort()
    _, _, _, c, why = scored[0]
    base = min(cell(grid[c]), key=lambda i: grid[i]["tpot_p50_ms"])
    answer = "win" if why == "ok" else "none" if why == "one_seed" else (
        "tie" if why in ("unsure", "flips") else "keep")
    return dict(answer=answer, why=why, row=c if answer == "win" else base, setting=c,
                baseline=grid[base]["policy"], m=m)
