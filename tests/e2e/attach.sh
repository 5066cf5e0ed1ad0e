#!/bin/sh
# tests/e2e/attach.sh - the workbench attached to a live eldrd from Lua
# (eldr.attach, eldr.load_snapshot, eldr.hungarian, lua/eldr/refit.lua):
# starts eldrd, replays the small sample into it, then runs
# tests/e2e/attach.lua with `eldr run` (snapshot, set_tau, decisions,
# explain, window, model, a saved snapshot opened offline, refit + push).
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs "attach"
[ -x "$ELDR" ] || { notok "attach prerequisites" "need $ELDR"; exit 0; }
"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --seed 1 >/dev/null 2>&1
check "fixture: a K=4 model" test -s "$TMP/m.h5"
start attach -m "$TMP/m.h5" --workers w0,w1,w2,w3 --state-dir "$TMP/state" --quiet || exit 0
expect_status "replay the sample into eldrd" 0 \
    "$ELDR" replay "$SMALL" --to "$URL" --rate 2000 --tpot-ms 0.1
curl -s --max-time 10 -o "$TMP/snap.json" "$URL/v1/snapshot?centroids=1"
check "saved snapshot with centroids and idf" jq_py "$TMP/snap.json" \
    'len(j["model"]["centroids"]) == 4 and j["model"]["sig_idf"] is not None'
dead_port; DEAD="http://127.0.0.1:$DEADPORT"
timeout 120 "$ELDR" run "$ROOT/tests/e2e/attach.lua" "$URL" "$TMP/snap.json" "$DEAD" >"$TMP/lua.out" 2>"$TMP/lua.err"
rc=$?
cat "$TMP/lua.out"
[ $rc -eq 0 ] && ok "attach.lua exits 0" || notok "attach.lua exits 0" "exit $rc" "$(head -c 400 "$TMP/lua.err")"
check "the pushed model was persisted" test -s "$TMP/state/model.h5"
stop
