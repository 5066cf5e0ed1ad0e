#!/bin/sh
# tests/e2e/timeouts.sh - eldrd --proxy's time limits apart (issue 31,
# item 3; docs/reliability.md, "Timeouts"): --connect-timeout against an
# address whose SYNs go unanswered (a listener with its accept queue
# full), retried on another decoder; --decode-timeout against a decoder
# that accepts and never answers, retried; --prefill-timeout apart from
# --decode-timeout (a slow prefill is slow by right); --stream-idle-timeout
# against a stream that stalls after its first chunk, far below the
# first-byte limit.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs timeouts

"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --variant count --layers all --seed 1 >/dev/null 2>&1
# a blackhole (accepts, never reads or answers) and a SYN sink (a listener
# whose accept queue is full, so that a connect hangs)
$PY - "$TMP/holes" <<'PYEOF' &
import socket, sys, time
bh = socket.socket(); bh.bind(("127.0.0.1", 0)); bh.listen(64)
sink = socket.socket(); sink.bind(("127.0.0.1", 0)); sink.listen(0)
fill = []
for _ in range(4):   # fill the accept queue; later SYNs are dropped
    c = socket.socket(); c.setblocking(False)
    try:
        c.connect(sink.getsockname())
    except BlockingIOError:
        pass
    fill.append(c)
time.sleep(0.3)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d %d\n" % (bh.getsockname()[1], sink.getsockname()[1]))
import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
held = []
end = time.time() + 120
bh.settimeout(0.5)
while time.time() < end:
    try:
        held.append(bh.accept()[0])
    except socket.timeout:
        pass
PYEOF
PIDS="$PIDS $!"
i=0; while [ ! -s "$TMP/holes" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
read -r BH SINK <"$TMP/holes"
expect_fail2 "--connect-timeout 0 is refused" "--connect-timeout" \
    "$ELDRD" -m "$TMP/m.h5" --connect-timeout 0 --listen 127.0.0.1:1

standins t --prefill 1 --decode 4 --stall-decode 0 --chunks 2 --chunk-gap 0.05 --prefill-delay 1
LIVE=$(echo "$DC" | cut -d, -f2-)     # decoders 1..3 answer; 0 stalls its streams
STALL=$(echo "$DC" | cut -d, -f1)
# tau 2 is join-shortest-queue: a request alone goes to worker 0, and its
# retry to worker 1; so worker 0 is the faulty one in each eldrd
start sink -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "http://127.0.0.1:$SINK,$LIVE" --tau 2 \
    --eject-after 1 --connect-timeout 0.5 --health-interval 0 || exit 0
SINKURL=$URL
start hole -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "http://127.0.0.1:$BH,$LIVE" --tau 2 \
    --eject-after 1 --decode-timeout 0.7 --prefill-timeout 5 --health-interval 0 || exit 0
HOLEURL=$URL
start stall -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$STALL,$LIVE" --tau 2 \
    --decode-timeout 30 --stream-idle-timeout 0.5 --health-interval 0 || exit 0
STALLURL=$URL
start slowpf -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$LIVE,$STALL" --tau 2 \
    --prefill-timeout 0.5 --health-interval 0 || exit 0
SLOWURL=$URL
$PY - "$SINKURL" "$HOLEURL" "$STALLURL" "$SLOWURL" "$TMP" <<'PYEOF'
import http.client, json, sys, time, urllib.parse
SINK, HOLE, STALL, SLOW, TMP = sys.argv[1:6]


def ok(name, cond, *why):
    print(("ok - " if cond else "not ok - ") + name)
    for w in ([] if cond else why):
        print("#   " + str(w)[:600])
    sys.stdout.flush()


def call(url, method, path, body=None, rid=None):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=20)
    c.request(method, path, json.dumps(body) if body is not None else None,
              {"X-Request-Id": rid} if rid else {})
    r = c.getresponse()
    try:
        data = r.read()
    except http.client.IncompleteRead as e:
        data = e.partial   # a cut stream
    c.close()
    return r.status, data


def timed(url, rid, stream=False):
    t0 = time.time()
    body = {"prompt": "timeouts " + rid, "max_tokens": 4}
    if stream:
        body["stream"] = True
    st, data = call(url, "POST", "/v1/completions", body, rid)
    dt = time.time() - t0
    _, ex = call(url, "GET", "/v1/explain/" + rid)
    return st, data, dt, json.loads(ex)


def failed_first(ex):
    return any(i.get("worker_index") == 0 and i.get("why") == "failed this request"
               for i in ex.get("ineligible", []))


log = lambda name: open("%s/%s.log" % (TMP, name)).read()

st, data, dt, ex = timed(SINK, "sink-1")
ok("a decoder whose connect hangs: given up at --connect-timeout (0.5 s) and retried: 200 in "
   "%.2f s (1 s of prefill)" % dt, st == 200 and failed_first(ex) and 1.3 < dt < 3.0, st, dt, ex)
ok("... the log's ejection names --connect-timeout", "no connection in time (--connect-timeout)"
   in log("sink"), log("sink")[-500:])

st, data, dt, ex = timed(HOLE, "hole-1")
ok("a decoder that accepts and never answers: given up at --decode-timeout (0.7 s) and "
   "retried: 200 in %.2f s" % dt, st == 200 and failed_first(ex) and 1.5 < dt < 3.5, st, dt, ex)
ok("... the log's ejection names --decode-timeout", "no answer in time (--decode-timeout)"
   in log("hole"), log("hole")[-500:])
ok("... and the 1 s prefill, past --decode-timeout, is within --prefill-timeout (5 s)",
   st == 200, st)

st, data, dt, ex = timed(STALL, "stall-1", stream=True)
ev = [l[6:] for l in data.decode().split("\n") if l.startswith("data: ")]
err = json.loads(ev[-1]).get("error", {}) if ev else {}
ok("a stream silent after its first chunk is cut at --stream-idle-timeout (0.5 s), not the "
   "decoder's first-byte limit (30 s): %.2f s" % dt, st == 200 and ex.get("worker_index") == 0
   and dt < 4 and err.get("code") == 504 and "--stream-idle-timeout" in err.get("message", ""),
   st, dt, ev[-2:])

st, data, dt, ex = timed(SLOW, "slow-1")
ok("a prefill past --prefill-timeout (0.5 s < its 1 s): 504 naming the limit",
   st == 504 and b"--prefill-timeout" in data and dt < 3, st, data[:200], dt)
PYEOF
stop
