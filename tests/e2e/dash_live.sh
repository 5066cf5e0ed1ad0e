#!/bin/sh
# tests/e2e/dash_live.sh - the dashboard's live mode against a real eldrd:
# requests routed with curl (some finished) must show in `eldr dash
# --attach URL --frame` exactly as /v1/snapshot reports them (in-flight
# and routed per worker, every request id in the decisions view); a saved
# snapshot opens offline with --router-snapshot; in tmux the attached
# dashboard's numbers change after more routes, a dead daemon shows in the
# header without ending the session, and q quits with 0. Bad input: an
# unreachable URL, a bad snapshot file, mixed modes: exit 2, one line.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs "dash live"
[ -x "$ELDR" ] || { notok "dash live prerequisites" "need $ELDR"; exit 0; }
"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --seed 1 >/dev/null 2>&1
check "fixture: a K=4 model" test -s "$TMP/m.h5"
start dashlive -m "$TMP/m.h5" --workers w0,w1,w2,w3 --quiet || exit 0

# route RID: one request with sparse counts that differ per id
route() {
    n=$(echo "$1" | tr -dc 0-9)
    curl -s --max-time 10 -o /dev/null -X POST "$URL/v1/route" --data \
        "{\"request_id\":\"$1\",\"sparse\":[[0,$((n % 64)),6],[2,$(((n * 7) % 64)),5],[4,$(((n * 13) % 64)),4]]}"
}
for i in 1 2 3 4 5 6 7; do route "live-$i"; done
curl -s --max-time 10 -o /dev/null -X POST "$URL/v1/finish" --data '{"request_id":"live-2"}'

# frame vs the daemon's own snapshot: each worker's routed and in-flight
expect_status "attach --frame balance" 0 "$ELDR" dash --attach "$URL" --frame "$TMP/bal.txt" \
    --view balance --width 100 --height 24 --json
cp "$TMP/out" "$TMP/bal.json"
curl -s --max-time 10 -o "$TMP/snap0.json" "$URL/v1/snapshot"
check "balance frame shows each worker's in-flight as /v1/snapshot does" $PY -c '
import json, re, sys
snap = json.load(open(sys.argv[1])); frame = open(sys.argv[2]).read()
total = sum(w["routed"] for w in snap["workers"])
for w in snap["workers"]:
    m = re.search(r"^ [ >]%s .*?(\d+\.\d)%%\s*$" % w["name"], frame, re.M)
    rows = [l for l in frame.splitlines() if re.match(r"^ [ >]%s " % w["name"], l)]
    assert rows and rows[0].split()[-1] == str(w["inflight"]), (w, rows)
    share = "%.1f%%" % (100.0 * w["routed"] / total)
    assert share in rows[0], (share, rows[0])
assert sum(w["inflight"] for w in snap["workers"]) == 6
assert "in-flight 6, routed 7" in frame
' "$TMP/snap0.json" "$TMP/bal.txt"
check "--json: the workers of the snapshot" jq_py "$TMP/bal.json" \
    'j["mode"] == "attach" and sum(w["inflight"] for w in j["workers"]) == 6 and sum(w["routed"] for w in j["workers"]) == 7'

expect_status "attach --frame decisions" 0 "$ELDR" dash --attach "$URL" --frame "$TMP/dec.txt" \
    --view decisions --width 120 --height 30
missing=""
for i in 1 2 3 4 5 6 7; do grep -q "live-$i " "$TMP/dec.txt" || missing="$missing live-$i"; done
if [ -z "$missing" ] && grep -q "live-2 .*(finished)" "$TMP/dec.txt"; then
    ok "decisions view lists every routed id, live-2 finished"
else notok "decisions view lists every routed id, live-2 finished" "missing:$missing" "$(head -12 "$TMP/dec.txt")"; fi
expect_status "attach --frame drift" 0 "$ELDR" dash --attach "$URL" --frame "$TMP/drift.txt" --view drift
check "drift view: window of 7 signatures against the calibration" \
    grep -Eq 'window of 7 recent signatures' "$TMP/drift.txt"

# a saved snapshot, offline, after the daemon has moved on
curl -s --max-time 10 -o "$TMP/saved.json" "$URL/v1/snapshot?centroids=1"
expect_status "--router-snapshot balance" 0 "$ELDR" dash --router-snapshot "$TMP/saved.json" \
    --frame "$TMP/sbal.txt" --view balance --width 100 --height 24
check "snapshot frame: same in-flight counts, frozen" grep -q 'snapshot tau 0.10 K 4 gen 1 | in-flight 6, routed 7' "$TMP/sbal.txt"
expect_status "--router-snapshot scatter" 0 "$ELDR" dash --router-snapshot "$TMP/saved.json" \
    --frame "$TMP/ssc.txt" --view scatter
check "snapshot scatter: the 4 served centroids" grep -q 'PCA of the 4 centroids' "$TMP/ssc.txt"
expect_status "--router-snapshot decisions" 0 "$ELDR" dash --router-snapshot "$TMP/saved.json" \
    --frame "$TMP/sdec.txt" --view decisions
check "snapshot decisions: live-7 newest first" sh -c "grep -n 'live-' '$TMP/sdec.txt' | head -1 | grep -q 'live-7 '"

# bad input
dead_port; DEAD="http://127.0.0.1:$DEADPORT"
# a daemon that does not answer: exit 3 in every command that talks to eldrd
expect_status "unreachable URL: exit 3 (as replay)" 3 "$ELDR" dash --attach "$DEAD" --frame - --timeout 2
[ "$(wc -l <"$TMP/err")" -eq 1 ] && grep -q "$DEAD.*daemon unreachable\|daemon unreachable.*$DEAD" "$TMP/err" &&
    ok "unreachable URL: one line naming it" || notok "unreachable URL: one line naming it" "$(cat "$TMP/err")"
script -qec "'$ELDR' dash --attach '$DEAD' --timeout 2" "$TMP/ts" >/dev/null 2>&1 </dev/null
rc=$?
[ "$rc" -eq 3 ] && grep -q "daemon unreachable" "$TMP/ts" && ok "unreachable URL on a terminal: exit 3, before the screen" ||
    notok "unreachable URL on a terminal: exit 3, before the screen" "exit $rc" "$(head -c 300 "$TMP/ts")"
echo '{"format": "eldr-router-snapshot", "workers": [' >"$TMP/trunc.json"
expect_fail2 "truncated snapshot file: exit 2" 'trunc\.json: line' \
    "$ELDR" dash --router-snapshot "$TMP/trunc.json" --frame -
echo '{"format": "eldr-model"}' >"$TMP/other.json"
expect_fail2 "not a snapshot: exit 2 naming the key" 'other\.json: key format' \
    "$ELDR" dash --router-snapshot "$TMP/other.json" --frame -
expect_fail2 "missing snapshot file: exit 2" 'nope\.json' \
    "$ELDR" dash --router-snapshot "$TMP/nope.json" --frame -
expect_fail2 "--attach with a trace: exit 2" 'takes no trace' \
    "$ELDR" dash --attach "$URL" "$SMALL" --frame -
expect_fail2 "--attach and --router-snapshot: exit 2" 'give one of them' \
    "$ELDR" dash --attach "$URL" --router-snapshot "$TMP/saved.json" --frame -
expect_fail2 "--attach with --tau: exit 2" 'do not apply' \
    "$ELDR" dash --attach "$URL" --tau 0.3 --frame -
expect_fail2 "--interval 0: exit 2" 'interval' "$ELDR" dash --attach "$URL" --interval 0 --frame -
expect_status "dash --help" 0 "$ELDR" dash --help
if grep -q 'needs the router daemon' "$TMP/out"; then notok "--help no longer says 'needs the router daemon'"
else ok "--help no longer says 'needs the router daemon'"; fi

# live in a real terminal
if ! command -v tmux >/dev/null 2>&1; then notok "dash live tmux: tmux missing"; exit 0; fi
TMUX_NAME=eldr-dash-live PANE=live
. "$ROOT/tests/e2e/tmux.inc"
trap '$T kill-server 2>/dev/null; for p in $PIDS; do kill -9 $p 2>/dev/null; done; rm -rf "$TMP"' EXIT
tshell 100 30 || { notok "dash live: tmux new-session"; exit 0; }
$T send-keys -t live "$ELDR dash --attach $URL --interval 0.2 --view queues; echo EXIT=\$?" Enter
tcheck "tmux: attached, queues view" '\[4 queues\]' 10
tcheck "tmux: header shows the daemon's counts" 'in-flight 6, routed 7' 5
for i in 8 9 10 11 12; do route "live-$i"; done
tcheck "tmux: numbers change after 5 more routes" 'in-flight 11, routed 12' 5
tcheck "tmux: routes/s measured between polls" 'routed 12 \| [0-9.]+/s' 5
$T send-keys -t live 7
tcheck "tmux: key 7, the new decisions" 'live-12 ' 5
$T send-keys -t live 4
tcheck "tmux: queues history grows with the polls" 'in-flight history, ([3-9]|[1-9][0-9]+) polls' 5
stop
tcheck "tmux: a dead daemon shows in the header, retried" 'NO ANSWER, retrying; [0-9]+ failed' 10
tcheck "tmux: the footer says why" "poll failed: $URL" 5
tcheck "tmux: the last numbers stay" 'in-flight 11, routed 12 +NO ANSWER' 5
tcheck "tmux: how long since the last answer" 'NO ANSWER, retrying; [0-9]+ failed +last answer [0-9]+s ago' 5
# issue 14: the daemon comes back (same port, counters from 0): the
# histories mark the restart, and the decisions list pauses on space
"$ELDRD" --listen "127.0.0.1:$PORT" -m "$TMP/m.h5" --workers w0,w1,w2,w3 --quiet \
    2>"$TMP/again.log" &
PID=$!
PIDS="$PIDS $PID"
tcheck "tmux: restarted daemon answers again" 'routed 0 \| .*last answer' 15
tcheck "tmux: the restart is marked in the queues history" '! daemon restart' 5
$T send-keys -t live 1
tcheck "tmux: the overview counts the restart, once" "restarts +1 seen" 5
$T send-keys -t live 7
tcheck "tmux: key 7 after the restart" '\[7 decisions\]' 5
$T send-keys -t live Space
tcheck "tmux: space pauses the decisions" 'PAUSED: space resumes' 5
route "live-20"
tcheck "tmux: paused, the new decision is counted, not listed" 'PAUSED: space resumes; 1 newer' 5
if screen | grep -q 'live-20 '; then notok "tmux: paused list holds still" "$(screen | head -6)"
else ok "tmux: paused list holds still"; fi
$T send-keys -t live Space
tcheck "tmux: space resumes, live-20 listed" 'live-20 ' 5
$T send-keys -t live q
tcheck "tmux: q quits with 0 after connection errors" 'EXIT=0' 10
