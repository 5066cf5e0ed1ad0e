"""eldrd_fixtures.py - request bodies and a numpy oracle for tests/e2e/eldrd.sh.

Test fixture writer only (run by /usr/bin/python3 with numpy and h5py):

  eldrd_fixtures.py bodies TRACE.h5 OUTDIR
      dense_<i>.json (rows 0..39, ids d<i>), sparse_0.json (row 0 sparse,
      id s0), and the signature-cache set for row 5: cold.json (all counts),
      warm1.json (4 block hashes, none cached, counts for blocks 0..2 to
      store), warm2.json (the same hashes, 3 cached, counts only for the
      rest), miss.json (3 claimed cached under hashes nobody stored).
  eldrd_fixtures.py oracle MODEL.json TRACE.h5 ROW ANSWER.json
      exit 0 when the answer's similarities equal cos(signature, centroid)
      recomputed here from the model's idf and centroids (1e-5).
"""
import base64
import json
import os
import sys

import h5py
import numpy as np


def dense(counts):
    return base64.b64encode(counts.astype("<i2").tobytes()).decode()


def sparse(counts):
    L, E = counts.shape
    return [[int(l), int(e), int(counts[l, e])] for l in range(L) for e in range(E) if counts[l, e]]


def write(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)


def bodies(trace, out):
    with h5py.File(trace, "r") as f:
        c = f["prefill_counts"][:40].astype(np.int64)
    for i in range(40):
        write(os.path.join(out, f"dense_{i}.json"), {"request_id": f"d{i}", "counts": dense(c[i])})
    write(os.path.join(out, "sparse_0.json"), {"request_id": "s0", "sparse": sparse(c[0])})
    full = c[5]
    # three computed blocks, each a share of the counts (additive, <= 255 a cell)
    blocks = [np.minimum(full // 4, 255) for _ in range(3)]
    hashes = ["18446744073709551615", 12345, "987654321987654321", 42]
    write(os.path.join(out, "cold.json"), {"request_id": "cold", "counts": dense(full)})
    write(os.path.join(out, "warm1.json"), {
        "request_id": "warm1", "counts": dense(full), "block_hashes": hashes,
        "cached_blocks": 0, "block_counts": [dense(b) for b in blocks[:2]] + [sparse(blocks[2])]})
    rest = full - sum(blocks)
    write(os.path.join(out, "warm2.json"), {
        "request_id": "warm2", "counts": dense(rest), "block_hashes": hashes, "cached_blocks": 3})
    write(os.path.join(out, "miss.json"), {
        "request_id": "miss", "counts": dense(rest), "block_hashes": [7, 8, 9, 10],
        "cached_blocks": 3})


def oracle(model_json, trace, row, answer):
    m = json.load(open(model_json))
    with h5py.File(trace, "r") as f:
        c = f["prefill_counts"][int(row)].astype(np.float64)
    mask = m["layer_mask"]
    v = c[mask, :]
    if m["variant"] == "count_idf":
        v = v * np.asarray(m["sig_idf"], dtype=np.float64).reshape(v.shape)
    v = v.ravel()
    v /= np.linalg.norm(v)
    want = np.asarray(m["centroids"], dtype=np.float64) @ v
    got = np.asarray(json.load(open(answer))["similarities"], dtype=np.float64)
    if got.shape != want.shape or np.max(np.abs(got - want)) > 1e-5:
        print("similarities", got, "numpy", want, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "bodies":
        bodies(sys.argv[2], sys.argv[3])
    else:
        sys.exit(oracle(*sys.argv[2:6]))
