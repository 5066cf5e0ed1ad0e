#!/usr/bin/python3
"""snapshot_load.py - the load of tests/e2e/snapshot_load.sh against a
running eldrd --proxy over bin/pd_instant. Test-only.

    snapshot_load.py URL FILL CLIENTS SECONDS SAMPLES RESULT.json

Fills the decision ring with FILL proxied requests (4 keep-alive clients),
then starts CLIENTS processes that loop GET /v1/snapshot?decisions=4096
and, while they run, times GET /healthz, GET /metrics and a proxied
request, one after the other, SAMPLES rounds or SECONDS at the most. The
latencies (ms: p50, max, n) go to RESULT.json; the checks are the
script's."""
import http.client
import json
import subprocess
import sys
import threading
import time
import urllib.parse

URL, FILL, CLIENTS, SECONDS, SAMPLES, RESULT = sys.argv[1:7]
FILL, CLIENTS, SECONDS, SAMPLES = int(FILL), int(CLIENTS), float(SECONDS), int(SAMPLES)
U = urllib.parse.urlparse(URL)
BODY = json.dumps({"prompt": " ".join("tok%d" % i for i in range(64)), "max_tokens": 8})
HDRS = {"Content-Type": "application/json"}


def conn():
    return http.client.HTTPConnection(U.hostname, U.port, timeout=10)


def call(c, method, path, body=None):
    c.request(method, path, body=body, headers=HDRS if body else {})
    r = c.getresponse()
    data = r.read()
    return r.status, data


def fill(n, bad):
    c = conn()
    for _ in range(n):
        st, _ = call(c, "POST", "/v1/completions", BODY)
        if st != 200:
            bad.append(st)
    c.close()


def main():
    result = {"fill_failed": 0}
    t0 = time.monotonic()
    bad = []
    ts = [threading.Thread(target=fill, args=(FILL // 4, bad)) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    result["fill_failed"] = len(bad)
    result["fill_s"] = round(time.monotonic() - t0, 3)
    c = conn()
    t = time.perf_counter()
    st, data = call(c, "GET", "/v1/snapshot?decisions=4096")
    result["snapshot_ms"] = round((time.perf_counter() - t) * 1e3, 2)
    result["snapshot_bytes"] = len(data)
    result["decisions"] = len(json.loads(data)["decisions"]) if st == 200 else -1
    c.close()

    # the snapshot loopers: separate processes, so that the timing loop
    # here does not share an interpreter with them
    stop = RESULT + ".stop"
    loop = ("import http.client,os,sys,time\n"
            "end=time.monotonic()+float(sys.argv[3])\n"
            "go=lambda: time.monotonic()<end and not os.path.exists(sys.argv[4])\n"
            "n=0\n"
            "while go():\n"
            "  try:\n"
            "    c=http.client.HTTPConnection(sys.argv[1],int(sys.argv[2]),timeout=10)\n"
            "    while go():\n"
            "      c.request('GET','/v1/snapshot?decisions=4096'); c.getresponse().read(); n+=1\n"
            "  except Exception:\n"
            "    time.sleep(0.01)\n"
            "print(n)\n")
    procs = [subprocess.Popen([sys.executable, "-c", loop, U.hostname, str(U.port),
                               str(SECONDS + 5), stop], stdout=subprocess.PIPE)
             for _ in range(CLIENTS)]
    time.sleep(1.0)   # let them queue
    lat = {"healthz": [], "metrics": [], "proxied": []}
    fails = 0
    c = conn()
    end = time.monotonic() + SECONDS
    for _ in range(SAMPLES):
        if time.monotonic() > end:
            break
        for what, method, path, body in (("healthz", "GET", "/healthz", None),
                                         ("metrics", "GET", "/metrics", None),
                                         ("proxied", "POST", "/v1/completions", BODY)):
            t = time.perf_counter()
            try:
                st, _ = call(c, method, path, body)
            except Exception:
                st = 0
                c = conn()
            lat[what].append((time.perf_counter() - t) * 1e3)
            fails += st != 200
        time.sleep(0.01)
    open(stop, "w").close()
    snaps = 0
    for p in procs:
        out, _ = p.communicate(timeout=15)
        snaps += int(out or 0)
    result["timing_failed"] = fails
    result["snapshots_during"] = snaps
    for what, v in lat.items():
        v.sort()
        q = lambda f: round(v[min(len(v) - 1, int(len(v) * f))], 2) if v else -1
        result[what] = {"n": len(v), "p50": q(0.5), "p90": q(0.9), "max": q(1)}
    json.dump(result, open(RESULT, "w"))


main()
