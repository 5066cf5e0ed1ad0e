#!/bin/sh
# tests/e2e/proxy.sh - eldrd --proxy in the request path, against stand-in
# prefill and decode instances (tests/e2e/fake_pd.py, driven by
# tests/e2e/proxy_check.py): answers relayed intact (JSON and SSE, chunks
# in order and before the stream ends), the decode instance gets the
# prefill's KV handoff without eldr_sig, each request reaches the worker
# the locality band picks, in-flight counts return to zero, a client that
# leaves mid-stream is finished (also 60 that leave at their first byte),
# dead and slow upstreams give 502/504 while others are served, 256
# concurrent streams, stock engines without eldr_sig, the rest of the API
# (route, finish, a model swap) beside the proxy, and bad options exit 2.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
[ -x "$ELDR" ] || ELDR="$ROOT/bin/eldr"

"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --variant count --layers all --seed 1 >/dev/null 2>&1
check "fixture: a K=4 count model over every layer" test -s "$TMP/m.h5"

# stand-ins: 2 prefill, 4 decode; and a second set whose prefill has no eldr_sig
standins pd --prefill 2 --decode 4 --chunks 3 --chunk-gap 0.3 --decode-delay 3
PF1=$PF; DC1=$DC
dead_port; DEAD="http://127.0.0.1:$DEADPORT"

# --- options -----------------------------------------------------------------
expect_fail2 "--proxy without --prefill/--decode" "--proxy needs --prefill" \
    "$ELDRD" -m "$TMP/m.h5" --proxy --listen 127.0.0.1:1
expect_fail2 "--decode without --proxy" "--decode is for proxy mode" \
    "$ELDRD" -m "$TMP/m.h5" --decode "$DC" --listen 127.0.0.1:1
expect_fail2 "--decode with 3 URLs for K = 4" "--decode lists 3 URLs.*K = 4" \
    "$ELDRD" -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$DEAD,$DEAD/a,$DEAD/b" --listen 127.0.0.1:1
expect_fail2 "--prefill with a non-http URL" "--prefill: 'ftp://x' is not an http" \
    "$ELDRD" -m "$TMP/m.h5" --proxy --prefill ftp://x --decode "$DC" --listen 127.0.0.1:1
expect_fail2 "--upstream-timeout 0" "--upstream-timeout" \
    "$ELDRD" -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$DC" --upstream-timeout 0 --listen 127.0.0.1:1
"$ELDRD" --help >"$TMP/out"; expect_out "eldrd --help lists --proxy" "--proxy"

start plain -m "$TMP/m.h5" || exit 0
req POST /v1/completions '{"prompt": "x"}'
expect_http "without --proxy, /v1/completions is 404 naming --proxy" 404 '"--proxy" in j["error"]["message"]'
stop

# --- the main run: tau from the model, and a tau 0 replica for the oracle ----
start proxy -m "$TMP/m.h5" --proxy --prefill "$PF1" --decode "$DC1" --upstream-timeout 1.5 --threads 4 \
    --max-conns-per-ip 400 --route-api --stream-start prefill || exit 0
MAIN=$URL; MAINPID=$PID
start proxy0 -m "$TMP/m.h5" --proxy --prefill "$PF1" --decode "$DC1" --tau 0 --threads 4 \
    --max-conns-per-ip 400 || exit 0
TAU0=$URL
check "proxy mode starts without a library warning (libmicrohttpd's thread pool)" \
    sh -c "! grep -q 'libmicrohttpd' '$TMP/proxy.log'"
if [ "$(id -u)" = 0 ]; then
    check "running as root is warned of at start" grep -q "warning: running as root" "$TMP/proxy.log"
else
    check "no root warning for a user" sh -c "! grep -q 'running as root' '$TMP/proxy.log'"
fi
standins nosig --prefill 1 --decode 4 --no-sig
start nosig -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$DC" || exit 0
NOSIG=$URL
start deadpf -m "$TMP/m.h5" --proxy --prefill "$DEAD" --decode "$DC1" || exit 0
DEADPF=$URL
# decode worker 3 is a dead address; tau 0 so the oracle knows who goes there
DC_DEAD=$(echo "$DC1" | awk -F, -v d="$DEAD" '{print $1","$2","$3","d}')
start deaddc -m "$TMP/m.h5" --proxy --prefill "$PF1" --decode "$DC_DEAD" --tau 0 || exit 0
DEADDC=$URL
# stock vLLM's handoff (--pd-protocol vllm), tau 0 for the oracle
standins stock --prefill 1 --decode 4 --stock --chunks 3 --chunk-gap 0.1
STOCK_PF=$PF; STOCK_DC=$DC
start stock -m "$TMP/m.h5" --proxy --pd-protocol vllm --prefill "$PF" --decode "$DC" --tau 0 || exit 0
STOCK=$URL
expect_fail2 "--pd-protocol other" "--pd-protocol: 'sglang' is neither eldr nor vllm" \
    "$ELDRD" -m "$TMP/m.h5" --proxy --pd-protocol sglang --prefill "$PF" --decode "$DC" --listen 127.0.0.1:1

$PY "$ROOT/tests/e2e/proxy_check.py" "$TMP" "$TMP/m.h5" "$SMALL" "$MAIN" "$TAU0" "$NOSIG" \
    "$DEADPF" "$DEADDC" "$TMP/pd.jsonl" "$TMP/nosig.jsonl" "$STOCK" "$TMP/stock.jsonl"

# --- the release call is the authors' route: never sent to stock vLLM ---------
# decoders 1-3 dead, tau 0, no ejection: requests whose decode never connects
# fail (502); with --pd-protocol eldr their KV would be released at decoder 0
dead_port; D2="http://127.0.0.1:$DEADPORT"; dead_port; D3="http://127.0.0.1:$DEADPORT"
start stockdead -m "$TMP/m.h5" --proxy --pd-protocol vllm --prefill "$STOCK_PF" \
    --decode "${STOCK_DC%%,*},$DEAD,$D2,$D3" --tau 0 --eject-after 0 || exit 0
n502=0
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
    req POST /v1/completions "{\"prompt\": \"dead decode $i\", \"max_tokens\": 4}"
    [ "$(cat "$TMP/status")" = 502 ] && n502=$((n502 + 1))
done
sleep 0.5
check "--pd-protocol vllm: decodes that never connected fail ($n502 of 12 got 502)" test $n502 -ge 1
check "... and no POST /v1/kv_transfer/release reached stock vLLM (it frees the blocks itself)" \
    $PY -c "import json,sys; sys.exit(any(json.loads(l).get('release') for l in open(sys.argv[1])))" \
    "$TMP/stock.jsonl"
stop

# --- engines started with --api-key ------------------------------------------
KEY=sk-test-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
standins key --prefill 1 --decode 4 --stock --api-key "$KEY"
printf '%s\n' "$KEY" >"$TMP/key"
start keyfile -m "$TMP/m.h5" --proxy --pd-protocol vllm --prefill "$PF" --decode "$DC" \
    --upstream-api-key-file "$TMP/key" || exit 0
n200=0
for i in 1 2 3 4 5 6; do
    req POST /v1/completions "{\"prompt\": \"keyed $i\", \"max_tokens\": 4}"
    [ "$(cat "$TMP/status")" = 200 ] && n200=$((n200 + 1))
done
check "--upstream-api-key-file: 6 of 6 requests without a client header served ($n200)" test $n200 -eq 6
check "... every decode got the key: 6 records with Authorization, none refused" $PY -c "
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if sum(1 for x in r if x.get('auth')) == 6 and not any(x.get('unauthorized') for x in r) else 1)" "$TMP/key.jsonl"
stop
start keyfwd -m "$TMP/m.h5" --proxy --pd-protocol vllm --prefill "$PF" --decode "$DC" || exit 0
n200=0
for i in 1 2 3 4; do
    curl -s --max-time 10 -o "$TMP/body" -w '%{http_code}' -H "Authorization: Bearer $KEY" \
        --data-binary "{\"prompt\": \"forwarded $i\", \"max_tokens\": 4}" \
        "$URL/v1/completions" >"$TMP/status" 2>/dev/null
    [ "$(cat "$TMP/status")" = 200 ] && n200=$((n200 + 1))
done
check "without the file, the client's Authorization is forwarded: 4 of 4 served ($n200)" test $n200 -eq 4
req POST /v1/completions '{"prompt": "no key", "max_tokens": 4}'
expect_http "... a client without it: the engine's 401 relayed as 502 naming it" 502 '"401" in j["error"]["message"]'
curl -s --max-time 10 -o "$TMP/body" -w '%{http_code}' -H "Authorization: Bearer a$(printf '\177')b" \
    --data-binary '{"prompt": "odd header", "max_tokens": 4}' "$URL/v1/completions" >"$TMP/status" 2>/dev/null
expect_http "... a header that is not printable ASCII: 400 naming Authorization" 400 \
    'j["error"]["param"] == "Authorization"'
stop
check "the key is in no log line (both daemons)" sh -c "! grep -q '$KEY' '$TMP/keyfile.log' '$TMP/keyfwd.log'"
# the authors' protocol behind keyed engines: the release call carries the key too
standins keyeldr --prefill 1 --decode 4 --api-key "$KEY"
start keyeldr -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$DC" --upstream-api-key-file "$TMP/key" || exit 0
req POST /v1/completions '{"prompt": "one keyed token", "max_tokens": 1}'
expect_http "--pd-protocol eldr with the key: max_tokens 1 answered by the prefill" 200
sleep 0.3
check "... its release call reached a decode instance with the key (1 release, none refused)" $PY -c "
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if sum(1 for x in r if x.get('release')) == 1 and not any(x.get('unauthorized') for x in r) else 1)" "$TMP/keyeldr.jsonl"
stop
printf 'short\n' >"$TMP/shortkey"
expect_fail2 "--upstream-api-key-file: a key under 16 characters" \
    "--upstream-api-key-file .*shortkey: the token has 5 characters" \
    "$ELDRD" -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$DC" --upstream-api-key-file "$TMP/shortkey" \
    --listen "127.0.0.1:$(free_port)"
expect_fail2 "--upstream-api-key-file without --proxy" "is for proxy mode" \
    "$ELDRD" -m "$TMP/m.h5" --upstream-api-key-file "$TMP/key" --listen 127.0.0.1:1

# a gate model: eldr_sig is float32 gate_prob [L*E]
"$ELDR" gen -o "$TMP/g.h5" --requests 300 --layers 6 --experts 16 --top-k 2 --domains 3 \
    --gate-prob --seed 4 >/dev/null 2>&1 &&
    "$ELDR" fit "$TMP/g.h5" -k 3 --variant gate_prob --layers all -o "$TMP/gm.h5" >/dev/null 2>&1
check "fixture: a K=3 gate_prob model" test -s "$TMP/gm.h5"
$PY "$ROOT/tests/e2e/fake_pd.py" "$TMP/g.h5" "$TMP/gate.ports" "$TMP/gate.jsonl" --prefill 1 \
    --decode 3 --gate --max-seconds 300 &
PIDS="$PIDS $!"
i=0; while [ ! -s "$TMP/gate.ports" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
GPF=$($PY -c "import json,sys; print(','.join('http://127.0.0.1:%d' % p for p in json.load(open(sys.argv[1]))['prefill']))" "$TMP/gate.ports")
GDC=$($PY -c "import json,sys; print(','.join('http://127.0.0.1:%d' % p for p in json.load(open(sys.argv[1]))['decode']))" "$TMP/gate.ports")
start gate -m "$TMP/gm.h5" --proxy --prefill "$GPF" --decode "$GDC" --tau 0 || exit 0
check "a gate model routes on eldr_sig as float32 gates: 24 requests on the oracle's worker" \
    $PY - "$URL" "$TMP/g.h5" "$TMP/gm.h5" <<'PYEOF'
import hashlib, json, sys, urllib.request
import h5py, numpy as np
url, trace, model = sys.argv[1:4]
G = h5py.File(trace, "r")["gate_prob"][:].astype(np.float64)
C = h5py.File(model, "r")["centroids"][:].astype(np.float64)
bad, used = [], set()
for i in range(24):
    p = "gate prompt %d" % i
    s = G[int(hashlib.sha256(p.encode()).hexdigest(), 16) % G.shape[0]].ravel()
    want = int(np.argmax(C @ (s / np.linalg.norm(s))))
    used.add(want)
    req = urllib.request.Request(url + "/v1/completions", json.dumps({"prompt": p, "max_tokens": 4}).encode(),
                                 {"Content-Type": "application/json"})
    got = json.load(urllib.request.urlopen(req, timeout=10))["decoder"]
    if got != want:
        bad.append((p, got, want))
print(bad, used)
sys.exit(0 if not bad and len(used) >= 2 else 1)
PYEOF
# the same gate model behind a prefill that sends int16 counts: 502 naming float32
start gatebad -m "$TMP/gm.h5" --proxy --prefill "$PF1" --decode "$GDC" || exit 0
req POST /v1/completions '{"prompt": "counts to a gate model", "max_tokens": 4}'
expect_http "a gate model given int16 counts in eldr_sig: 502 naming float32" 502 \
    '"float32" in j["error"]["message"]'

# live attach shows the proxied traffic: the dashboard's decisions view
# (tau 0 replica: the oracle's requests and the 256 streams went there)
expect_status "dash --attach on the proxy: a frame of its decisions" 0 "$ELDR" dash --attach "$TAU0" \
    --frame "$TMP/dec.txt" --view decisions --width 120 --height 30
check "... lists proxied requests by id" grep -q "many-" "$TMP/dec.txt"
expect_status "dash --attach on the proxy: the balance view" 0 "$ELDR" dash --attach "$TAU0" \
    --frame "$TMP/bal.txt" --view balance --width 120 --height 30
check "... counts them: in flight 0, routed >= 300" \
    $PY -c 'import re,sys; t=open(sys.argv[1]).read(); m=re.search(r"in-flight (\d+), routed (\d+)", t); sys.exit(0 if m and m.group(1) == "0" and int(m.group(2)) >= 300 else 1)' "$TMP/bal.txt"

# /v1/route and /v1/finish are off in proxy mode unless asked for (issue
# 31, item 7): anyone reaching the port could pin load with them
URL=$TAU0
req POST /v1/route '{"request_id": "direct-0", "sparse": [[0, 0, 3], [1, 2, 1]]}'
expect_http "proxy mode without --route-api: POST /v1/route is 404 naming it" 404 \
    '"--route-api" in j["error"]["message"]'
req POST /v1/finish '{"request_id": "direct-0"}'
expect_http "... and POST /v1/finish too" 404 '"--route-api" in j["error"]["message"]'
expect_fail2 "--stream-start other" "--stream-start: 'early' is neither decoder nor prefill" \
    "$ELDRD" -m "$TMP/m.h5" --proxy --stream-start early --prefill "$PF" --decode "$DC" --listen 127.0.0.1:1
expect_fail2 "--route-api without --proxy is refused" "--route-api is for proxy mode" \
    "$ELDRD" -m "$TMP/m.h5" --route-api --listen 127.0.0.1:1
# the rest of the API in proxy mode (it runs beside the proxy's loop)
URL=$MAIN; PID=$MAINPID
req POST /v1/route '{"request_id": "direct-1", "sparse": [[0, 0, 3], [1, 2, 1]]}'
expect_http "proxy mode: POST /v1/route routes a direct caller" 200 'j["request_id"] == "direct-1"'
req POST /v1/finish '{"request_id": "direct-1"}'
expect_http "proxy mode: POST /v1/finish finishes it" 200 'j["request_id"] == "direct-1"'
"$ELDR" model export "$TMP/m.h5" -o "$TMP/m.json" >/dev/null 2>&1
req GET /v1/snapshot
g0=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['model']['generation'])" "$TMP/body")
req PUT /v1/model "$(cat "$TMP/m.json")"
expect_http "proxy mode: PUT /v1/model swaps the model" 200 "j['model_generation'] == $g0 + 1"
req POST /v1/completions '{"prompt": "after the swap", "max_tokens": 4}'
expect_http "... and the next proxied request is decided by it" 200 '"choices" in j'
req GET /v1/snapshot?decisions=1
expect_http "... (the newest decision names the new generation)" 200 \
    "j['decisions'][-1]['model_generation'] == $g0 + 1"

# SIGTERM: nothing proxied is left upstream, so it drains at once and exits 0
stop
[ "$RC" -eq 0 ] && ok "the proxy drains and exits 0" || notok "the proxy drains and exits 0" "exit $RC"
