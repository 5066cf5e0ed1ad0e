#!/bin/sh
# tests/e2e/gateway_pd.sh - eldrd --ext-proc as the one picker of a P/D pool
# behind llm-d's coordinator, with STOCK vLLM prefills (issue 29, item 3):
# the coordinator's two calls (tests/gateway/envoy.js coordinate: EPP-Profile
# prefill, then decode with the prefill's kv_transfer_params copied in, as
# llm-d-router's steps/prefill.go, decode.go and connectors/kv/nixl.go make
# them) through the Envoy stand-in to fake_pd.py's prefill and decode
# instances (--stock --routed npy: vLLM >= 0.22's answer, no eldr_sig).
# Every decode pick equals the band rule on the prompt's routed experts (an
# independent numpy oracle, 30/30), joined by x-request-id; 10 more joined by
# the transfer ids alone; the answers streamed back unchanged; the profile
# header honoured (decode without a prefill: the no-signature rule; encode
# 503; an unknown one 400); a bare-IP subset hint; options and endpoint roles
# refused with one line.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs gateway_pd
standin_prereqs gateway_pd
CHK="$ROOT/tests/e2e/gateway_pd_check.py"
field() { $PY -c "import json,sys; j=json.loads(open(sys.argv[1]).readline()); print($2)" "$1"; }

"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --variant count --layers all --seed 1 >/dev/null 2>&1
check "fixture: a K=4 count model over every layer" test -s "$TMP/m.h5"
standins pd --prefill 2 --decode 4 --stock --routed npy --chunks 2 --chunk-gap 0.01
$PY "$CHK" endpoints "$TMP/pd.ports" "$TMP/eps.json"

# --- options and the endpoints file's roles -----------------------------------
expect_fail2 "--join-max without --ext-proc" "are for the gateway's picker" \
    "$ELDRD" -m "$TMP/m.h5" --join-max 10 --listen 127.0.0.1:1
expect_fail2 "--join-max 0" "--join-max" \
    "$ELDRD" -m "$TMP/m.h5" --ext-proc 127.0.0.1:1 --endpoints "$TMP/eps.json" --join-max 0
expect_fail2 "--join-ttl -1" "--join-ttl" \
    "$ELDRD" -m "$TMP/m.h5" --ext-proc 127.0.0.1:1 --endpoints "$TMP/eps.json" --join-ttl -1
expect_fail2 "2 prefill endpoints, 1 prefill worker" "has 2 prefill endpoints; --prefill-workers names 1" \
    "$ELDRD" -m "$TMP/m.h5" --ext-proc 127.0.0.1:1 --endpoints "$TMP/eps.json" --listen 127.0.0.1:1
$PY -c "import json,sys; j=json.load(open(sys.argv[1])); j['endpoints'][4]['labels']={'role':'prefil'}; json.dump(j,open(sys.argv[2],'w'))" \
    "$TMP/eps.json" "$TMP/badrole.json"
expect_fail2 "an unknown role is refused, named" 'labels.role: "prefil" is not one of llm-d' \
    "$ELDRD" -m "$TMP/m.h5" --ext-proc 127.0.0.1:1 --endpoints "$TMP/badrole.json" \
    --prefill-workers p0,p1 --listen 127.0.0.1:1
"$ELDRD" --help >"$TMP/out"; expect_out "eldrd --help lists --join-max and --join-ttl" "--join-ttl S"

XP=$(free_port)
start pick -m "$TMP/m.h5" --tau 0 --ext-proc "127.0.0.1:$XP" --endpoints "$TMP/eps.json" \
    --prefill-workers p0,p1 || exit 0
T="127.0.0.1:$XP"

# --- 30 requests through the coordinator's two calls, joined by x-request-id ---
$PY "$CHK" bodies "$TMP/b.jsonl" 30 coordinated
envoy coordinate --target "$T" --body-lines "$TMP/b.jsonl" --request-id rid >"$TMP/picks" 2>"$TMP/picks.err"
check "30 coordinated requests complete" grep -q '"requests":30,"ok":30,"failed":0' "$TMP/picks"
$PY "$CHK" check "$TMP/m.h5" "$TMP/pd.ports" "$TMP/pd.jsonl" "$TMP/picks" "$URL" "by x-request-id"
check "both prefill endpoints were used (the ring)" $PY -c "
import json,sys
s={json.loads(l).get('prefill_endpoint') for l in open(sys.argv[1]) if 'summary' not in l}
assert len(s)==2, s" "$TMP/picks"

# --- 10 more whose decode call has another x-request-id: the transfer ids -------
$PY "$CHK" bodies "$TMP/t.jsonl" 10 transfer
envoy coordinate --target "$T" --body-lines "$TMP/t.jsonl" --request-id tid --decode-request-id other \
    >"$TMP/tpicks" 2>"$TMP/tpicks.err"
$PY "$CHK" check "$TMP/m.h5" "$TMP/pd.ports" "$TMP/pd.jsonl" "$TMP/tpicks" "$URL" "by transfer ids"

curl -s --max-time 5 "$URL/metrics" >"$TMP/met"
expect_grep_file() { if grep -q -- "$2" "$3"; then ok "$1"; else notok "$1" "$(grep -E 'extproc_(join|profile|prefill)' "$3" | head -30)"; fi; }
expect_grep_file "30 joins by x-request-id" 'eldr_extproc_joins_total{key="request_id"} 30' "$TMP/met"
expect_grep_file "10 by the transfer ids" 'eldr_extproc_joins_total{key="transfer"} 10' "$TMP/met"
expect_grep_file "nothing left pending" 'eldr_extproc_join_pending 0' "$TMP/met"
expect_grep_file "40 prefill profile calls counted" 'eldr_extproc_profile_total{profile="prefill"} 40' "$TMP/met"
expect_grep_file "40 picks on the routed experts" 'eldr_extproc_picks_total{signal="routed_experts"} 40' "$TMP/met"
expect_grep_file "evictions have HELP and TYPE" '# HELP eldr_extproc_join_evictions_total' "$TMP/met"
expect_grep_file "expiries have HELP and TYPE" '# TYPE eldr_extproc_join_expiries_total counter' "$TMP/met"
expect_grep_file "in flight back to 0" 'eldr_extproc_in_flight 0' "$TMP/met"

# --- the profile header ----------------------------------------------------------
printf '{"model":"m","prompt":"no prefill before me","max_tokens":4}' >"$TMP/plain.json"
envoy pick --target "$T" --body-file "$TMP/plain.json" --header "epp-profile=decode" \
    --request-id lone >"$TMP/p" 2>&1
check "a decode call without a joined prefill: picked by the no-signature rule" \
    test "$(field "$TMP/p" "j['ok'] and j['endpoint'] is not None")" = True
req GET /v1/explain/lone
expect_http "... and explain says so" 200 "j['signal']['source']=='none'"
envoy pick --target "$T" --body-file "$TMP/plain.json" --header "epp-profile=encode" >"$TMP/p" 2>&1
check "EPP-Profile encode: 503, named" test "$(field "$TMP/p" "j['immediate_status']")" = 503
check "... saying eldrd does not serve it" grep -q "encode is not served here" "$TMP/p"
envoy pick --target "$T" --body-file "$TMP/plain.json" --header "epp-profile=prefil" >"$TMP/p" 2>&1
check "an unknown EPP-Profile: 400 naming it" grep -q '"immediate_status":400.*prefil' "$TMP/p"

# --- a bare-IP subset hint (GIE matches an entry by its address) -------------------
envoy pick --target "$T" --body-file "$TMP/plain.json" --subset 127.0.0.1 >"$TMP/p" 2>&1
check "a bare-IP subset hint matches the endpoints at that address" \
    test "$(field "$TMP/p" "j['endpoint'] is not None and j['endpoint'].startswith('127.0.0.1:')")" = True
envoy pick --target "$T" --body-file "$TMP/plain.json" --subset 127.0.0.2 >"$TMP/p" 2>&1
check "... and one at no endpoint's address: 503" test "$(field "$TMP/p" "j['immediate_status']")" = 503
D1=$($PY -c "import json; print(json.load(open('$TMP/pd.ports'))['decode'][1])")
envoy pick --target "$T" --body-file "$TMP/plain.json" --subset "127.0.0.1:$D1" \
    --expect-endpoint "127.0.0.1:$D1" >"$TMP/p" 2>&1
check "an ip:port hint still names exactly that endpoint" test "$(field "$TMP/p" "j['ok']")" = True

# --- prefill answers that give the join nothing: passed on whole, counted --------
envoy pick --target "$T" --body-file "$TMP/plain.json" --header "epp-profile=prefill" \
    --request-id plainpf >"$TMP/p" 2>&1
check "a prefill answer without routed experts: picked on the ring, streamed back whole" \
    test "$(field "$TMP/p" "j['ok'] and j['resp_echo_ok'] and j['endpoint'] in ['127.0.0.1:%d' % x for x in json.load(open('$TMP/pd.ports'))['prefill']]")" = True
envoy pick --target "$T" --body-file "$TMP/plain.json" --header "epp-profile=prefill" \
    --response-status 503 >"$TMP/p" 2>&1
check "... and one that is a 503" test "$(field "$TMP/p" "j['ok']")" = True
curl -s --max-time 5 "$URL/metrics" >"$TMP/met"
expect_grep_file "counted: no routing" 'eldr_extproc_prefill_unread_total{reason="no_routing"} 1' "$TMP/met"
expect_grep_file "counted: the status" 'eldr_extproc_prefill_unread_total{reason="status"} 1' "$TMP/met"
check "the reason is logged once, with the engine flag to set" \
    grep -q "no_routing: start the engine with --enable-return-routed-experts" "$TMP/pick.log"
envoy pick --target "$T" --body-file "$TMP/plain.json" --header "epp-profile=decode" \
    --request-id plainpf >"$TMP/p" 2>&1
req GET /v1/explain/plainpf
expect_http "its decode call: the no-signature rule" 200 "j['signal']['source']=='none'"
