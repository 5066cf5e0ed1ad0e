# tests/e2e/dash.sh - the interactive dashboard in a real terminal (tmux):
# start, keys switch views, '+' changes the tau shown and the numbers, ']'
# refits with K+1, the help overlay, a resize redraws cleanly, 'q' quits
# leaving a sane terminal, and SIGINT (^C) restores the terminal too.
# Every wait is bounded (polling capture-pane). Needs tmux and
# samples/small.h5; prints "ok - " / "not ok - " lines.
. "$ROOT/tests/cli/lib.sh"
SAMPLE="$ROOT/samples/small.h5"
TMUX_NAME=eldr-dash-test PANE=dash
. "$ROOT/tests/e2e/tmux.inc"

if ! command -v tmux >/dev/null 2>&1 || [ ! -f "$SAMPLE" ]; then
    notok "dash e2e: tmux or $SAMPLE missing"
    exit 0
fi
cleanup() { $T kill-server 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT

header() { screen | sed -n 2p; }

$T new-session -d -s dash -x 100 -y 30 "env PS1='PROMPT\$ ' TERM=xterm-256color sh -i" || {
    notok "dash e2e: tmux new-session"; exit 0; }
wait_for 'PROMPT\$' 5
$T send-keys -t dash "$ELDR dash $SAMPLE --rate 100 --tau 0; echo EXIT=\$?" Enter
tcheck "dash starts and shows the overview" '\[1 overview\]' 15
tcheck "dash shows the headline numbers" 'p50 [0-9.]+ms' 15
# issue 14: on this sample at 100 req/s eldr at tau 0 is worse than the best baseline:
# its deltas are red (256-colour 196) and, in colour, need no words
hdr_e=$($T capture-pane -e -p -t dash | sed -n 2p)
case "$hdr_e" in
*'38;5;196m+'*) ok "header deltas are coloured (red: worse)" ;;
*) notok "header deltas are coloured (red: worse)" "$hdr_e" ;;
esac
case "$(header)" in
*worse*|*better*) notok "colour header carries no words" "$(header)" ;;
*) ok "colour header carries no words" ;;
esac

$T send-keys -t dash 2
tcheck "key 2: balance view" '\[2 balance\]'
tcheck "balance names the workers" '>w0 '
$T send-keys -t dash Tab
tcheck "Tab: heatmap view" '\[3 heatmap\]'
tcheck "heatmap has a legend" 'legend:'
# issue 14: in a 256-colour terminal the cells keep their glyphs (a text
# capture is not blank); arrows move the cell cursor and its readout
if screen | grep -Eq '^[ *]L0 +[^ ]*[.:=+*#%@-]{8}'; then ok "colour heatmap readable as text"
else notok "colour heatmap readable as text" "$(screen | sed -n 3,6p)"; fi
$T send-keys -t dash Down Down Right
tcheck "arrows move the heatmap cursor" 'cursor L2 E1' 5
tcheck "the readout gives the sample size" 'activations here; w0 served [0-9]+/[0-9]+ requests' 5
$T send-keys -t dash 6
tcheck "key 6: rho view" '\[6 rho\]'
tcheck "rho marks N*" 'N\*='

# the start's --tau 0 is a what-if change: wait until it is shown (no "...")
wait_for 'eldr tau 0\.00 K 4 \| (TPOT )?p50' 30
before=$(header)
$T send-keys -t dash +
tcheck "'+': tau shown goes to 0.05" 'eldr tau 0\.05 K 4 \| (TPOT )?p50'
wait_for 'eldr tau 0\.05 K 4 \| (TPOT )?p50' 10
after=$(header)
nb=$(echo "$before" | sed 's/^.* K [0-9]* //'); na=$(echo "$after" | sed 's/^.* K [0-9]* //')
if [ -n "$na" ] && [ "$nb" != "$na" ]; then ok "'+': the numbers change"; else
    notok "'+': the numbers change" "before: $before" "after:  $after"; fi

$T send-keys -t dash ]
tcheck "']': refit to K 5" 'tau 0\.05 K 5 \| (TPOT )?p50' 20
$T send-keys -t dash 2
tcheck "balance after refit shows w4" '^ +>?w4 '
# issue 14: the overview says a refit is one, and '[' back restores
$T send-keys -t dash 1
tcheck "overview after ']' says refitted here with K 5" 'source +refitted here with K 5'
$T send-keys -t dash '['
tcheck "'[': back to K 4" 'tau 0\.05 K 4 \| (TPOT )?p50' 20
tcheck "'[': the first fit is back in the overview" 'source +fitted here \(default recipe\)' 5
$T send-keys -t dash 2
$T send-keys -t dash '?'
tcheck "'?': help overlay" 'keys'
$T send-keys -t dash '?'
# issue 22: q in the help overlay closes the overlay, not the dashboard
$T send-keys -t dash '?'
tcheck "'?' again: help overlay" 'this help \(\?, Esc or q close it\)'
$T send-keys -t dash q
if wait_gone 'this help \(' 5 && wait_for '\[2 balance\]' 5 && ! screen | grep -q 'EXIT='; then
    ok "q in the help overlay closes it; the dashboard stays"
else notok "q in the help overlay closes it; the dashboard stays" "$(screen | head -3)"; fi
# U/step is kept at 60 columns (it is the last number of the header)
$T resize-window -t dash -x 60 -y 24
sleep 0.3
if wait_for '^eldr tau 0\.05 K 4 .* U [-+]?[0-9.]+' 5; then ok "60 columns: the header keeps U"
else notok "60 columns: the header keeps U" "$(header)"; fi

$T resize-window -t dash -x 80 -y 24
sleep 0.3
tcheck "resize: redrawn at 80 columns" '^ eldr +1 overview +\[2 balance\]' 5
lines=$(screen | wc -l)
long=$(screen | LC_ALL=C.UTF-8 sed 's/[^ -~]/x/g' | awk 'length > 80' | wc -l)
if [ "$lines" -eq 24 ] && [ "$long" -eq 0 ] && screen | tail -1 | grep -q 'help'; then
    ok "resize: 24 lines, none wider than 80, footer at the bottom"
else notok "resize: 24 lines, none wider than 80, footer at the bottom" "lines $lines, long $long"; fi
$T resize-window -t dash -x 120 -y 40
tcheck "resize up: uses the big terminal" 'distinct experts|calibration share' 5

$T send-keys -t dash q
tcheck "'q' quits with status 0" 'EXIT=0' 10
$T send-keys -t dash "stty -a | tr ' ;' '\n\n' | grep -Ex -- '-?(icanon|echo|icrnl|opost)' | tr '\n' ' '; echo STTY" Enter
wait_for 'STTY$' 5
st=$(screen | grep 'STTY$' | tail -1)
case "$st" in
*-icanon*|*-echo\ *|*-icrnl*|*-opost*) notok "terminal sane after q" "$st" ;;
*icanon*) ok "terminal sane after q" ;;
*) notok "terminal sane after q" "$st" ;;
esac

$T send-keys -t dash clear Enter
# the second start on a terminal without colour (vt100): the header's
# deltas say better / worse in words instead (issue 14)
$T send-keys -t dash "TERM=vt100 $ELDR dash $SAMPLE --rate 800; echo EXIT=\$?" Enter
tcheck "second start" ' p50 [0-9.]+' 15
tcheck "no-colour terminal: each delta says which way" 'p50 [0-9.]+(ms)? [-+][0-9.]+%( (±|\+-)[0-9.]+)? (worse|better|even) p99 .* vs (random|rr|jsq|p2c)' 5
$T send-keys -t dash C-c
tcheck "^C exits with 130" 'EXIT=130' 10
$T send-keys -t dash "stty -a | tr ' ;' '\n\n' | grep -Ex -- '-?(icanon|echo)' | tr '\n' ' '; echo STTY2" Enter
wait_for 'STTY2$' 5
st=$(screen | grep 'STTY2$' | tail -1)
case "$st" in
*-icanon*|*-echo\ *) notok "terminal sane after ^C" "$st" ;;
*icanon*) ok "terminal sane after ^C" ;;
*) notok "terminal sane after ^C" "$st" ;;
esac

# View 7: the trade-off grid computes in the background (the real trace
# at 10 seeds takes a few seconds: long enough to see the progress and
# to use another view meanwhile); Enter applies a cell; the trail keeps
# every setting applied.
TR="$DATA"; [ -f "$TR" ] || TR="$SAMPLE"
$T send-keys -t dash clear Enter
$T send-keys -t dash "$ELDR dash $TR --seeds 10; echo EXIT=\$?" Enter
tcheck "third start (trade-off), the header has its +-" 'p50 [0-9.]+ms [-+][0-9.]+% (±|\+-)[0-9.]+ p99' 30
$T send-keys -t dash 7
tcheck "key 7: trade-off view" '\[7 tradeoff\]' 5
if [ "$TR" = "$DATA" ]; then
    tcheck "trade-off shows its progress while computing" 'computing the tau x K grid' 5
    $T send-keys -t dash 2
    # the balance view is drawn while the footer still counts the grid
    if wait_for '\[2 balance\]' 2 && screen | tail -1 | grep -Eq ' 7 +([0-9]+%|fits) *$'; then
        ok "the UI answers keys while the grid computes (footer: its progress)"
    else notok "the UI answers keys while the grid computes (footer: its progress)" "$(screen | tail -1)"; fi
    $T send-keys -t dash 7
fi
tcheck "trade-off table appears when done" 'tau x K: TPOT p50 change vs each K.s best baseline' 90
tcheck "trade-off gives a verdict" '^ verdict: (use tau [0-9.]+ at K [0-9]+|keep [a-z0-9]+ at K [0-9]+|tie at K [0-9]+: keep [a-z0-9]+): ' 5
tcheck "trade-off says what its intervals cover" '^ \+-: 95% CI over 10 seeds' 5
tcheck "trade-off marks the current cell" '^>.@ +0\.10 +4 ' 5
tcheck "trade-off draws the scatter" 'gain \(y\) vs imbalance \(x\)' 5
for metric in 'TPOT p99' 'tok/s' 'TPOT p50'; do   # m cycles them, back to p50
    $T send-keys -t dash m
    tcheck "m: the cells compare on $metric" "tau x K: $metric change" 5
done
tcheck "trail starts with the opening setting" ' 1  eldr tau 0\.10  K 4 ' 5
$T send-keys -t dash j
tcheck "j moves the cursor to the next cell" '^>.  +0\.20 +4 ' 5
$T send-keys -t dash Enter
tcheck "Enter applies the cell: tau 0.20 in the header" '^eldr tau 0\.20 K 4 \| (TPOT )?p50' 30
tcheck "the applied cell joins the trail" ' 2  eldr tau 0\.20  K 4 ' 30
$T send-keys -t dash j j j j
tcheck "cursor on tau 0.20 K 8" '^>.  +0\.20 +8 ' 5
$T send-keys -t dash Enter
tcheck "Enter with another K refits: K 8 in the header" '^eldr tau 0\.20 K 8 \| (TPOT )?p50' 60
tcheck "trail: 3 settings" ' 3  eldr tau 0\.20  K 8 ' 30
$T send-keys -t dash -
tcheck "'-' appends to the trail too" ' 4  eldr tau 0\.15  K 8 ' 30
if screen | grep -q ' 2  eldr tau 0\.20  K 4 '; then ok "the trail keeps what '-' replaced"; else
    notok "the trail keeps what '-' replaced" "$(screen | grep -A5 Trail)"; fi
if [ "$TR" = "$DATA" ]; then
    $T send-keys -t dash r
    tcheck "r recomputes the grid (around K 8 now)" 'computing the tau x K grid around K 8' 5
    $T send-keys -t dash Escape
    tcheck "Esc cancels the grid" 'trade-off grid: cancelled \(r: compute again\)' 10
    $T send-keys -t dash r
    tcheck "r after a cancel computes it again" 'tau x K: TPOT p50 change' 90
    tcheck "the new grid is around K 8 (K 4, 8, 16)" '^...  +0\.20 +16 ' 5
fi
$T send-keys -t dash q
tcheck "q quits from the trade-off view" 'EXIT=0' 10

expect_status "dash --view tradeoff frame" 0 "$ELDR" dash "$SAMPLE" --frame - --view tradeoff --width 100 --height 30
expect_out "tradeoff frame is complete (table)" 'tau x K: TPOT p50 change .* 5 seeds'
expect_out "tradeoff frame has the current cell" '^>.@ +0\.10 +4 '
expect_out "tradeoff frame has the trail" 'Trail: 1 setting'
expect_status "dash --view tradeoff --json" 0 "$ELDR" dash "$SAMPLE" --rate 800 --frame "$TMP/t.txt" --view tradeoff --json
expect_out "tradeoff json has 12 cells with CIs and the Pareto flag" '"tradeoff"'
if python3 -c "import json,sys; d=json.load(open('$TMP/out')); c=d['tradeoff']['cells']; sys.exit(not (len(c)==12 and all(len(x['ci95'])==2 and len(x['p99_ci95'])==2 and len(x['tps_ci95'])==2 for x in c) and any(x['pareto'] for x in c)))" 2>/dev/null; then
    ok "tradeoff json: 12 cells, ci95 pairs for p50, p99, tok/s, a Pareto cell"; else notok "tradeoff json: 12 cells, ci95 pairs for p50, p99, tok/s, a Pareto cell" "$(head -c 300 "$TMP/out")"; fi
# issue 22, item 5: no cell worse than its baseline on the front; the
# verdict and what the intervals cover are in the JSON as on screen
if python3 -c "import json,sys; t=json.load(open('$TMP/out'))['tradeoff']; sys.exit(not (all(x['vs_best_baseline_pct'] < 0 for x in t['cells'] if x['pareto']) and t['split_redrawn'] and 'calibration split' in t['ci_covers'] and t['verdict']))" 2>/dev/null; then
    ok "tradeoff json: the front beats its baselines; verdict, ci_covers"; else notok "tradeoff json: the front beats its baselines; verdict, ci_covers" "$(head -c 300 "$TMP/out")"; fi
v=$(python3 -c "import json; print(json.load(open('$TMP/out'))['tradeoff']['verdict'])" 2>/dev/null)
if [ -n "$v" ] && grep -qF "verdict: $(printf '%s' "$v" | cut -c1-60)" "$TMP/t.txt"; then
    ok "the frame shows the JSON's verdict"; else notok "the frame shows the JSON's verdict" "$v"; fi
# at 60 req/s on the sample no setting gains 1% over the baselines
expect_status "dash --view tradeoff at 60 req/s" 0 "$ELDR" dash "$SAMPLE" --rate 60 --frame - --view tradeoff --width 100 --height 30
expect_out "verdict at 60 req/s: keep the best baseline (eldr slower)" '^ verdict: keep (rr|jsq|p2c) at K 4: no setting gains 1.0% on TPOT p50 at 60 req/s: the closest, tau'
expect_status "dash --view tradeoff --metric p99" 0 "$ELDR" dash "$SAMPLE" --rate 800 --frame - --view tradeoff --metric p99 --width 100 --height 30
expect_out "--metric p99 heads the table" 'p99 change +vs +ms imbal'
expect_status "dash --view tradeoff --metric tps" 0 "$ELDR" dash "$SAMPLE" --rate 800 --frame - --view tradeoff --metric tps --width 100 --height 30
expect_out "--metric tps heads the table" 'tok/s change +vs +tok/s imbal'
expect_fail2 "dash --metric bad" "--metric 'p90': expected p50, p99 or tps" "$ELDR" dash "$SAMPLE" --frame - --metric p90
expect_status "dash --view tradeoff --seeds 2 -k 2" 0 "$ELDR" dash "$SAMPLE" --frame - --view tradeoff -k 2 --seeds 2 --width 100 --height 30
expect_out "tradeoff around K 2: K 1, 2, 4" '0\.20 +1 .*' 
expect_out "tradeoff around K 2 has K 4" '0\.00 +4 '
expect_status "dash --attach ... --view tradeoff: an unreachable daemon is exit 3" 3 "$ELDR" dash --attach http://127.0.0.1:1 --frame - --view tradeoff
expect_fail2 "dash without a terminal fails cleanly" 'needs a terminal' "$ELDR" dash "$SAMPLE"
expect_fail2 "dash on a missing trace" 'nope\.h5' "$ELDR" dash /nope.h5 --frame -
expect_fail2 "dash --view bad" "--view 'x'" "$ELDR" dash "$SAMPLE" --frame - --view x
expect_fail2 "dash --width too small" 'width' "$ELDR" dash "$SAMPLE" --frame - --width 5
expect_fail2 "dash --cell bad" "--cell '3'" "$ELDR" dash "$SAMPLE" --frame - --cell 3
expect_status "dash --cell 3,7 --view heatmap" 0 "$ELDR" dash "$SAMPLE" --frame - --view heatmap \
    --cell 3,7 --width 100 --height 30
if grep -q 'cursor L3 E7' "$TMP/out"; then ok "--cell puts the heatmap cursor there"
else notok "--cell puts the heatmap cursor there" "$(grep cursor "$TMP/out")"; fi
expect_status "dash --help" 0 "$ELDR" dash --help
expect_out "dash --help names --frame" '--frame FILE'
expect_out "dash --help names --split" '--split MODE'
expect_out "dash --help names --seeds" '--seeds N'
expect_out "dash --help names the tradeoff view" 'tradeoff'
expect_status "dash --frame FILE" 0 "$ELDR" dash "$SAMPLE" --frame "$TMP/f.txt" --view rho --width 80 --height 24
if [ "$(wc -l <"$TMP/f.txt")" -eq 24 ] && grep -q 'N\*=' "$TMP/f.txt" && ! ls "$TMP"/f.txt.tmp.* >/dev/null 2>&1; then
    ok "frame file: 24 lines, N* marked, no temporary left"
else notok "frame file: 24 lines, N* marked, no temporary left"; fi
expect_fail2 "dash --frame - --json refused: both would be on stdout" "--frame - and --json" \
    "$ELDR" dash "$SAMPLE" --frame - --json
expect_status "dash --split head" 0 "$ELDR" dash "$SAMPLE" --frame - --split head --width 100 --height 30
expect_out "overview names the head split" 'split +head \(the first rows\): [0-9]+ calibrate'
expect_status "dash default split" 0 "$ELDR" dash "$SAMPLE" --frame - --width 100 --height 30
expect_out "overview names the random split and its seed" 'split +random \(seed 1\): [0-9]+ calibrate, [0-9]+ simulated'
expect_status "dash --split-seed 7 --calib-split 0.25" 0 "$ELDR" dash "$SAMPLE" --frame - --split-seed 7 --calib-split 0.25
expect_out "overview shows seed 7 and a quarter" 'split +random \(seed 7\): 150 calibrate, 450 simulated'
expect_status "dash header with CIs" 0 "$ELDR" dash "$SAMPLE" --frame - --width 100 --height 30 --rate 60
expect_out "header: TPOT, p99 and U/step changes with +- (5 seeds), naming the baseline" '(TPOT )?p50 [0-9.]+(ms)? [-+][0-9.]+% \+-[0-9.]+ (worse|better|even|b|w|=) p99 [0-9.]+(ms)? [-+][0-9.]+% \+-[0-9.]+ .*U(/step)? [0-9.]+ [-+][0-9.]+% \+-[0-9.]+ (worse|better|even|b|w|=) vs (random|rr|jsq|p2c)'
expect_status "dash --seeds 1" 0 "$ELDR" dash "$SAMPLE" --frame - --width 100 --height 30 --rate 60 --seeds 1
if grep -q -- '+-' "$TMP/out"; then notok "--seeds 1: no +- in the header" "$(sed -n 2p "$TMP/out")"; else ok "--seeds 1: no +- in the header"; fi
"$ELDR" fit "$SAMPLE" -k 4 -o "$TMP/self.h5" >/dev/null 2>&1
expect_status "dash -m a model fitted on this trace" 0 "$ELDR" dash "$SAMPLE" -m "$TMP/self.h5" --frame - --width 160 --height 30
expect_out "overview warns: in-sample" 'warning +in-sample: 300 of 300 simulated rows calibrated it \(all\)'
if grep -q 'warning: .*self.h5: in-sample' "$TMP/err"; then ok "stderr warns: in-sample"; else
    notok "stderr warns: in-sample" "$(cat "$TMP/err")"; fi
expect_fail2 "dash --split bad" "--split: 'x'" "$ELDR" dash "$SAMPLE" --frame - --split x
expect_fail2 "dash --seeds 0" "--seeds" "$ELDR" dash "$SAMPLE" --frame - --seeds 0
expect_fail2 "dash --attach with --split" "apply to a trace" "$ELDR" dash --attach http://127.0.0.1:1 --split head
expect_status "dash --frame --json" 0 "$ELDR" dash "$SAMPLE" --frame "$TMP/g.txt" --json
expect_out "json has the sizes and the best baseline" '"best_baseline"'

# routing that cannot matter is said, not shown as 0.0 +-0.0 (issue 22, item 4):
# the sample at its own 20 req/s decodes every request alone; make run opens
# it at 800 req/s, where batches form and the header has numbers
expect_status "dash at the sample's own rate" 0 "$ELDR" dash "$SAMPLE" --frame - --width 100 --height 30
expect_out "header: routing is moot at batch 1, and says why" '^eldr tau 0\.10 K 4 \| routing is moot: mean batch 1\.[0-4], requests decode alone'
expect_status "dash as make run opens it" 0 "$ELDR" dash "$SAMPLE" --rate 800 --frame - --width 100 --height 30
expect_out "header at 800 req/s: changes with +-" '^eldr tau 0\.10 K 4 (\| )?p50 [0-9.]+(ms)? [-+][0-9.]+% \+-'
if grep -q 'RUN_RATE := 800' "$ROOT/Makefile" && grep -q 'dash $(SAMPLE) --rate $(RUN_RATE)' "$ROOT/Makefile"; then
    ok "make run opens the sample at 800 req/s"; else notok "make run opens the sample at 800 req/s"; fi

# issue 22, item 7: layout and wording at 100 columns. The heatmap's side
# panel ends inside the frame (its last words are there, not clipped);
# the scatter's legend is wrapped into its column; members are letters
# on a monochrome canvas; K 1 and "balanced" say what they mean.
expect_status "heatmap at 100 columns" 0 "$ELDR" dash "$SAMPLE" --rate 800 --frame - --view heatmap --width 100 --height 30
expect_out "heatmap side panel: its batch line whole" ' batch [0-9.]+; under 1: reuse$'
expect_out "heatmap side panel: the legend's top value whole" ' [0-9]\.[0-9][0-9]$'
expect_out "heatmap marks the signature's layers in words" 'blank: unused; \*: signature layer'
expect_status "scatter at 100 columns" 0 "$ELDR" dash "$SAMPLE" --rate 800 --frame - --view scatter --width 100 --height 30
expect_out "scatter legend wrapped into its column" '\| centroid$'
expect_out "scatter members are letters (monochrome)" '^\|.* [abcd]{3,}'
expect_status "overview with K 1" 0 "$ELDR" dash "$SAMPLE" --rate 800 -k 1 --frame - --width 100 --height 30
expect_out "K 1 is one worker" '  K +1 worker \(w0\); balanced fit: at most ceil\(300/1\) = 300 each'
expect_status "overview with K 4" 0 "$ELDR" dash "$SAMPLE" --rate 800 --frame - --width 100 --height 30
expect_out "balanced says its cap and the sizes" '  K +4 workers \(w0 \.\.\. w3\); balanced fit: at most ceil\(300/4\) = 75 each, sizes 75'
hdr_base=$(sed -n 2p "$TMP/out" | sed -n 's/.* vs \([a-z0-9]*\)$/\1/p')
if [ -n "$hdr_base" ] && grep -Eq "^   $hdr_base \*" "$TMP/out"; then
    ok "the overview's star and the header name one baseline ($hdr_base)"
else notok "the overview's star and the header name one baseline" "$(sed -n 2p "$TMP/out")" "$(grep '\*' "$TMP/out")"; fi

# issue 22, item 4: make run's sample batches (mean batch well above 1 at
# RUN_RATE), and settings where routing cannot matter are said in words
expect_status "heatmap as make run opens it" 0 "$ELDR" dash "$SAMPLE" --rate 800 --frame - --view heatmap --width 100 --height 30
mb=$(sed -n 's/.* batch \([0-9.]*\); under 1: reuse$/\1/p' "$TMP/out" | head -1)
if [ -n "$mb" ] && awk "BEGIN { exit !($mb >= 5) }"; then ok "make run's sample: mean batch $mb (>= 5)"
else notok "make run's sample: mean batch >= 5" "got '$mb'"; fi
expect_status "dash -k 1" 0 "$ELDR" dash "$SAMPLE" --rate 800 -k 1 --frame - --width 100 --height 30
expect_out "K 1: the header says routing is moot" '^eldr tau 0\.10 K 1 \| routing is moot: '
expect_status "dash --tau 2" 0 "$ELDR" dash "$SAMPLE" --rate 800 --tau 2 --frame - --width 100 --height 30
expect_out "tau 2: the header says ELDR is a balancer" '^eldr tau 2\.00 K 4 \| tau 2\.00: the band holds every worker, ELDR is join-shortest-queue'
