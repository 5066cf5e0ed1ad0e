"""cost_policy_check.py - checks of eldrd's cost policy for tests/e2e/cost_policy.sh.

Test helper only (run by /usr/bin/python3 with numpy and h5py). Each
subcommand exits 0 when its check holds and prints why not otherwise:

  cost_policy_check.py first URL TRACE.h5 TOPK
      one route of trace row 0 to an idle daemon under --policy cost:
      "policy" and "rule" are "cost", "costs" has K numbers, the chosen
      worker has the least, and every cost equals the cost model's step
      time of that request alone, recomputed here from GET /v1/config's
      coefficients and the counts (docs/routing.md: t0 + L a + b U + c +
      d kv, U = sum of min(1, top_k c / layer sum), kv = layer sum / top_k);
      explain shows the same costs and every worker's terms; /metrics
      shows the chosen worker's expected distinct experts = U.
  cost_policy_check.py many URL TRACE.h5 FROM TO
      routes rows FROM..TO-1 (ids r<row>): each answer's costs are K
      numbers and its worker their argmin; explain agrees.
  cost_policy_check.py full URL TRACE.h5 ROW
      a route when every worker holds --max-batch (1) requests: every
      worker's terms show a wait > 0 and B >= 1.
  cost_policy_check.py retries URL N
      N overlapping streams through eldrd --proxy --policy cost whose
      decoder 1 answers 500: every one whole (retried elsewhere), decisions under the
      cost rule with the prefill's eldr_sig cells (dU > 0), a retry's
      decision names the failed worker and gives it no cost.
  cost_policy_check.py ejected URL N
      N streams to decoders that stall after their first chunk, while
      active probes eject every decoder: each request's decision ends
      "ejected", eldr_inflight_ejected_total counts them, and the estimate
      is empty while the streams are still open.
  cost_policy_check.py drained URL
      after every request is gone: each worker's expected distinct
      experts, members and kv tokens in /metrics are 0, and the snapshot's
      in-flight loads are 0.
"""
import base64
import json
import math
import re
import sys
import urllib.request

import h5py
import numpy as np


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read().decode()


def post(url, body):
    rq = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(rq, timeout=10) as r:
        return json.loads(r.read())


def counts_of(trace, row):
    with h5py.File(trace, "r") as f:
        return f["prefill_counts"][int(row)].astype(np.int64)


def route(url, trace, row, rid):
    c = counts_of(trace, row)
    body = {"request_id": rid,
            "counts": base64.b64encode(c.astype("<i2").tobytes()).decode()}
    return c, post(url + "/v1/route", body)


def fail(msg):
    print(msg)
    sys.exit(1)


def check_argmin(a, K):
    costs = a.get("costs")
    if a.get("policy") != "cost" or a.get("rule") != "cost":
        fail("policy/rule %r/%r, wanted cost/cost" % (a.get("policy"), a.get("rule")))
    if not isinstance(costs, list) or len(costs) != K or not all(
            isinstance(x, (int, float)) for x in costs):
        fail("costs %r: wanted %d numbers" % (costs, K))
    w = a["worker_index"]
    if any(costs[w] > x * (1 + 1e-9) for x in costs):
        fail("worker %d has cost %g, not the least of %r" % (w, costs[w], costs))
    return costs


def metric(text, name, worker):
    m = re.search(r'^%s\{worker="%s"\} (\S+)$' % (name, re.escape(worker)), text, re.M)
    if not m:
        fail("no %s{worker=%s} in /metrics" % (name, worker))
    return float(m.group(1))


def first(url, trace, topk):
    topk = int(topk)
    cfg = json.loads(get(url + "/v1/config"))
    if cfg["policy"] != "cost" or cfg["top_k"] != topk:
        fail("config %r" % cfg)
    c, a = route(url, trace, 0, "first")
    K = len(a["loads"])
    costs = check_argmin(a, K)
    L = c.shape[0]
    sums = c.sum(axis=1).astype(np.float64)
    U = 0.0
    kv = 0.0
    for l in range(L):
        if sums[l] <= 0:
            continue
        tokens = sums[l] / topk
        kv = max(kv, tokens)
        U += float(np.minimum(1.0, c[l] / tokens).sum())
    m = cfg["cost_model"]
    want = (m["t0"] + L * m["a"] + m["b"] * U + m["c"] * 1 + m["d"] * kv) * 1e3
    for k, x in enumerate(costs):
        if abs(x - want) > 1e-6 * want:
            fail("worker %d: cost %.9g ms, the model gives %.9g ms (U %.4f, kv %g)" %
                 (k, x, want, U, kv))
    e = json.loads(get(url + "/v1/explain/first"))
    if e.get("costs") != costs or e.get("policy") != "cost":
        fail("explain costs %r != %r" % (e.get("costs"), costs))
    terms = e.get("cost_terms")
    if not isinstance(terms, list) or len(terms) != K:
        fail("explain cost_terms %r" % terms)
    for k, t in enumerate(terms):
        for key in ("B", "U", "dU", "kv", "t_before_ms", "t_after_ms", "wait_ms", "cost_ms"):
            if key not in t:
                fail("terms[%d] lacks %s: %r" % (k, key, t))
        if t["B"] != 0 or t["U"] != 0 or abs(t["dU"] - U) > 1e-3 * U or t["wait_ms"] != 0 \
                or abs(t["cost_ms"] - costs[k]) > 1e-9 * costs[k]:
            fail("terms[%d] %r: wanted B 0, U 0, dU %g, no wait" % (k, t, U))
    met = get(url + "/metrics")
    got = metric(met, "eldr_cost_expected_experts", a["worker"])
    if abs(got - U) > 1e-3 * U:
        fail("eldr_cost_expected_experts %g, wanted U %g" % (got, U))
    if metric(met, "eldr_cost_members", a["worker"]) != 1:
        fail("eldr_cost_members of %s is not 1" % a["worker"])
    if 'eldr_policy_info{policy="cost"} 1' not in met:
        fail("no eldr_policy_info{policy=\"cost\"} 1")


def many(url, trace, lo, hi):
    for row in range(int(lo), int(hi)):
        _, a = route(url, trace, row, "r%d" % row)
        costs = check_argmin(a, len(a["loads"]))
        e = json.loads(get(url + "/v1/explain/r%d" % row))
        if e.get("costs") != costs or e.get("worker_index") != a["worker_index"]:
            fail("explain of r%d disagrees with its answer" % row)


def full(url, trace, row):
    _, a = route(url, trace, row, "full")
    check_argmin(a, len(a["loads"]))
    e = json.loads(get(url + "/v1/explain/full"))
    for k, t in enumerate(e["cost_terms"]):
        if not (t["B"] >= 1 and t["wait_ms"] > 0):
            fail("terms[%d] %r: a full batch shows no wait" % (k, t))


def drained(url):
    met = get(url + "/metrics")
    snap = json.loads(get(url + "/v1/snapshot"))
    for w in snap["workers"]:
        if w["inflight"] != 0:
            fail("worker %s still has %d in flight" % (w["name"], w["inflight"]))
        for name in ("eldr_cost_expected_experts", "eldr_cost_members", "eldr_cost_kv_tokens"):
            v = metric(met, name, w["name"])
            if v != 0:
                fail("%s{worker=%s} = %g after every request left" % (name, w["name"], v))


def completion(url, rid, stream=False, timeout=20):
    import http.client
    import urllib.parse
    p = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(p.hostname, p.port, timeout=timeout)
    c.request("POST", "/v1/completions",
              json.dumps({"prompt": "a prompt %s" % rid, "max_tokens": 4, "stream": stream}),
              {"X-Request-Id": rid, "Content-Type": "application/json"})
    return c, c.getresponse()


def retries(url, n):
    import threading
    import time
    res = {}

    def one(i):
        c, r = completion(url, "rt%d" % i, stream=True)
        res[i] = (r.status, r.read())
        c.close()
    ts = []
    for i in range(int(n)):   # overlapping streams: idle workers are few
        ts.append(threading.Thread(target=one, args=(i,)))
        ts[-1].start()
        time.sleep(0.02)
    for t in ts:
        t.join()
    for i in range(int(n)):
        st, body = res.get(i, (0, b""))
        if st != 200 or not body.rstrip().endswith(b"data: [DONE]"):
            fail("rt%d: HTTP %d %r" % (i, st, body[-200:]))
    retried = 0
    for i in range(int(n)):
        e = json.loads(get(url + "/v1/explain/rt%d" % i))
        if e.get("policy") != "cost" or e.get("rule") != "cost":
            fail("rt%d decided by %r/%r" % (i, e.get("policy"), e.get("rule")))
        if e["signal"]["source"] != "eldr_sig" or not any(
                t and t["dU"] > 0 for t in e["cost_terms"]):
            fail("rt%d: no cells from eldr_sig: %r" % (i, e["signal"]))
        for x in e.get("ineligible", []):
            if x["why"] == "failed this request":
                retried += 1
                if e["costs"][x["worker_index"]] is not None:
                    fail("rt%d: the failed worker has a cost" % i)
    if not retried:
        fail("no decision was a retry")


def ejected(url, n):
    import threading
    import time
    n = int(n)
    conns = []
    for i in range(n):
        c, r = completion(url, "ej%d" % i, stream=True, timeout=30)
        r.fp.readline()   # the first chunk: routed and streaming
        conns.append((c, r))
    for _ in range(100):
        met = get(url + "/metrics")
        got = sum(float(v) for v in
                  re.findall(r"^eldr_inflight_ejected_total\{[^}]*\} (\S+)$", met, re.M))
        if got >= n:
            break
        time.sleep(0.1)
    else:
        fail("eldr_inflight_ejected_total never reached %d" % n)
    for i in range(n):
        e = json.loads(get(url + "/v1/explain/ej%d" % i))
        if e.get("ended") != "ejected":
            fail("ej%d ended %r" % (i, e.get("ended")))
    met = get(url + "/metrics")
    for name in ("eldr_cost_members", "eldr_cost_expected_experts", "eldr_inflight"):
        vals = re.findall(r"^%s\{[^}]*\} (\S+)$" % name, met, re.M)
        if len(vals) != 4 or any(float(v) != 0 for v in vals):
            fail("%s %r while the streams are open" % (name, vals))
    for c, r in conns:
        c.close()


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"first": first, "many": many, "full": full, "drained": drained, "retries": retries,
     "ejected": ejected}[cmd](*args)
