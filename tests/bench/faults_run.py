#!/usr/bin/python3
"""faults_run.py - the fault run of docs/reliability.md ("What a client
sees under faults"): eldrd --proxy against the stand-ins of
tests/e2e/fake_pd.py with one fault at a time, and what the clients saw,
as `make bench` rows (what, size, seconds, rate). Run by
tests/bench/faults.sh. A benchmark script, never part of eldr.

    faults_run.py ROOT BIN TMP

Faults: every decoder dead; one decoder flapping (500 every other
second, its /health too); one decoder resetting every stream after its
first chunk; one decoder a blackhole (accepts, never answers). Each run
sends its requests 4 at a time and counts what came back."""
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

ROOT, BIN, TMP = sys.argv[1:4]
ELDRD = os.path.join(ROOT, BIN, "eldrd")
PY = "/usr/bin/python3"
SMALL = os.path.join(ROOT, "samples", "small.h5")
MODEL = os.path.join(TMP, "m.h5")
procs = []


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def standins(name, *args):
    ports = os.path.join(TMP, name + ".ports")
    procs.append(subprocess.Popen([PY, os.path.join(ROOT, "tests/e2e/fake_pd.py"), SMALL, ports,
                                   os.path.join(TMP, name + ".jsonl"), *args,
                                   "--max-seconds", "120"]))
    for _ in range(100):
        if os.path.exists(ports) and os.path.getsize(ports):
            break
        time.sleep(0.1)
    p = json.load(open(ports))
    return (",".join("http://127.0.0.1:%d" % x for x in p["prefill"]),
            ["http://127.0.0.1:%d" % x for x in p["decode"]])


def eldrd(name, *args):
    port = free_port()
    log = open(os.path.join(TMP, name + ".log"), "w")
    procs.append(subprocess.Popen([ELDRD, "-m", MODEL, "--listen", "127.0.0.1:%d" % port,
                                   "--max-conns-per-ip", "200", *args], stderr=log))
    url = "http://127.0.0.1:%d" % port
    for _ in range(100):
        try:
            call(url, "GET", "/livez")
            break
        except OSError:
            time.sleep(0.1)
    return url


def call(url, method, path, body=None, timeout=30):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    c.request(method, path, json.dumps(body) if body is not None else None)
    r = c.getresponse()
    try:
        data = r.read()
    except http.client.IncompleteRead as e:
        data = e.partial
    c.close()
    return r.status, dict(r.getheaders()), data


def one(url, i, stream):
    t0 = time.time()
    try:
        st, hd, data = call(url, "POST", "/v1/completions",
                            {"prompt": "fault run %d" % i, "max_tokens": 4, "stream": stream})
    except OSError as e:
        return ("conn", time.time() - t0, str(e))
    dt = time.time() - t0
    if st != 200:
        return ("%d%s" % (st, "+RA" if "Retry-After" in hd else ""), dt, data[:120])
    if stream and not data.rstrip().endswith(b"data: [DONE]"):
        return ("broken stream", dt, data[-120:])
    return ("ok", dt, b"")


def run(url, n, stream=False):
    t0 = time.time()
    with ThreadPoolExecutor(4) as ex:
        res = list(ex.map(lambda i: one(url, i, stream), range(n)))
    return res, time.time() - t0


def summary(res):
    kinds = {}
    for k, _, _ in res:
        kinds[k] = kinds.get(k, 0) + 1
    lat = sorted(d for _, d, _ in res)
    return kinds, lat[len(lat) // 2], lat[min(len(lat) - 1, int(len(lat) * 0.99))]


def metric(url, name):
    text = call(url, "GET", "/metrics")[2].decode()
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith(name + "{") or line.startswith(name + " "))


def row(what, size, secs, text):
    print("%s\t%s\t%.3f\t%s" % (what, size, secs, text))
    sys.stdout.flush()


def fmt(kinds):
    return ", ".join("%s %d" % kv for kv in sorted(kinds.items(), key=lambda kv: -kv[1]))


try:
    subprocess.run([os.path.join(ROOT, BIN, "eldr"), "fit", SMALL, "-k", "4", "-o", MODEL,
                    "--variant", "count", "--layers", "all", "--seed", "1"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    common = ["--eject-after", "3", "--eject-time", "2", "--health-interval", "0.5",
              "--tau", "2"]

    # 1. every decoder dead
    pf, dc = standins("dead", "--prefill", "1", "--decode", "4", "--chunks", "2",
                      "--chunk-gap", "0.02")
    dead = ",".join("http://127.0.0.1:%d" % free_port() for _ in range(4))
    url = eldrd("dead", "--proxy", "--prefill", pf, "--decode", dead, *common)
    t0 = time.time()
    while call(url, "GET", "/healthz")[0] != 503 and time.time() - t0 < 10:
        time.sleep(0.05)
    ready = time.time() - t0
    res, secs = run(url, 100)
    kinds, p50, p99 = summary(res)
    res2, secs2 = run(url, 100, stream=True)
    kinds2 = summary(res2)[0]
    row("faults: every decoder dead (probes every 0.5 s)", "100 + 100 streamed", secs + secs2,
        "/healthz 503 after %.2f s; plain: %s (p50 %.1f ms); streamed: %s; no stream began"
        % (ready, fmt(kinds), p50 * 1e3, fmt(kinds2)))

    # 2. one decoder flapping: 500 every other second, /health too
    pf, dc = standins("flap", "--prefill", "1", "--decode", "4", "--flap-decode", "1",
                      "--flap-period", "1", "--chunks", "2", "--chunk-gap", "0.02")
    url = eldrd("flap", "--proxy", "--prefill", pf, "--decode", ",".join(dc), *common)
    res, secs = run(url, 400)
    kinds, p50, p99 = summary(res)
    row("faults: one decoder of 4 flapping (500 every other second)", "400 requests", secs,
        "%s; retried %d, ejections %d; p50 %.1f ms, p99 %.1f ms"
        % (fmt(kinds), metric(url, "eldr_proxy_retries_total"),
           metric(url, "eldr_upstream_ejections_total"), p50 * 1e3, p99 * 1e3))

    # 3. one decoder resetting every stream after its first chunk
    pf, dc = standins("reset", "--prefill", "1", "--decode", "4", "--reset-decode", "1",
                      "--chunks", "2", "--chunk-gap", "0.02")
    url = eldrd("reset", "--proxy", "--prefill", pf, "--decode", ",".join(dc),
                "--eject-after", "3", "--eject-time", "30", "--health-interval", "0", "--tau", "2")
    res, secs = run(url, 200, stream=True)
    kinds, p50, p99 = summary(res)
    row("faults: one decoder of 4 resetting every stream midway", "200 streams", secs,
        "%s (each broken stream ends with an error event); ejections %d"
        % (fmt(kinds), metric(url, "eldr_upstream_ejections_total")))

    # 4. one decoder a blackhole: accepts, never answers
    bh = socket.socket()
    bh.bind(("127.0.0.1", 0))
    bh.listen(256)
    held = []
    threading.Thread(target=lambda: [held.append(bh.accept()[0]) for _ in iter(int, 1)],
                     daemon=True).start()
    pf, dc = standins("hole", "--prefill", "1", "--decode", "4", "--chunks", "2",
                      "--chunk-gap", "0.02")
    dc[1] = "http://127.0.0.1:%d" % bh.getsockname()[1]
    url = eldrd("hole", "--proxy", "--prefill", pf, "--decode", ",".join(dc),
                "--eject-after", "3", "--eject-time", "30", "--health-interval", "0",
                "--decode-timeout", "2", "--tau", "2")
    res, secs = run(url, 200)
    kinds, p50, p99 = summary(res)
    slow = sum(1 for _, d, _ in res if d > 1.5)
    row("faults: one decoder of 4 a blackhole (--decode-timeout 2)", "200 requests", secs,
        "%s; %d waited out the limit before its ejection (p99 %.2f s, p50 %.1f ms)"
        % (fmt(kinds), slow, p99, p50 * 1e3))
finally:
    for p in procs:
        p.kill()
