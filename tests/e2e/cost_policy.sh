#!/bin/sh
# tests/e2e/cost_policy.sh - eldrd's cost policy (issue 33, item 3):
# --policy cost routes to the least predicted cost and says so ("policy",
# "rule", "costs", explain's terms, checked against the cost model
# recomputed in tests/e2e/cost_policy_check.py); PUT /v1/config switches
# band <-> cost at run time, a bad value is a 4xx naming "policy"; a full
# batch (--max-batch) shows its wait; finishes, the admin's clear and the
# TTL bring the estimate back to 0; bad options exit 2. In proxy mode
# (fake_pd.py's stand-ins): retries away from a decoder that answers 500
# and stream ends leave it empty; decoders ejected by the active probes
# take their in-flight streams out of it at once.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs cost_policy
CHK="$PY $ROOT/tests/e2e/cost_policy_check.py"

"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --variant count --layers all --seed 1 >/dev/null 2>&1

expect_fail2 "--policy fast: exit 2 naming it" "--policy: 'fast' is neither band nor cost" \
    "$ELDRD" -m "$TMP/m.h5" --policy fast
expect_fail2 "--max-batch 0: exit 2" "--max-batch" "$ELDRD" -m "$TMP/m.h5" --max-batch 0
echo '{"format": "eldr-cost", "version": 1, "t0": "x"}' >"$TMP/bad_cost.json"
expect_fail2 "--cost with a bad file: exit 2 naming --cost" "--cost" \
    "$ELDRD" -m "$TMP/m.h5" --cost "$TMP/bad_cost.json" --listen 127.0.0.1:1

# a reference fit JSON gives no top-k: the cost rule needs --top-k
"$ELDR" model export "$TMP/m.h5" -o "$TMP/m.json" >/dev/null 2>&1
$PY -c "import json,sys; j=json.load(open(sys.argv[1])); j.pop('top_k'); json.dump(j, open(sys.argv[2], 'w'))" \
    "$TMP/m.json" "$TMP/nok.json"
expect_fail2 "--policy cost on a model without top-k: exit 2 naming --top-k" \
    "--policy cost: the cost rule needs the MoE router's top-k.*--top-k N" \
    "$ELDRD" -m "$TMP/nok.json" --policy cost --listen 127.0.0.1:1
start nok -m "$TMP/nok.json" || exit 0
req PUT /v1/config '{"policy": "cost"}'
expect_http "PUT policy cost on a model without top-k: 409 naming --top-k" 409 \
    'j["error"]["param"] == "policy" and "--top-k" in j["error"]["message"]'
stop
start topk -m "$TMP/nok.json" --policy cost --top-k 4 || exit 0
req GET /v1/config
expect_http "... with --top-k 4 it serves: top_k 4 from --top-k" 200 \
    'j["policy"] == "cost" and j["top_k"] == 4 and j["top_k_source"] == "--top-k"'
stop

start cost -m "$TMP/m.h5" --policy cost --inflight-ttl 0 || exit 0
req GET /v1/config
expect_http "GET /v1/config: policy cost, max_batch 256, the model's top-k, the default cost model" \
    200 'j["policy"] == "cost" and j["max_batch"] == 256 and j["top_k"] == 4 and j["top_k_source"] == "model" and j["cost_file"] is None and j["cost_model"]["b"] > 0'
check "a route to an idle daemon: costs = the cost model's step time of the request alone, argmin chosen, explain's terms" \
    $CHK first "$URL" "$SMALL" 4
check "30 more routes: each answer's worker is the argmin of its costs, explain agrees" \
    $CHK many "$URL" "$SMALL" 1 31
req PUT /v1/config '{"policy": "band"}'
expect_http "PUT /v1/config policy band: 200" 200 'j["policy"] == "band" and j["tau"] >= 0'
req POST /v1/route '{"request_id": "band-1", "sparse": [[0, 1, 4], [1, 2, 4]]}'
expect_http "under band: policy band, a band rule, no costs" 200 \
    'j["policy"] == "band" and j["rule"] != "cost" and "costs" not in j'
req PUT /v1/config '{"policy": "fastest"}'
expect_http "PUT /v1/config with a bad policy: 422, OpenAI-shaped, param policy" 422 \
    'j["error"]["param"] == "policy" and "fastest" in j["error"]["message"] and "type" in j["error"]'
req PUT /v1/config '{"policy": 3}'
expect_http "PUT /v1/config with a policy not a string: 400 param policy" 400 \
    'j["error"]["param"] == "policy"'
req GET /v1/config
expect_http "... and the policy stayed band" 200 'j["policy"] == "band"'
req PUT /v1/config '{"policy": "cost", "tau": 0.2}'
expect_http "PUT /v1/config back to cost (and tau): 200" 200 'j["policy"] == "cost" and abs(j["tau"] - 0.2) < 1e-9'
req POST /v1/route '{"request_id": "cost-2", "sparse": [[0, 1, 4], [1, 2, 4]]}'
expect_http "the estimate kept under band: a cost route right after the switch" 200 \
    'j["policy"] == "cost" and len(j["costs"]) == 4'
req POST /v1/route '{"request_id": "nosig", "sparse": []}'
expect_http "a route with all-zero counts under cost: costs too" 200 'j["rule"] == "cost" and len(j["costs"]) == 4'
req GET /v1/explain/nosig
expect_http "... and explain's note says the rule saw no expert counts" 200 \
    '"no expert counts" in j["signal"]["note"]'
check "the audit log names the policy switches" grep -q "policy band -> cost" "$TMP/cost.log"
# every request leaves: finishes, then the admin's clear of what is left on one worker
for id in first band-1 cost-2 nosig $(seq -f 'r%g' 1 20); do
    req POST /v1/finish "{\"request_id\": \"$id\"}"
done
req GET /v1/snapshot
expect_http "the snapshot names the policy the dashboard shows: cost" 200 'j["policy"] == "cost"'
W=$($PY -c "import json,sys; j=json.load(open(sys.argv[1])); print(max(j['workers'], key=lambda w: w['inflight'])['name'])" "$TMP/body")
req POST /v1/inflight/clear "{\"worker\": \"$W\"}"
expect_http "the admin clears worker $W" 200 'j["cleared"] >= 1'
for id in $(seq -f 'r%g' 21 30); do
    req POST /v1/finish "{\"request_id\": \"$id\"}"
done
check "after every request left (finish, clear): expected experts, members, kv tokens 0" \
    $CHK drained "$URL"
stop

# a batch cap of 1: the fifth route finds every worker full and waits
start full -m "$TMP/m.h5" --policy cost --max-batch 1 || exit 0
check "--max-batch 1, K busy workers: every worker's terms show the wait" sh -c "
$CHK many '$URL' '$SMALL' 0 4 && $CHK full '$URL' '$SMALL' 4"
stop

# --inflight-ttl: the estimate goes with the expired requests
start ttl -m "$TMP/m.h5" --inflight-ttl 1 || exit 0
check "under band the estimate is kept (members 1 after a route)" sh -c "
curl -s --max-time 5 -X POST --data-binary '{\"request_id\": \"t1\", \"sparse\": [[0, 1, 4]]}' '$URL/v1/route' >/dev/null &&
curl -s --max-time 5 '$URL/metrics' | grep -Eq '^eldr_cost_members\{worker=\"[^\"]+\"\} 1$'"
check "expired by --inflight-ttl 1: the estimate is back to 0" $PY -c "
import subprocess, sys, time
for _ in range(50):
    if subprocess.run(sys.argv[1:]).returncode == 0:
        sys.exit(0)
    time.sleep(0.2)
sys.exit(1)" $CHK drained "$URL"
stop

# proxy mode: decoder 1 answers 500, the proxy retries elsewhere
standins fails --prefill 1 --decode 4 --fail-decode 1 --chunks 10 --chunk-gap 0.05
start proxy -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$DC" --policy cost \
    --eject-time 60 || exit 0
check "--proxy --policy cost, a decoder answering 500: 12 overlapping streams whole, retries decided by cost" \
    $CHK retries "$URL" 12
check "... and after the streams ended the estimate is empty" $CHK drained "$URL"
stop

# proxy mode: stalled streams on decoders the probes eject
standins stall --prefill 1 --decode 4 --stall-decode 0,1,2,3 --health-fail 0,1,2,3
start eject -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$DC" --policy cost \
    --health-interval 1 --eject-after 3 --eject-time 60 --stream-idle-timeout 30 --drain 1 || exit 0
check "4 open streams, every decoder ejected: the requests end 'ejected', the estimate empties" \
    $CHK ejected "$URL" 4
stop
