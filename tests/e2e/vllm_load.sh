#!/bin/sh
# tests/e2e/vllm_load.sh - eldrd --load-from vllm against a fake worker
# (tests/e2e/fake_vllm.py) that serves Prometheus /metrics with loads the
# test controls: decisions follow the reported loads (vLLM's series or
# SGLang's, told apart by their names), the KV cache usage is shown per
# worker and left out of the load, two replicas agree,
# a worker without a usable report falls back to eldrd's own count (and
# the snapshot and /metrics say so), and bad options exit 2.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
[ -x "$ELDR" ] || ELDR="$ROOT/bin/eldr"
prereqs "vllm load"

# loads W0 W1 W2 W3: each "R" (vLLM, running R - 1, waiting 1), "sR" (the same
# from SGLang), "oR" (a vLLM before 0.9: the old KV gauge only) or a fake mode;
# the KV cache usage each reports is R / 100
loads() {
    $PY - "$TMP/loads.json" "$@" <<'PYEOF'
import json, os, sys
out = {}
for i, v in enumerate(sys.argv[2:]):
    eng = {"s": "sglang", "o": "vllm-old"}.get(v[0], "vllm")
    r = int(v.lstrip("so")) if v not in ("missing", "nan", "error", "hang") else 0
    out["d%d" % i] = v if v in ("missing", "nan", "error", "hang") else {"running": r - 1, "waiting": 1, "kv": r / 100.0, "engine": eng}
tmp = sys.argv[1] + ".tmp"
json.dump(out, open(tmp, "w"))
os.replace(tmp, sys.argv[1])
PYEOF
}
# wait_snap EXPR: until the snapshot satisfies EXPR (bounded, 5 s); the last
# snapshot stays in $TMP/body
wait_snap() {
    i=0
    while [ $i -lt 50 ]; do
        req GET "/v1/snapshot?decisions=0"
        jq_py "$TMP/body" "$1" && return 0
        sleep 0.1; i=$((i + 1))
    done
    return 1
}
# wait_known N...: until the snapshot's load.workers[i].known equal the given 0/1s (bounded)
wait_known() {
    wait_snap "[int(w['known']) for w in j['load']['workers']] == [$(echo "$@" | tr ' ' ',')] and j['load']['polls'] >= 2"
}
route() { # ID: a sparse route; worker index to stdout
    req POST /v1/route "{\"request_id\": \"$1\", \"sparse\": [[0, 1, 5], [3, 4, 10]]}"
    $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["worker_index"])' "$TMP/body" 2>/dev/null
}

"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --seed 1 >/dev/null 2>&1
check "fixture: a K=4 model" test -s "$TMP/m.h5"
loads 50 50 50 50
$PY "$ROOT/tests/e2e/fake_vllm.py" "$TMP/loads.json" "$TMP/vport" 120 &
PIDS="$PIDS $!"
i=0; while [ ! -s "$TMP/vport" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
V="http://127.0.0.1:$(cat "$TMP/vport")"
W="d0,d1,d2,d3"
URLS="$V/d0,$V/d1,$V/d2/metrics,$V/d3/"

# --- options ---
expect_fail2 "vllm without --worker-urls" "needs --worker-urls" \
    "$ELDRD" -m "$TMP/m.h5" --workers $W --load-from vllm
expect_fail2 "--worker-urls without vllm" "needs --load-from vllm" \
    "$ELDRD" -m "$TMP/m.h5" --workers $W --worker-urls "$URLS"
expect_fail2 "--load-from unknown" "--load-from: 'prom'" "$ELDRD" -m "$TMP/m.h5" --load-from prom
expect_fail2 "--worker-urls count must be K" "3 entries for 4 workers" \
    "$ELDRD" -m "$TMP/m.h5" --workers $W --load-from vllm --worker-urls "$V/a,$V/b,$V/c" \
    --listen 127.0.0.1:1
expect_fail2 "--worker-urls unknown name" "'dx' is not a decode worker" \
    "$ELDRD" -m "$TMP/m.h5" --workers $W --load-from vllm \
    --worker-urls "d0=$V/d0,d1=$V/d1,d2=$V/d2,dx=$V/d3" --listen 127.0.0.1:1
expect_fail2 "--worker-urls not http" "not an http:// URL" \
    "$ELDRD" -m "$TMP/m.h5" --workers $W --load-from vllm --worker-urls "a,b,c,d" --listen 127.0.0.1:1
expect_status "eldrd --help" 0 "$ELDRD" --help
expect_out "--help lists --load-from" "--load-from own.vllm"

# --- replica A: join-shortest-queue (tau 2) so the loads alone decide ---
loads 50 3 50 50
start vllmA -m "$TMP/m.h5" --workers $W --tau 2 --load-from vllm --worker-urls "$URLS" \
    --poll-ms 50 --quiet || exit 0
A=$URL; PIDA=$PID
wait_known 1 1 1 1
req GET "/v1/snapshot?decisions=0"
expect_http "snapshot: every worker reported, loads from the page" 200 \
    'j["load"]["from"] == "vllm" and [w["reported"] for w in j["load"]["workers"]] == [50,3,50,50] and [w["load_source"] for w in j["workers"]] == ["vllm"]*4 and j["load"]["workers"][2]["url"].endswith("/d2/metrics") and j["load"]["workers"][3]["url"].endswith("/d3/metrics")'
got=""
for n in 1 2 3 4 5; do got="$got$(route a$n)"; done
if [ "$got" = "11111" ]; then ok "routes go to the least reported worker"; else
    notok "routes go to the least reported worker" "workers $got, wanted 11111"; fi
jq_py "$TMP/body" 'j["loads"][0] == 50 and 3 <= j["loads"][1] <= 7' && ok "route sees the report (plus own recent sends)" ||
    notok "route sees the report (plus own recent sends)" "$(head -c 300 "$TMP/body")"

# between polls, the requests sent since the last poll count on top of the report: a
# replica that polls only at start (the first poll is synchronous) shows it exactly
start slow -m "$TMP/m.h5" --workers $W --tau 2 --load-from vllm --worker-urls "$URLS" \
    --poll-ms 600000 --quiet || exit 0
got=""
for n in 1 2 3 4 5; do got="$got$(route s$n)"; done
if [ "$got" = "11111" ] && jq_py "$TMP/body" 'j["loads"] == [50, 7, 50, 50]'; then
    ok "between polls: report + own sends since the poll"
else notok "between polls: report + own sends since the poll" "workers $got" "$(head -c 300 "$TMP/body")"; fi
stop
URL=$A

# the loads move: d0 becomes the least loaded
loads 2 60 50 50
wait_snap '[w["reported"] for w in j["load"]["workers"]] == [2,60,50,50]'
got=""
for n in 1 2 3; do got="$got$(route b$n)"; done
if [ "$got" = "000" ]; then ok "after a new poll routes follow the new loads"; else
    notok "after a new poll routes follow the new loads" "workers $got, wanted 000"; fi

# --- replica B, same workers: it agrees although it has routed nothing ---
start vllmB -m "$TMP/m.h5" --workers $W --tau 2 --load-from vllm --worker-urls "$URLS" \
    --poll-ms 50 --quiet || exit 0
B=$URL
# wait (bounded) for B's first complete poll: until then a worker it has
# not heard from counts with B's own (zero) load
wait_snap '[w["reported"] for w in j["load"]["workers"]] == [2,60,50,50]'
got="$(route c1)"
if [ "$got" = "0" ]; then ok "second replica agrees on load"; else
    notok "second replica agrees on load" "worker $got, wanted 0"; fi
# without the reports, B (with no requests in flight) would pick worker 0 anyway: make the
# difference visible by loading d0 in the reports; B then avoids it
loads 40 60 9 50
wait_snap '[w["reported"] for w in j["load"]["workers"]] == [40,60,9,50]'
got="$(route c2)"
if [ "$got" = "2" ]; then ok "replica B routes by the reports, not its own counts"; else
    notok "replica B routes by the reports, not its own counts" "worker $got, wanted 2"; fi

# --- unusable reports: missing metric, NaN, HTTP 500 -> the last report stays (stale) ---
# B last heard 40 60 9 50 and has since routed c2 to d2 (d2: 9 + 1, or 9 when a
# poll after c2 came back before the reports broke)
loads 40 missing nan error
wait_known 1 0 0 0 && ok "unusable reports are marked unknown" || notok "unusable reports are marked unknown" "$(head -c 600 "$TMP/body")"
expect_http "snapshot says why, and keeps each worker's last report (stale), not 0" 200 \
    '[w["load_source"] for w in j["workers"]] == ["vllm","vllm-stale","vllm-stale","vllm-stale"] and "no vllm:num_requests_running" in j["load"]["workers"][1]["error"] and "nan" in j["load"]["workers"][2]["error"].lower() and "HTTP 500" in j["load"]["workers"][3]["error"] and j["load"]["workers"][1]["poll_errors"] >= 1 and [w["load"] for w in j["workers"]][1:4:2] == [60, 50] and j["workers"][2]["load"] in (9, 10)'
curl -s --max-time 5 "$URL/metrics" >"$TMP/metrics"
if grep -q 'eldr_load_reported{worker="d0"} 1' "$TMP/metrics" && grep -q 'eldr_load_reported{worker="d1"} 0' "$TMP/metrics" &&
    grep -q 'eldr_vllm_load{worker="d0"} 40' "$TMP/metrics" && grep -q 'eldr_vllm_poll_errors_total{worker="d3"} [1-9]' "$TMP/metrics" &&
    grep -q 'eldr_load_stale{worker="d1"} 1' "$TMP/metrics" && grep -q 'eldr_load_stale{worker="d0"} 0' "$TMP/metrics" &&
    grep -q 'eldr_vllm_poll_age_seconds{worker="d0"} [0-9.]*$' "$TMP/metrics" && grep -q 'eldr_vllm_poll_duration_seconds{worker="d1"} [0-9.]*$' "$TMP/metrics"; then
    ok "metrics: load source, reported load, poll errors, staleness, poll age and duration"
else notok "metrics: load source, reported load, poll errors, staleness, poll age and duration" "$(grep -E 'load_|vllm' "$TMP/metrics" | grep -v '^#' | head -30)"; fi
req GET /healthz
expect_http "healthz: degraded, naming the stale workers" 200 'j["status"] == "degraded" and j["stale_load"] == ["d1", "d2", "d3"]'
# the stale workers keep their last load: 40 60 10 50 -> d2 (10) takes the route
got="$(route c3)"
if [ "$got" = "2" ]; then ok "stale workers compete with their last report plus routes since"; else
    notok "stale workers compete with their last report plus routes since" "worker $got, wanted 2 (loads $(head -c 200 "$TMP/body"))"; fi
loads 40 60 50 50
i=0; while [ $i -lt 50 ]; do
    req GET /healthz
    jq_py "$TMP/body" 'j["status"] == "ok"' && break
    sleep 0.1; i=$((i + 1))
done
expect_http "healthz: ok again once every worker reports" 200 'j["status"] == "ok" and "stale_load" not in j'

# --- a worker that holds 40 and stops answering gets no routes (it used to look idle) ---
loads 40 10 10 10
start busy -m "$TMP/m.h5" --workers $W --tau 2 --load-from vllm --worker-urls "$URLS" \
    --poll-ms 50 --quiet || exit 0
wait_known 1 1 1 1
loads error 10 10 10
wait_known 0 1 1 1
got=""
for n in 1 2 3 4 5 6; do got="$got$(route h$n)"; done
case "$got" in *0*) notok "a worker whose /metrics broke keeps its last load (40): no routes" "workers $got" ;;
    *) ok "a worker whose /metrics broke keeps its last load (40): no routes" ;; esac
stop

# --- one hanging /metrics delays nobody else's polls ---
loads hang 10 10 10
start hang -m "$TMP/m.h5" --workers $W --tau 2 --load-from vllm --worker-urls "$URLS" \
    --poll-ms 50 --quiet || exit 0
req GET "/v1/snapshot?decisions=0"; cp "$TMP/body" "$TMP/h0.json"
sleep 2
req GET "/v1/snapshot?decisions=0"; cp "$TMP/body" "$TMP/h1.json"
if $PY - "$TMP/h0.json" "$TMP/h1.json" <<'PYEOF'; then ok "a hanging worker: the others are still polled about every 50 ms"; else notok "a hanging worker: the others are still polled about every 50 ms" "$(head -c 400 "$TMP/h1.json")"; fi
import json, sys
a = json.load(open(sys.argv[1]))["load"]["workers"]; b = json.load(open(sys.argv[2]))["load"]["workers"]
rates = [(y["polls"] - x["polls"]) / 2.0 for x, y in zip(a, b)]
print("# polls/s per worker over 2 s:", rates)
assert all(r >= 5 for r in rates[1:]), rates     # 20/s asked; ~1.5/s when the hang held every poll
assert not b[0]["known"] and rates[0] <= 5, rates   # its polls end at the 500 ms timeout
PYEOF
stop
[ "$RC" -eq 0 ] && ok "SIGTERM with a transfer hanging: exit 0" || notok "SIGTERM with a transfer hanging: exit 0" "exit $RC"

# --- SGLang workers and an old vLLM beside current ones: the engine from the names
# in each page; the KV cache usage shown per worker, not part of the load ---
loads s30 o50 4 s60
start mixed -m "$TMP/m.h5" --workers $W --tau 2 --load-from vllm --worker-urls "$URLS" \
    --poll-ms 50 --quiet || exit 0
wait_known 1 1 1 1
req GET "/v1/snapshot?decisions=0"
expect_http "snapshot: engine per worker, loads and KV usage from SGLang's and vLLM's series" 200 \
    '[w["engine"] for w in j["load"]["workers"]] == ["sglang","vllm","vllm","sglang"] and [w["reported"] for w in j["load"]["workers"]] == [30,50,4,60] and [w["kv_cache_usage"] for w in j["load"]["workers"]] == [0.3,0.5,0.04,0.6] and [w["kv_series"] for w in j["load"]["workers"]] == ["sglang:token_usage","vllm:gpu_cache_usage_perc","vllm:kv_cache_usage_perc","sglang:token_usage"]'
curl -s --max-time 5 "$URL/metrics" >"$TMP/metrics"
if grep -q 'eldr_worker_kv_cache_usage{worker="d0"} 0.3$' "$TMP/metrics" && grep -q 'eldr_worker_kv_cache_usage{worker="d2"} 0.04$' "$TMP/metrics" &&
    grep -q 'eldr_vllm_load{worker="d3"} 60$' "$TMP/metrics" && grep -q '^# TYPE eldr_worker_kv_cache_usage gauge' "$TMP/metrics"; then
    ok "metrics: eldr_worker_kv_cache_usage per worker, SGLang's load in eldr_vllm_load"
else notok "metrics: eldr_worker_kv_cache_usage per worker, SGLang's load in eldr_vllm_load" "$(grep -E 'kv_cache|vllm_load' "$TMP/metrics" | head -20)"; fi
got="$(route m1)"
if [ "$got" = "2" ]; then ok "mixed engines: the route goes to the least reported load"; else
    notok "mixed engines: the route goes to the least reported load" "worker $got, wanted 2"; fi
# a nearly full KV cache does not move a route: the load is requests, not KV usage
# (d1 reports 99% KV and the least requests)
loads s30 o9 40 s60
wait_snap '[w["reported"] for w in j["load"]["workers"]] == [30,9,40,60]'
$PY - "$TMP/loads.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1])); d["d1"]["kv"] = 0.99
json.dump(d, open(sys.argv[1] + ".tmp", "w"))
import os; os.replace(sys.argv[1] + ".tmp", sys.argv[1])
PYEOF
wait_snap 'j["load"]["workers"][1]["kv_cache_usage"] == 0.99'
got="$(route m2)"
if [ "$got" = "1" ]; then ok "KV usage is shown, not routed on: a 99% full worker with the least requests gets the route"; else
    notok "KV usage is shown, not routed on: a 99% full worker with the least requests gets the route" "worker $got, wanted 1"; fi
stop

# --- a worker that does not answer at all (closed port) ---
dead_port; DEAD="http://127.0.0.1:$DEADPORT"
start vllmC -m "$TMP/m.h5" --workers $W --tau 2 --load-from vllm \
    --worker-urls "d0=$V/d0,d1=$DEAD,d2=$V/d2,d3=$V/d3" --poll-ms 50 --quiet || exit 0
req GET "/v1/snapshot?decisions=0"
expect_http "unreachable worker: unknown, the daemon serves on" 200 \
    'not j["load"]["workers"][1]["known"] and j["load"]["workers"][1]["error"] and j["workers"][1]["load_source"] == "own"'
stop
[ "$RC" -eq 0 ] && ok "SIGTERM stops the poller, exit 0" || notok "SIGTERM stops the poller, exit 0" "exit $RC"
PID=$PIDA; stop
[ "$RC" -eq 0 ] && ok "replica A exits 0" || notok "replica A exits 0" "exit $RC"
