"""tests/e2e/push_check.py - the oracle of tests/e2e/push.sh: which new
cluster each live worker should get, by brute force over every
permutation (K <= 6), written here without eldr's code.

  push_check.py perm LIVE.h5 NEW.h5
      prints the best permutation (max summed cosine of live row i with
      new row p[i]) as "p0,p1,..."; exit 2 when the best is not unique
      within 1e-6 (the test would then not tell a right answer from a
      wrong one)
  push_check.py served SNAPSHOT.json NEW.h5 PERM
      exit 0 when the snapshot's centroids are NEW's rows in PERM order
      (to 1e-6)
  push_check.py diff PUSH.json PERM NAMES LIVE.h5 NEW.h5
      exit 0 when eldr push --json's workers say PERM, under NAMES
      (comma-separated), with the cosines computed here (aligned and in
      the file's order, to 1e-4)
"""
import itertools
import json
import sys

import h5py
import numpy as np


def cents(path):
    with h5py.File(path, "r") as f:
        return np.asarray(f["centroids"], dtype=np.float64)


def best(live, new):
    K = live.shape[0]
    sims = live @ new.T
    scored = sorted(((sum(sims[i, p[i]] for i in range(K)), p)
                     for p in itertools.permutations(range(K))), reverse=True)
    if len(scored) > 1 and scored[0][0] - scored[1][0] < 1e-6:
        sys.exit(2)
    return scored[0][1], sims


def main():
    cmd = sys.argv[1]
    if cmd == "perm":
        p, _ = best(cents(sys.argv[2]), cents(sys.argv[3]))
        print(",".join(map(str, p)))
        return 0
    if cmd == "served":
        snap = json.load(open(sys.argv[2]))
        got = np.asarray(snap["model"]["centroids"], dtype=np.float64)
        new = cents(sys.argv[3])
        perm = [int(x) for x in sys.argv[4].split(",")]
        return 0 if got.shape == new.shape and np.abs(got - new[perm]).max() < 1e-6 else 1
    if cmd == "diff":
        j = json.load(open(sys.argv[2]))
        perm = [int(x) for x in sys.argv[3].split(",")]
        names = sys.argv[4].split(",")
        _, sims = best(cents(sys.argv[5]), cents(sys.argv[6]))
        w = j["workers"]
        good = [x["new_cluster"] for x in w] == perm and [x["name"] for x in w] == names
        good = good and all(abs(x["cos"] - sims[i, perm[i]]) < 1e-4 and
                            abs(x["cos_as_given"] - sims[i, i]) < 1e-4 for i, x in enumerate(w))
        return 0 if good else 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
