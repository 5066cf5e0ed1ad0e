#!/bin/sh
# tests/e2e/dash_push.sh - the dashboard's key P (issue 30, item 4): in a
# real terminal (tmux), `eldr dash TRACE -m NEW --push-to ADMIN_URL
# --token-file F` against an eldrd with --admin-listen and an admin token:
# P draws the plan over the view (each live worker's new cluster, the
# cosines), n keeps the live model (the generation does not move), P then
# y pushes it: the status line names the new generation, and the served
# centroids are NEW's rows in the order a brute force over all 120
# permutations of K = 5 gives (tests/e2e/push_check.py, the oracle of
# push.sh). Without --push-to, P says how to enable it; the option
# combinations it does not take exit 2. Bounded: every wait polls.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
TMUX_NAME=eldr-dash-push PANE=dash
. "$ROOT/tests/e2e/tmux.inc"
prereqs "dash_push"
if ! command -v tmux >/dev/null 2>&1 || [ ! -x "$ELDR" ]; then
    notok "dash_push prerequisites" "need tmux and $ELDR"
    exit 0
fi
trap '$T kill-server 2>/dev/null; for p in $PIDS; do kill $p 2>/dev/null; done; rm -rf "$TMP"' EXIT
CHK="$PY $ROOT/tests/e2e/push_check.py"

"$ELDR" fit "$SMALL" -k 5 -o "$TMP/live.h5" --seed 1 --layers all >/dev/null 2>&1
"$ELDR" fit "$SMALL" -k 5 -o "$TMP/new.h5" --seed 5 --split-seed 9 --iters 3 --layers all >/dev/null 2>&1
PERM=$($CHK perm "$TMP/live.h5" "$TMP/new.h5")
check "oracle: one best permutation, not the identity" \
    sh -c "[ -n '$PERM' ] && [ '$PERM' != '0,1,2,3,4' ]"
printf 'adm1n-t0ken-0123456789abcdef\n' >"$TMP/admin.tok"
chmod 600 "$TMP/admin.tok"
AP=$(free_port); AURL="http://127.0.0.1:$AP"
start dash_push -m "$TMP/live.h5" --workers n0,n1,n2,n3,n4 --admin-listen "127.0.0.1:$AP" \
    --admin-token-file "$TMP/admin.tok" --quiet || exit 0
generation() {
    curl -s --max-time 5 "$AURL/v1/snapshot?decisions=0" |
        $PY -c 'import json,sys; print(json.load(sys.stdin)["model"]["generation"])'
}

expect_fail2 "--token-file without --push-to: exit 2" "give --push-to URL" \
    "$ELDR" dash "$SMALL" --token-file "$TMP/admin.tok"
expect_fail2 "--push-to with --frame: exit 2" "--push-to: key P of the interactive dashboard" \
    "$ELDR" dash "$SMALL" --push-to "$AURL" --frame -
expect_fail2 "--push-to with --attach: exit 2" "--push-to: key P" \
    "$ELDR" dash --attach "$URL" --push-to "$AURL"

# one terminal for both runs: a tmux server whose last session is killed
# exits, and a new session started meanwhile can race with its exit
$T new-session -d -s dash -x 110 -y 36 "env PS1='PROMPT\$ ' TERM=xterm-256color sh -i" || {
    notok "dash_push: tmux new-session"; exit 0; }
wait_for 'PROMPT\$' 5
dash() { # dash ARGS: the dashboard on the sample, in a cleared terminal
    $T send-keys -t dash "clear; $ELDR dash $SMALL --rate 60 --seeds 1 $*; echo EXIT=\$?" Enter
    wait_for 'p50 [0-9.]+ ?ms' 30
}

dash -m "$TMP/new.h5"
$T send-keys -t dash P
tcheck "without --push-to, P says how to push" "start the dashboard with --push-to URL" 5
$T send-keys -t dash q
wait_for 'EXIT=0' 10

dash -m "$TMP/new.h5" --push-to "$AURL" --token-file "$TMP/admin.tok"
$T send-keys -t dash P
tcheck "P draws the plan over the view" "push to $AURL" 10
# the question is not the help overlay: its title asks, it names what goes
# where, and its bottom border has its keys (the help's: "? Esc q: close")
screen >"$TMP/confirm"
if grep -q -- "[^ ] confirm: push to $AURL " "$TMP/confirm"; then
    ok "... titled as a question naming where: confirm: push to URL"
else notok "... titled as a question naming where: confirm: push to URL" "$(cat "$TMP/confirm")"; fi
check "... it names what is pushed (the model file, K, recipe)" \
    grep -Eq "push the model of new\.h5: K 5, [a-z_]+ over [0-9]+ layers, tau " "$TMP/confirm"
check "... and where, replacing which generation" \
    grep -Eq "to eldrd at $AURL \(PUT /v1/model\), replacing generation 1: K 5" "$TMP/confirm"
check "... its keys on its bottom border, no help's title" sh -c \
    "grep -q ' y send, other key keep ' '$TMP/confirm' && ! grep -q 'help: keys' '$TMP/confirm'"
$T send-keys -t dash n
wait_for "push: cancelled" 5
$T send-keys -t dash '?'
wait_for 'help: keys' 5
screen >"$TMP/helpbox"
check "the help overlay is titled help: keys, with its own keys, no push words" sh -c \
    "grep -q '? Esc q: close' '$TMP/helpbox' && ! grep -q 'confirm: push' '$TMP/helpbox'"
$T send-keys -t dash '?'
i=0; while screen | grep -q 'help: keys' && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
$T send-keys -t dash P
wait_for "push to $AURL" 10
P0=$(echo "$PERM" | cut -d, -f1)
tcheck "... live worker n0 gets the brute force's cluster $P0" "n0 +cluster $P0 " 2
tcheck "... and the answer keys" "y: send it \\(PUT /v1/model\\)" 2
$T send-keys -t dash n
tcheck "n keeps the live model" "push: cancelled; eldrd keeps generation 1" 5
G=$(generation)
check "... the generation did not move" test "$G" = 1
$T send-keys -t dash P
wait_for "push to $AURL" 10
$T send-keys -t dash y
tcheck "y pushes: the status names generation 2" "pushed: eldrd serves generation 2 \\(was 1\\)" 10
curl -s --max-time 5 "$AURL/v1/snapshot?centroids=1&decisions=0" >"$TMP/snap.json"
check "... eldrd serves the new centroids in the brute force's order" \
    $CHK served "$TMP/snap.json" "$TMP/new.h5" "$PERM"
$T send-keys -t dash q
tcheck "q quits with status 0" 'EXIT=0' 10
stop
