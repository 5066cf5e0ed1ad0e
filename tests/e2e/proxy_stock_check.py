#!/usr/bin/python3
"""proxy_stock_check.py - the checks of tests/e2e/proxy_stock.sh. Prints
"ok - NAME" / "not ok - NAME". Test-only.

    proxy_stock_check.py MODEL.h5 NPY_URL NPY.jsonl LISTS_URL LISTS.jsonl COLD_URL

The oracle is independent of eldrd's decoder and signature cache: the
stand-in records each prompt's full routing (RECORD.truth, every row,
also those it answered -1); the counts are summed here in numpy, and
the band at tau 0 is the centroid nearest the normalised counts (a count
model over every layer).
"""
import http.client
import json
import sys
import urllib.parse

import h5py
import numpy as np

from routed_oracle import nearest_worker

MODEL, NPY, NPY_REC, LISTS, LISTS_REC, COLD = sys.argv[1:7]
with h5py.File(MODEL, "r") as f:
    CENT = f["centroids"][:].astype(np.float64)
    L, E = int(f.attrs["layers"]), int(f.attrs["experts"])


def ok(name, cond, *why):
    print(("ok - " if cond else "not ok - ") + name)
    if not cond:
        for w in why:
            print("#   " + str(w)[:600])
    sys.stdout.flush()


def call(url, method, path, body=None, headers=None):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=20)
    c.request(method, path, json.dumps(body) if body is not None else None, headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def lines(path):
    try:
        with open(path) as f:
            return [json.loads(x) for x in f]
    except FileNotFoundError:
        return []


def oracle(rows):
    return nearest_worker(CENT, L, E, rows)


SYSTEMS = ["You are a careful assistant for questions on rivers lakes and the sea " * 3,
           "Answer as a mathematician who writes short proofs with every step shown " * 3,
           "Translate the following into plain words for a child of seven years " * 3]
TOPICS = ["rivers", "proofs", "poems", "code", "law", "chemistry", "music", "maps", "tides",
          "stars"]


def run(url, rec, tag, chat=False, stream=False):
    """30 requests (10 per system prompt): each decision against the oracle."""
    wrong, explains, leaked = [], {}, []
    for i in range(30):
        rid = "%s-%d" % (tag, i)
        text = SYSTEMS[i % 3] + "question %d about %s" % (i, TOPICS[i % 10])
        if chat and i % 2:
            body = {"messages": [{"role": "user", "content": text}], "max_tokens": 4}
            path = "/v1/chat/completions"
        else:
            body = {"prompt": text, "max_tokens": 4}
            path = "/v1/completions"
        if stream and i % 3 == 0:
            body["stream"] = True
        st, data = call(url, "POST", path, body, {"X-Request-Id": rid})
        if b"routed_experts" in data or st != 200:
            leaked.append((rid, st, data[:200]))
        st, ex = call(url, "GET", "/v1/explain/" + rid)
        explains[rid] = json.loads(ex) if st == 200 else {}
    truth = {t["request_id"]: t for t in lines(rec + ".truth")}
    dec = {d["request_id"]: d for d in lines(rec) if "body" in d}
    for i in range(30):
        rid = "%s-%d" % (tag, i)
        t, d = truth.get(rid), dec.get(rid)
        if not t or not d:
            wrong.append((rid, "no truth or no decode record"))
            continue
        want = oracle(t["rows"])
        if d["instance"] != want or explains[rid].get("worker_index") != want:
            wrong.append((rid, d["instance"], explains[rid].get("worker_index"), want))
        if "routed_experts" in json.dumps(d["body"]):
            leaked.append((rid, "decode body", d["body"]))
    return truth, dec, explains, wrong, leaked


# ---- vLLM >= 0.22: the .npy of choices[0].routed_experts -------------------
truth, dec, ex, wrong, leaked = run(NPY, NPY_REC, "npy", chat=True, stream=True)
ok("npy: 30 of 30 decisions equal the band rule on the prompt's routed experts", not wrong,
   wrong)
ok("npy: the routing never reaches the client nor the decoder", not leaked, leaked)
src = [e.get("signal", {}).get("source") for e in ex.values()]
ok("npy: explain names the signal's source: routed_experts, every prompt row",
   src == ["routed_experts"] * 30 and all(
       ex[r]["signal"]["rows"] == len(truth[r]["ids"]) and ex[r]["signal"]["cached_rows"] == 0
       for r in truth), src[:3], list(ex.values())[:1])
ok("npy: the prefill was asked for the prompt's token ids (return_token_ids)",
   all("prompt_token_ids" not in json.dumps(d["body"]) for d in dec.values()), "")
_, m = call(NPY, "GET", "/metrics")
m = m.decode()
ok("npy: eldr_proxy_signal_total counts 30 routed_experts, 0 none",
   'eldr_proxy_signal_total{source="routed_experts"} 30' in m and
   'eldr_proxy_signal_total{source="none"} 0' in m and "eldr_proxy_no_signature_total 0" in m,
   [x for x in m.splitlines() if "signal" in x])
ok("npy: the stored blocks are in the signature cache's metrics",
   any(x.startswith("eldr_sigcache_stored_blocks_total") and not x.endswith(" 0")
       for x in m.splitlines()), [x for x in m.splitlines() if "sigcache_stored" in x])

# ---- vLLM 0.21 with its prefix cache: -1 rows filled from the cache -------
truth, dec, ex, wrong, leaked = run(LISTS, LISTS_REC, "lists")
ok("lists: 30 of 30 decisions equal the band rule, prefix-cached rows included", not wrong,
   wrong)
ok("lists: the routing never reaches the client nor the decoder", not leaked, leaked)
cached = {r: t["unrouted"] for r, t in truth.items()}
ok("lists: the engine served prompt rows from its prefix cache (the test's premise)",
   sum(1 for v in cached.values() if v > 0) >= 20, cached)
bad = [(r, ex[r].get("signal"), cached[r]) for r in truth
       if ex[r].get("signal", {}).get("source") != "routed_experts" or
       ex[r]["signal"].get("cached_rows") != cached[r] or
       ex[r]["signal"].get("rows") != len(truth[r]["ids"])]
ok("lists: explain says routed_experts and how many rows came from the cache", not bad, bad)
hits = [ex[r]["cache"]["hit_blocks"] for r in truth]
ok("lists: the cache found exactly the engine's cached blocks",
   hits == [cached[r] // 16 for r in truth], hits)

# ---- a cold eldrd against the warm engine: no invented counts -------------
st, data = call(COLD, "POST", "/v1/completions",
                {"prompt": SYSTEMS[0] + "question 0 about rivers", "max_tokens": 4},
                {"X-Request-Id": "cold-1"})
st2, ex = call(COLD, "GET", "/v1/explain/cold-1")
e = json.loads(ex) if st2 == 200 else {}
sig = e.get("signal", {})
ok("cold cache: the request is served (200) without a signature, by the no-signature rule",
   st == 200 and sig.get("source") == "none" and e.get("rule") == "no-signature" and e.get("cache", {}).get("missing_blocks") == 2, st, e)
ok("cold cache: explain's note says which cached blocks it lacks",
   "signature cache holds 0 of the" in sig.get("note", ""), sig)
_, m = call(COLD, "GET", "/metrics")
ok("cold cache: counted as none and as no signature",
   'eldr_proxy_signal_total{source="none"} 1' in m.decode() and
   "eldr_proxy_no_signature_total 1" in m.decode(), "")
