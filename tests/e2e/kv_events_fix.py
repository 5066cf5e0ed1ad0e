#!/usr/bin/env python3
"""kv_events_fix.py - fixtures of tests/e2e/kv_events.sh: prompts, eldrd's own
block hashes of them (src/core/blockhash.h, written again here so that a
change on either side shows), and POST /v1/route bodies that store their
blocks' counts in the signature cache.

Usage: kv_events_fix.py OUTDIR  (L = 16, E = 64, k = 4: samples/small.h5)
Writes OUTDIR/fix.json {"NAME": {"tokens": [...], "hashes": [...]}} and
OUTDIR/route_NAME.json for the prompts a (4 blocks), b (2), c (3); "vllm":
a sha256 digest per block, as vLLM's bytes hashes."""
import hashlib
import json
import os
import sys

M = (1 << 64) - 1
ROOT = 0xcbf29ce484222325
B = 16


def fmix64(k):
    k ^= k >> 33
    k = (k * 0xff51afd7ed558ccd) & M
    k ^= k >> 33
    k = (k * 0xc4ceb9fe1a85ec53) & M
    k ^= k >> 33
    return k


def block_hash(parent, tokens):
    x = fmix64(parent ^ ((len(tokens) * 0x9e3779b97f4a7c15) & M))
    for t in tokens:
        x = fmix64(x ^ (((t & 0xffffffff) + 0x632be59bd9b4e019) & M))
    return x


def chain(tokens):
    out, h = [], ROOT
    for i in range(len(tokens) // B):
        h = block_hash(h, tokens[i * B:(i + 1) * B])
        out.append(h)
    return out


def main():
    out = sys.argv[1]
    prompts = {"a": list(range(1000, 1000 + 4 * B)), "b": list(range(5000, 5000 + 2 * B)),
               "c": list(range(9000, 9000 + 3 * B))}
    fix = {}
    for name, toks in prompts.items():
        hashes = chain(toks)
        fix[name] = {"tokens": toks, "hashes": hashes,
                     "vllm": ["b:" + hashlib.sha256(b"%s%d" % (name.encode(), i)).hexdigest()
                              for i in range(len(hashes))]}
        # each block: layers 0..15, experts (l + j) % 64 for j < 4, 16 tokens each
        block = [[l, (l + j) % 64, B] for l in range(16) for j in range(4)]
        n = len(hashes)
        body = {"request_id": "kv-" + name, "prefill_worker": "p0",
                "sparse": [[l, e, c * n] for l, e, c in block],
                "block_hashes": hashes, "cached_blocks": 0,
                "block_counts": [block] * n}
        with open(os.path.join(out, "route_%s.json" % name), "w") as f:
            json.dump(body, f)
    with open(os.path.join(out, "fix.json"), "w") as f:
        json.dump(fix, f)


if __name__ == "__main__":
    main()
