#!/bin/sh
# tests/e2e/gateway.sh - eldrd --ext-proc as the endpoint picker of an
# Envoy-based inference gateway (docs/gateway.md), driven by the Envoy
# stand-in (tests/gateway/envoy.js: Envoy's own ext_proc protos, its
# FULL_DUPLEX_STREAMED filter): 100 picks equal /v1/route's for the same
# signals, header and envoy.lb metadata equal, the body echoed byte for
# byte in chunks of at most 62,000 bytes (a 150 KB body too), the signal
# from the body, from x-eldr-signature, or none; the subset hint obeyed
# (list and comma string), 503 on an empty or foreign subset; health;
# malformed protobuf, over-deep metadata and a stream cancelled mid-body
# answered on their stream while the daemon serves on; 500 concurrent
# streams with in-flight back to 0; a 5xx from an endpoint counts against
# it in the pool; the endpoints file reloaded when replaced, a bad one
# kept out; bad options exit 2.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs gateway
[ -x "$ELDR" ] || ELDR="$ROOT/bin/eldr"
GW="$ROOT/tests/gateway"
if ! command -v node >/dev/null 2>&1 || [ ! -d "$GW/node_modules/@grpc/grpc-js-xds" ]; then
    notok "gateway prerequisites" "need node and tests/gateway/node_modules (make deps)"
    exit 0
fi
envoy() { timeout 120 node "$GW/envoy.js" "$@"; }
# field FILE EXPR: EXPR on the JSON line of FILE (j), printed
field() { $PY -c "import json,sys; j=json.loads(open(sys.argv[1]).readline()); print($2)" "$1"; }

"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --variant count --layers all --seed 1 >/dev/null 2>&1
check "fixture: a K=4 count model" test -s "$TMP/m.h5"
# the K = 4 decode endpoints, JSON form (tests/gateway/endpoints.json)
cp "$ROOT/tests/gateway/endpoints.json" "$TMP/eps.json"
cp "$TMP/eps.json" "$TMP/eps.good"

# --- options -------------------------------------------------------------
expect_fail2 "--ext-proc without --endpoints" "--ext-proc needs --endpoints" \
    "$ELDRD" -m "$TMP/m.h5" --ext-proc 127.0.0.1:1
expect_fail2 "--endpoints without --ext-proc" "--endpoints is for the gateway" \
    "$ELDRD" -m "$TMP/m.h5" --endpoints "$TMP/eps.json"
$PY -c "import json,sys; j=json.load(open(sys.argv[1])); j['endpoints']=j['endpoints'][:3]; json.dump(j,open(sys.argv[2],'w'))" \
    "$TMP/eps.json" "$TMP/eps3.json"
expect_fail2 "3 endpoints for K = 4" "has 3 endpoints; the model has 4 workers" \
    "$ELDRD" -m "$TMP/m.h5" --ext-proc 127.0.0.1:1 --endpoints "$TMP/eps3.json" --listen 127.0.0.1:1
printf 'endpoints:\n  - name: w0\n    address: "10.0.0.1"\n    port: 8000\n' >"$TMP/bad.yaml"
expect_fail2 "an unquoted port (llm-d reads a string)" "bad.yaml:4: endpoints\[0\].port" \
    "$ELDRD" -m "$TMP/m.h5" --ext-proc 127.0.0.1:1 --endpoints "$TMP/bad.yaml" --listen 127.0.0.1:1
expect_fail2 "--ext-proc on a name, not an address" "not a numeric" \
    "$ELDRD" -m "$TMP/m.h5" --ext-proc localhost:1 --endpoints "$TMP/eps.json" --listen 127.0.0.1:1
"$ELDRD" --help >"$TMP/out"; expect_out "eldrd --help lists --ext-proc" "--ext-proc HOST:PORT"

XP=$(free_port)
start gw -m "$TMP/m.h5" --ext-proc "127.0.0.1:$XP" --endpoints "$TMP/eps.json" --eject-after 2 \
    --eject-time 30 || exit 0
GWURL=$URL; GWPID=$PID
start ref -m "$TMP/m.h5" || exit 0
REF=$URL
T="127.0.0.1:$XP"

# --- health ----------------------------------------------------------------
envoy health --target "$T" --expect SERVING >"$TMP/h" 2>&1
check "health: SERVING" grep -q '"status":"SERVING"' "$TMP/h"
envoy health --target "$T" --service envoy.service.ext_proc.v3.ExternalProcessor --expect SERVING >"$TMP/h" 2>&1
check "health of the ext_proc service: SERVING" grep -q '"status":"SERVING"' "$TMP/h"
envoy health --target "$T" --service liveness --expect SERVING >"$TMP/h" 2>&1
check "health: liveness (GIE's name) SERVING" grep -q '"status":"SERVING"' "$TMP/h"
envoy health --target "$T" --service nope --expect any >"$TMP/h" 2>&1
check "health of an unknown service: NOT_FOUND" grep -q '"grpc_status":"NOT_FOUND"' "$TMP/h"

# --- 100 picks against /v1/route -------------------------------------------
$PY "$ROOT/tests/e2e/gateway_check.py" bodies "$SMALL" "$TMP/b.jsonl" 100
envoy pick --target "$T" --body-lines "$TMP/b.jsonl" --concurrency 1 >"$TMP/picks" 2>"$TMP/picks.err"
check "100 picks through ext_proc, each accepted as Envoy would" \
    grep -q '"requests":100,"ok":100,"failed":0' "$TMP/picks"
check "each pick equals /v1/route's for the same signal and loads" \
    $PY "$ROOT/tests/e2e/gateway_check.py" compare "$TMP/picks" "$TMP/b.jsonl.route" "$REF" "$TMP/eps.json"
check "header and envoy.lb metadata name the same endpoint, route cache cleared" $PY -c "
import json,sys
for l in open(sys.argv[1]):
    j=json.loads(l)
    if j.get('summary'): continue
    m=j['dynamic_metadata']['envoy.lb']['x-gateway-destination-endpoint']
    assert j['set_headers']['x-gateway-destination-endpoint']==m==j['endpoint'], j
    assert j['clear_route_cache'] and j['header_responses']==1, j
    assert j['echo_ok'] and j['echo_sha256']==j['sent_sha256'], j
" "$TMP/picks"
curl -s --max-time 5 "$GWURL/metrics" >"$TMP/met"
expect_grep_file() { if grep -q -- "$2" "$3"; then ok "$1"; else notok "$1" "$(grep extproc "$3" | head -20)"; fi; }
expect_grep_file "90 picks counted with the body's signal" 'eldr_extproc_picks_total{signal="body"} 90' "$TMP/met"
expect_grep_file "10 without one: the no-signature rule" 'eldr_extproc_picks_total{signal="none"} 10' "$TMP/met"
expect_grep_file "in flight back to 0" 'eldr_extproc_in_flight 0' "$TMP/met"
ID=$(field "$TMP/picks" "j['id']")
URL=$GWURL; req GET "/v1/explain/$ID"; URL=$REF
expect_http "a pick is an ordinary decision: /v1/explain knows it" 200 "j['request_id']=='$ID'"

# --- the signal from a header ------------------------------------------------
$PY - "$SMALL" "$TMP" <<'EOF'
import base64, json, sys, h5py
with h5py.File(sys.argv[1]) as f:
    c = f["prefill_counts"][3].astype("<i2")
open(sys.argv[2] + "/hsig", "w").write(base64.b64encode(c.tobytes()).decode())
open(sys.argv[2] + "/plain.json", "w").write(json.dumps({"model": "m", "prompt": "p"}))
EOF
envoy pick --target "$T" --body-file "$TMP/plain.json" --header "x-eldr-signature=$(cat "$TMP/hsig")" \
    --request-id hdr-1 >"$TMP/p" 2>&1
WANT=$(sed -n 4p "$TMP/picks" | $PY -c "import json,sys; print(json.loads(sys.stdin.readline())['endpoint'])")
check "x-eldr-signature: the same pick as row 3's eldr_sig" test "$(field "$TMP/p" "j['endpoint']")" = "$WANT"
envoy pick --target "$T" --body-file "$TMP/plain.json" --header "x-eldr-signature=!!" >"$TMP/p" 2>&1
check "a header that is not base64: 400 named" test "$(field "$TMP/p" "j['immediate_status']")" = 400
printf '{"prompt":"p","kv_transfer_params":{"eldr_sig":"AAAA"}}' >"$TMP/short.json"
envoy pick --target "$T" --body-file "$TMP/short.json" >"$TMP/p" 2>&1
check "an eldr_sig of the wrong size: 422" test "$(field "$TMP/p" "j['immediate_status']")" = 422
check "... naming the size" grep -q 'bytes' "$TMP/p"
envoy pick --target "$T" --no-body --request-id nobody >"$TMP/p" 2>&1
check "a headers-only request is picked on its headers" test "$(field "$TMP/p" "j['ok']")" = True

# --- the signature cache, claimed in the handoff ---------------------------------
# a prefill whose prefix cache served 3 blocks sends eldr_sig for the rest
# and names the blocks (eldr_block_hashes, eldr_cached_blocks): eldrd adds
# the blocks' counts, kept from an earlier handoff's eldr_block_counts, as
# POST /v1/route does with block_hashes (tests/e2e/eldrd_fixtures.py's set)
mkdir -p "$TMP/fx"
$PY "$ROOT/tests/e2e/eldrd_fixtures.py" bodies "$SMALL" "$TMP/fx"
$PY - "$TMP/fx" <<'PYEOF'
import json, sys
d = sys.argv[1]
ren = {"counts": "eldr_sig", "block_hashes": "eldr_block_hashes",
       "cached_blocks": "eldr_cached_blocks", "block_counts": "eldr_block_counts"}
for name in ("cold", "warm1", "warm2", "miss"):
    r = json.load(open(f"{d}/{name}.json"))
    kv = {ren[k]: v for k, v in r.items() if k in ren}
    kv["remote_engine_id"] = "pf-0"
    json.dump({"model": "m", "prompt": name, "kv_transfer_params": kv}, open(f"{d}/{name}.h.json", "w"))
PYEOF
pick_of() { envoy pick --target "$T" --body-file "$TMP/fx/$1.h.json" --request-id "c-$1" >"$TMP/p" 2>&1; field "$TMP/p" "j['endpoint'] or j['immediate_status']"; }
COLD=$(pick_of cold)
W1=$(pick_of warm1)
W2=$(pick_of warm2)
check "the first handoff (all counts, 3 blocks to keep) picks as the whole prompt" test "$W1" = "$COLD"
check "the next (3 blocks cached, eldr_sig the rest): the same pick, from the cache" test "$W2" = "$COLD"
curl -s --max-time 5 "$GWURL/metrics" >"$TMP/met"
expect_grep_file "the 3 claimed blocks were found" 'eldr_sigcache_hit_blocks_total{prefill="default"} 3' "$TMP/met"
for f in warm1 warm2; do
    URL=$REF; req POST /v1/route "$(cat "$TMP/fx/$f.json")"
    $PY -c "import json,sys; print(json.load(open(sys.argv[1]))['worker_index'])" "$TMP/body" >"$TMP/ref.$f"
    req POST /v1/finish "{\"request_id\": \"$f\"}"
done
check "... as /v1/route picks for the same claims" test "$W2" = "10.0.0.$(($(cat "$TMP/ref.warm2") + 1)):8000"
MISS=$(pick_of miss)
curl -s --max-time 5 "$GWURL/metrics" >"$TMP/met"
expect_grep_file "claimed blocks it never kept are counted missing, not invented" \
    'eldr_sigcache_miss_blocks_total{prefill="default"} 3' "$TMP/met"
check "... and the request is still picked" test -n "$(echo "$MISS" | grep 8000)"
$PY -c "
import json,sys
b=json.load(open(sys.argv[1])); b['kv_transfer_params']['eldr_cached_blocks']=9
json.dump(b,open(sys.argv[2],'w'))" "$TMP/fx/warm2.h.json" "$TMP/fx/bad.h.json"
check "eldr_cached_blocks past the hashes: 422 naming it" \
    sh -c "node '$GW/envoy.js' pick --target '$T' --body-file '$TMP/fx/bad.h.json' | grep -q 'eldr_cached_blocks'"

# --- bodies over 64 KiB -------------------------------------------------------
$PY -c "import json; print(json.dumps({'prompt': 'x' * 150000, 'max_tokens': 4}))" >"$TMP/big.json"
envoy pick --target "$T" --body-file "$TMP/big.json" --chunk 16384 >"$TMP/p" 2>&1
check "a 150 KB body echoed byte for byte" test "$(field "$TMP/p" "j['echo_ok'] and j['echo_bytes']")" = "$(wc -c <"$TMP/big.json")"
check "in chunks of at most 62,000 bytes (3 of them)" \
    test "$(field "$TMP/p" "(j['echo_max_chunk'], j['echo_chunks'])")" = "(62000, 3)"

# --- the subset hint ------------------------------------------------------------
envoy pick --target "$T" --body-lines "$TMP/b.jsonl" --subset 10.0.0.2:8000,10.0.0.4:8000 --quiet >"$TMP/p" 2>&1
check "subset hint (a list): every pick inside it" $PY -c "
import json,sys; j=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert j['ok']==100 and set(j['picks'])<={'10.0.0.2:8000','10.0.0.4:8000'}, j" "$TMP/p"
envoy pick --target "$T" --body-file "$TMP/plain.json" --subset-json '"10.0.0.3:8000, 10.0.0.1:8000"' --repeat 8 --quiet >"$TMP/p" 2>&1
check "subset hint (a comma string): every pick inside it" $PY -c "
import json,sys; j=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert j['ok']==8 and set(j['picks'])<={'10.0.0.3:8000','10.0.0.1:8000'}, j" "$TMP/p"
envoy pick --target "$T" --body-file "$TMP/plain.json" --subset '' >"$TMP/p" 2>&1
check "an empty subset: immediate 503" test "$(field "$TMP/p" "j['immediate_status']")" = 503
envoy pick --target "$T" --body-file "$TMP/plain.json" --subset 10.9.9.9:80 >"$TMP/p" 2>&1
check "a subset of unknown endpoints: immediate 503" test "$(field "$TMP/p" "j['immediate_status']")" = 503

# --- broken streams; the daemon serves on ------------------------------------
envoy raw --target "$T" --hex 0a0b0c --expect error >"$TMP/p" 2>&1
check "malformed protobuf: INVALID_ARGUMENT on its stream" grep -q '"grpc_status":"INVALID_ARGUMENT"' "$TMP/p"
DEEP=$($PY -c "
def v(x):
    o=b''
    while True:
        c=x&0x7f; x>>=7
        if x: o+=bytes([c|0x80])
        else: return o+bytes([c])
def ld(n,b): return v((n<<3)|2)+v(len(b))+b
s=b''
for i in range(60): s=ld(1, ld(2, ld(5, s)))
print((ld(2,b'')+ld(8, ld(1, ld(1,b'a')+ld(2,s)))).hex())")
envoy raw --target "$T" --hex "$DEEP" --expect error >"$TMP/p" 2>&1
check "metadata nested 180 deep: refused, not recursed" grep -q 'nests deeper than 32' "$TMP/p"
envoy cancel --target "$T" --body-file "$TMP/big.json" --after-bytes 50000 --wait-ms 200 >"$TMP/p" 2>&1
check "a stream cancelled mid-body" grep -q '"cancelled":true' "$TMP/p"
envoy pick --target "$T" --body-file "$TMP/plain.json" --concurrency 500 --repeat 500 --connections 2 --quiet >"$TMP/p" 2>&1
check "500 concurrent streams, all picked" grep -q '"requests":500,"ok":500,"failed":0' "$TMP/p"
check "... at once" $PY -c "import json,sys; j=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); assert j['max_concurrency']>=400, j" "$TMP/p"
sleep 0.3
curl -s --max-time 5 "$GWURL/metrics" >"$TMP/met"
expect_grep_file "in flight back to 0 after them" 'eldr_extproc_in_flight 0' "$TMP/met"
expect_grep_file "no stream left open" 'eldr_extproc_streams 0' "$TMP/met"
check "the engine's loads are 0 too" sh -c "curl -s --max-time 5 '$GWURL/v1/snapshot' | $PY -c \"import json,sys; j=json.load(sys.stdin); assert sum(w['inflight'] for w in j['workers'])==0, j['workers']\""
check "... and the cost rule's estimate is empty (the picker's stream ends removed each)" $PY -c "
import re, sys
m = sys.stdin.read()
v = re.findall(r'^eldr_cost_(?:members|expected_experts)\{[^}]*\} (\S+)$', m, re.M)
assert v and all(float(x) == 0 for x in v), v" <"$TMP/met"

# --- a 5xx from an endpoint counts against it ---------------------------------
envoy pick --target "$T" --body-file "$TMP/plain.json" --subset 10.0.0.2:8000 --response-status 503 --repeat 2 --quiet >"$TMP/p" 2>&1
curl -s --max-time 5 "$GWURL/v1/snapshot" >"$TMP/snap"
check "two 503s from 10.0.0.2 eject worker 1 (--eject-after 2)" \
    jq_py "$TMP/snap" "j['pool']['decode'][1]['ejected']"
envoy pick --target "$T" --body-lines "$TMP/b.jsonl" --quiet >"$TMP/p" 2>&1
check "... and no pick goes there while it is out" $PY -c "
import json,sys; j=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert j['ok']==100 and '10.0.0.2:8000' not in j['picks'], j" "$TMP/p"

# --- the endpoints file, replaced ---------------------------------------------
sed 's/10.0.0.4/10.0.1.4/' "$TMP/eps.json" >"$TMP/eps.new" && mv "$TMP/eps.new" "$TMP/eps.json"
i=0; while [ $i -lt 40 ] && ! curl -s --max-time 2 "$GWURL/v1/snapshot" | grep -q 10.0.1.4; do sleep 0.1; i=$((i + 1)); done
envoy pick --target "$T" --body-lines "$TMP/b.jsonl" --quiet >"$TMP/p" 2>&1
check "a replaced file is taken: every pick inside the new set" $PY -c "
import json,sys; j=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert j['ok']==100 and '10.0.0.4:8000' not in j['picks'], j" "$TMP/p"
envoy pick --target "$T" --body-file "$TMP/plain.json" --subset 10.0.1.4:8000 >"$TMP/p" 2>&1
check "... worker 3 is now 10.0.1.4" test "$(field "$TMP/p" "j['endpoint']")" = 10.0.1.4:8000
printf 'endpoints: [\n' >"$TMP/eps.bad" && mv "$TMP/eps.bad" "$TMP/eps.json"
sleep 1.5
check "a bad replacement is logged and kept out" grep -q -- "--endpoints: .*previous endpoints stay" "$TMP/gw.log"
envoy pick --target "$T" --body-file "$TMP/plain.json" --repeat 4 --quiet >"$TMP/p" 2>&1
check "... the previous endpoints serve on" grep -q '"ok":4' "$TMP/p"


# --- limits: a silent connection, the body budget --------------------------------
XP2=$(free_port)
$PY -c "import json; print(json.dumps({'prompt': 'y' * 900000}))" >"$TMP/900k.json"
start lim -m "$TMP/m.h5" --ext-proc "127.0.0.1:$XP2" --endpoints "$TMP/eps.good" --header-timeout 1 \
    --max-body 1000000 --max-model-body 1000000 --max-kv-body 1000000 --body-budget 1500000 || exit 0
LIMURL=$URL
check "a connection that sends nothing is closed after --header-timeout" $PY -c "
import socket,sys,time
s=socket.create_connection(('127.0.0.1',int(sys.argv[1]))); s.settimeout(5); t=time.time()
assert s.recv(100000) is not None
while s.recv(100000): pass
assert 0.5 < time.time()-t < 4, time.time()-t" "$XP2"
envoy cancel --target "127.0.0.1:$XP2" --body-file "$TMP/900k.json" --after-bytes 800000 --wait-ms 3000 >"$TMP/hold" 2>&1 &
HOLD=$!
sleep 1
envoy pick --target "127.0.0.1:$XP2" --body-file "$TMP/900k.json" >"$TMP/p" 2>&1
check "a body past --body-budget (another one held): immediate 503" \
    test "$(field "$TMP/p" "j['immediate_status']")" = 503
check "... naming the budget" grep -q 'body-budget' "$TMP/p"
check "... in OpenAI's error shape (the client reads it as any error; issue 31, item 6)" \
    test "$(field "$TMP/p" "json.loads(j['immediate_body'])['error']['code']")" = 503
wait $HOLD
envoy pick --target "127.0.0.1:$XP2" --body-file "$TMP/900k.json" >"$TMP/p" 2>&1
check "once the held body is gone, the same body is picked" test "$(field "$TMP/p" "j['echo_ok']")" = True
curl -s --max-time 5 "$LIMURL/metrics" >"$TMP/met"
expect_grep_file "the silent connection counted" 'eldr_extproc_preface_timeouts_total 1' "$TMP/met"
expect_grep_file "the budget holds nothing when idle" 'eldr_body_bytes 0' "$TMP/met"
# --- the drain: a stream mid-body holds it; the picker stops being ready --------
envoy cancel --target "$T" --body-file "$TMP/big.json" --after-bytes 50000 --wait-ms 5000 >"$TMP/hold" 2>&1 &
HOLD=$!
sleep 0.7
kill -TERM $GWPID
sleep 0.5
envoy health --target "$T" --expect any --timeout 3 >"$TMP/h" 2>&1
check "draining: health answers NOT_SERVING on a new connection" \
    grep -q '"status":"NOT_SERVING"' "$TMP/h"
envoy pick --target "$T" --body-file "$TMP/plain.json" >"$TMP/p" 2>&1
check "draining: a new stream gets the immediate 503 ..." \
    test "$(field "$TMP/p" "j['immediate_status']")" = 503
check "... that says it is draining" grep -q 'draining' "$TMP/p"
check "draining: the open stream keeps eldrd up" kill -0 $GWPID
wait $HOLD
PID=$GWPID; stop
check "a second SIGTERM (stop) waits for the drain: eldrd exits 0 once the stream is gone" test "$RC" = 0
