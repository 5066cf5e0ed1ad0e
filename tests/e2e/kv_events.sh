#!/bin/sh
# tests/e2e/kv_events.sh - vLLM's KV events as vLLM sends them (issue 29,
# item 5): eldrd --kv-events subscribed to a stand-in of vLLM's ZMQ
# publisher (tests/e2e/kv_pub.py, which names the vLLM files and commits it
# follows). Blocks stored by routes (eldrd's own hashes of the prompt's
# tokens) are dropped by BlockRemoved events that name vLLM's hashes only
# (bytes, unsigned ints >= 2^63, negative ints), through the map that
# BlockStored's token ids build; the batch in each of msgspec's forms; a
# bad event inside a good batch; POST /v1/kv-events with hashes
# 18446744073709551615 and 9223372036854775808; a gap recovered from the
# replay socket, a gap the replay socket does not answer (the cache is
# emptied), and a publisher restart (numbering from 0 again: the cache is
# emptied, and the new run's batches that went by are replayed); the
# option errors; and eldrd --proxy in front of a stock vLLM prefill
# (tests/e2e/fake_pd.py), whose stored blocks vLLM's BlockRemoved drops.
# Every wait is bounded; about 20 s.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs "eldrd --kv-events"
if ! $PY -c 'import zmq, msgpack' 2>/dev/null; then
    notok "eldrd --kv-events prerequisites" "need pyzmq and msgpack under $PY (python3-zmq, python3-msgpack)"
    exit 0
fi

"$ROOT/$BIN/eldr" fit "$SMALL" -k 4 -o "$TMP/m.h5" --seed 1 >/dev/null 2>&1 ||
    { notok "fit the fixture model"; exit 0; }
$PY "$ROOT/tests/e2e/kv_events_fix.py" "$TMP" || { notok "fixtures"; exit 0; }
fx() { $PY -c "import json,sys; f=json.load(open(sys.argv[1])); print(json.dumps($1))" "$TMP/fix.json"; }

# --- options ---
expect_fail2 "--kv-events: one endpoint per prefill worker" \
    "--kv-events: 1 endpoint for 2 prefill workers" \
    "$ELDRD" -m "$TMP/m.h5" --prefill-workers p0,p1 --kv-events tcp://127.0.0.1:1 --listen 127.0.0.1:1
expect_fail2 "--kv-events-topic needs --kv-events" "--kv-events-topic needs --kv-events" \
    "$ELDRD" -m "$TMP/m.h5" --kv-events-topic x
expect_fail2 "--kv-events: an endpoint zmq refuses" "--kv-events: 'nonsense'" \
    "$ELDRD" -m "$TMP/m.h5" --kv-events nonsense --listen 127.0.0.1:1

# --- the publisher stand-in, driven through a fifo ---
PP=$(free_port); RP=$(free_port)
NOUT=0
# publisher: start one on $PP/$RP (its commands on fd 3, its answers in $TMP/pub.out)
publisher() {
    rm -f "$TMP/ctl" "$TMP/pub.out"; mkfifo "$TMP/ctl"; : >"$TMP/pub.out"; NOUT=0
    $PY "$ROOT/tests/e2e/kv_pub.py" "$PP" "$RP" "" <"$TMP/ctl" >"$TMP/pub.out" 2>"$TMP/pub.err" &
    PUBPID=$!; PIDS="$PIDS $PUBPID"
    exec 3>"$TMP/ctl"
}
# ready: the publisher saw eldrd subscribe (bounded)
ready() {
    i=0; while ! grep -q '^ready' "$TMP/pub.out" && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
    grep -q '^ready' "$TMP/pub.out"
}
# pub JSON: one command; waits until the publisher has done it
pub() {
    echo "$1" >&3
    NOUT=$((NOUT + 1)); i=0
    while [ "$(grep -c '^ok' "$TMP/pub.out")" -lt $NOUT ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
}
# metric SERIES: its value in /metrics
metric() {
    curl -s --max-time 5 "$URL/metrics" | awk -v k="$1" '$1 == k {print $2}'
}
# expect_metric NAME SERIES VALUE: within 5 s
expect_metric() {
    i=0; while [ "$(metric "$2")" != "$3" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    got=$(metric "$2")
    if [ "$got" = "$3" ]; then ok "$1"; else notok "$1" "$2 is '$got', wanted $3"; fi
}
ENT='eldr_sigcache_entries{prefill="p0"}'
MAP='eldr_kv_hash_map_entries{prefill="p0"}'

publisher
start kv -m "$TMP/m.h5" --prefill-workers p0 --kv-events "tcp://127.0.0.1:$PP" \
    --kv-events-replay "tcp://127.0.0.1:$RP" || exit 0
if ready; then ok "the publisher sees eldrd subscribe"; else notok "the publisher sees eldrd subscribe" "$(cat "$TMP/pub.err" "$TMP/kv.log")"; exit 0; fi
for p in a b c; do req POST /v1/route "@$TMP/route_$p.json"; done
expect_metric "routes store 4 + 2 + 3 blocks (eldrd's hashes, some >= 2^63)" "$ENT" 9

# BlockStored in each form: vLLM's hashes mapped to eldrd's
pub "{\"op\": \"send\", \"form\": \"map\", \"events\": [{\"stored\": {\"hashes\": $(fx 'f["a"]["vllm"]'), \"parent\": null, \"tokens\": $(fx 'f["a"]["tokens"]'), \"block_size\": 16}}]}"
expect_metric "map form: BlockStored (sha256 bytes hashes) counted" 'eldr_kv_events_total{prefill="p0",kind="stored"}' 1
expect_metric "map form: its 4 hashes mapped" "$MAP" 4
pub "{\"op\": \"send\", \"form\": \"array-maps\", \"events\": [{\"stored\": {\"hashes\": [18446744073709551615, 9223372036854775808], \"parent\": null, \"tokens\": $(fx 'f["b"]["tokens"]'), \"block_size\": 16}}]}"
expect_metric "array batch, map events: BlockStored (int hashes >= 2^63) mapped" "$MAP" 6
pub "{\"op\": \"send\", \"form\": \"array\", \"events\": [{\"stored\": {\"hashes\": [-5, 77, 78], \"parent\": null, \"tokens\": $(fx 'f["c"]["tokens"]'), \"block_size\": 16}}]}"
expect_metric "array form: BlockStored (negative int hashes) mapped" "$MAP" 9
pub "{\"op\": \"send\", \"form\": \"array\", \"events\": [{\"stored\": {\"hashes\": [500], \"parent\": null, \"tokens\": $(fx 'f["c"]["tokens"][:8]'), \"block_size\": 8}}]}"
expect_metric "another block size: counted as unmapped" 'eldr_kv_unmapped_blocks_total{prefill="p0",reason="block_size"}' 1
check "the signature cache still holds 9 blocks" test "$(metric "$ENT")" = 9

# BlockRemoved names vLLM's hashes only
pub "{\"op\": \"send\", \"form\": \"map\", \"events\": [{\"removed\": [$(fx 'f["a"]["vllm"][3]')]}]}"
expect_metric "BlockRemoved (bytes hash) drops eldrd's block" "$ENT" 8
expect_metric "removals counted" 'eldr_sigcache_removals_total{prefill="p0"}' 1
pub "{\"op\": \"send\", \"form\": \"array-maps\", \"events\": [{\"raw\": {\"type\": \"BlockRemoved\", \"block_hashes\": \"oops\"}}, {\"removed\": [$(fx 'f["a"]["vllm"][2]')]}]}"
expect_metric "a bad event is counted" 'eldr_kv_events_bad_total{prefill="p0",what="event"}' 1
expect_metric "... and the good event of its batch applied" "$ENT" 7

# POST /v1/kv-events: JSON integers >= 2^63 are block hashes
req POST /v1/kv-events '{"worker": "p0", "events": [{"type": "BlockRemoved", "block_hashes": [18446744073709551615, 9223372036854775808], "medium": "GPU"}]}'
expect_http "POST /v1/kv-events with 18446744073709551615 and 9223372036854775808" 200 \
    'j["removed_blocks"] == 2 and j["cache_entries"] == 5'
expect_metric "POST and ZMQ events counted together" 'eldr_kv_events_total{prefill="p0",kind="removed"}' 3

# a gap the replay socket fills
pub "{\"op\": \"send\", \"form\": \"array\", \"drop\": true, \"events\": [{\"removed\": [-5]}]}"
pub "{\"op\": \"send\", \"form\": \"map\", \"events\": [{\"removed\": [$(fx 'f["a"]["vllm"][1]')]}]}"
expect_metric "gap: the lost batch replayed and applied" "$ENT" 3
expect_metric "gap counted" 'eldr_kv_events_gaps_total{prefill="p0"}' 1
expect_metric "gap: replayed batches counted" 'eldr_kv_events_replayed_total{prefill="p0"}' 1
check "gap replayed: the cache was not emptied" test "$(metric 'eldr_kv_cache_resets_total{prefill="p0",reason="gap"}')" = 0

# a gap the replay socket leaves unanswered: the cache is distrusted
pub '{"op": "mute_replay"}'
pub "{\"op\": \"send\", \"form\": \"map\", \"drop\": true, \"events\": [{\"removed\": [77]}]}"
pub "{\"op\": \"send\", \"form\": \"map\", \"events\": [{\"removed\": [$(fx 'f["a"]["vllm"][0]')]}]}"
expect_metric "gap not replayed: the worker's cache emptied" 'eldr_kv_cache_resets_total{prefill="p0",reason="gap"}' 1
expect_metric "... its blocks gone" "$ENT" 0
expect_metric "... and its hash map" "$MAP" 0
expect_metric "missed sequence numbers counted" 'eldr_kv_events_missed_total{prefill="p0"}' 2

# the publisher restarts: numbering from 0 again, its KV cache empty
sed 's/"kv-a"/"kv-a2"/' "$TMP/route_a.json" >"$TMP/route_a2.json"
req POST /v1/route "@$TMP/route_a2.json"
expect_metric "route after the reset stores 4 blocks" "$ENT" 4
pub '{"op": "quit"}'
wait $PUBPID 2>/dev/null
exec 3>&-
publisher
if ready; then ok "eldrd reconnects to the restarted publisher"; else notok "eldrd reconnects to the restarted publisher" "$(cat "$TMP/pub.err")"; fi
# the new run's first batch (sequence 0) is lost on the wire; the next one
# shows the restart, and what the publisher still buffers is replayed
pub "{\"op\": \"send\", \"form\": \"map\", \"drop\": true, \"events\": [{\"stored\": {\"hashes\": $(fx 'f["a"]["vllm"]'), \"parent\": null, \"tokens\": $(fx 'f["a"]["tokens"]'), \"block_size\": 16}}]}"
pub "{\"op\": \"send\", \"form\": \"map\", \"events\": [{\"removed\": [$(fx 'f["a"]["vllm"][3]')]}]}"
expect_metric "restart (sequence 1 after 9): the cache emptied" 'eldr_kv_cache_resets_total{prefill="p0",reason="restart"}' 1
expect_metric "... the blocks of the old run gone" "$ENT" 0
expect_metric "... the new run's lost first batch replayed (4 hashes mapped, 1 removed)" "$MAP" 3
sed 's/"kv-a"/"kv-a3"/' "$TMP/route_a.json" >"$TMP/route_a3.json"
req POST /v1/route "@$TMP/route_a3.json"
expect_metric "route after the restart stores 4 blocks" "$ENT" 4
pub "{\"op\": \"send\", \"form\": \"map\", \"events\": [{\"removed\": [$(fx 'f["a"]["vllm"][2]')]}]}"
expect_metric "a hash learnt from the replayed batch removes its block" "$ENT" 3
pub '{"op": "send", "form": "map", "events": [{"cleared": true}]}'
expect_metric "AllBlocksCleared empties the cache" "$ENT" 0
expect_metric "AllBlocksCleared counted" 'eldr_kv_events_total{prefill="p0",kind="cleared"}' 1
curl -s --max-time 5 "$URL/metrics" >"$TMP/metrics"
expect_in "eldr_kv_events_total has HELP and TYPE" "$TMP/metrics" '^# TYPE eldr_kv_events_total counter'
if command -v promtool >/dev/null; then
    check "/metrics with --kv-events is promtool-clean" sh -c "promtool check metrics <'$TMP/metrics'"
fi
check "no message was refused" test "$(metric 'eldr_kv_events_bad_total{prefill="p0",what="message"}')" = 0
pub '{"op": "quit"}'
exec 3>&-
stop
check "SIGTERM with the subscriber running exits 0" test "$RC" -eq 0

# --- the proxy in front of a stock vLLM prefill: the blocks it stores (its
# --block-size chain of the answer's prompt_token_ids) leave on vLLM's events
"$ROOT/$BIN/eldr" fit "$SMALL" -k 4 -o "$TMP/mall.h5" --variant count --layers all --seed 1 \
    >/dev/null 2>&1 || { notok "fit the proxy's model"; exit 0; }
standins stock --prefill 1 --decode 4 --routed npy
PP=$(free_port); RP=$(free_port)
publisher
start proxy -m "$TMP/mall.h5" --proxy --pd-protocol vllm --prefill "$PF" --decode "$DC" \
    --kv-events "tcp://127.0.0.1:$PP" --kv-events-replay "tcp://127.0.0.1:$RP" || exit 0
ready || { notok "the publisher sees the proxy subscribe" "$(cat "$TMP/pub.err")"; exit 0; }
PROMPT=$($PY -c 'print(" ".join("word%d" % i for i in range(40)))')
req POST /v1/completions "{\"prompt\": \"$PROMPT\", \"max_tokens\": 4}"
expect_http "proxy: a stock prefill's answer routes" 200
SENT='eldr_sigcache_entries{prefill="default"}'
expect_metric "proxy: the 40-token prompt's 2 full blocks stored" "$SENT" 2
IDS=$($PY -c 'import json,sys; print(json.dumps([json.loads(l) for l in open(sys.argv[1])][-1]["ids"][:32]))' "$TMP/stock.jsonl.truth")
pub "{\"op\": \"send\", \"form\": \"map\", \"events\": [{\"stored\": {\"hashes\": [\"b:$(printf 'aa%.0s' $(seq 32))\", \"b:$(printf 'bb%.0s' $(seq 32))\"], \"parent\": null, \"tokens\": $IDS, \"block_size\": 16}}, {\"removed\": [\"b:$(printf 'bb%.0s' $(seq 32))\"]}]}"
expect_metric "proxy: vLLM's BlockRemoved drops the block the proxy stored" "$SENT" 1
expect_metric "proxy: counted" 'eldr_kv_events_total{prefill="default",kind="removed"}' 1
pub '{"op": "quit"}'
exec 3>&-
stop
