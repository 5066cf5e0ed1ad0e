#!/bin/sh
# tests/e2e/dash_failures.sh - the live overview shows what fails (issue
# 30, item 3; docs/dashboard.md, "Live mode"): eldrd --proxy over
# fake_pd.py's stand-ins with decoder 3 dead (nothing listens on its
# port), requests enough to route some there, a malformed request (400)
# and a client holding more connections than --max-conns-per-ip; and a
# second eldrd whose only prefill is dead (a request: 502). Then
#   - /v1/snapshot: pool.decode[3] ejected with its URL, worker name and
#     state; the routes that died there counted "failed", not "finished";
#     "failures" with the per-IP refusals, the 400, the retries;
#   - /metrics: eldr_failed_total and eldr_proxy_timeouts_total;
#   - `eldr dash --attach URL --frame - --view overview` at 80x24: a
#     Problems block on the first screen naming the ejected worker with
#     its URL, the refusals and the failed routes, each number whole;
#     with the prefill dead, the prefill with its URL and the 502;
#   - in tmux at 80x24 the same line, the Problems heading in red (256-
#     colour 196) and the Router heading not; at 120x40 the rules column
#     and the prefill instance; q exits 0.
# Bounded: a few seconds; every request capped.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs dash_failures
[ -x "$ELDR" ] || ELDR="$ROOT/bin/eldr"

"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --variant count --layers all --seed 1 >/dev/null 2>&1
check "fixture: a K=4 count model" test -s "$TMP/m.h5"
standins live --prefill 1 --decode 3 --chunks 1 --chunk-gap 0 --decode-delay 0.3
dead_port; DEADP=$DEADPORT
DEAD="http://127.0.0.1:$DEADP"
start fails -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$DC,$DEAD" --tau 2 \
    --eject-after 2 --eject-time 60 --max-conns-per-ip 24 || exit 0
FAILS=$URL

$PY - "$URL" <<'PYEOF'
import http.client, json, socket, sys, threading, time, urllib.parse
URL = sys.argv[1]
u = urllib.parse.urlparse(URL)


def post(body):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    c.request("POST", "/v1/completions", body)
    r = c.getresponse()
    r.read()
    c.close()
    return r.status


# slow decodes keep loads up, so the band's least loaded rotates onto the dead one
st = []
ts = [threading.Thread(target=lambda i=i: st.append(post(json.dumps(
    {"prompt": "w%d x y" % i, "max_tokens": 4, "slow": True})))) for i in range(16)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print("# statuses:", sorted(st))
print("ok - 16 requests with decoder 3 dead all answered (retried)" if st.count(200) == 16
      else "not ok - 16 requests with decoder 3 dead all answered (retried)\n#   %s" % st)
post("{not json")        # a 400
# one client, 30 connections at once: past --max-conns-per-ip 24
socks = []
for i in range(30):
    s = socket.create_connection((u.hostname, u.port), timeout=5)
    socks.append(s)
time.sleep(0.5)
for s in socks:
    s.close()
PYEOF

curl -s --max-time 10 -o "$TMP/snap.json" "$URL/v1/snapshot"
check "snapshot: pool.decode[3] ejected, with its URL, worker name and state" jq_py "$TMP/snap.json" \
    "j['pool']['decode'][3]['url'] == '$DEAD' and j['pool']['decode'][3]['state'] == 'ejected' \
     and j['pool']['decode'][3]['worker'] == j['workers'][3]['name'] \
     and all(d['state'] == 'in_rotation' and d['url'] for d in j['pool']['decode'][:3]) \
     and j['pool']['prefill'][0]['url'] == '$PF' and j['pool']['prefill'][0]['state'] == 'in_rotation'"
check "snapshot: the routes that died at decoder 3 are failed, not finished" jq_py "$TMP/snap.json" \
    "j['workers'][3]['failed'] >= 2 and j['workers'][3]['finished'] == 0 \
     and j['workers'][3]['failed'] + j['workers'][3]['ejected'] == j['workers'][3]['routed'] \
     and j['failures']['failed_after_routing'] == sum(w['failed'] for w in j['workers']) \
     and j['failures']['retries']['decode'] == j['workers'][3]['routed']"
check "snapshot: failures counts the per-IP refusals and the 400" jq_py "$TMP/snap.json" \
    "j['failures']['refusals']['per_ip'] >= 6 and j['failures']['answered']['by_code'].get('400') == 1 \
     and j['failures']['answered']['4xx'] >= 1 and j['failures']['proxy']['bad_request'] == 1 \
     and set(j['failures']['upstream_timeouts']) == {'connect', 'prefill', 'decode', 'idle'}"
curl -s --max-time 10 -o "$TMP/metrics" "$URL/metrics"
check "metrics: eldr_failed_total per worker, eldr_proxy_timeouts_total per phase" $PY -c '
import re, sys
m = open(sys.argv[1]).read()
failed = [int(v) for v in re.findall(r"^eldr_failed_total\{worker=\"[^\"]+\"\} (\d+)$", m, re.M)]
assert len(failed) == 4 and failed[3] >= 2, failed
assert "# TYPE eldr_failed_total counter" in m
for p in ("connect", "prefill", "decode", "idle"):
    assert re.search(r"^eldr_proxy_timeouts_total\{phase=\"%s\"\} \d+$" % p, m, re.M), p
' "$TMP/metrics"

expect_status "attach --frame overview at 80x24" 0 "$ELDR" dash --attach "$URL" --frame - \
    --view overview --width 80 --height 24
cp "$TMP/out" "$TMP/frame.txt"
sed 's/^/#   /' "$TMP/frame.txt"
check "the 80x24 overview shows the ejected worker, its URL, the refusals and the failures" $PY -c '
import json, re, sys
snap = json.load(open(sys.argv[1])); f = open(sys.argv[2]).read()
lines = f.splitlines()
assert len(lines) == 24 and max(len(l) for l in lines) <= 80, (len(lines), max(map(len, lines)))
w3 = snap["workers"][3]["name"]; url = sys.argv[3][len("http://"):]
fails = snap["failures"]
# the Problems block, before the long tables
top = "\n".join(lines[:12])
assert "Problems" in top, top
assert re.search(r"ejected +%s, out \d+ s more, \d+ failures: %s\n" % (re.escape(w3), re.escape(url)), top), top
m = re.search(r"refused +(\d+) connections \(--max-conns-per-ip\)", top)
assert m and int(m.group(1)) >= fails["refusals"]["per_ip"] >= 6, top
assert re.search(r"answered +\d+ 5xx, \d+ 4xx: 400 x1", top), top
m = re.search(r"failed +(\d+) routes at a decoder, \d+ retried; timeouts: none", top)
assert m and int(m.group(1)) == fails["failed_after_routing"], top
# the worker row: state, load source, URL; its failed column
row = [l for l in lines if re.match(r"^ +%s " % re.escape(w3), l)]
assert row and re.search(r"ejected \d+s +own +%s" % re.escape(url), row[0]), row
assert re.search(r" %d +ejected" % snap["workers"][3]["failed"], row[0]), row
' "$TMP/snap.json" "$TMP/frame.txt" "$DEAD"

# the only prefill dead: every request fails; the overview says so at once
start nopf -m "$TMP/m.h5" --proxy --prefill "http://127.0.0.1:$DEADP" --decode "$DC,$DEAD" \
    --eject-after 1 --eject-time 30 || exit 0
curl -s --max-time 10 -o /dev/null -w '%{http_code}' "$URL/v1/completions" \
    -d '{"prompt": "x y", "max_tokens": 4}' >"$TMP/status"
check "with the only prefill dead, a request fails (502)" test "$(cat "$TMP/status")" = 502
expect_status "attach --frame overview with the prefill dead" 0 "$ELDR" dash --attach "$URL" \
    --frame - --view overview --width 80 --height 24
cp "$TMP/out" "$TMP/frame2.txt"
check "the 80x24 overview names the dead prefill, its URL, and the 502" $PY -c '
import re, sys
f = open(sys.argv[1]).read(); url = sys.argv[2][len("http://"):]
top = "\n".join(f.splitlines()[:10])
assert re.search(r"prefill +ejected, the only one \(out \d+ s more\): %s\n" % re.escape(url), top), f
assert re.search(r"answered +1 5xx, 0 4xx: 502 x1\n", top), f
assert re.search(r"Prefill \(1, 0 in rotation\)\n +ejected \d+s +in-flight 0, 1 failures +%s\n" % re.escape(url), f), f
' "$TMP/frame2.txt" "$DEAD"

# in a real terminal, 80x24 then 120x40: the Problems block in colour
if ! command -v tmux >/dev/null 2>&1; then notok "dash_failures tmux: tmux missing"; exit 0; fi
TMUX_NAME=eldr-dash-failures PANE=fails
. "$ROOT/tests/e2e/tmux.inc"
trap '$T kill-server 2>/dev/null; for p in $PIDS; do kill -9 $p 2>/dev/null; done; rm -rf "$TMP"' EXIT
tshell 80 24 || { notok "dash_failures: tmux new-session"; exit 0; }
$T send-keys -t fails "$ELDR dash --attach $FAILS --interval 0.2; echo EXIT=\$?" Enter
tcheck "tmux 80x24: the overview opens with the ejected worker and its URL" \
    "ejected +w3, out [0-9]+ s more, [0-9]+ failures: ${DEAD#http://}" 10
$T capture-pane -e -p -t fails >"$TMP/pane.esc"
check "tmux 80x24: the Problems block is red (colour 196), the Router heading is not" $PY -c '
import sys
lines = open(sys.argv[1], encoding="utf-8", errors="replace").read().splitlines()
prob = [l for l in lines if "Problems" in l]
router = [l for l in lines if "Router" in l]
assert prob and "38;5;196" in prob[0].split("Problems")[0], prob
assert router and "38;5;196" not in router[0], router
' "$TMP/pane.esc"
$T resize-window -t fails -x 120 -y 40 2>/dev/null
tcheck "tmux 120x40: the worker table adds the rules" "url +decided by" 5
tcheck "tmux 120x40: the prefill instances listed" "in rotation +in-flight 0, 0 failures +${PF#http://}" 5
$T send-keys -t fails q
tcheck "tmux: q exits 0" "EXIT=0" 5
