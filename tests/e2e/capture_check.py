#!/usr/bin/python3
"""capture_check.py - the oracle of tests/e2e/capture.sh (test-only).

    capture_check.py TRACE.h5 PROMPTS.jsonl TRUTH.jsonl [--all]

Checks, with h5py and numpy only, that every row of the captured trace
equals what the stand-in engine (fake_engine.py) says it answered for that
prompt: prompt_tokens (the routed prompt rows), prefill_unrouted_tokens
(the rows without routing; absent means none), decode_tokens
(= completion - 1), the per-token
expert ids in tokens/ and the count matrices summed from them, request_id,
label, and that rows are in prompt order. --all: every prompt is in the
trace. Prints one line and exits 1 at the first difference."""
import json
import sys

import h5py
import numpy as np

trace, prompts, truth_path = sys.argv[1:4]
want_all = "--all" in sys.argv
lines = [json.loads(l) for l in open(prompts) if l.strip()]
truth = {}
for l in open(truth_path):
    r = json.loads(l)
    truth[r["text"]] = r


def text_of(p):
    return p["prompt"] if "prompt" in p else " ".join(m["content"] for m in p["messages"])


def fail(msg):
    print("capture_check: " + msg)
    sys.exit(1)


with h5py.File(trace, "r") as f:
    L, E, k = int(f.attrs["layers"]), int(f.attrs["experts"]), int(f.attrs["top_k"])
    ids = [x.decode() if isinstance(x, bytes) else x for x in f["request_id"][:]]
    pc, dc = f["prefill_counts"][:], f["decode_counts"][:]
    pt, dt = f["prompt_tokens"][:], f["decode_tokens"][:]
    pe, po = f["tokens/prefill_experts"][:], f["tokens/prefill_offsets"][:]
    de, do = f["tokens/decode_experts"][:], f["tokens/decode_offsets"][:]
    labels = f["label"][:] if "label" in f else None
    names = [x.decode() if isinstance(x, bytes) else x for x in f["label_names"][:]] if labels is not None else None
    arrival = f["arrival_s"][:]
    unrouted = f["prefill_unrouted_tokens"][:] if "prefill_unrouted_tokens" in f else None

by_id = {p["id"]: (i, p) for i, p in enumerate(lines)}
if want_all and len(ids) != len(lines):
    fail("%d rows, %d prompts" % (len(ids), len(lines)))
last = -1
for r, rid in enumerate(ids):
    if rid not in by_id:
        fail("row %d: request_id %r is not a prompt id" % (r, rid))
    i, p = by_id[rid]
    if i <= last:
        fail("row %d: out of prompt order" % r)
    last = i
    t = truth.get(text_of(p))
    if t is None:
        fail("row %d (%s): the engine never answered it" % (r, rid))
    U = t.get("unrouted", 0)
    P, D = t["prompt_tokens"] - U, t["completion_tokens"] - 1
    if pt[r] != P or dt[r] != D:
        fail("row %d: tokens %d/%d, engine %d/%d (routed prompt/decode)" % (r, pt[r], dt[r], P, D))
    if (unrouted[r] if unrouted is not None else 0) != U:
        fail("row %d: prefill_unrouted_tokens %s, engine %d" %
             (r, None if unrouted is None else unrouted[r], U))
    tp = np.array(t["prefill"], dtype=np.int64).reshape(P, L, k)
    td = np.array(t["decode"], dtype=np.int64).reshape(D, L, k)
    if not np.array_equal(pe[po[r]:po[r + 1]], tp) or not np.array_equal(de[do[r]:do[r + 1]], td):
        fail("row %d: per-token expert ids differ from the engine's" % r)
    for ids_, counts, what in ((tp, pc[r], "prefill"), (td, dc[r], "decode")):
        want = np.zeros((L, E), dtype=np.int64)
        for l in range(L):
            np.add.at(want[l], ids_[:, l, :].ravel(), 1)
        if not np.array_equal(want, counts):
            fail("row %d: %s_counts differ from the engine's routing" % (r, what))
    if labels is not None and names[labels[r]] != str(p.get("label")):
        fail("row %d: label %r, prompt says %r" % (r, names[labels[r]], p.get("label")))
if not np.all(np.isfinite(arrival)) or np.any(arrival < 0):
    fail("arrival_s not finite and >= 0")
print("capture_check: %d rows equal the engine's routing" % len(ids))
