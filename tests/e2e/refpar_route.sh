#!/bin/sh
# tests/e2e/refpar_route.sh - eldrd serves the reference implementation's
# fit JSONs (count, count_idf, gate_prob_all) as they are, routes a gate
# model from "gates" (base64 float32 or sparse), refuses the wrong signal
# with 422, and decides as an independent model of the reference's
# route_jsq does (tests/e2e/refpar_route.py: 800 decisions for each tau in
# {0, 0.02, 0.1, 0.3} and each model, loads varied).
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs "refpar_route"
PEER="$ROOT/tests/fixtures/ref_peer.py"
R="$TMP/ref"
mkdir -p "$R"
$PY "$PEER" capture "$R" --n 160 --layers 6 --experts 16 --top-k 2 --seed 5
for v in count count_idf gate_prob_all; do
    $PY "$PEER" fit "$R/capture.npz" "$R/fit_$v.json" --variant $v -k 4 --mask 0,2,3,5
done
# one request's signal, as the wire wants it
$PY - "$R" <<'EOF'
import base64, json, sys
import numpy as np
cap = np.load(sys.argv[1] + "/capture.npz")
b64 = lambda a: base64.b64encode(a.tobytes()).decode()
g, c = cap["gate_probabilities"][7].astype("<f4"), cap["prefill_counts"][7].astype("<i2")
bodies = {
    "gates": {"gates": b64(g)},
    "gates_sparse": {"gates": [[int(l), int(e), float(g[l, e])] for l, e in zip(*np.nonzero(g))]},
    "counts": {"counts": b64(c)},
    "gates_short": {"gates": b64(g[:, :8].copy())},
    "gates_nan": {"gates": b64(np.where(np.arange(g.size).reshape(g.shape) == 35, np.nan, g)
                              .astype("<f4"))},
    "gates_negative": {"gates": [[0, 1, 0.5], [2, 3, -0.25]]},
    "gates_and_counts": {"gates": b64(g), "counts": b64(c)},
    "gates_blocks": {"gates": b64(g), "block_hashes": [1, 2]},
}
for name, body in bodies.items():
    open("%s/%s.json" % (sys.argv[1], name), "w").write(json.dumps(body))
EOF
body() { cat "$R/$1.json"; }

# ---- a gate model (their gate_prob_all fit JSON, as it is) ----------------
start gate -m "$R/fit_gate_prob_all.json" --workers d0,d1,d2,d3 || exit 0
req GET /v1/snapshot
expect_http "eldrd serves their gate_prob_all fit" 200 \
    "j['model']['variant'] == 'gate_prob' and j['model']['K'] == 4 and j['model']['k'] == 0"
req POST /v1/route "$(body gates)"
expect_http "gate model routes dense base64 float32 gates" 200 "j['worker'].startswith('d')"
cp "$TMP/body" "$TMP/dense.json"
req POST /v1/route "$(body gates_sparse)"
expect_http "gate model routes sparse gates" 200 "j['worker'].startswith('d')"
check "dense and sparse gates give the same similarities" $PY -c "
import json, sys
a, b = json.load(open('$TMP/dense.json')), json.load(open('$TMP/body'))
sys.exit(0 if a['similarities'] == b['similarities'] else 1)"
req POST /v1/route "$(body counts)"
expect_http "gate model: counts get 422" 422 "j['error']['param'] == 'counts' and 'send \"gates\"' in j['error']['message']"
req POST /v1/route "$(body gates_short)"
expect_http "gates of the wrong length: 422" 422 "'L*E*4 = 384' in j['error']['message']"
req POST /v1/route "$(body gates_nan)"
expect_http "a NaN gate: 422" 422 "'layer 2 expert 3 is not finite' in j['error']['message']"
req POST /v1/route "$(body gates_negative)"
expect_http "a negative probability: 422" 422 "'negative probability' in j['error']['message']"
req POST /v1/route "$(body gates_and_counts)"
expect_http "gates and counts together: 400" 400 "j['error']['param'] == 'gates'"
req POST /v1/route "$(body gates_blocks)"
expect_http "gates with block fields: 422" 422 "j['error']['param'] == 'block_hashes'"
req GET /v1/snapshot
expect_http "refused routes left no load" 200 "sum(w['inflight'] for w in j['workers']) == 2"
stop

# ---- count models refuse gates ------------------------------------------------
start count -m "$R/fit_count_idf.json" --workers d0,d1,d2,d3 || exit 0
req POST /v1/route "$(body gates)"
expect_http "count model: gates get 422" 422 "j['error']['param'] == 'gates' and 'routes on expert counts' in j['error']['message']"
req POST /v1/route "$(body counts)"
expect_http "count model routes counts" 200 "j['rule'] in ('min2', 'band-jsq', 'locality')"
stop

# ---- decision equality with their route_jsq -----------------------------------------
for v in count count_idf gate_prob_all; do
    start "eq_$v" -m "$R/fit_$v.json" --workers d0,d1,d2,d3 || continue
    timeout 300 $PY "$ROOT/tests/e2e/refpar_route.py" "$URL" "$R/fit_$v.json" "$R/capture.npz" \
        800 11 2>&1 || echo "not ok - refpar_route.py $v exited with an error"
    stop
done

# ---- the band edge: where float32 and double part, shown, not hidden -----------
$PY "$ROOT/tests/e2e/refpar_route.py" edge-fit "$R/edge.json"
start edge -m "$R/edge.json" --workers d0,d1,d2 || exit 0
timeout 60 $PY "$ROOT/tests/e2e/refpar_route.py" edge "$URL" "$R/edge.json" 2>&1 ||
    echo "not ok - refpar_route.py edge exited with an error"
stop
