#!/usr/bin/python3
"""stock_peer.py - numpy on the stock answer of bench_stock.c (the same
bytes, left in $TMPDIR/eldr_bench_stock.json by it in this `make bench`):
json.loads + b64decode + np.load + one bincount over (layer, expert)
pairs, CPU time of this process, best of 20. Prints its row and how many
times eldr's C (bench_stock's .cpu) is faster. A benchmark peer, never
part of eldr."""
import base64
import io
import json
import os
import sys
import time

import numpy as np

d = os.environ.get("TMPDIR", "/tmp")
try:
    body = open(os.path.join(d, "eldr_bench_stock.json"), "rb").read()
    c_cpu = float(open(os.path.join(d, "eldr_bench_stock.cpu")).read())
except OSError:
    sys.stderr.write("stock peer: run bin/bench_stock first; skipped\n")
    sys.exit(0)
best = 1e9
for _ in range(20):
    t0 = time.process_time()
    a = json.loads(body)
    ids = np.load(io.BytesIO(base64.b64decode(a["choices"][0]["routed_experts"])))
    P = a["usage"]["prompt_tokens"]
    L, k = ids.shape[1], ids.shape[2]
    E = 128
    layer = np.broadcast_to(np.arange(L)[None, :, None], (P, L, k))
    counts = np.bincount((layer * E + ids[:P].astype(np.int64)).ravel(),
                         minlength=L * E).reshape(L, E)
    best = min(best, time.process_time() - t0)
assert counts.sum() == P * L * k
print("stock signature: numpy peer (json + b64 + np.load + bincount)\t"
      "4096 tok, L48 k8 E128, .npy b64\t%.6f\t%.1f ms CPU (eldr %.1fx faster)"
      % (best, best * 1e3, best / c_cpu))
