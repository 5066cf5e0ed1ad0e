#!/bin/sh
# tests/e2e/eldrd_refit.sh - eldrd's online refit (--refit-every,
# --refit-window; docs/eldrd.md "Online refit"): flag errors exit 2 with
# one line; under a replay the refits happen (the generation grows in
# /v1/snapshot and /metrics, eldr_refits_total counts them), every route
# and finish of the replay succeeds while they do, decisions and
# /v1/explain name the generation that decided and that it was a refit,
# each worker keeps its identity (its refitted centroid is still nearest
# its own original one: the traffic does not drift), a hot swap (PUT
# /v1/model) wins over the refits and starts the window over, and with
# no traffic nothing is refitted. Without --refit-every nothing of it
# shows (refit null, no eldr_refit series).
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs "eldrd refit"

"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" >/dev/null 2>&1 || notok "refit: fit the model"
"$ELDR" model export "$TMP/m.h5" -o "$TMP/m.json" >/dev/null 2>&1 || notok "refit: export the model"

expect_fail2 "eldrd --refit-every 0" "--refit-every" "$ELDRD" -m "$TMP/m.h5" --refit-every 0
expect_fail2 "eldrd --refit-every junk" "--refit-every" "$ELDRD" -m "$TMP/m.h5" --refit-every 2.5s
expect_fail2 "eldrd --refit-window without --refit-every" "needs --refit-every" "$ELDRD" -m "$TMP/m.h5" --refit-window 5
expect_fail2 "eldrd --refit-max-rows 0" "--refit-max-rows" "$ELDRD" -m "$TMP/m.h5" --refit-every 1 --refit-max-rows 0
expect_status "eldrd --help names --refit-every" 0 "$ELDRD" --help
expect_out "eldrd --help: refit flags" "--refit-window W"

# --- without --refit-every: nothing of it ---
start plain -m "$TMP/m.h5" --quiet || exit 0
req GET /v1/snapshot
expect_http "no refit: snapshot refit is null, the model is loaded" 200 \
    "j['refit'] is None and j['model']['origin'] == 'loaded' and j['model']['refit_of'] is None"
curl -s --max-time 5 "$URL/metrics" >"$TMP/plain.metrics"
expect_not_in "no refit: no eldr_refit series" "$TMP/plain.metrics" "^eldr_refit"
stop

# --- refits every 0.5 s over 1 s windows, under a 4 s replay at 150 req/s ---
start refit -m "$TMP/m.h5" --refit-every 0.5 --refit-window 1 --decisions 8192 --quiet || exit 0
req GET /v1/snapshot
expect_http "refit: at start generation 1, no refit yet" 200 \
    "j['model']['generation'] == 1 and j['refit']['refits'] == 0 and j['refit']['last'] is None and j['refit']['every_s'] == 0.5 and j['refit']['window_s'] == 1"
"$ELDR" replay "$SMALL" --to "$URL" --rate 150 --requests 600 --tpot-ms 2 --id-prefix q \
    --json >"$TMP/replay.json" 2>"$TMP/replay.err"
check "refit: every route and finish of the replay succeeded during refits" \
    jq_py "$TMP/replay.json" "j['routed'] == 600 and j['route_errors'] == 0 and j['finish_errors'] == 0"
req GET "/v1/snapshot?decisions=8192&centroids=1"
cp "$TMP/body" "$TMP/snap.json"
expect_http "refit: the generation grew with the refits" 200 \
    "j['refit']['refits'] >= 4 and j['model']['generation'] == 1 + j['refit']['refits'] and j['model']['origin'] == 'refit' and j['model']['refit_of'] == j['model']['generation'] - 1 and j['refit']['failures'] == 0 and j['model']['epoch'] == 1"
check "refit: the last refit's numbers" jq_py "$TMP/snap.json" \
    "j['refit']['last']['generation'] == j['model']['generation'] and 4 <= j['refit']['last']['rows'] <= 4096 and j['refit']['last']['seconds'] < 1 and j['refit']['last']['age_s'] >= 0"
# decisions were made by several generations, each named, refits among them
check "refit: decisions name the generation that decided" jq_py "$TMP/snap.json" \
    "len(set(d['model_generation'] for d in j['decisions'])) >= 3 and all((d['model_origin'] == 'refit') == (d['model_generation'] > 1) for d in j['decisions']) and all(d['model_refit_of'] is None or d['model_refit_of'] < d['model_generation'] for d in j['decisions'])"
id=$($PY -c "import json,sys; j=json.load(open(sys.argv[1])); print([d for d in j['decisions'] if d['model_origin'] == 'refit'][0]['request_id'])" "$TMP/snap.json")
gen=$($PY -c "import json,sys; j=json.load(open(sys.argv[1])); print([d for d in j['decisions'] if d['request_id'] == sys.argv[2]][0]['model_generation'])" "$TMP/snap.json" "$id")
req GET "/v1/explain/$id"
expect_http "refit: explain names the generation and that it was a refit" 200 \
    "j['model_generation'] == $gen and j['model_origin'] == 'refit' and j['model_refit_of'] == $gen - 1"
# worker identities persist: each refitted centroid is nearest its own original
if $PY - "$TMP/snap.json" "$TMP/m.json" <<'EOF'; then ok "refit: every worker keeps its identity"; else notok "refit: every worker keeps its identity"; fi
import json, sys
import numpy as np
now = np.array(json.load(open(sys.argv[1]))["model"]["centroids"])
orig = np.array(json.load(open(sys.argv[2]))["centroids"])
sim = now @ orig.T
assert (sim.argmax(axis=1) == np.arange(len(orig))).all(), sim
EOF
# no traffic: once the window has emptied (1 s), nothing is refitted
sleep 1.2
req GET /v1/snapshot
g0=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['model']['generation'])" "$TMP/body")
# the refits have stopped with the traffic: /metrics and the snapshot now
# agree (compared earlier, a refit could land between the two reads)
cp "$TMP/body" "$TMP/quiet.json"
curl -s --max-time 5 "$URL/metrics" >"$TMP/refit.metrics"
check "refit: /metrics counts the refits and the generation" $PY - "$TMP/refit.metrics" "$TMP/quiet.json" <<'EOF'
import json, re, sys
text = open(sys.argv[1]).read()
snap = json.load(open(sys.argv[2]))
def v(name):
    m = re.search(r"^%s (\S+)$" % name, text, re.M)
    return float(m.group(1))
assert v("eldr_refits_total") == snap["refit"]["refits"]
assert v("eldr_model_generation") == snap["model"]["generation"]
assert v("eldr_refit_failures_total") == 0 and v("eldr_refits_discarded_total") == 0
assert v("eldr_refit_last_age_seconds") >= 0 and v("eldr_refit_seconds_total") > 0
assert v("eldr_refit_last_seconds") > 0
assert "# TYPE eldr_refits_total counter" in text
EOF

sleep 1.5
req GET /v1/snapshot
expect_http "refit: no traffic, no refit" 200 \
    "j['model']['generation'] == $g0 and j['refit']['window_signatures'] == 0"

# a hot swap wins: a loaded generation, the window starts over
"$ELDR" replay "$SMALL" --to "$URL" --rate 150 --requests 60 --tpot-ms 2 --id-prefix w >/dev/null 2>&1
req PUT /v1/model "$(cat "$TMP/m.json")"
expect_http "refit: PUT /v1/model during refits is accepted" 200 "j['model_generation'] > $g0"
req GET /v1/snapshot
expect_http "refit: after PUT the model is the loaded one, its window empty" 200 \
    "j['model']['origin'] == 'loaded' and j['model']['epoch'] == j['model']['generation'] and j['refit']['window_signatures'] == 0"
stop
check "refit: eldrd exits 0 on SIGTERM with the refit thread running" test "$RC" -eq 0
