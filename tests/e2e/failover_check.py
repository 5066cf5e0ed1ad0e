#!/usr/bin/python3
"""failover_check.py - the checks of tests/e2e/failover.sh (which starts
the daemons and stand-ins and passes their URLs). Prints "ok - ..." or
"not ok - ..." lines."""
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

(DEAD, DEADP, DEADD, FAILS, PROBED, LATER, ENDLESS, ENDLESS_PID, SMALL, TMP,
 ROOT) = sys.argv[1:12]


def ok(name, cond, *why):
    print(("ok - " if cond else "not ok - ") + name)
    if not cond:
        for w in why:
            print("#   " + str(w)[:600])


def conn(url, timeout=10):
    u = urllib.parse.urlparse(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)


def post(url, path, body, timeout=10, rid=None):
    try:
        c = conn(url, timeout)
        h = {"Content-Type": "application/json"}
        if rid:
            h["X-Request-Id"] = rid
        c.request("POST", path, json.dumps(body), h)
        r = c.getresponse()
        return r.status, r.read()
    except (OSError, http.client.HTTPException) as e:
        return 0, str(e).encode()


def get(url, path):
    c = conn(url)
    c.request("GET", path)
    r = c.getresponse()
    return r.status, r.read().decode()


def metric(text, name, **labels):
    want = ",".join('%s="%s"' % kv for kv in labels.items())
    for line in text.splitlines():
        if line.startswith(name + ("{" + want + "}" if want else " ")):
            return float(line.rsplit(" ", 1)[1])
    return None


def wait_for(cond, secs):
    end = time.time() + secs
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def batch(url, n, tag, conc=8):
    res = [None] * n

    def one(i):
        res[i] = post(url, "/v1/completions", {"prompt": "%s prompt %d about topic %d" %
                                               (tag, i, i % 7), "max_tokens": 4},
                      rid="%s-%d" % (tag.replace(" ", "-"), i))
    for start in range(0, n, conc):
        th = [threading.Thread(target=one, args=(i,)) for i in range(start, min(n, start + conc))]
        for t in th:
            t.start()
        for t in th:
            t.join()
    return res


# ---- 1. one of two prefills and one of four decoders dead --------------------
res = batch(DEAD, 200, "first")
failed = [r for r in res if r[0] != 200]
ok("dead prefill and decoder: at most 2%% of 200 requests fail (%d failed)" % len(failed),
   len(failed) <= 4, failed[:3])
m = get(DEAD, "/metrics")[1]
ok("... both dead instances are ejected",
   metric(m, "eldr_upstream_ejected", role="prefill", instance=DEADP) == 1 and
   metric(m, "eldr_upstream_ejected", role="decode", instance=DEADD) == 1,
   [l for l in m.splitlines() if "ejected{" in l])
r0 = (metric(m, "eldr_proxy_retries_total", role="prefill"),
      metric(m, "eldr_proxy_retries_total", role="decode"))
ok("... the failures before the ejections were retried (prefill %s, decode %s)" % r0,
   r0[0] and r0[0] >= 1 and r0[1] and r0[1] >= 1, r0)
res = batch(DEAD, 100, "second")
m2 = get(DEAD, "/metrics")[1]
r1 = (metric(m2, "eldr_proxy_retries_total", role="prefill"),
      metric(m2, "eldr_proxy_retries_total", role="decode"))
ok("... once ejected, none of 100 more fails and none needs a retry",
   all(r[0] == 200 for r in res) and r1 == r0, r0, r1, [r for r in res if r[0] != 200][:2])
ex = [json.loads(get(DEAD, "/v1/explain/second-%d" % i)[1]) for i in range(100)]
why = {(w["worker_index"], w["why"]) for e in ex for w in e.get("ineligible", [])}
ok("... and explain says why worker 3 was left out: ejected",
   why == {(3, "ejected")} and all(e.get("worker_index") != 3 for e in ex), why)
st, body = get(DEAD, "/healthz")
j = json.loads(body)
ok("... /healthz is degraded and names them",
   st == 200 and j.get("status") == "degraded" and
   sorted(j.get("ejected", [])) == sorted(["prefill " + DEADP, "decode " + DEADD]), body)
st, body = get(DEAD, "/v1/snapshot")
pool = json.loads(body).get("pool", {})
ok("... the snapshot's pool shows them ejected, with their failures",
   pool.get("decode", [{}] * 4)[3].get("ejected") is True and
   pool["decode"][3].get("failures", 0) >= 3 and
   [p["ejected"] for p in pool.get("prefill", [])] == [False, True], pool)
ok("... in flight back to zero",
   wait_for(lambda: all(w["inflight"] == 0 for w in
                        json.loads(get(DEAD, "/v1/snapshot")[1])["workers"]), 5))

# ---- 2. a decoder that answers 500 -----------------------------------------------
res = batch(FAILS, 40, "fails")
m = get(FAILS, "/metrics")[1]
retried = metric(m, "eldr_proxy_retries_total", role="decode")
ok("a decoder answering 500: every request still gets 200 (retried %s times)" % retried,
   all(r[0] == 200 and json.loads(r[1]).get("decoder") != 1 for r in res) and retried >= 1,
   [r for r in res if r[0] != 200][:2])
ex = [json.loads(get(FAILS, "/v1/explain/fails-%d" % i)[1]) for i in range(40)]
retried_ex = [e for e in ex
              if any(w["why"] == "failed this request" for w in e.get("ineligible", []))]
ok("... explain names the failed worker of each retried request (%d)" % len(retried_ex),
   len(retried_ex) == retried and
   all([w["worker_index"] for w in e["ineligible"] if w["why"] == "failed this request"] == [1]
       for e in retried_ex), [e.get("ineligible") for e in ex][:6])
name1 = json.loads(get(FAILS, "/v1/snapshot")[1])["pool"]["decode"][1]["name"]
ok("... and it is ejected (%s retries: 3 failures in a row, and those already on their way)"
   % retried, metric(m, "eldr_upstream_ejected", role="decode", instance=name1) == 1 and
   3 <= retried <= 3 + 8, retried)
res = batch(FAILS, 40, "fails again")
m = get(FAILS, "/metrics")[1]
ok("... after which 40 more need no retry",
   all(r[0] == 200 for r in res) and
   metric(m, "eldr_proxy_retries_total", role="decode") == retried,
   metric(m, "eldr_proxy_retries_total", role="decode"))

# ---- 3. active probes -------------------------------------------------------------
snap = lambda: json.loads(get(PROBED, "/v1/snapshot")[1])["pool"]["decode"]
ok("probes: a dead decoder is ejected with no request sent",
   wait_for(lambda: snap()[3]["ejected"], 5), snap())
ok("... and one whose /health answers 503", wait_for(lambda: snap()[2]["ejected"], 5), snap())
ok("... the live ones stay in rotation", not snap()[0]["ejected"] and not snap()[1]["ejected"],
   snap())
later = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests/e2e/fake_pd.py"), SMALL,
                          os.path.join(TMP, "later.ports"), os.path.join(TMP, "later.jsonl"),
                          "--prefill", "1", "--decode", "1", "--bind-decode", LATER,
                          "--max-seconds", "30"])
try:
    ok("... and the dead one comes back once its port answers",
       wait_for(lambda: not snap()[3]["ejected"], 8), snap())
finally:
    later.kill()

# ---- 4. a client that stops reading an endless stream ----------------------------
def rss(pid):
    with open("/proc/%s/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    return -1


u = urllib.parse.urlparse(ENDLESS)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
s.connect((u.hostname, u.port))
body = json.dumps({"prompt": "an endless story", "max_tokens": 100000, "stream": True})
s.sendall(("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           "Content-Length: %d\r\n\r\n%s" % (len(body), body)).encode())
first = s.recv(4096)
r0 = rss(ENDLESS_PID)
time.sleep(6)   # not reading: the decoder keeps sending as fast as it may
r1 = rss(ENDLESS_PID)
ok("a client that stops reading an endless stream costs eldrd under 64 MB (%d -> %d MB)" %
   (r0, r1), first.startswith(b"HTTP/1.1 200") and r1 - r0 < 64 and r1 < 128, first[:80])
got = 0
s.settimeout(5)
end = time.time() + 3
try:
    while time.time() < end and got < 8 << 20:
        d = s.recv(1 << 16)
        if not d:
            break
        got += len(d)
except OSError:
    pass
ok("... and the stream goes on when it reads again (%d MB read in 3 s)" % (got >> 20),
   got >= 4 << 20, got)
s.close()
