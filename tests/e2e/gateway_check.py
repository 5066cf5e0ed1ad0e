#!/usr/bin/env python3
"""tests/e2e/gateway_check.py - fixtures and the oracle of tests/e2e/gateway.sh.

  bodies TRACE OUT N      N decode bodies (one JSON object a line, as llm-d's
                          coordinator sends them: the client's request plus
                          the prefill's kv_transfer_params, eldr_sig among
                          them) from the trace's prefill counts; every 10th
                          has no eldr_sig (the no-signature rule). Also
                          OUT.route: the same signals as POST /v1/route bodies.
  compare PICKS ROUTES REF ENDPOINTS
                          each pick of the stand-in (one JSON line a request,
                          in order) against the decision of a second eldrd
                          (REF, no gateway) for the same counts, each finished
                          after it as the picker's was: the same worker, named
                          by its endpoint; prints one line per mismatch.
"""
import base64
import json
import sys
import urllib.request

import h5py
import numpy as np


def bodies(trace, out, n):
    with h5py.File(trace, "r") as f:
        counts = f["prefill_counts"][:n].astype("<i2")
    with open(out, "w") as b, open(out + ".route", "w") as r:
        for i in range(n):
            kv = {"do_remote_prefill": True, "remote_engine_id": "pf-0",
                  "remote_block_ids": [i, i + 1]}
            route = {"request_id": f"g{i}"}
            if i % 10 != 9:
                sig = base64.b64encode(counts[i].tobytes()).decode()
                kv["eldr_sig"] = sig
                route["counts"] = sig
            else:
                route["counts"] = base64.b64encode(np.zeros_like(counts[i]).tobytes()).decode()
            b.write(json.dumps({"model": "m", "prompt": f"request {i}", "max_tokens": 16,
                                "kv_transfer_params": kv}) + "\n")
            r.write(json.dumps(route) + "\n")


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as a:
        return json.load(a)


def compare(picks, routes, ref, endpoints):
    eps = json.load(open(endpoints))["endpoints"]
    addr = [f'{e["address"]}:{e["port"]}' for e in eps]
    got = [json.loads(l) for l in open(picks) if l.strip()]
    got = sorted((g for g in got if not g.get("summary")), key=lambda g: g["index"])
    want = [json.loads(l) for l in open(routes) if l.strip()]
    bad = 0
    if len(got) != len(want):
        print(f"{len(got)} picks for {len(want)} requests")
        return 1
    for g, w in zip(got, want):
        a = post(ref + "/v1/route", w)
        post(ref + "/v1/finish", {"request_id": w["request_id"]})
        if g.get("endpoint") != addr[a["worker_index"]]:
            bad += 1
            print(f'{w["request_id"]}: picker {g.get("endpoint")}, /v1/route '
                  f'{addr[a["worker_index"]]} ({a["rule"]})')
    print(f"{len(got) - bad} of {len(got)} picks equal /v1/route's")
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "bodies":
        bodies(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1] == "compare":
        sys.exit(compare(*sys.argv[2:6]))
    else:
        sys.exit("usage: gateway_check.py bodies|compare ...")
