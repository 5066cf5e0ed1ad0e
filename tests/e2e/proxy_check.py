#!/usr/bin/python3
"""proxy_check.py - the checks of tests/e2e/proxy.sh against running
eldrd proxies and the stand-ins of fake_pd.py. Prints "ok - NAME" or
"not ok - NAME" lines. Test-only.

    proxy_check.py TMP MODEL.h5 TRACE.h5 MAIN TAU0 NOSIG DEADPF DEADDC PD.jsonl NOSIG.jsonl
                   STOCK STOCK.jsonl
"""
import hashlib
import http.client
import json
import re
import socket
import sys
import threading
import time
import urllib.parse

import h5py
import numpy as np

TMP, MODEL, TRACE, MAIN, TAU0, NOSIG, DEADPF, DEADDC, PD_REC, NOSIG_REC, STOCK, STOCK_REC = \
    sys.argv[1:13]


def ok(name, cond, *why):
    print(("ok - " if cond else "not ok - ") + name)
    if not cond:
        for w in why:
            print("#   " + str(w)[:600])
    sys.stdout.flush()


def conn(url, timeout=10):
    u = urllib.parse.urlparse(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)


def post(url, path, body, headers=None, timeout=10):
    c = conn(url, timeout)
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    c.request("POST", path, body=json.dumps(body) if not isinstance(body, str) else body,
              headers=h)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data, dict(r.getheaders())


def get_json(url, path):
    c = conn(url)
    c.request("GET", path)
    r = c.getresponse()
    return json.loads(r.read())


def metrics(url):
    c = conn(url)
    c.request("GET", "/metrics")
    return c.getresponse().read().decode()


def inflight(url):
    return [w["inflight"] for w in get_json(url, "/v1/snapshot?decisions=0")["workers"]]


def wait_idle(url, secs=5):
    t = time.time() + secs
    while time.time() < t:
        if sum(inflight(url)) == 0:
            return True
        time.sleep(0.05)
    return False


def records(path):
    out = []
    with open(path) as f:
        for line in f:
            out.append(json.loads(line))
    return out


# ---- the oracle: the worker a tau-0 band picks (count variant, every layer)
with h5py.File(MODEL, "r") as f:
    CENT = f["centroids"][:].astype(np.float64)
with h5py.File(TRACE, "r") as f:
    COUNTS = f["prefill_counts"][:]


def oracle(prompt):
    row = int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % COUNTS.shape[0]
    s = COUNTS[row].astype(np.float64).ravel()
    s /= np.linalg.norm(s)
    return int(np.argmax(CENT @ s))


# ---- 1. non-streaming: relayed intact, handoff forwarded, oracle ----------
st, data, _ = post(MAIN, "/v1/completions", {"prompt": "hello world", "max_tokens": 8},
                   {"X-Request-Id": "req-json-1"})
ans = json.loads(data) if st == 200 else {}
ok("a completion is proxied: 200 with the decode instance's answer", st == 200 and
   ans.get("request_id") == "req-json-1" and "decoded by" in ans["choices"][0]["text"], st, data)
rec = [r for r in records(PD_REC) if r.get("request_id") == "req-json-1"]
ok("the decode instance got exactly one request with the client's X-Request-Id", len(rec) == 1,
   rec)
if rec:
    b = rec[0]["body"]
    kv = b.get("kv_transfer_params", {})
    ok("... the prefill's kv_transfer_params, without eldr_sig, with prefill_created",
       "eldr_sig" not in kv and kv.get("remote_block_ids") == [1, 2, 3] and
       kv.get("prefill_created") == 1700000000 and kv.get("remote_engine_id", "").startswith("p")
       and kv.get("transfer_id") == "xfer-req-json-1", kv)
    ok("... prompt = the prefill's token ids, add_special_tokens false",
       b.get("prompt") == [ord(c) % 1000 for c in "hello world"] and
       b.get("add_special_tokens") is False and b.get("max_tokens") == 8, b)
    ok("... sent to the worker the decision names (explain)",
       get_json(MAIN, "/v1/explain/req-json-1")["worker_index"] == rec[0]["instance"])

prompts = ["oracle prompt %d about %s" % (i, w) for i, w in
           enumerate(["rivers", "proofs", "poems", "code", "law", "chemistry"] * 8)]
wrong = []
for i, p in enumerate(prompts):
    st, data, _ = post(TAU0, "/v1/completions", {"prompt": p, "max_tokens": 4},
                       {"X-Request-Id": "oracle-%d" % i})
    got = json.loads(data).get("decoder") if st == 200 else None
    if got != oracle(p):
        wrong.append((p, got, oracle(p)))
ok("tau 0: each of %d requests reaches the worker the band picks (an independent oracle)"
   % len(prompts), not wrong, wrong[:3])
used = {oracle(p) for p in prompts}
ok("... and the oracle spreads them over several workers", len(used) >= 2, used)

# ---- 2. prefill-only, stock engine, bad bodies -----------------------------
st, data, _ = post(MAIN, "/v1/completions", {"prompt": "only one", "max_tokens": 1},
                   {"X-Request-Id": "one-token"})
a = json.loads(data) if st == 200 else {}
ok("max_tokens 1: the prefill's answer, no decode (finish_reason length, no KV params)",
   st == 200 and a["choices"][0]["finish_reason"] == "length" and "kv_transfer_params" not in a
   and "token_ids" not in a["choices"][0], data)
time.sleep(0.3)
rel = [r for r in records(PD_REC) if r.get("release") and
       r["body"].get("transfer_id") == "xfer-one-token"]
ok("... and the prefill's KV is released at a decode instance", len(rel) == 1, rel)
for i in range(5):
    st, data, _ = post(NOSIG, "/v1/completions", {"prompt": "stock %d" % i, "max_tokens": 4})
ok("a stock engine (no eldr_sig) is proxied too", st == 200, st, data)
m = metrics(NOSIG)
ok("... /metrics counts the requests without a signature",
   "eldr_proxy_no_signature_total 5" in m, [l for l in m.splitlines() if "no_sig" in l])
for body, where in (("{nope", "body"), ({"prompt": ["a", "b"]}, "prompt"),
                    ({"prompt": "x", "n": 2}, "n"),
                    ({"prompt": "x", "kv_transfer_params": {}}, "kv_transfer_params")):
    st, data, _ = post(MAIN, "/v1/completions", body)
    j = json.loads(data) if data.startswith(b"{") else {}
    ok("a bad body (%s) gets 400 naming %s" % (where, where), st == 400 and j.get("error", {}).get("param") == where,
       st, data)
st, data, _ = post(MAIN, "/v1/chat/completions", {"messages": []})
ok("a chat without messages gets 400", st == 400, st, data)
st, data, _ = post(MAIN, "/v1/chat/completions",
                   {"messages": [{"role": "user", "content": "hi chat"}], "max_tokens": 4},
                   {"X-Request-Id": "chat-1"})
j = json.loads(data) if data.startswith(b"{") else {}
rec = [r for r in records(PD_REC) if r.get("request_id") == "chat-1"]
ok("--pd-protocol eldr: a chat gets 400 naming --pd-protocol vllm (the authors' proxy refuses "
   "chat too), and reaches no instance",
   st == 400 and j.get("error", {}).get("param") == "path" and "--pd-protocol vllm" in j.get("error", {}).get("message", "")
   and not rec, st, data, rec)

# ---- stock vLLM's handoff (--pd-protocol vllm) -----------------------------
wrong = []
for i, p in enumerate(prompts[:12]):
    st, data, _ = post(STOCK, "/v1/completions", {"prompt": p, "max_tokens": 9, "min_tokens": 2},
                       {"X-Request-Id": "stock-%d" % i})
    got = json.loads(data).get("decoder") if st == 200 else None
    if got != oracle(p):
        wrong.append((st, got, oracle(p), data[:200]))
ok("--pd-protocol vllm: each request reaches the worker the band picks", not wrong, wrong[:2])
rec = [r for r in records(STOCK_REC) if r.get("request_id") == "stock-0"]
if rec:
    b = rec[0]["body"]
    ok("... the decoder gets the client's request (prompt text, max_tokens, min_tokens) and "
       "the handoff without eldr_sig",
       b.get("prompt") == prompts[0] and b.get("max_tokens") == 9 and b.get("min_tokens") == 2
       and b["kv_transfer_params"].get("remote_block_ids") == [7, 8] and
       "eldr_sig" not in b["kv_transfer_params"] and "prefill_created" not in
       b["kv_transfer_params"], b)
else:
    ok("... the decoder gets the client's request", False, "no record for stock-0")
ok("... and the prefill's remote_request_id (NixlConnector's) in the handoff",
   bool(rec) and rec[0]["body"]["kv_transfer_params"].get("remote_request_id") == "cmpl-stock-0-0",
   rec[:1])
st, data, _ = post(STOCK, "/v1/chat/completions",
                   {"messages": [{"role": "user", "content": "hi stock chat"}], "max_tokens": 4},
                   {"X-Request-Id": "stock-chat"})
rec = [r for r in records(STOCK_REC) if r.get("request_id") == "stock-chat"]
ok("--pd-protocol vllm: a chat is proxied; its decode gets the messages and the handoff",
   st == 200 and len(rec) == 1 and rec[0]["body"].get("messages") ==
   [{"role": "user", "content": "hi stock chat"}] and
   rec[0]["body"]["kv_transfer_params"].get("remote_block_ids") == [7, 8], st, data, rec)

# ---- 3. streams -------------------------------------------------------------


def stream(url, body, rid=None, stop_after=None, timeout=20):
    """Events as (receive time, text); stops reading after stop_after events."""
    u = urllib.parse.urlparse(url)
    s = socket.create_connection((u.hostname, u.port), timeout=timeout)
    data = json.dumps(body).encode()
    head = ("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n%s\r\n" % (len(data), "X-Request-Id: %s\r\n" % rid if rid else ""))
    t0 = time.time()
    s.sendall(head.encode() + data)
    buf = b""
    events = []
    status = None
    while True:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        buf += chunk
        if status is None and b"\r\n" in buf:
            status = int(buf.split(b" ", 2)[1])
        while b"\n\n" in buf.split(b"\r\n\r\n", 1)[-1] if b"\r\n\r\n" in buf else False:
            head_part, rest = buf.split(b"\r\n\r\n", 1)
            ev, rest = rest.split(b"\n\n", 1)
            # strip chunked framing lines (hex sizes) around the event
            lines = [l for l in ev.split(b"\r\n") if l.startswith(b"data: ") or l.startswith(b"data:")]
            for l in lines:
                events.append((time.time() - t0, l[6:].decode()))
            buf = head_part + b"\r\n\r\n" + rest
        if events and events[-1][1] == "[DONE]":
            break
        if stop_after and len(events) >= stop_after:
            break
    s.close()
    return status, events


st, ev = stream(MAIN, {"prompt": "stream me", "max_tokens": 8, "stream": True}, "stream-1")
texts = [e[1] for e in ev]
ok("a stream is relayed: 200, the first token, 3 decode chunks in order, [DONE]",
   st == 200 and len(texts) == 5 and texts[-1] == "[DONE]" and
   [json.loads(t)["chunk"] for t in texts[1:4]] == [0, 1, 2], st, texts)
if len(ev) == 5:
    first = json.loads(texts[0])
    ok("... the first event is the prefill's token, not finished",
       first["choices"][0]["finish_reason"] is None and "kv_transfer_params" not in first, first)
    ok("... chunks arrive as sent, before the stream ends (0.3 s apart)",
       ev[1][0] < ev[4][0] - 0.5 and ev[2][0] - ev[1][0] > 0.15, [e[0] for e in ev])
st, ev = stream(MAIN, {"prompt": "slow start", "max_tokens": 8, "stream": True, "slow": True},
                "stream-slow")
ok("a slow decoder does not hold back the first token (it arrives at once)",
   st == 200 and ev and ev[0][0] < 0.5, st, [e[0] for e in ev])
ok("... and past --upstream-timeout the stream ends with an error event (504)",
   len(ev) >= 2 and "error" in ev[-1][1] and "504" in ev[-1][1], [e[1][:120] for e in ev])
# (MAIN runs --stream-start prefill, the reference's prefill-first delivery;
# the default, decoder, holds the status and the first token for the decoder)
st, ev = stream(TAU0, {"prompt": "slow start", "max_tokens": 8, "stream": True, "slow": True},
                "stream-slow-held")
ok("--stream-start decoder (the default): the stream starts once the decoder answered (after "
   "its 3 s), whole, first token first", st == 200 and ev and ev[0][0] > 2.5 and
   ev[-1][1] == "[DONE]" and "finish_reason" in ev[0][1], st, [(round(e[0], 2), e[1][:60]) for e in ev])
ok("in flight back to zero after streams", wait_idle(MAIN), inflight(MAIN))
st, ev = stream(STOCK, {"prompt": "stock stream", "max_tokens": 8, "stream": True}, "stock-s")
ok("--pd-protocol vllm streams the decoder's answer whole: 3 chunks and [DONE]",
   st == 200 and [e[1] for e in ev][-1:] == ["[DONE]"] and len(ev) == 4 and
   json.loads(ev[0][1])["chunk"] == 0, st, [e[1][:80] for e in ev])
ok("... in flight back to zero", wait_idle(STOCK), inflight(STOCK))

# a client that leaves mid-stream is finished
before = metrics(MAIN)
st, ev = stream(MAIN, {"prompt": "leave early", "max_tokens": 8, "stream": True}, "leaver",
                stop_after=2)
ok("(a client reads two events and leaves)", st == 200 and len(ev) == 2, st, ev)
ok("a client that leaves mid-stream is finished: in flight back to zero", wait_idle(MAIN, 5),
   inflight(MAIN))
m = metrics(MAIN)
ok("... counted as client_gone", 'eldr_proxy_requests_total{outcome="client_gone"} 1' in m,
   [l for l in m.splitlines() if "client_gone" in l])
ok("... its decision is kept for explain", get_json(MAIN, "/v1/explain/leaver").get("request_id")
   == "leaver")


def leave_at_first_byte(url, body):
    """Send a stream request, read one byte and close at once (a reset
    while eldrd still streams)."""
    u = urllib.parse.urlparse(url)
    s = socket.create_connection((u.hostname, u.port), timeout=5)
    data = json.dumps(body)
    s.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               "Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(data), data)).encode())
    got = s.recv(1)
    s.close()
    return got


# many clients leaving right after the first byte, one after another: the
# cancel and the end of the decode race each other
firsts = [leave_at_first_byte(MAIN, {"prompt": "leave at once %d" % i, "max_tokens": 8,
                                      "stream": True}) for i in range(60)]
st, _, _ = post(MAIN, "/v1/completions", {"prompt": "after the leavers", "max_tokens": 4})
ok("60 clients that leave at their first byte: each got it, and eldrd serves on",
   all(f == b"H" for f in firsts) and st == 200, firsts[:5], st)
ok("... in flight back to zero", wait_idle(MAIN, 5), inflight(MAIN))

# ---- 4. dead and slow upstreams; others served meanwhile -------------------
st, data, _ = post(DEADPF, "/v1/completions", {"prompt": "p", "max_tokens": 4})
j = json.loads(data) if data.startswith(b"{") else {}
ok("a dead prefill instance: 502 with a JSON error naming it", st == 502 and "prefill" in
   j.get("error", {}).get("message", ""), st, data)
to_dead = [p for p in prompts if oracle(p) == 3][:2]
res = [post(DEADDC, "/v1/completions", {"prompt": p, "max_tokens": 4}) for p in to_dead]
ok("a dead decode instance: retried once on the next best worker (200, decoded elsewhere)",
   to_dead and all(r[0] == 200 and json.loads(r[1]).get("decoder") != 3 for r in res),
   to_dead, res)
res = [post(DEADDC, "/v1/completions", {"prompt": p, "max_tokens": 4}) for p in prompts
       if oracle(p) != 3][:3]
ok("... while requests for the live decoders get 200", all(r[0] == 200 for r in res), res)
ok("... and nothing stays in flight", wait_idle(DEADDC), inflight(DEADDC))
m = metrics(DEADDC)
ok("... /metrics counts the retries and the dead decoder's failures",
   'eldr_proxy_retries_total{role="decode"} %d' % len(to_dead) in m and
   re.search(r'eldr_upstream_failures_total\{role="decode",instance="[^"]*"\} %d' %
             len(to_dead), m) is not None, [l for l in m.splitlines() if "retries" in l or
                                             "failures_total" in l])

slow = {}


def slow_one():
    t = time.time()
    slow["res"] = post(MAIN, "/v1/completions", {"prompt": "slow json", "max_tokens": 4,
                                                 "slow": True})
    slow["secs"] = time.time() - t


th = threading.Thread(target=slow_one)
th.start()
time.sleep(0.2)
t = time.time()
st_fast, _, _ = post(MAIN, "/v1/completions", {"prompt": "fast meanwhile", "max_tokens": 4})
fast_secs = time.time() - t
th.join()
ok("a slow decoder: 504 after --upstream-timeout (1.5 s)",
   slow["res"][0] == 504 and 1.2 < slow["secs"] < 3.5, slow)
ok("... while another request is served at once", st_fast == 200 and fast_secs < 1.0,
   st_fast, fast_secs)
ok("... and nothing stays in flight", wait_idle(MAIN), inflight(MAIN))

# ---- 5. 256 concurrent streams (on the replica with the default timeout:
# the stand-ins, in Python, answer 256 at once slowly) ------------------------
results = [None] * 256


def one(i):
    try:
        results[i] = stream(TAU0, {"prompt": "many %d" % i, "max_tokens": 8, "stream": True},
                            "many-%d" % i, timeout=30)
    except OSError as e:
        results[i] = (None, [(0, str(e))])


threads = [threading.Thread(target=one, args=(i,)) for i in range(256)]
t = time.time()
for th in threads:
    th.start()
for th in threads:
    th.join()
good = sum(1 for st, ev in results if st == 200 and len(ev) == 5 and ev[-1][1] == "[DONE]")
ok("256 concurrent streams all complete (%.1f s)" % (time.time() - t), good == 256,
   "%d of 256" % good, [r for r in results if not (r[0] == 200 and len(r[1]) == 5)][:2])
ok("... in flight back to zero", wait_idle(TAU0, 10), inflight(TAU0))
snap = get_json(TAU0, "/v1/snapshot?decisions=4096")
ids = {d.get("request_id") for d in snap.get("decisions", [])}
ok("the snapshot (what live attach reads) shows the proxied decisions",
   "many-0" in ids and "many-255" in ids and "oracle-0" in ids, len(ids))
m = metrics(MAIN)
ok("/metrics counts proxied requests by outcome",
   'eldr_proxy_requests_total{outcome="ok"}' in m and "eldr_proxy_open 0" in m)

# proxy.sh then attaches the dashboard and stops MAIN
