"""trace_peer.py - the h5py peer of bench_trace.c: read the same datasets of
the same files (the real gpt-oss-20b trace and /tmp/eldr-bench-trace.h5,
written by bench_trace first), best of 3, and print rows beside eldr's:
MB/s of decoded numeric arrays in the file's dtypes. Run by /usr/bin/python3."""
import os
import sys
import time

import h5py
import numpy as np

REAL = "../shared/data/gptoss20b-routing.h5"
BIG = "/tmp/eldr-bench-trace.h5"
KNOWN = ["prefill_counts", "prompt_tokens", "decode_counts", "decode_tokens",
         "gate_prob", "gate_logit", "label", "label_names", "arrival_s", "request_id",
         "tokens/prefill_experts", "tokens/prefill_offsets", "tokens/decode_experts",
         "tokens/decode_offsets", "tokens/decode_probs", "tokens/block_hashes",
         "tokens/block_offsets"]
PER_REQUEST = {"prefill_counts", "prompt_tokens", "decode_counts", "decode_tokens",
               "gate_prob", "gate_logit", "label", "arrival_s", "request_id"}


def load(path, rows=None):
    """Read what eldr's loader reads; return the numeric bytes decoded."""
    nbytes = 0
    with h5py.File(path, "r") as f:
        for name in KNOWN:
            if name not in f:
                continue
            ds = f[name]
            if rows is not None and name in PER_REQUEST:
                a = ds[rows[0]:rows[1]]
            else:
                a = ds[...]
            if a.dtype.kind in "iuf":
                nbytes += a.nbytes
    return nbytes


def bench(path, what, size, rows=None):
    best, nbytes = float("inf"), 0
    for _ in range(3):
        t0 = time.perf_counter()
        nbytes = load(path, rows)
        best = min(best, time.perf_counter() - t0)
    print(f"{what}\t{size}\t{best:.6f}\t{nbytes / best / 1e6:.1f} MB/s", flush=True)


def main():
    if os.path.exists(REAL):
        bench(REAL, "trace load (h5py)", "gptoss20b 449x24x32")
    if not os.path.exists(BIG):
        print(f"trace_peer: {BIG} absent (bench_trace makes it)", file=sys.stderr)
        return 0
    bench(BIG, "trace load (h5py)", "synthetic 2000x48x128")
    bench(BIG, "trace load rows (h5py)", "100 of 2000x48x128", rows=(1000, 1100))
    return 0


if __name__ == "__main__":
    sys.exit(main())
