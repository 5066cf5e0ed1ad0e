#!/bin/sh
# tests/e2e/midstream.sh - eldrd --proxy with decoders that break streams
# after their first byte (issue 31, item 2; docs/reliability.md, "Dead
# upstreams"): one resets every stream midway (tests/e2e/fake_pd.py
# --reset-decode), one falls silent after its first chunk (--stall-decode).
# Each such stream ends, for the client, with an OpenAI-shaped SSE error
# event; the breaks count toward ejection like failures before the first
# byte, so both are ejected after --eject-after of them, and every stream
# after that completes; eldrd's log names the request and the instance.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs midstream

"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --variant count --layers all --seed 1 >/dev/null 2>&1
standins ms --prefill 1 --decode 4 --reset-decode 1 --stall-decode 2 --chunks 2 --chunk-gap 0.05
start ms -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$DC" --tau 0 --eject-after 2 \
    --eject-time 60 --upstream-timeout 1 --health-interval 0 || exit 0
$PY - "$URL" "$DC" "$TMP/ms.log" <<'PYEOF'
import http.client, json, sys, time, urllib.parse
URL, DC, LOG = sys.argv[1], sys.argv[2].split(","), sys.argv[3]


def ok(name, cond, *why):
    print(("ok - " if cond else "not ok - ") + name)
    for w in ([] if cond else why):
        print("#   " + str(w)[:600])
    sys.stdout.flush()


def stream(i):
    u = urllib.parse.urlparse(URL)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=15)
    rid = "ms-%d" % i
    c.request("POST", "/v1/completions",
              json.dumps({"prompt": "midstream prompt %d" % i, "max_tokens": 4, "stream": True}),
              {"X-Request-Id": rid, "Content-Type": "application/json"})
    r = c.getresponse()
    try:
        data = r.read()
    except http.client.IncompleteRead as e:
        data = e.partial   # eldrd cuts a broken stream: no last chunk, never "complete"
    events = [line[6:] for line in data.decode().split("\n") if line.startswith("data: ")]
    c.close()
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
    c.request("GET", "/v1/explain/" + rid)
    ex = json.loads(c.getresponse().read())
    c.close()
    return rid, r.status, events, ex.get("worker_index")


def metric(name, **labels):
    u = urllib.parse.urlparse(URL)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    want = ",".join('%s="%s"' % kv for kv in labels.items())
    for line in text.splitlines():
        if line.startswith(name + "{" + want + "}"):
            return float(line.split()[-1])
    return None


runs = [stream(i) for i in range(60)]
broken = [(rid, w, ev) for rid, st, ev, w in runs if ev[-1:] != ["[DONE]"]]
by = {1: [b for b in broken if b[1] == 1], 2: [b for b in broken if b[1] == 2]}
ok("streams on the resetting and the silent decoder break (%d and %d), no other does"
   % (len(by[1]), len(by[2])), len(by[1]) >= 1 and len(by[2]) >= 1 and
   len(broken) == len(by[1]) + len(by[2]), [(b[0], b[1], b[2][-1:]) for b in broken])
shape = [b for b in broken if not (lambda e: isinstance(e.get("error"), dict) and
         {"message", "type", "param", "code"} <= set(e["error"]))(json.loads(b[2][-1]))]
ok("each broken stream ends with an OpenAI-shaped error event {message, type, param, code}",
   broken and not shape, shape[:2], broken[:1])
last = {w: json.loads(by[w][-1][2][-1])["error"] for w in (1, 2) if by[w]}
ok("... a reset is an upstream_error (502), silence a timeout (504)",
   last.get(1, {}).get("code") == 502 and last.get(1, {}).get("type") == "upstream_error" and
   last.get(2, {}).get("code") == 504 and last.get(2, {}).get("type") == "timeout", last)
ok("the breaks count toward ejection: both decoders are ejected after 2 each",
   metric("eldr_upstream_ejected", role="decode", instance=DC[1]) == 1 and
   metric("eldr_upstream_ejected", role="decode", instance=DC[2]) == 1 and
   len(by[1]) == 2 and len(by[2]) == 2, len(by[1]), len(by[2]))
after = [stream(100 + i) for i in range(20)]
ok("... after which 20 more streams all complete ([DONE]) on the others",
   all(ev[-1:] == ["[DONE]"] and w in (0, 3) for _, st, ev, w in after),
   [(rid, w, ev[-1:]) for rid, st, ev, w in after if ev[-1:] != ["[DONE]"]])
log = open(LOG).read()
rid1 = by[1][0][0] if by[1] else "?"
rid2 = by[2][0][0] if by[2] else "?"
ok("the log names the request and the instance of each break and ejection",
   ("request %s: decode %s failed mid-stream" % (rid1, DC[1])) in log and
   ("request %s: decode %s failed mid-stream (silent" % (rid2, DC[2])) in log and
   ("decode %s ejected" % DC[1]) in log, log[-800:])
PYEOF
stop
