#!/bin/sh
# tests/e2e/replay.sh - `eldr replay` against a real eldrd over 127.0.0.1:
# options and bad input (exit 2, one line), an unreachable daemon (exit
# 3, as in dash --attach), the counts adding up (routed = finished = requests; the daemon's
# per-worker totals equal the replay's tally; in-flight back to zero),
# Poisson arrivals with rows repeating, the time bound, a failing route
# (409) making the exit status non-zero, and the real gpt-oss-20b trace.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
REAL="$DATA"
prereqs "replay"
[ -x "$ELDR" ] || { notok "replay prerequisites" "need $ELDR"; exit 0; }

"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --seed 1 >/dev/null 2>&1
check "fixture: a K=4 model on the small sample" test -s "$TMP/m.h5"

expect_status "replay --help" 0 "$ELDR" replay --help
expect_out "replay --help shows usage" "usage: eldr replay TRACE --to URL"
expect_fail2 "replay without --to" "--to URL is required" "$ELDR" replay "$SMALL"
expect_fail2 "replay without a trace" "no trace file" "$ELDR" replay --to http://127.0.0.1:1
expect_fail2 "replay bad --rate" "--rate" "$ELDR" replay "$SMALL" --to http://127.0.0.1:1 --rate x
expect_fail2 "replay bad --concurrency" "--concurrency" "$ELDR" replay "$SMALL" --to http://127.0.0.1:1 --concurrency 0
expect_fail2 "replay https URL refused" "give http://HOST:PORT" "$ELDR" replay "$SMALL" --to https://127.0.0.1:1
expect_fail2 "replay missing trace file" "nope.h5" "$ELDR" replay "$TMP/nope.h5" --to http://127.0.0.1:1
dead_port; DEAD="http://127.0.0.1:$DEADPORT"
expect_status "replay to a closed port: exit 3 (daemon unreachable)" 3 "$ELDR" replay "$SMALL" --to "$DEAD" --timeout 2
[ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "$DEAD" "$TMP/err" && ok "unreachable: one line naming the URL" ||
    notok "unreachable: one line naming the URL" "$(head -c 300 "$TMP/err")"

start replay -m "$TMP/m.h5" --workers a,b,c,d --quiet || exit 0
if [ -f "$REAL" ]; then
    expect_fail2 "replay a trace of another geometry" "L=24 E=32.*serves L=16 E=64" \
        "$ELDR" replay "$REAL" --to "$URL"
fi

# the whole sample at its arrival_s, 40x faster (~0.8 s of wall time)
expect_status "replay the sample (arrival_s, speed 40)" 0 \
    "$ELDR" replay "$SMALL" --to "$URL" --speed 40 --tpot-ms 5 --json --max-seconds 60
cp "$TMP/out" "$TMP/r1.json"
check "counts add up: routed = finished = 600, no errors" jq_py "$TMP/r1.json" \
    'j["requests"] == 600 and j["routed"] == 600 and j["finished"] == 600 and j["route_errors"] == 0 and j["finish_errors"] == 0 and j["skipped"] == 0 and sum(j["workers"].values()) == 600 and sum(j["rules"].values()) == 600 and j["daemon_inflight_after"] == 0'
check "latency percentiles ordered, decisions/s > 0" jq_py "$TMP/r1.json" \
    '0 < j["route_latency_ms"]["p50"] <= j["route_latency_ms"]["p99"] <= j["route_latency_ms"]["max"] and j["decisions_per_s"] > 0 and j["max_inflight"] >= 1'
req GET "/v1/snapshot?decisions=5"
cp "$TMP/body" "$TMP/s1.json"
check "daemon agrees: per-worker routed = replay's tally, in flight 0" $PY -c '
import json, sys
r = json.load(open(sys.argv[1])); s = json.load(open(sys.argv[2]))
w = {x["name"]: x for x in s["workers"]}
assert all(w[n]["routed"] == c and w[n]["finished"] == c and w[n]["inflight"] == 0 for n, c in r["workers"].items()), (r["workers"], s["workers"])
assert all(d["finished"] for d in s["decisions"])
' "$TMP/r1.json" "$TMP/s1.json"

# Poisson arrivals, more requests than rows (rows repeat), text output
expect_status "replay --rate with rows repeating" 0 \
    "$ELDR" replay "$SMALL" --to "$URL" --rate 1500 --requests 900 --tpot-ms 1 --concurrency 3 --seed 5
expect_out "text summary: routed 900, finished 900" "routed 900, finished 900, route errors 0, finish errors 0"
expect_out "text summary: latency and per worker" "route latency ms: p50 .* p99 .* max"
req GET "/v1/snapshot?decisions=0"
expect_http "after both runs: 1500 routed, 1500 finished, none in flight" 200 \
    'sum(w["routed"] for w in j["workers"]) == 1500 and sum(w["finished"] for w in j["workers"]) == 1500 and sum(w["inflight"] for w in j["workers"]) == 0'

# the time bound: long decodes and slow arrivals cut off at 0.6 s; what was in
# flight is finished at the bound, the rest skipped
t0=$(date +%s)
expect_status "bounded run: exit 0" 0 "$ELDR" replay "$SMALL" --to "$URL" --rate 20 --tpot-ms 1000 \
    --max-seconds 0.6 --json
t1=$(date +%s)
check "bounded run: skipped > 0, routed = finished, nothing left in flight" jq_py "$TMP/out" \
    'j["skipped"] > 0 and j["routed"] == j["finished"] and j["routed"] + j["skipped"] == 600 and j["daemon_inflight_after"] == 0'
[ $((t1 - t0)) -le 5 ] && ok "bounded run ends near the bound" || notok "bounded run ends near the bound" "$((t1 - t0)) s"

# progress: on a terminal (script gives stderr a pty) the bar shows the routing
# and then the drain (the wait for the last decodes); stdout, here --json to a
# file, stays clean; without a terminal stderr has no bar
script -qec "'$ELDR' replay '$SMALL' --to '$URL' --requests 40 --rate 2000 --tpot-ms 10 --json >'$TMP/pj.json'" \
    "$TMP/typescript" >/dev/null 2>&1
check "progress on a terminal: routing, then the drain" grep -q "eldr replay: drain .*40/40" "$TMP/typescript"
check "progress on a terminal: the routing bar" grep -q "eldr replay: routing .*40/40" "$TMP/typescript"
check "progress on a terminal: --json on stdout stays clean" jq_py "$TMP/pj.json" 'j["finished"] == 40'
"$ELDR" replay "$SMALL" --to "$URL" --requests 40 --rate 2000 --tpot-ms 10 >"$TMP/out" 2>"$TMP/err"
[ ! -s "$TMP/err" ] && ok "no progress bar when stderr is not a terminal" ||
    notok "no progress bar when stderr is not a terminal" "$(head -c 300 "$TMP/err" | od -c | head -5)"

# a failing route: the id is in flight already (409) -> exit 1, one line, the rest go through
req POST /v1/route '{"request_id": "dup-0", "sparse": [[0, 1, 5]]}'
expect_status "a failed route makes replay exit 1" 1 \
    "$ELDR" replay "$SMALL" --to "$URL" --requests 4 --rate 1000 --tpot-ms 1 --id-prefix dup- --json
[ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "HTTP 409" "$TMP/err" && ok "the failure is one stderr line with HTTP 409" ||
    notok "the failure is one stderr line with HTTP 409" "$(head -c 300 "$TMP/err")"
check "the failure is counted, the others route and finish" jq_py "$TMP/out" \
    'j["route_errors"] == 1 and j["routed"] == 3 and j["finished"] == 3 and "in flight" in j["first_error"]'
req POST /v1/finish '{"request_id": "dup-0"}'
expect_http "the earlier dup-0 is still the one in flight" 200
stop

# the real trace: gpt-oss-20b, 449 requests, decode times from decode_tokens
if [ -f "$REAL" ]; then
    "$ELDR" fit "$REAL" -k 4 -o "$TMP/real.h5" --seed 1 >/dev/null 2>&1
    start real -m "$TMP/real.h5" --quiet || exit 0
    expect_status "replay the real gpt-oss-20b trace" 0 \
        "$ELDR" replay "$REAL" --to "$URL" --rate 800 --tpot-ms 0.05 --json --concurrency 4
    check "real trace: 449 routed and finished, in flight 0 after" jq_py "$TMP/out" \
        'j["routed"] == 449 and j["finished"] == 449 and j["daemon_inflight_after"] == 0 and len(j["workers"]) == 4'
    stop
else
    notok "real trace" "missing $REAL"
fi

# a gate model: replay sends the trace's gate values ("gates")
"$ELDR" gen -o "$TMP/g.h5" --requests 120 --layers 6 --experts 16 --top-k 2 --domains 3 \
    --gate-prob --seed 4 >/dev/null 2>&1 &&
    "$ELDR" fit "$TMP/g.h5" -k 3 --variant gate_prob --layers all -o "$TMP/gm.h5" >/dev/null 2>&1
start gate -m "$TMP/gm.h5" --quiet || exit 0
expect_status "replay to a gate_prob model" 0 \
    "$ELDR" replay "$TMP/g.h5" --to "$URL" --rate 2000 --tpot-ms 1 --json
check "gate model: 120 routed by their gate values, none refused" jq_py "$TMP/out" \
    'j["routed"] == 120 and j["finished"] == 120 and j["route_errors"] == 0'
"$ELDR" gen -o "$TMP/nog.h5" --requests 20 --layers 6 --experts 16 --top-k 2 --no-gates \
    --seed 4 >/dev/null 2>&1
expect_fail2 "replay a trace without gate_prob to a gate model" "serves a gate_prob model.*no gate_prob dataset" \
    "$ELDR" replay "$TMP/nog.h5" --to "$URL"
stop
