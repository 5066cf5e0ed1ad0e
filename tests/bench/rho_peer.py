#!/usr/bin/python3
"""rho_peer.py - the benchmark peer of bench_rho.c, and an oracle.

A straightforward numpy/scipy implementation of eldr's greedy layer
selection (docs/calibration.md): count_idf signatures, IDF over all rows,
decode distances over all L*E decode counts, per-layer pair dot products and
squared norms computed once, then for every step and every candidate layer
the cumulative cosine distance of each pair and scipy.stats.spearmanr
against the decode distances. It reads the trace and the pairs that
bench_rho wrote (/tmp/eldr-bench-rho.h5, .pairs) so both sides work on the
identical input, checks that it picks the same layers as eldr
(/tmp/eldr-bench-rho.result), and prints its time and the speed-up as
bench rows (what, size, seconds, rate).

`rho_peer.py --real FILE` instead prints, for the real gpt-oss-20b trace,
rho of every variant over all pairs and all layers (scipy.spearmanr on
float64), the oracle values quoted in tests/unit/test_rho.c and
tests/cli/rho.sh.

Run by /usr/bin/python3 (numpy, scipy, h5py); never part of the product.
"""
import sys
import time

import h5py
import numpy as np
from scipy.stats import spearmanr

TRACE = "/tmp/eldr-bench-rho.h5"
PAIRS = "/tmp/eldr-bench-rho.pairs"
RESULT = "/tmp/eldr-bench-rho.result"
GRID = 2.0 ** 36  # eldr rounds distances to multiples of 2^-36 (rho.h)


def unit_rows(x):
    n = np.linalg.norm(x, axis=1)
    return x / np.where(n > 0, n, 1)[:, None]


def pair_dots(x, pi, pj, chunk=4096):
    """sum(x[pi] * x[pj], axis=1) without materialising P x D at once."""
    out = np.empty(len(pi))
    for s in range(0, len(pi), chunk):
        out[s:s + chunk] = np.einsum("pd,pd->p", x[pi[s:s + chunk]], x[pj[s:s + chunk]])
    return out


def greedy(pre, dec, pi, pj):
    n, L, E = pre.shape
    df = (pre > 0).sum(axis=0)
    idf = np.log((n + 1) / (df + 1.0)).astype(np.float32)  # eldr keeps idf in float32
    vals = pre.astype(np.float64) * idf.astype(np.float64)
    dec_dist = 1 - pair_dots(unit_rows(dec.reshape(n, -1).astype(np.float64)), pi, pj)
    dot = np.stack([pair_dots(vals[:, l, :], pi, pj) for l in range(L)])  # [L, P]
    sq = (vals ** 2).sum(axis=2)  # [n, L]
    cum_dot = np.zeros(len(pi))
    cum_sq = np.zeros(n)
    order, curve = [], []
    for _ in range(L):
        best, best_l = -np.inf, -1
        for l in range(L):
            if l in order:
                continue
            s = cum_sq + sq[:, l]
            inv = np.where(s > 0, 1 / np.sqrt(np.where(s > 0, s, 1)), 0)
            d = 1 - (cum_dot + dot[l]) * inv[pi] * inv[pj]
            d = np.round(d * GRID) / GRID
            r = spearmanr(d, dec_dist).correlation
            if r > best:
                best, best_l = r, l
        order.append(best_l)
        curve.append(best)
        cum_dot += dot[best_l]
        cum_sq += sq[:, best_l]
    return order, curve


def bench():
    with h5py.File(TRACE, "r") as f:
        pre = f["prefill_counts"][:]
        dec = f["decode_counts"][:]
    pairs = np.loadtxt(PAIRS, dtype=np.int64)
    pi, pj = pairs[:, 0], pairs[:, 1]
    ref = {}
    with open(RESULT) as f:
        for line in f:
            k, *v = line.split()
            ref[k] = v
    t0 = time.perf_counter()
    order, curve = greedy(pre, dec, pi, pj)
    secs = time.perf_counter() - t0
    n, L, E = pre.shape
    same = order == [int(x) for x in ref["order"]]
    diff = max(abs(a - float(b)) for a, b in zip(curve, ref["curve"]))
    print(f"rho_peer: same greedy order as eldr: {'yes' if same else 'NO'}; "
          f"max |curve difference| {diff:.2e}", file=sys.stderr)
    size = f"N={n} L={L} E={E} P={len(pi)}"
    sets = L * (L + 1) / 2
    print(f"greedy layer selection, numpy/scipy peer\t{size}\t{secs:.6f}\t{sets / secs:.1f} sets/s")
    eldr = float(ref["seconds"][0])
    print(f"greedy speed-up, eldr vs numpy peer\t{size}\t{eldr:.6f}\t{secs / eldr:.1f}x"
          f"{'' if same else ' (ORDERS DIFFER)'}")


def real(path):
    with h5py.File(path, "r") as f:
        pre = f["prefill_counts"][:].astype(np.float64)
        dec = f["decode_counts"][:].astype(np.float64)
        gate = f["gate_prob"][:].astype(np.float64) if "gate_prob" in f else None
    n = pre.shape[0]
    iu = np.triu_indices(n, 1)

    def dist(x):
        u = unit_rows(x.reshape(n, -1))
        return 1 - (u @ u.T)[iu]

    dd = dist(dec)
    df = (pre > 0).sum(axis=0)
    variants = [("count_idf", pre * np.log((n + 1) / (df + 1.0))), ("count", pre),
                ("sqrt_count", np.sqrt(pre)), ("binary", (pre > 0) * 1.0)]
    if gate is not None:
        variants.append(("gate_prob", gate))
    for name, x in variants:
        print(f"{name}\t{spearmanr(dist(x), dd).correlation:.10f}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--real":
        real(sys.argv[2])
    else:
        try:
            open(RESULT).close()
        except OSError:
            print("rho_peer: run bin/bench_rho first (no /tmp/eldr-bench-rho.result)",
                  file=sys.stderr)
            sys.exit(0)
        bench()
