# tests/e2e/dash_cost.sh - the cost rule in the interactive dashboard
# (tmux, a real terminal): `--policy eldr-cost` shows it in the frame (the
# header, the overview's table above the baselines, the header's numbers
# over seeds); from the default eldr, `p` cycles to eldr-cost, then on to
# random; view 7 run under eldr-cost has an eldr-cost cell per K in its
# verdict's settings; the help lists it; q quits with status 0. Every wait
# is bounded (polling capture-pane). Needs tmux and samples/small.h5.
. "$ROOT/tests/cli/lib.sh"
SAMPLE="$ROOT/samples/small.h5"
TMUX_NAME=eldr-dash-cost PANE=dash
. "$ROOT/tests/e2e/tmux.inc"

if ! command -v tmux >/dev/null 2>&1 || [ ! -f "$SAMPLE" ]; then
    notok "dash_cost e2e: tmux or $SAMPLE missing"
    exit 0
fi
cleanup() { $T kill-server 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT

start() { # start ARGS: a fresh dashboard on the sample
    # the new session first, then the old one goes: a tmux server whose
    # last session is killed exits, and a new-session can race with that
    $T new-session -d -s next -x 110 -y 40 "env PS1='PROMPT\$ ' TERM=xterm-256color sh -i" || {
        notok "dash_cost e2e: tmux new-session"; exit 0; }
    $T kill-session -t dash 2>/dev/null
    $T rename-session -t next dash
    wait_for 'PROMPT\$' 5
    $T send-keys -t dash "$ELDR dash $SAMPLE --rate 100 --seeds 3 $*; echo EXIT=\$?" Enter
}

# --policy eldr-cost: shown from the start
start --policy eldr-cost
tcheck "--policy eldr-cost: the header names it, with its numbers" \
    '^eldr-cost K 4 \| (TPOT )?p50 [0-9.]+ ?ms' 20
tcheck "--policy eldr-cost: the overview's table lists it above the baselines" \
    '^ +eldr-cost +[0-9.]+ +[0-9.]+' 10
if screen | grep -q 'one of the baselines'; then
    notok "--policy eldr-cost: not called a baseline" "$(screen | grep 'baselines')"
else ok "--policy eldr-cost: not called a baseline"; fi
# view 7 under eldr-cost: a cost cell per K, weighed by the verdict
$T send-keys -t dash 7
tcheck "view 7 under eldr-cost: a cost cell at K 4, the current one" '^.[a-zA-Z]@ +cost +4 ' 60
tcheck "view 7: the verdict counts K 4's cost cell (5 settings)" 'tok/s; m 5 \(Bonferroni\)' 5
$T send-keys -t dash '?'
tcheck "help: p cycles through eldr-cost" 'cycle the policy: eldr eldr-cost random' 5
$T send-keys -t dash q
$T send-keys -t dash q
tcheck "q quits with status 0" 'EXIT=0' 10

# the default eldr: p cycles to eldr-cost, then on to random
start
tcheck "default: eldr shown" '^eldr tau 0\.10 K 4 \| (TPOT )?p50' 20
$T send-keys -t dash p
tcheck "p: cycles to eldr-cost" '^eldr-cost K 4 \| (TPOT )?p50 [0-9.]+ ?ms' 20
tcheck "p: the overview lists eldr-cost" '^ +eldr-cost +[0-9.]+ ' 10
$T send-keys -t dash 7
tcheck "view 7 under eldr-cost after p: cost cells" '^.[a-zA-Z]@ +cost +4 ' 60
$T send-keys -t dash p
tcheck "p again: random" '^random K 4 \| (TPOT )?p50' 20
tcheck "view 7 after p leaves eldr-cost: r drops its cells" 'r: without them' 5
$T send-keys -t dash q
tcheck "q quits with status 0 again" 'EXIT=0' 10
