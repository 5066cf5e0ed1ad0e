#!/usr/bin/python3
"""kmeans_peer.py - the numpy/scipy peer of bench_kmeans: balanced spherical
K-means as the reference implementation does it, the assignment step by
scipy.optimize.linear_sum_assignment on the N x (K*cap) cost matrix (each
cluster repeated cap = ceil(N/K) times).

It fits the identical problems bench_kmeans wrote (N = 1000, D = 1536 and
6144: /tmp/eldr-bench-kmeans-dD.npy, initial rows in ...-dD-init.txt), with
the same rules: at most 50 iterations, stop when the assignment repeats or no
centroid moves by more than 1e-6, empty clusters keep their centroid. Prints
its row and, from eldr's time in ...-dD-eldr.txt, the ratio row; a line on
stderr if the two fits disagree (same start and an exact assignment on both
sides: they should not). Run by /usr/bin/python3, after bin/bench_kmeans."""
import math
import sys
import time

import numpy as np
from scipy.optimize import linear_sum_assignment

PREFIX = "/tmp/eldr-bench-kmeans"
DIMS = (1536, 6144)
ITERS = 50
EPS = 1e-6


def balanced_assign(x, mu, cap):
    cost = 1.0 - x @ mu.T
    big = np.repeat(cost, cap, axis=1)
    _, cols = linear_sum_assignment(big)
    return cols // cap


def fit(x, init, iters):
    n, _ = x.shape
    k = len(init)
    cap = math.ceil(n / k)
    mu = x[init].copy()
    prev = None
    it = 0
    for it in range(1, iters + 1):
        a = balanced_assign(x, mu, cap)
        if prev is not None and np.array_equal(a, prev):
            break
        prev = a
        new = mu.copy()
        for c in range(k):
            members = x[a == c]
            if len(members) == 0:
                continue
            s = members.astype(np.float64).sum(axis=0)
            nrm = np.linalg.norm(s)
            if nrm > 0:
                new[c] = s / nrm
        shift = np.max(np.linalg.norm(new.astype(np.float64) - mu, axis=1))
        mu = new
        if shift <= EPS:
            break
    obj = float(np.sum(1.0 - np.einsum("ij,ij->i", x.astype(np.float64), mu[a].astype(np.float64))))
    return it, obj


def run_case(d):
    try:
        x = np.load(f"{PREFIX}-d{d}.npy")
        init = [int(v) for v in open(f"{PREFIX}-d{d}-init.txt").read().split()]
    except OSError as e:
        print(f"kmeans_peer: {e} (run bin/bench_kmeans first)", file=sys.stderr)
        return 1
    n, d = x.shape
    k = len(init)
    secs = math.inf
    for _ in range(5):  # best of 5, as bench_kmeans does
        t0 = time.perf_counter()
        it, obj = fit(x, init, ITERS)
        secs = min(secs, time.perf_counter() - t0)
    size = f"N={n} D={d} K={k}"
    print(f"kmeans fit N={n} (numpy+scipy)\t{size}\t{secs:.6f}\t{it / secs:.1f} iter/s", flush=True)
    try:
        eldr_secs, eldr_it, eldr_obj = open(f"{PREFIX}-d{d}-eldr.txt").read().split()
    except (OSError, ValueError):
        return 0
    eldr_secs = float(eldr_secs)
    print(f"kmeans fit N={n} speedup, eldr vs numpy+scipy\t{size}\t{eldr_secs:.6f}\t"
          f"{secs / eldr_secs:.1f} x", flush=True)
    if int(eldr_it) != it or abs(float(eldr_obj) - obj) > 1e-4 * abs(obj):
        print(f"kmeans_peer: D={d}: eldr took {eldr_it} iterations to objective {eldr_obj}, "
              f"the peer {it} to {obj:.6f}", file=sys.stderr)
    return 0


def main():
    return max(run_case(d) for d in DIMS)


if __name__ == "__main__":
    sys.exit(main())
