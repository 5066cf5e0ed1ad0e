#!/bin/sh
# tests/e2e/replay_admin.sh - `eldr replay` against eldrd with
# --admin-listen (issue 30, item 4): routes to --listen, the snapshot from
# --admin; without --admin, one line naming it (exit 2); --to at the
# admin listener (the snapshot answers, every route is 404): the run stops
# at the first 404, one line, exit 2, no summary and no "p50 nan"; --to
# and --admin swapped, or a server where every path is 404: one line,
# exit 2; and through the proxy with
# --route-token-file: --token-file sends it (every call succeeds), without
# it every route is 401 (exit 1, and the summary says no route succeeded
# instead of printing nan). Bounded; about 5 s.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs "replay --admin"
[ -x "$ELDR" ] || { notok "replay --admin prerequisites" "need $ELDR"; exit 0; }
"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --seed 1 >/dev/null 2>&1
check "fixture: a K = 4 model" test -s "$TMP/m.h5"

AP=$(free_port); AURL="http://127.0.0.1:$AP"
start split -m "$TMP/m.h5" --admin-listen "127.0.0.1:$AP" --quiet || exit 0
expect_fail2 "--to the public listener without --admin: exit 2 naming --admin" \
    "$URL answers GET /v1/snapshot on its --admin-listen listener: give that address as --admin URL" \
    "$ELDR" replay "$SMALL" --to "$URL" --requests 20 --rate 400
T0=$(date +%s)
expect_fail2 "--to the admin listener: exit 2, one line" \
    "$AURL does not serve POST /v1/route .*HTTP 404: no such endpoint.*admin listener" \
    "$ELDR" replay "$SMALL" --to "$AURL" --requests 2000 --rate 100
T1=$(date +%s)
check "... the run stops at the first 404 (2000 requests at 100/s would take 20 s)" \
    test $((T1 - T0)) -le 5
check "... no summary, no nan" sh -c "! grep -q . '$TMP/out'"
expect_fail2 "--to and --admin swapped: exit 2" "--admin $URL is eldrd's public listener" \
    "$ELDR" replay "$SMALL" --to "$AURL" --admin "$URL" --requests 20 --rate 400
expect_status "--to the public listener, --admin the admin one: exit 0" 0 \
    "$ELDR" replay "$SMALL" --to "$URL" --admin "$AURL" --requests 120 --rate 600 --tpot-ms 1 --json
check "... every route and finish succeeded, in flight back to 0" jq_py "$TMP/out" \
    'j["routed"] == 120 and j["finished"] == 120 and j["route_errors"] == 0 and sum(j["workers"].values()) == 120 and j["daemon_inflight_after"] == 0 and j["admin"] == "'"$AURL"'"'
curl -s --max-time 5 -o "$TMP/snap.json" "$AURL/v1/snapshot?decisions=0"
check "... and the daemon counted them" jq_py "$TMP/snap.json" \
    'sum(w["routed"] for w in j["workers"]) == 120 and sum(w["inflight"] for w in j["workers"]) == 0'
expect_status "--admin at a closed port: exit 3" 3 \
    "$ELDR" replay "$SMALL" --to "$URL" --admin "http://127.0.0.1:$(free_port)" --requests 5 --timeout 2
stop

# a server that answers 404 to everything (not eldrd)
mkdir -p "$TMP/empty"
NP=$(free_port)
$PY -m http.server "$NP" --bind 127.0.0.1 --directory "$TMP/empty" >/dev/null 2>&1 &
PIDS="$PIDS $!"
i=0; while [ $i -lt 50 ] && ! curl -s --max-time 1 -o /dev/null "http://127.0.0.1:$NP/"; do sleep 0.1; i=$((i + 1)); done
expect_fail2 "--to a server where every path is 404: exit 2, one line" \
    "http://127.0.0.1:$NP/v1/snapshot: HTTP 404, no eldrd snapshot there" \
    "$ELDR" replay "$SMALL" --to "http://127.0.0.1:$NP" --requests 20 --rate 400
check "... no summary, no nan" sh -c "! grep -qi nan '$TMP/out' && ! grep -q . '$TMP/out'"

# through the proxy: its route token
standins pd --prefill 1 --decode 4
printf 'r0ute-t0ken-0123456789abcdef\n' >"$TMP/route.tok"
AP=$(free_port); AURL="http://127.0.0.1:$AP"
start proxy -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$DC" --admin-listen "127.0.0.1:$AP" \
    --route-token-file "$TMP/route.tok" --quiet || exit 0
expect_status "proxy: --token-file sends the route token: exit 0" 0 \
    "$ELDR" replay "$SMALL" --to "$URL" --admin "$AURL" --token-file "$TMP/route.tok" \
    --requests 60 --rate 600 --tpot-ms 1 --json
check "... every route and finish succeeded" jq_py "$TMP/out" \
    'j["routed"] == 60 and j["finished"] == 60 and j["route_errors"] == 0 and j["finish_errors"] == 0'
expect_status "proxy: without it every route is 401: exit 1" 1 \
    "$ELDR" replay "$SMALL" --to "$URL" --admin "$AURL" --requests 10 --rate 600 --tpot-ms 1
check "... the summary says no route succeeded (no nan), the error is eldrd's 401" sh -c "
    grep -q 'route latency ms: none (no route succeeded)' '$TMP/out' && ! grep -qi nan '$TMP/out' &&
    grep -q 'HTTP 401' '$TMP/err'"
expect_fail2 "proxy: a token file too short: exit 2" "--token-file .*: the token has 3 characters" \
    sh -c "printf 'abc\n' >'$TMP/bad.tok'; '$ELDR' replay '$SMALL' --to '$URL' --admin '$AURL' --token-file '$TMP/bad.tok'"
stop
