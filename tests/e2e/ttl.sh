#!/bin/sh
# tests/e2e/ttl.sh - the in-flight TTL's bounded default (issue 31, item
# 7): without --inflight-ttl, a /v1/route request whose finish never
# comes is forgotten after twice the prefill and decode limits (its load
# returns); a request eldrd proxies and finishes itself is never expired,
# however long its stream runs.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs ttl

"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --variant count --layers all --seed 1 >/dev/null 2>&1
# default TTL = 2 x (0.5 + 0.5) = 2 s
start plain -m "$TMP/m.h5" --prefill-timeout 0.5 --decode-timeout 0.5 || exit 0
req POST /v1/route '{"request_id": "lost-1", "sparse": [[0, 1, 4]]}'
expect_http "a route whose finish never comes" 200
check "it is forgotten by the default TTL (2 x the limits): ended expired, load 0" $PY -c "
import json, sys, time, urllib.request
u = sys.argv[1]
for _ in range(60):
    e = json.load(urllib.request.urlopen(u + '/v1/explain/lost-1'))
    s = json.load(urllib.request.urlopen(u + '/v1/snapshot'))
    if e.get('ended') == 'expired' and sum(w['inflight'] for w in s['workers']) == 0:
        sys.exit(0)
    time.sleep(0.2)
sys.exit(1)" "$URL"
stop

# a proxied stream of 12 chunks 0.5 s apart (6 s) against a 4 s TTL
standins long --prefill 1 --decode 4 --chunks 12 --chunk-gap 0.5
start proxy -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$DC" --prefill-timeout 1 \
    --decode-timeout 1 --stream-idle-timeout 5 || exit 0
check "a proxied stream that outlives the default TTL is never expired: finished, whole" $PY -c "
import http.client, json, sys, threading, time, urllib.parse, urllib.request
u = sys.argv[1]
p = urllib.parse.urlparse(u)
seen = []
def watch():
    time.sleep(5)
    s = json.load(urllib.request.urlopen(u + '/v1/snapshot'))
    seen.append(sum(w['inflight'] for w in s['workers']))
t = threading.Thread(target=watch); t.start()
c = http.client.HTTPConnection(p.hostname, p.port, timeout=30)
c.request('POST', '/v1/completions', json.dumps({'prompt': 'long one', 'max_tokens': 16,
          'stream': True}), {'X-Request-Id': 'long-1'})
data = c.getresponse().read()
t.join()
time.sleep(0.3)
e = json.load(urllib.request.urlopen(u + '/v1/explain/long-1'))
ok = data.rstrip().endswith(b'data: [DONE]') and seen == [1] and e.get('ended') == 'finished'
print(seen, e.get('ended'), data[-60:])
sys.exit(0 if ok else 1)" "$URL"
stop
