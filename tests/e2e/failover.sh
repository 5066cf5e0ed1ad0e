#!/bin/sh
# tests/e2e/failover.sh - eldrd --proxy with dead, failing and endless
# upstreams (issue 20, items 1 and 2; docs/reliability.md, "Dead
# upstreams" and "Slow clients"), against the stand-ins of fake_pd.py:
#   - one of two prefills and one of four decoders dead: at most 2% of 200
#     requests fail, none once both are ejected; /healthz degraded naming
#     them, /metrics per instance, retries counted;
#   - a decoder that answers 500: retried on another worker, then ejected;
#   - active probes: a dead decoder is ejected with no request sent, and
#     comes back once something answers on its port; a 503 /health ejects;
#   - a client that stops reading an endless stream costs eldrd less than
#     64 MB, and the stream goes on when it reads again.
# Bounded: about 30 s; every wait and request capped.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs "failover"
[ -x "$ELDR" ] || ELDR="$ROOT/bin/eldr"

"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --variant count --layers all --seed 1 >/dev/null 2>&1
check "fixture: a K=4 count model" test -s "$TMP/m.h5"


expect_fail2 "--eject-after -1 is refused" "--eject-after" \
    "$ELDRD" -m "$TMP/m.h5" --eject-after -1 --listen 127.0.0.1:1
expect_fail2 "--health-path without a slash is refused" "--health-path: 'health'" \
    "$ELDRD" -m "$TMP/m.h5" --health-path health --listen 127.0.0.1:1
expect_fail2 "--stream-buffer 10 is refused" "--stream-buffer" \
    "$ELDRD" -m "$TMP/m.h5" --stream-buffer 10 --listen 127.0.0.1:1

# 1. dead instances: prefill 1 of 2, decode worker 3 of 4
standins live --prefill 1 --decode 3 --chunks 2 --chunk-gap 0.01
DEADP="http://127.0.0.1:$(free_port)"
DEADD="http://127.0.0.1:$(free_port)"
start dead -m "$TMP/m.h5" --proxy --prefill "$PF,$DEADP" --decode "$DC,$DEADD" \
    --eject-time 60 --tau 2 --max-conns-per-ip 200 || exit 0
DEAD=$URL; DEADPID=$PID

# 2. decoder 1 answers 500
standins fails --prefill 1 --decode 4 --fail-decode 1
start fails -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$DC" --eject-time 60 --tau 2 || exit 0
FAILS=$URL

# 3. active probes: decoder 3's port has nothing yet; decoder 2 answers 503 to /health
LATER=$(free_port)
standins probed --prefill 1 --decode 3 --health-fail 2
start probed -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$DC,http://127.0.0.1:$LATER" \
    --health-interval 0.2 --eject-time 60 || exit 0
PROBED=$URL

# 4. an endless stream of 16 KB events
standins endless --prefill 1 --decode 4 --chunks 1000000 --chunk-gap 0 --chunk-bytes 16384
start endless -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$DC" || exit 0
ENDLESS=$URL; ENDLESSPID=$PID

# 5. a decoder that answers streams with JSON; a prefill whose answer is 65 MiB
standins json --prefill 1 --decode 4 --json-stream 0,1,2,3
start json -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$DC" || exit 0
JSONS=$URL
standins huge --prefill 1 --decode 4 --huge-prefill
start huge -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$DC" || exit 0
curl -s --max-time 20 -o "$TMP/body" -w '%{http_code}' "$URL/v1/completions" \
    -d '{"prompt": "a long answer", "max_tokens": 4}' >"$TMP/status"
expect_http "a prefill answer over 64 MiB: 502 naming the limit" 502 \
    '"64 MiB limit" in j["error"]["message"] and "prefill" in j["error"]["message"]'
curl -s --max-time 10 -N "$JSONS/v1/completions" \
    -d '{"prompt": "stream me", "max_tokens": 4, "stream": true}' >"$TMP/sse" 2>/dev/null
if grep -q '^data: {"error"' "$TMP/sse" && grep -q 'not SSE' "$TMP/sse" &&
    ! grep -q '^{' "$TMP/sse"; then ok "a decoder's JSON answer to a stream becomes an SSE error event"
else notok "a decoder's JSON answer to a stream becomes an SSE error event" "$(head -c 400 "$TMP/sse")"; fi

$PY "$ROOT/tests/e2e/failover_check.py" "$DEAD" "$DEADP" "$DEADD" "$FAILS" "$PROBED" "$LATER" \
    "$ENDLESS" "$ENDLESSPID" "$SMALL" "$TMP" "$ROOT"
grep -q "decode $DEADD ejected" "$TMP/dead.log" && ok "the ejection is logged" ||
    notok "the ejection is logged" "$(head -c 600 "$TMP/dead.log")"
