#!/bin/sh
# tests/e2e/dash_progressive.sh - the dashboard's first look, its
# refinement and Esc, in a real terminal (tmux, 80 x 24; issue 34 item 1,
# issue 30 item 5).
#
# On a 3000-request trace (2000 simulated rows) at 50 seeds: the first
# screen says FIRST LOOK and what it rests on (800 of the 2000 rows, one
# seed); the refine job shows a progress bar in the footer; Esc stops it
# within 1 s (its simulations poll the flag) and it does not start again
# by itself; a new change refines again; a tau pressed while a job runs is
# dropped when Esc stops the job, not started at once (issue 30: tau 0.10
# -> 0.15 was); view 7 shows the first look's grid (labelled) while the full one
# computes, and Esc keeps it; the refined screen drops the label. Every
# wait is bounded.
. "$ROOT/tests/cli/lib.sh"
TMUX_NAME=eldr-dash-prog PANE=prog
. "$ROOT/tests/e2e/tmux.inc"
if ! command -v tmux >/dev/null 2>&1; then
    notok "dash progressive: tmux missing"
    exit 0
fi
cleanup() { $T kill-server 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
TR="$TMP/t.h5"
"$ELDR" gen -o "$TR" --requests 3000 --layers 16 --experts 64 --top-k 8 --domains 4 \
    --decode-tokens 600 --prompt-tokens 64 --seed 5 >/dev/null 2>&1 || notok "progressive e2e: gen"
header() { screen | sed -n 2p; }
footer() { screen | tail -1; }
now() { date +%s.%N; }

tshell 80 24 || { notok "progressive e2e: tmux"; exit 0; }
$T send-keys -t prog "$ELDR dash $TR --rate 800 --seeds 50 --no-cache; echo EXIT=\$?" Enter
tcheck "the first screen says FIRST LOOK" '^eldr tau 0\.10 K 4(\.\.\.)? FIRST LOOK' 20
tcheck "the footer names its rows and seed while refining" \
    'first look 800/2000 rows, 1 seed; refining' 10
# the bar: the footer's percentage after the bar's cells
if wait_for 'refining: (every row|seeds) .* +[0-9]+% +Esc cancel' 10; then
    ok "refining shows a progress bar"; else notok "refining shows a progress bar" "$(footer)"; fi
t0=$(now)
$T send-keys -t prog Escape
if wait_for 'refine cancelled; shown: first look: stratified 800 of 2000 rows, 1 seed' 3; then
    dt=$(awk -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.2f", b - a}')
    if awk -v d="$dt" 'BEGIN {exit !(d <= 1.0)}'; then ok "Esc stops the refine within 1 s ($dt s)"
    else notok "Esc stops the refine within 1 s" "took $dt s"; fi
else
    notok "Esc stops the refine within 1 s" "$(footer)"
fi
sleep 2
if footer | grep -q 'refine cancelled' && ! header | grep -q '\.\.\.' &&
    header | grep -q 'FIRST LOOK'; then ok "a cancelled refine does not start again"
else notok "a cancelled refine does not start again" "$(header)" "$(footer)"; fi

# a new change shows first, then refines again
$T send-keys -t prog +
tcheck "'+': the first look of tau 0.15" '^eldr tau 0\.15 K 4(\.\.\.)? FIRST LOOK' 15
tcheck "'+': and it refines again" 'refining' 10
# issue 30: a key pressed while a job runs is pending ('+': tau 0.20 shown
# as wanted); Esc stops the job and the pending tau is dropped, not
# started at once: what is shown (tau 0.15) stays
$T send-keys -t prog +
tcheck "a pending '+' during the refine" '^eldr tau 0\.20 K 4\.\.\.' 5
$T send-keys -t prog Escape
tcheck "Esc stops the refine with a change pending" 'refine cancelled' 3
sleep 2
if header | grep -q '^eldr tau 0\.15 K 4 FIRST LOOK' && ! header | grep -q '\.\.\.'; then
    ok "the pending tau is not started after Esc (tau 0.15 stays)"
else notok "the pending tau is not started after Esc (tau 0.15 stays)" "$(header)" "$(footer)"; fi
# view 7: the first look's grid first, labelled while the full one computes
$T send-keys -t prog 7
tcheck "view 7: the first look's grid, labelled, while the full one computes" \
    'FIRST LOOK: 800 of 2000 rows, 1 seed; refining' 60
$T send-keys -t prog Escape
tcheck "Esc in view 7 keeps the first look's grid" \
    'FIRST LOOK: 800 of 2000 rows, 1 seed; not refined \(r: the full grid\)' 5
$T send-keys -t prog q
tcheck "q quits with status 0" 'EXIT=0' 10

# refined to the end (fewer seeds): the label goes
$T send-keys -t prog clear Enter
$T send-keys -t prog "$ELDR dash $TR --rate 800 --seeds 2 --no-cache; echo EXIT=\$?" Enter
tcheck "at 2 seeds the refine lands: the header has its +-" \
    '^eldr tau 0\.10 K 4 .*p50 [0-9.]+ [-+][0-9.]+% (±|\+-)' 60
if header | grep -q 'FIRST LOOK'; then notok "refined: no FIRST LOOK" "$(header)"
else ok "refined: no FIRST LOOK"; fi
$T send-keys -t prog q
tcheck "q quits with status 0 (refined)" 'EXIT=0' 10
