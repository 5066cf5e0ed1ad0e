#!/bin/sh
# tests/e2e/snapshot_load.sh - heavy snapshots beside the proxy (issue 20):
# eldrd --proxy over the instant stand-ins ($BIN/pd_instant), its
# 4096-decision ring filled by proxied requests, then 4 clients looping
# GET /v1/snapshot?decisions=4096 while /healthz, /metrics and proxied
# requests are timed (tests/e2e/snapshot_load.py). The snapshot is built
# outside the routing lock and serialised on the side thread, and /healthz
# and /metrics run on a thread of their own, so none of the three waits
# for a snapshot. The latencies are printed as a "# " line.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
[ -x "$ELDR" ] || ELDR="$ROOT/bin/eldr"
PD="$ROOT/$BIN/pd_instant"
[ -x "$PD" ] || PD="$ROOT/bin/pd_instant"
if [ ! -x "$ELDRD" ] || [ ! -x "$PD" ]; then
    notok "snapshot load prerequisites" "need $ELDRD and $PD (make $BIN/pd_instant)"
    exit 0
fi

"$ELDR" gen -o "$TMP/t.h5" --requests 300 --layers 24 --experts 32 --top-k 4 --domains 4 \
    --seed 5 >/dev/null 2>&1 &&
    "$ELDR" fit "$TMP/t.h5" -k 4 -o "$TMP/m.h5" >/dev/null 2>&1
check "fixture: a K=4 model of 24 layers x 32 experts" test -s "$TMP/m.h5"

"$PD" "$TMP/ports" 24 32 &
PIDS="$PIDS $!"
i=0; while [ ! -s "$TMP/ports" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
read -r PP DP <"$TMP/ports"
start snap -m "$TMP/m.h5" --quiet --proxy --prefill "http://127.0.0.1:$PP" \
    --decode "http://127.0.0.1:$DP,http://127.0.0.2:$DP,http://127.0.0.3:$DP,http://127.0.0.4:$DP" \
    --decisions 4096 || exit 0

# 4400 proxied requests fill the ring; 4 snapshot clients for 12 s at most
timeout 40 $PY "$ROOT/tests/e2e/snapshot_load.py" "$URL" 4400 "${SNAP_CLIENTS:-4}" 12 300 "$TMP/r.json"
check "the load ran" test -s "$TMP/r.json"
[ -s "$TMP/r.json" ] || exit 0
echo "# $(cat "$TMP/r.json")"
check "the fill: every proxied request answered 200, the ring holds 4096 decisions" \
    jq_py "$TMP/r.json" 'j["fill_failed"] == 0 and j["decisions"] == 4096'
check "under load: every timed request answered 200, and snapshots were served" \
    jq_py "$TMP/r.json" 'j["timing_failed"] == 0 and j["snapshots_during"] >= 4'
# Bounds, measured on the 2-core development machine shared with other
# builds (load average 3-7), 4 clients (docs/eldrd.md, "Snapshots beside
# the proxy"). Before, with the snapshot built under the routing lock,
# dumped on the loop, and /healthz queued behind it on the one side
# thread: /healthz p50 230-900 ms, p90 410-1080, max 440-1080; /metrics
# p90 440-1120; proxied p50 60-2100 ms, max 290-2960 (under ASan: /healthz
# p50 910 ms, max 1220). After: /healthz p50 0.6-0.9 ms, p90 2-15, max
# 34-85; /metrics p90 1-5, max 13-96; proxied p50 0.4-0.9 ms, max 22-85
# (under ASan: p50 1-2 ms, p90 5-10, max 30-150). The maxima are the
# scheduler's on a loaded machine; the p50 and p90 bounds are the sharp
# ones.
case "$BIN" in *asan*) MAXMS=600 ;; *) MAXMS=300 ;; esac
check "under load: /healthz p90 under 50 ms, max under $MAXMS ms" \
    jq_py "$TMP/r.json" "j['healthz']['p90'] < 50 and j['healthz']['max'] < $MAXMS"
check "under load: /metrics p90 under 50 ms, max under $MAXMS ms" \
    jq_py "$TMP/r.json" "j['metrics']['p90'] < 50 and j['metrics']['max'] < $MAXMS"
check "under load: proxied p50 under 10 ms, max under $MAXMS ms" \
    jq_py "$TMP/r.json" "j['proxied']['p50'] < 10 and j['proxied']['max'] < $MAXMS"
stop
check "eldrd exits 0 after the load" test "$RC" -eq 0
