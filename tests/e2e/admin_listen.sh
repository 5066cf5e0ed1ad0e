#!/bin/sh
# tests/e2e/admin_listen.sh - the admin listener (issue 20, item 7): with
# --admin-listen, the admin and introspection endpoints answer only there
# (404 naming --admin-listen on the public listener, from the headers),
# /healthz and /metrics on both, both listeners drain on SIGTERM; in proxy
# mode, --route-token-file guards /v1/route and /v1/finish on the public
# listener while proxied requests need nothing; the bind rule applies to
# the listener that serves the admin endpoints, and proxying on a
# non-loopback --listen without --admin-listen logs a warning (those two
# in a network namespace of their own, so nothing binds off loopback on
# the machine). Every curl and wait is bounded; about 15 s.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs "eldrd --admin-listen"

"$ROOT/bin/eldr" fit "$SMALL" -k 4 -o "$TMP/m.h5" --variant count --layers all --seed 1 \
    >/dev/null 2>&1 || { notok "fit the fixture model"; exit 0; }
"$ROOT/bin/eldr" model export "$TMP/m.h5" -o "$TMP/m.json" >/dev/null 2>&1
printf 'r0ute-t0ken-0123456789abcdef\n' >"$TMP/route.tok"
ROUTEH="Authorization: Bearer r0ute-t0ken-0123456789abcdef"
route_body() { printf '{"request_id": "%s", "sparse": [[0, 1, 3], [1, 2, 5]]}' "$1"; }
# areq METHOD PATH [BODY|@FILE]: req on the admin listener ($AURL)
areq() { U=$URL; URL=$AURL; req "$@"; URL=$U; }
# hreq HEADER METHOD PATH [BODY]: req with one header, headers to $TMP/headers
hreq() {
    h=$1; shift
    curl -s --max-time 10 -D "$TMP/headers" -o "$TMP/body" -w '%{http_code}' -X "$1" \
        ${h:+-H "$h"} ${3:+--data-binary "$3"} "$URL$2" >"$TMP/status" 2>/dev/null
}

# ---- the two listeners ------------------------------------------------------------
AP=$(free_port); AURL="http://127.0.0.1:$AP"
start split -m "$TMP/m.h5" --admin-listen "127.0.0.1:$AP" || exit 0
req POST /v1/route "$(route_body a-1)"
expect_http "public: POST /v1/route" 200
req POST /v1/route "$(route_body a-2)"
req POST /v1/finish '{"request_id": "a-1"}'
expect_http "public: POST /v1/finish" 200
for ep in "GET /v1/snapshot" "GET /v1/explain/a-1" "GET /v1/window" "PUT /v1/config" \
          "POST /v1/inflight/clear" "POST /v1/kv-events" "PUT /v1/model"; do
    req ${ep% *} ${ep#* } '{}'
    expect_http "public: $ep is 404 naming --admin-listen" 404 '"--admin-listen" in j["error"]["message"]'
done
$PY -c 'print("{\"x\": \"" + "a" * 6000000 + "\"}")' >"$TMP/big.json"
hreq "" PUT /v1/model "@$TMP/big.json"
expect_http "public: a 6 MB model upload gets its 404 from the headers" 404
check "... with Connection: close" grep -qi '^Connection: close' "$TMP/headers"
for p in /healthz /metrics; do
    req GET $p; expect_http "public: GET $p" 200
    areq GET $p; expect_http "admin: GET $p" 200
done
areq GET /v1/snapshot
expect_http "admin: the snapshot counts the public listener's routes" 200 \
    'sum(w["routed"] for w in j["workers"]) == 2 and sum(w["inflight"] for w in j["workers"]) == 1'
areq GET /v1/explain/a-2
expect_http "admin: GET /v1/explain/{id}" 200 'j["request_id"] == "a-2"'
areq GET /v1/window
expect_http "admin: GET /v1/window" 200
areq PUT /v1/config '{"tau": 0.3}'
expect_http "admin: PUT /v1/config" 200 'abs(j["tau"] - 0.3) < 1e-9'
areq POST /v1/kv-events '{"worker": "default", "events": [{"type": "AllBlocksCleared"}]}'
expect_http "admin: POST /v1/kv-events" 200
areq GET /v1/snapshot
W=$($PY -c 'import json,sys; print([w["name"] for w in json.load(open(sys.argv[1]))["workers"] if w["inflight"]][0])' "$TMP/body")
areq POST /v1/inflight/clear "{\"worker\": \"$W\"}"
expect_http "admin: POST /v1/inflight/clear" 200 'j["cleared"] == 1'
areq PUT /v1/model "@$TMP/m.json"
expect_http "admin: PUT /v1/model" 200 'j["model_generation"] == 2'
areq POST /v1/route "$(route_body a-3)"
expect_http "admin: no POST /v1/route there" 404 '"no such endpoint" in j["error"]["message"]'
curl -s --max-time 5 "$AURL/metrics" >"$TMP/metrics.txt"
check "/metrics: PUT /v1/model counted once by code, whichever listener answered" \
    sh -c "grep -qx 'eldr_http_responses_by_endpoint_total{endpoint=\"PUT /v1/model\",code=\"404\"} 2' '$TMP/metrics.txt' &&
           grep -qx 'eldr_http_responses_by_endpoint_total{endpoint=\"PUT /v1/model\",code=\"200\"} 1' '$TMP/metrics.txt'"
check "the audit line names the admin listener's client" \
    grep -q "audit: PUT /v1/model from 127.0.0.1 (no token required): generation 2" "$TMP/split.log"

# the drain: an upload on the admin listener that began before SIGTERM is
# answered; neither listener takes new connections
$PY - "$PORT" "$AP" "$PID" >"$TMP/drain.out" 2>&1 <<'EOF'
import os, signal, socket, sys, time
port, aport, pid = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
body = b'{"tau": 0.2}'
a = socket.create_connection(("127.0.0.1", aport), timeout=5)
a.sendall(b"PUT /v1/config HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:4])
time.sleep(0.3)
os.kill(pid, signal.SIGTERM)
time.sleep(0.5)
for name, p in (("public", port), ("admin", aport)):
    try:
        s = socket.create_connection(("127.0.0.1", p), timeout=1)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        print(name, "new connection", "answered" if s.recv(100) else "closed")
    except OSError as e:
        print(name, "new connection refused")
a.sendall(body[4:])
print("admin upload", a.recv(4096).split(b"\r\n")[0].decode())
EOF
i=0; while kill -0 $PID 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
wait $PID; RC=$?
check "SIGTERM: the admin listener's upload begun before it is answered" grep -q "^admin upload HTTP/1.1 200" "$TMP/drain.out"
check "... and neither listener takes a new connection" \
    sh -c "grep -Eq '^public new connection (refused|closed)' '$TMP/drain.out' && grep -Eq '^admin new connection (refused|closed)' '$TMP/drain.out'"
check "... then eldrd exits 0" test "$RC" -eq 0

# ---- start-up rules ------------------------------------------------------------------
expect_fail2 "an --admin-listen address off loopback needs a token" \
    "--admin-listen 10.1.2.3:9999 is not a loopback address" \
    "$ELDRD" -m "$TMP/m.h5" --listen 127.0.0.1:1 --admin-listen 10.1.2.3:9999
expect_fail2 "--route-token-file without --proxy: exit 2" "--route-token-file is for proxy mode" \
    "$ELDRD" -m "$TMP/m.h5" --route-token-file "$TMP/route.tok"
P=$(free_port)
$PY -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(5)' "$P" &
BUSY=$!; PIDS="$PIDS $BUSY"
sleep 0.3
expect_fail2 "--admin-listen on a port in use: exit 2, one line" \
    "--admin-listen 127.0.0.1:$P: cannot listen there: Address already in use" \
    "$ELDRD" -m "$TMP/m.h5" --listen "127.0.0.1:$(free_port)" --admin-listen "127.0.0.1:$P"
kill $BUSY 2>/dev/null

# ---- proxy mode: the route token, the admin listener beside the loop ----------------
$PY "$ROOT/tests/e2e/fake_pd.py" "$SMALL" "$TMP/pd.ports" "$TMP/pd.jsonl" --prefill 1 --decode 4 \
    --max-seconds 60 &
PIDS="$PIDS $!"
i=0; while [ ! -s "$TMP/pd.ports" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
PF=$($PY -c "import json,sys; print(','.join('http://127.0.0.1:%d' % p for p in json.load(open(sys.argv[1]))['prefill']))" "$TMP/pd.ports")
DC=$($PY -c "import json,sys; print(','.join('http://127.0.0.1:%d' % p for p in json.load(open(sys.argv[1]))['decode']))" "$TMP/pd.ports")
AP=$(free_port); AURL="http://127.0.0.1:$AP"
start proxy -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$DC" --admin-listen "127.0.0.1:$AP" \
    --route-token-file "$TMP/route.tok" || exit 0
curl -s --max-time 10 -o "$TMP/body" -w '%{http_code}' -H 'X-Request-Id: px-1' \
    --data-binary '{"model": "m", "prompt": "Explain KV caches.", "max_tokens": 8}' \
    "$URL/v1/completions" >"$TMP/status"
expect_http "proxy: a completion on the public listener needs no token" 200
hreq "" POST /v1/route "$(route_body r-1)"
expect_http "proxy: POST /v1/route without the route token: 401" 401 '"route token" in j["error"]["message"]'
hreq "$ROUTEH" POST /v1/route "$(route_body r-1)"
expect_http "proxy: ... with it: 200" 200
hreq "" POST /v1/finish '{"request_id": "r-1"}'
expect_http "proxy: POST /v1/finish without it: 401" 401
hreq "$ROUTEH" POST /v1/finish '{"request_id": "r-1"}'
expect_http "proxy: ... with it: 200" 200
areq GET /v1/explain/px-1
expect_http "proxy: the admin listener explains the proxied request" 200 'j["request_id"] == "px-1"'
areq PUT /v1/model "@$TMP/m.json"
expect_http "proxy: a model swap on the admin listener (its own threads)" 200
req GET /v1/snapshot
expect_http "proxy: no snapshot on the public listener" 404
check "proxy on loopback with --admin-listen: no warning" \
    sh -c "! grep -q 'warning: --proxy' '$TMP/proxy.log'"
stop
check "proxy mode with both listeners: SIGTERM exits 0" test "$RC" -eq 0

# ---- off loopback, in a network namespace ------------------------------------------
if unshare -n true 2>/dev/null; then
    printf 'adm1n-t0ken-0123456789abcdef\n' >"$TMP/admin.tok"
    ELDRD="$ELDRD" M="$TMP/m.h5" T="$TMP" \
        D="http://127.0.0.1:1,http://127.0.0.1:2,http://127.0.0.1:3,http://127.0.0.1:4" \
        unshare -n sh -c '
        ip link set lo up || exit 9
        run() { # NAME ARGS...: start, wait for /healthz on 127.0.0.1:8470, stop
            n=$1; shift
            "$ELDRD" -m "$M" --listen 0.0.0.0:8470 "$@" 2>"$T/$n.log" &
            p=$!; i=0
            while [ $i -lt 50 ] && ! curl -s --max-time 1 http://127.0.0.1:8470/healthz >/dev/null; do
                kill -0 $p 2>/dev/null || break; sleep 0.1; i=$((i + 1)); done
            curl -s --max-time 1 -o /dev/null -w "$n %{http_code}\n" http://127.0.0.1:8470/healthz
            kill $p; wait $p
        }
        run warn --proxy --prefill http://127.0.0.1:1 --decode "$D" --admin-token-file "$T/admin.tok"
        run nowarn --proxy --prefill http://127.0.0.1:1 --decode "$D" --admin-listen 127.0.0.1:8471
        run plain
    ' >"$TMP/netns.out" 2>&1
    check "netns: --proxy on 0.0.0.0 without --admin-listen serves, and warns" \
        sh -c "grep -q '^warn 200' '$TMP/netns.out' && grep -q 'warning: --proxy on 0.0.0.0, which is not loopback, without --admin-listen' '$TMP/warn.log'"
    check "netns: with --admin-listen on loopback, 0.0.0.0 needs no admin token, and no warning" \
        sh -c "grep -q '^nowarn 200' '$TMP/netns.out' && ! grep warning '$TMP/nowarn.log' | grep -qv 'running as root'"
    check "netns: 0.0.0.0 serving the admin endpoints without a token is still refused" \
        grep -q "not a loopback address" "$TMP/plain.log"
else
    ok "netns: skipped (no network namespace here)"
    ok "netns: skipped"
    ok "netns: skipped"
fi
