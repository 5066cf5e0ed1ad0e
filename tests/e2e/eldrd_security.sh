#!/bin/sh
# tests/e2e/eldrd_security.sh - eldrd off loopback (issue 15, items 1, 5
# and the IPv6 listen): bearer tokens on the state-changing endpoints
# (401 JSON before the body is read, constant-time compare, a separate kv
# token), the bind rule (a non-loopback --listen needs a token or
# --insecure), the audit log of model/config changes, and lost finishes
# (--inflight-ttl expiry, POST /v1/inflight/clear), each visible in
# /v1/snapshot, /v1/explain and /metrics. Every server binds 127.0.0.1
# (or ::1) on a free port; every curl and wait is bounded.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs "eldrd security"

"$ROOT/bin/eldr" fit "$SMALL" -k 4 -o "$TMP/m.h5" --layers all >/dev/null 2>&1 ||
    { notok "fit the fixture model"; exit 0; }
"$ROOT/bin/eldr" model export "$TMP/m.h5" -o "$TMP/m.json" >/dev/null 2>&1
printf 'adm1n-t0ken-0123456789abcdef\n' >"$TMP/admin.tok"
printf '  kv-t0ken-0123456789abcdef  \n' >"$TMP/kv.tok"
ADMIN="Authorization: Bearer adm1n-t0ken-0123456789abcdef"
KVH="Authorization: Bearer kv-t0ken-0123456789abcdef"

# hreq HEADER METHOD PATH [BODY|@FILE]: like req, with one header ("" for none)
hreq() {
    h=$1; shift
    if [ -n "$3" ]; then
        curl -s --max-time 10 -D "$TMP/headers" -o "$TMP/body" -w '%{http_code}' -X "$1" \
            ${h:+-H "$h"} --data-binary "$3" "$URL$2" >"$TMP/status" 2>/dev/null
    else
        curl -s --max-time 10 -D "$TMP/headers" -o "$TMP/body" -w '%{http_code}' -X "$1" \
            ${h:+-H "$h"} "$URL$2" >"$TMP/status" 2>/dev/null
    fi
}
metric() { # NAME: the sum of a metric's series
    curl -s --max-time 5 "$URL/metrics" | awk -v n="$1" '$1 == n || index($1, n "{") == 1 { s += $2 } END { print s + 0 }'
}
route_body() { # ID: a sparse route body
    printf '{"request_id": "%s", "sparse": [[0, 1, 3], [1, 2, 5], [2, %d, 4]]}' "$1" "$(( $(printf %s "$1" | cksum | cut -d' ' -f1) % 64 ))"
}

# ---- tokens -------------------------------------------------------------
start tok -m "$TMP/m.h5" --admin-token-file "$TMP/admin.tok" || exit 0
hreq "" PUT /v1/config '{"tau": 0.3}'
expect_http "PUT /v1/config without a token: 401 JSON" 401 \
    'j["error"]["param"] == "authorization" and "Bearer" in j["error"]["message"]'
check "401 carries WWW-Authenticate: Bearer" grep -qi '^WWW-Authenticate: Bearer' "$TMP/headers"
hreq "Authorization: Bearer adm1n-t0ken-0123456789abcdeX" PUT /v1/config '{"tau": 0.3}'
expect_http "PUT /v1/config with a wrong token: 401" 401
hreq "Authorization: Basic YWRtaW46YWRtaW4=" PUT /v1/config '{"tau": 0.3}'
expect_http "PUT /v1/config with another scheme: 401" 401
req GET /v1/snapshot
expect_http "tau unchanged by refused requests" 200 'abs(j["tau"] - 0.3) > 1e-9'
hreq "$ADMIN" PUT /v1/config '{"tau": 0.3}'
expect_http "PUT /v1/config with the admin token: 200" 200 'abs(j["tau"] - 0.3) < 1e-9'
hreq "" PUT /v1/model "@$TMP/m.json"
expect_http "PUT /v1/model without a token: 401" 401
req GET /v1/snapshot
expect_http "model generation unchanged by the refused PUT" 200 'j["model"]["generation"] == 1'
hreq "$ADMIN" PUT /v1/model "@$TMP/m.json"
expect_http "PUT /v1/model with the admin token: 200" 200 'j["model_generation"] == 2'
hreq "" POST /v1/kv-events '{"worker": "default", "events": [{"type": "AllBlocksCleared"}]}'
expect_http "kv-events without a token (admin guards it): 401" 401
hreq "$ADMIN" POST /v1/kv-events '{"worker": "default", "events": [{"type": "AllBlocksCleared"}]}'
expect_http "kv-events with the admin token: 200" 200
hreq "" POST /v1/route "$(route_body open-1)"
expect_http "routes need no token" 200
hreq "" POST /v1/finish '{"request_id": "open-1"}'
expect_http "finishes need no token" 200
check "eldr_auth_failures_total counts the five 401s" test "$(metric eldr_auth_failures_total)" -eq 5
check "audit log: the config change, who and what" \
    grep -q "audit: PUT /v1/config from 127.0.0.1 (admin token): tau 0.1 -> 0.3" "$TMP/tok.log"
check "audit log: the model change with its generation" \
    grep -q "audit: PUT /v1/model from 127.0.0.1 (admin token): generation 2" "$TMP/tok.log"
check "the log names refused attempts" grep -q "401 PUT /v1/model from 127.0.0.1: no Authorization header" "$TMP/tok.log"
check "no token in the log" sh -c "! grep -q 'adm1n-t0ken' '$TMP/tok.log'"
# a big body without a token is refused from its headers
$PY -c 'print("{\"x\": \"" + "a" * 6000000 + "\"}")' >"$TMP/big.json"
hreq "" PUT /v1/model "@$TMP/big.json"
expect_http "a 6 MB model without a token: 401" 401
stop

start kv -m "$TMP/m.h5" --admin-token-file "$TMP/admin.tok" --kv-token-file "$TMP/kv.tok" || exit 0
hreq "$KVH" POST /v1/kv-events '{"worker": "default", "events": [{"type": "AllBlocksCleared"}]}'
expect_http "--kv-token-file: kv-events with the kv token (blanks trimmed): 200" 200
hreq "$ADMIN" POST /v1/kv-events '{"worker": "default", "events": [{"type": "AllBlocksCleared"}]}'
expect_http "--kv-token-file: the admin token is not the kv token: 401" 401
hreq "$KVH" PUT /v1/config '{"tau": 0.2}'
expect_http "--kv-token-file: the kv token cannot change the config: 401" 401
stop

printf 'short\n' >"$TMP/short.tok"
expect_fail2 "a short token is refused at start" "at least 16" \
    "$ELDRD" -m "$TMP/m.h5" --listen 127.0.0.1:1 --admin-token-file "$TMP/short.tok"
expect_fail2 "a missing token file is refused at start" "admin-token-file .*absent" \
    "$ELDRD" -m "$TMP/m.h5" --listen 127.0.0.1:1 --admin-token-file "$TMP/absent"
expect_fail2 "--kv-token-file alone is refused" "needs --admin-token-file" \
    "$ELDRD" -m "$TMP/m.h5" --listen 127.0.0.1:1 --kv-token-file "$TMP/kv.tok"

# ---- the bind rule ------------------------------------------------------
P=$(free_port)
expect_fail2 "0.0.0.0 without a token: exit 2, one line" "not a loopback address.*--admin-token-file" \
    "$ELDRD" -m "$TMP/m.h5" --listen "0.0.0.0:$P"
"$ELDRD" -m "$TMP/m.h5" --listen "127.0.0.2:$P" --quiet 2>"$TMP/l2.err" &
p2=$!; PIDS="$PIDS $p2"
i=0; while [ $i -lt 50 ] && ! curl -s --max-time 1 "http://127.0.0.2:$P/healthz" >/dev/null 2>&1; do sleep 0.1; i=$((i + 1)); done
check "127.0.0.2 is loopback: served without a token" curl -sf --max-time 2 "http://127.0.0.2:$P/healthz"
kill -9 $p2 2>/dev/null
if $PY -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null; then
    P=$(free_port)
    "$ELDRD" -m "$TMP/m.h5" --listen "[::1]:$P" --quiet 2>"$TMP/v6.err" &
    p6=$!; PIDS="$PIDS $p6"
    i=0; while [ $i -lt 50 ] && ! curl -s --max-time 1 -g "http://[::1]:$P/healthz" >/dev/null 2>&1; do sleep 0.1; i=$((i + 1)); done
    check "--listen '[::1]:PORT' serves over IPv6 loopback" curl -sf --max-time 2 -g "http://[::1]:$P/healthz"
    kill -9 $p6 2>/dev/null
else
    ok "--listen [::1]: skipped (no IPv6 loopback here)"
fi
expect_fail2 "an unbracketed IPv6 host is refused" "brackets" \
    "$ELDRD" -m "$TMP/m.h5" --listen "::1:8470"

# ---- lost finishes: --inflight-ttl and the admin clear --------------------
start ttl -m "$TMP/m.h5" --inflight-ttl 1 || exit 0
for n in 1 2 3; do req POST /v1/route "$(route_body lost-$n)"; done
req GET /v1/snapshot
expect_http "three requests in flight" 200 'sum(w["inflight"] for w in j["workers"]) == 3'
sleep 2.5
req GET /v1/snapshot
expect_http "--inflight-ttl 1: expired after 2.5 s, load back to 0" 200 \
    'sum(w["inflight"] for w in j["workers"]) == 0 and sum(w["expired"] for w in j["workers"]) == 3'
check "eldr_inflight_expired_total counts them" test "$(metric eldr_inflight_expired_total)" -eq 3
req GET /v1/explain/lost-2
expect_http "explain says it expired" 200 'j["ended"] == "expired" and j["finished"] is False'
req POST /v1/finish '{"request_id": "lost-1"}'
expect_http "a finish after expiry: 404" 404
check "the expiry is logged" grep -Eq "[123] requests? in flight for more than 1 s forgotten" "$TMP/ttl.log"
req POST /v1/route "$(route_body fresh-1)"
req GET /v1/snapshot
expect_http "a fresh request stays" 200 'sum(w["inflight"] for w in j["workers"]) == 1'
stop
check "SIGTERM with the ttl thread running: exit 0" test "$RC" -eq 0

start clear -m "$TMP/m.h5" --admin-token-file "$TMP/admin.tok" || exit 0
for n in 1 2 3 4 5 6 7 8; do req POST /v1/route "$(route_body c-$n)"; done
req GET /v1/snapshot
cp "$TMP/body" "$TMP/before.json"
W=$($PY -c 'import json,sys; j=json.load(open(sys.argv[1])); w=max(j["workers"], key=lambda w: w["inflight"]); print(w["name"], w["inflight"])' "$TMP/before.json")
NAME=${W% *}; HAD=${W#* }
hreq "" POST /v1/inflight/clear "{\"worker\": \"$NAME\"}"
expect_http "clear without a token: 401" 401
hreq "$ADMIN" POST /v1/inflight/clear "{\"worker\": \"$NAME\"}"
expect_http "clear worker $NAME: its $HAD in-flight requests" 200 "j['cleared'] == $HAD and j['worker'] == '$NAME'"
req GET /v1/snapshot
expect_http "that worker is at 0, the others keep theirs" 200 \
    "[w['inflight'] for w in j['workers'] if w['name'] == '$NAME'] == [0] and sum(w['inflight'] for w in j['workers']) == 8 - $HAD"
check "eldr_inflight_cleared_total counts them" test "$(metric eldr_inflight_cleared_total)" -eq "$HAD"
check "audit log: the clear" grep -q "audit: POST /v1/inflight/clear from 127.0.0.1 (admin token): worker $NAME, $HAD in-flight" "$TMP/clear.log"
hreq "$ADMIN" POST /v1/inflight/clear '{"worker": "nobody"}'
expect_http "clear an unknown worker: 404" 404 'j["error"]["param"] == "worker"'
hreq "$ADMIN" POST /v1/inflight/clear '{"wroker": "w0"}'
expect_http "clear with a misspelt key: 422 naming it" 422 'j["error"]["param"] == "wroker"'
hreq "$ADMIN" POST /v1/inflight/clear '[1'
expect_http "clear with broken JSON: 400" 400
stop

# ---- refused requests change nothing; typos are not ignored (items 9, 11) ----
mkdir -p -m 700 "$TMP/state"   # the owner's, as eldrd makes it (no warning)
start strict -m "$TMP/m.h5" --state-dir "$TMP/state" || exit 0
req POST /v1/route '{"request_id": "t-1", "sparse": [[0, 1, 3]], "cached_block": 1}'
expect_http "route with a misspelt key: 422 naming it" 422 'j["error"]["param"] == "cached_block" and "cached_blocks" in j["error"]["message"]'
req POST /v1/finish '{"request_id": "t-1", "force": true}'
expect_http "finish with an unknown key: 422" 422 'j["error"]["param"] == "force"'
req PUT /v1/config '{"tua": 0.2}'
expect_http "config with a misspelt key: 422" 422 'j["error"]["param"] == "tua"'
req POST /v1/route '{"request_id": "bc-1", "sparse": [[0, 1, 300], [0, 2, 20]], "block_hashes": [11, 12], "block_counts": [[[0, 2, 5]], [[0, 1, 300]]]}'
expect_http "route with a bad block_counts[1]: 422" 422 'j["error"]["param"] == "block_counts" and "block_counts[1]" in j["error"]["message"]'
req GET /v1/snapshot
expect_http "... and block_counts[0] was not stored" 200 \
    'j["caches"][0]["entries"] == 0 and j["caches"][0]["stored_blocks"] == 0 and sum(w["inflight"] for w in j["workers"]) == 0'
req PUT /v1/model "@$TMP/m.json"
expect_http "a model PUT into the state dir" 200
stop
"$ROOT/bin/eldr" fit "$SMALL" -k 6 -o "$TMP/m6.h5" --layers all >/dev/null 2>&1
expect_fail2 "six --workers against the state dir's K=4 model: the error names the state dir" \
    "state dir.*wins over -m.*remove it" \
    "$ELDRD" -m "$TMP/m6.h5" --state-dir "$TMP/state" --listen 127.0.0.1:1 --workers a,b,c,d,e,f
start statewins -m "$TMP/m6.h5" --state-dir "$TMP/state" || exit 0
check "the log says the state dir's model wins over -m" grep -q "the state dir's model (the last PUT /v1/model), not -m" "$TMP/statewins.log"
stop
expect_fail2 "a worker name with invalid UTF-8 is refused" "not printable UTF-8" \
    "$ELDRD" -m "$TMP/m.h5" --listen 127.0.0.1:1 --workers "$(printf 'a\377b'),b,c,d"
expect_fail2 "a worker name with a control character is refused" "name 2 is not printable" \
    "$ELDRD" -m "$TMP/m.h5" --listen 127.0.0.1:1 --workers "a,$(printf 'b\tc'),c,d"

start framing -m "$TMP/m.h5" || exit 0
$PY - "$PORT" >"$TMP/dup.out" 2>&1 <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b'POST /v1/finish HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 20\r\n\r\n{"a":')
print(s.recv(4096).decode(errors="replace"))
EOF
check "two Content-Length headers: 400 JSON naming them" grep -q '"param":"Content-Length"' "$TMP/dup.out"
check "... with the status line 400" grep -q "^HTTP/1.1 400" "$TMP/dup.out"
# transfer codings as RFC 9112 (issue 31, item 5): chunked last and once,
# else 400; a coding eldrd does not read, 501; each with a status line, a
# JSON body naming Transfer-Encoding, and Connection: close
$PY - "$PORT" >"$TMP/te.out" 2>&1 <<'EOF'
import socket, sys
for te in (b"chunked, identity", b"chunked, chunked", b"gzip, chunked", b"xchunked",
           b"identity", b"gzip;q=1, chunked"):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
    s.sendall(b"POST /v1/finish HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: " + te +
              b"\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
    out = b""
    while True:
        d = s.recv(4096)
        if not d:
            break
        out += d
    head, _, body = out.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    print(te.decode(), "|", lines[0].split()[1], "|", "Connection: close" in lines, "|",
          body.decode())
    s.close()
EOF
check "Transfer-Encoding with chunked not last, or twice: 400 and close" sh -c \
    "grep -q '^chunked, identity | 400 | True |.*\"param\":\"Transfer-Encoding\"' '$TMP/te.out' &&
     grep -q '^chunked, chunked | 400 | True |' '$TMP/te.out'"
check "a coding eldrd does not read (gzip, xchunked, identity): 501 and close" sh -c \
    "grep -q '^gzip, chunked | 501 | True |.*not_implemented_error' '$TMP/te.out' &&
     grep -q '^xchunked | 501 | True |' '$TMP/te.out' && grep -q '^identity | 501 | True |' '$TMP/te.out' &&
     grep -q '^gzip;q=1, chunked | 501 | True |' '$TMP/te.out'"
req GET /healthz
expect_http "the daemon serves on after it" 200
# requests libmicrohttpd refuses before eldrd's handler (a malformed
# length, which eldrd then answers for it: tests/e2e/framing.sh; headers
# over its memory; a malformed chunk) must still be counted
$PY - "$PORT" >"$TMP/mhd.out" 2>&1 <<'EOF'
import socket, sys
for raw in (b"POST /v1/finish HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}",
            b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n",
            b"POST /v1/finish HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
    s.sendall(raw)
    print(s.recv(200).decode(errors="replace").split("\r\n")[0])
    s.close()
EOF
check "libmicrohttpd's own answers: 400, 431, 400" \
    sh -c "awk '{printf \"%s \", \$2}' '$TMP/mhd.out' | grep -qx '400 431 400 '"
curl -s --max-time 5 "$URL/metrics" >"$TMP/mhd.metrics"
check "... counted in eldr_http_protocol_errors_total" grep -qx "eldr_http_protocol_errors_total 3" "$TMP/mhd.metrics"
check "... and by code under endpoint other" \
    grep -qx 'eldr_http_responses_by_endpoint_total{endpoint="other",code="431"} 1' "$TMP/mhd.metrics"
stop

# ---- JSON that would cost memory (item 3) ----------------------------------
# kv-events may take 8 MB here (its default is 1 MiB), so that the JSON
# bounds are what refuses them
start json -m "$TMP/m.h5" --max-kv-body 8388608 || exit 0
rss() { awk '/^VmRSS/ {print $2}' "/proc/$PID/status"; }
hwm() { awk '/^VmHWM/ {print $2}' "/proc/$PID/status"; }
$PY -c 'import sys; sys.stdout.write("[" + ",".join(["{}"] * 2300000) + "]")' >"$TMP/objs.json"
$PY -c 'import sys; sys.stdout.write("{\"request_id\": \"" + "x" * 100000 + "\"}")' >"$TMP/longfinish.json"
h0=$(hwm); r0=$(rss)
req PUT /v1/config "@$TMP/objs.json"
expect_http "7 MB of {} to /v1/config: 413 (its limit is 64 KiB)" 413 '"65536" in j["error"]["message"]'
req POST /v1/finish "@$TMP/longfinish.json"
expect_http "100 kB to /v1/finish: 413" 413
req POST /v1/kv-events "@$TMP/objs.json"
expect_http "7 MB of {} to /v1/kv-events: 413 before parsing" 413 '"200000" in j["error"]["message"]'
req PUT /v1/model "@$TMP/objs.json"
expect_http "7 MB of {} to /v1/model: 413 before parsing" 413 '"objects and arrays" in j["error"]["message"]'
$PY -c 'print("[" * 40 + "]" * 40)' >"$TMP/deep.json"
req POST /v1/kv-events "@$TMP/deep.json"
expect_http "JSON 40 levels deep: 413" 413 '"deeper" in j["error"]["message"]'
h1=$(hwm); r1=$(rss)
case "$BIN" in
*asan*) ok "RSS: not judged under ASan (its quarantine keeps freed memory)" ;;
*) check "peak RSS grew by less than 64 MB ($h0 -> $h1 kB)" test $((h1 - h0)) -lt 65536
   check "RSS back within 32 MB after the big bodies ($r0 -> $r1 kB)" test $((r1 - r0)) -lt 32768 ;;
esac
req POST /v1/route "$(route_body after-json)"
expect_http "routes still served" 200
stop

# ---- every answer is JSON (item 7) ---------------------------------------
start errs -m "$TMP/m.h5" || exit 0
req GET /v1/explain/%FF
expect_http "explain of an id with invalid UTF-8: 404 JSON" 404 '"error" in j and "param" in j["error"]'
ID=$($PY -c 'print("a" + "\u00e9" * 120)')
req POST /v1/route "{\"request_id\": \"$ID\", \"sparse\": [[0, 1, 3]]}"
req POST /v1/route "{\"request_id\": \"$ID\", \"sparse\": [[0, 1, 3]]}"
expect_http "409 for an id cut inside a character: still JSON" 409 '"in flight already" in j["error"]["message"]'
req POST /v1/finish "{\"request_id\": \"${ID}x\"}"
expect_http "404 for such an id: JSON" 404 '"not in flight" in j["error"]["message"]'
check "HEAD /healthz: 200" sh -c "curl -s --max-time 5 -I '$URL/healthz' | head -1 | grep -q ' 200'"
check "HEAD /metrics: 200" sh -c "curl -s --max-time 5 -I '$URL/metrics' | head -1 | grep -q ' 200'"
stop

# ---- the metrics an operator needs (item 10) --------------------------------
cp "$TMP/m.h5" "$TMP/mr.h5"
start mets -m "$TMP/mr.h5" || exit 0
for n in 1 2 3; do req POST /v1/route "$(route_body met-$n)"; done
req GET /v1/nowhere
printf 'not a model' >"$TMP/mr.h5"
kill -HUP $PID; sleep 0.5
curl -s --max-time 5 "$URL/metrics" >"$TMP/metrics.txt"
mval() { grep -F "$1 " "$TMP/metrics.txt" | grep -v '^#' | awk '{ print $NF }' | head -1; }
check "process_resident_memory_bytes > 1 MB" test "$(mval process_resident_memory_bytes)" -gt 1000000
check "process_open_fds > 3" test "$(mval process_open_fds)" -gt 3
check "process_cpu_seconds_total present" grep -q '^process_cpu_seconds_total [0-9.]*$' "$TMP/metrics.txt"
check "eldr_build_info names the version" grep -q '^eldr_build_info{version="[0-9][^"]*"} 1$' "$TMP/metrics.txt"
check "eldr_open_connections counts this one" test "$(mval eldr_open_connections)" -ge 1
check "responses by endpoint and code: 3 routes" test "$(mval 'eldr_http_responses_by_endpoint_total{endpoint="POST /v1/route",code="200"}')" -eq 3
check "responses by endpoint and code: the unknown path" test "$(mval 'eldr_http_responses_by_endpoint_total{endpoint="other",code="404"}')" -eq 1
check "route buckets between 1 and 100 ms" grep -q '^eldr_route_seconds_bucket{le="0.0075"}' "$TMP/metrics.txt"
check "a failed SIGHUP reload is counted" test "$(mval eldr_reload_failures_total)" -eq 1
check "eldr_persist_failures_total present" grep -q '^eldr_persist_failures_total 0$' "$TMP/metrics.txt"
req GET /healthz
expect_http "still serving the old model after the failed reload" 200
stop

# ---- slow clients (item 2) ------------------------------------------------
start slow -m "$TMP/m.h5" --max-conns-per-ip 8 --request-deadline 2 --timeout 10 || exit 0
# 12 trickling connections from 127.0.0.1: header bytes one at a time
$PY - "$PORT" >"$TMP/trickle.out" 2>&1 <<'EOF' &
import socket, sys, time
port = int(sys.argv[1]); socks = []; refused = 0
for i in range(12):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        s.sendall(b"G")
        socks.append(s)
    except OSError:
        refused += 1
time.sleep(0.5)
alive = 0
for s in socks:   # the server closes the connections over the cap
    s.setblocking(False)
    try:
        alive += s.recv(1) != b""
    except BlockingIOError:
        alive += 1
    except OSError:
        pass
print("alive", alive, "refused", refused)
end = time.time() + 4
while time.time() < end:
    for s in socks:
        try: s.send(b"E")
        except OSError: pass
    time.sleep(0.5)
EOF
TP=$!; PIDS="$PIDS $TP"
sleep 1.2
check "another address is served within 1 s while one trickles" \
    curl -sf --max-time 1 --interface 127.0.0.2 "$URL/healthz"
wait $TP
check "one address holds at most --max-conns-per-ip 8 connections" grep -q "^alive [0-8] " "$TMP/trickle.out"
# a body trickled a byte every 0.4 s: cut at --request-deadline 2 s (the
# idle timer alone would let it run for ever)
$PY - "$PORT" >"$TMP/deadline.out" 2>&1 <<'EOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"POST /v1/route HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
t0 = time.time(); closed = False
for i in range(40):                      # 16 s of trickle at most
    s.settimeout(0.4)
    try:
        if s.recv(4096) == b"":
            closed = True
            break
    except socket.timeout:
        pass
    except OSError:
        closed = True
        break
    try:
        s.send(b" ")
    except OSError:
        closed = True
        break
print("closed" if closed else "open", "after %.1f s" % (time.time() - t0))
EOF
check "a trickled body is cut at the deadline" grep -q "^closed" "$TMP/deadline.out"
check "... within 5 s, not at the end of the trickle" sh -c "awk '{ exit !(\$3 < 5) }' '$TMP/deadline.out'"
check "eldr_deadline_cuts_total counts it" sh -c "curl -s --max-time 5 '$URL/metrics' | grep -q '^eldr_deadline_cuts_total 1$'"
check "the cut is logged" grep -q "cut POST /v1/route from 127.0.0.1: its body took more than 2 s" "$TMP/slow.log"
req GET /healthz
expect_http "the daemon serves on" 200
stop
expect_fail2 "--max-conns-per-ip above --max-conns is refused" "one address could take every" \
    "$ELDRD" -m "$TMP/m.h5" --listen 127.0.0.1:1 --max-conns 10 --max-conns-per-ip 20

# ---- drain (item 6) --------------------------------------------------------
start drain -m "$TMP/m.h5" --drain 5 || exit 0
$PY - "$PORT" "$PID" >"$TMP/drain.out" 2>&1 <<'EOF'
import http.client, json, os, signal, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
body = json.dumps({"request_id": "slow-1", "sparse": [[0, 1, 3]]}).encode()
a = socket.create_connection(("127.0.0.1", port), timeout=5)      # a slow upload
a.sendall(b"POST /v1/route HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body[:5])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)      # a kept-alive client
def post(path, b):
    c.request("POST", path, body=json.dumps(b), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, r.getheader("Connection"), r.read()
print("before", post("/v1/route", {"request_id": "d-1", "sparse": [[0, 1, 3]]})[:2])
os.kill(pid, signal.SIGTERM)
time.sleep(0.3)
st, conn, b = post("/v1/route", {"request_id": "d-2", "sparse": [[0, 1, 3]]})
print("route while draining", st, conn, json.loads(b)["error"]["param"])
a.sendall(body[5:])
print("slow upload", a.recv(4096).split(b"\r\n")[0].decode())
EOF
i=0; while kill -0 $PID 2>/dev/null && [ $i -lt 40 ]; do sleep 0.1; i=$((i + 1)); done
check "a route before SIGTERM: 200" grep -q "^before (200" "$TMP/drain.out"
check "a route on a kept-alive connection while draining: 503, Connection: close" \
    grep -q "^route while draining 503 close route" "$TMP/drain.out"
check "the upload that began before SIGTERM is answered" grep -q "^slow upload HTTP/1.1 200" "$TMP/drain.out"
check "then eldrd exits at once, not at the end of --drain 5" sh -c "! kill -0 $PID 2>/dev/null"
wait $PID; RC=$?
check "... with status 0" test "$RC" -eq 0
check "the drain is logged" grep -q "drained" "$TMP/drain.log"
start cut -m "$TMP/m.h5" --drain 1 || exit 0
$PY - "$PORT" <<'EOF' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(b"POST /v1/route HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
time.sleep(6)
EOF
HOLD=$!; PIDS="$PIDS $HOLD"
sleep 0.5
stop
check "a request still in progress at the end of --drain 1: exit 1" test "$RC" -eq 1
check "... and the log says what was cut" grep -q "1 request still in progress after 1 s were cut" "$TMP/cut.log"
kill $HOLD 2>/dev/null
