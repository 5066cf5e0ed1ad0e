#!/bin/sh
# tests/e2e/dash_screens.sh - every view of the dashboard is usable at
# 80x24 (issue 30, item 5) and down to 40 columns, in a real terminal (tmux):
#   - offline (samples/small.h5) views 1..7 and live (--attach to an eldrd
#     proxying fake_pd.py's stand-ins, one decoder dead) views 1..8, each
#     captured at 80x24 and at 120x40 in the same session:
#     tests/e2e/screen_check.py finds no line over 80 columns, no word cut
#     without "...", and every decimal number or percentage of the 80x24
#     screen on the 120x40 one as it is (never "0.16" for 0.161); and the
#     same on --frame text at K 8 with a worker zoomed; each view also at
#     60x20 and 40x15 against its 120x40 capture, with the tab row inside
#     the width (the current view's name whole) and the help line ending
#     in "? help q quit";
#   - live at K 8 (eldrd over 8 stand-in decoders, 88 slow requests): the
#     decisions view at 80x24 shows each decision's 8 loads whole (two
#     digits among them), on its row or the line under it;
#   - request ids and worker names that share their start keep their
#     distinguishing tail: in the decisions view each row's id is the end
#     of its own, and the tables' worker names differ;
#   - the help overlay opened and closed leaves the screen as it was, and
#     while open it leaves no cut words of the view beside its box; its
#     title says "help: keys", its bottom border "? Esc q: close";
#   - the save-frame key s writes eldr-frame-NNN.txt in $ELDR_FRAME_DIR:
#     the screen as captured, the text --frame writes for the same view,
#     the name on the status line; a file already there is not touched
#     (the next number is used).
# Every wait is bounded; ~55 s (not under ASan: Makefile ASAN_SKIP).
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs dash_screens
if ! command -v tmux >/dev/null 2>&1; then notok "dash_screens: tmux missing"; exit 0; fi
TMUX_NAME=eldr-dash-screens PANE=scr
. "$ROOT/tests/e2e/tmux.inc"
trap '$T kill-server 2>/dev/null; for p in $PIDS; do kill -9 $p 2>/dev/null; done; rm -rf "$TMP"' EXIT
CHECK="$PY $ROOT/tests/e2e/screen_check.py"
mkdir -p "$TMP/frames"

# narrow_wide NAME TAB_RE: the pane at 80x24 to $TMP/NAME.80, then at
# 120x40 to $TMP/NAME.120, at 60x20 and 40x15 (the widths between 40 and
# 79 the fitting rule covers) to NAME.60 and NAME.40, back to 80x24
narrow_wide() {
    screen >"$TMP/$1.80"
    for sz in 120x40 60x20 40x15; do
        $T resize-window -t $PANE -x ${sz%x*} -y ${sz#*x}
        if [ ${sz%x*} = 120 ]; then wait_for '^ eldr dash ' 5; else wait_for '^ eldr  ' 5; fi
        wait_for "$2" 5
        sleep 0.2
        screen >"$TMP/$1.${sz%x*}"
    done
    $T resize-window -t $PANE -x 80 -y 24
    wait_for '^ eldr  ?(\[| 1)' 5 && wait_for "$2" 5
    sleep 0.3
}
# fits NAME [--skip RE]...: screen_check of NAME.80 against NAME.120
fits() {
    n=$1; shift
    if $CHECK "$TMP/$n.80" 80 "$TMP/$n.120" --skip '^ eldr ' "$@" >"$TMP/check.out" 2>&1; then
        ok "80x24 $n: fits, no word cut, numbers as at 120x40"
    else notok "80x24 $n: fits, no word cut, numbers as at 120x40" "$(head -5 "$TMP/check.out")" \
        "$(head -12 "$TMP/$n.80")"; fi
}
# fits_narrow NAME TAB [--skip RE]...: NAME.60 and NAME.40 against NAME.120
# as fits does, and the tab row fits with the current tab whole, and the
# help line ends in "? help q quit" whole
fits_narrow() {
    n=$1; tab=$2; shift 2
    for wd in 60 40; do
        if $CHECK "$TMP/$n.$wd" $wd "$TMP/$n.120" --skip '^ eldr ' "$@" >"$TMP/check.out" 2>&1 &&
            head -1 "$TMP/$n.$wd" | awk -v w=$wd 'length($0) > w { exit 1 }' &&
            head -1 "$TMP/$n.$wd" | grep -q -- "$tab" &&
            tail -1 "$TMP/$n.$wd" | grep -Eq '\? help  ?q quit'; then
            ok "$wd columns $n: fits, no word cut, numbers as at 120x40, tabs and help line whole"
        else notok "$wd columns $n: fits, no word cut, numbers as at 120x40, tabs and help line whole" \
            "$(head -5 "$TMP/check.out")" "$(cat "$TMP/$n.$wd")"; fi
    done
}
# help_clean NAME [SED]: '?' then '?' leaves the screen as it was (lines
# SED deletes left out: a live clock); while open, nothing beside the box
help_clean() {
    screen | sed "${2:-}" >"$TMP/h0"
    $T send-keys -t $PANE '?'
    wait_for 'this help \(' 5
    screen >"$TMP/hopen"
    $T send-keys -t $PANE '?'
    i=0; while screen | grep -q 'this help (' && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    sleep 0.3
    screen | sed "${2:-}" >"$TMP/h1"
    if cmp -s "$TMP/h0" "$TMP/h1"; then ok "help overlay on $1: closed, the screen is as before"
    else notok "help overlay on $1: closed, the screen is as before" "$(diff "$TMP/h0" "$TMP/h1" | head -6)"; fi
    # rows the box spans hold the box alone: blanks outside its borders
    if $PY - "$TMP/hopen" <<'PYEOF'
import sys
rows = open(sys.argv[1]).read().split("\n")
top = next(i for i, l in enumerate(rows) if "keys" in l and l.strip()[:1] in "+\u250c")
bot = next(i for i in range(top + 1, len(rows)) if rows[i].strip()[:1] in "+\u2514")
# named as what it is (the push question's box says "confirm: push to")
assert "help: keys" in rows[top] and "? Esc q: close" in rows[bot], (rows[top], rows[bot])
x = rows[top].index(rows[top].strip()[0])
for l in rows[top:bot + 1]:
    assert l[:x].strip() == "" and l.strip()[:1] in "|+\u2502\u250c\u2514", l
    assert l.rstrip()[-1] in "|+\u2502\u2510\u2518", l
PYEOF
    then ok "help overlay on $1: no cut words beside the box"
    else notok "help overlay on $1: no cut words beside the box" "$(sed -n 1,8p "$TMP/hopen")"; fi
}

# ---- offline: samples/small.h5, a terminal without colour (the frame's form)
tshell 80 24 || { notok "dash_screens: tmux new-session"; exit 0; }
$T send-keys -t $PANE "cd $TMP/frames; TERM=vt100 LANG=C ELDR_FRAME_DIR=$TMP/frames $ELDR dash $SMALL --rate 800; echo EXIT=\$?" Enter
tcheck "offline dash opens at 80x24" 'eldr tau 0\.10 K 4 p50 [0-9.]+' 20
# the header's seeds are in when the footnote says "mean ... over the 5 seeds"
tcheck "offline: the header's seeds computed" 'lowest mean TPOT p50 over the 5 seeds' 30
for v in 1:overview 2:balance 3:heatmap 4:queues 5:scatter 6:rho 7:tradeoff; do
    k=${v%%:*}; name=${v#*:}
    $T send-keys -t $PANE "$k"
    wait_for "\\[$k $name\\]" 5
    [ "$name" = tradeoff ] && wait_for ' tau +K +p50' 30
    sleep 0.3
    narrow_wide "$name" "\\[$k $name\\]"
    # the heatmap's cell under the cursor groups layers by the width
    fits "$name" --skip-numbers 'cursor L|activations here'
    fits_narrow "$name" "\[$k $name\]" --skip-numbers 'cursor L|activations here'
    help_clean "$name"
done

# save-frame: the screen, the --frame text; an existing file stays
$T send-keys -t $PANE 2
wait_for '\[2 balance\]' 5
sleep 0.3
echo mine >"$TMP/frames/eldr-frame-001.txt"
screen >"$TMP/before_s"
$T send-keys -t $PANE s
tcheck "s: the status line names the file" "frame saved: eldr-frame-002.txt \\(80x24\\) in " 5
if [ "$(cat "$TMP/frames/eldr-frame-001.txt")" = mine ]; then ok "s: an existing eldr-frame-001.txt is not overwritten"
else notok "s: an existing eldr-frame-001.txt is not overwritten" "$(head -3 "$TMP/frames/eldr-frame-001.txt")"; fi
if cmp -s "$TMP/before_s" "$TMP/frames/eldr-frame-002.txt"; then ok "s: the file is the screen"
else notok "s: the file is the screen" "$(diff "$TMP/before_s" "$TMP/frames/eldr-frame-002.txt" | head -6)"; fi
"$ELDR" dash "$SMALL" --rate 800 --view balance --frame "$TMP/bal.frame" --width 80 --height 24 2>/dev/null
if cmp -s "$TMP/bal.frame" "$TMP/frames/eldr-frame-002.txt"; then ok "s: the file is what --frame writes"
else notok "s: the file is what --frame writes" "$(diff "$TMP/bal.frame" "$TMP/frames/eldr-frame-002.txt" | head -6)"; fi
ls "$TMP/frames" | grep -v '^eldr-frame-00[12]\.txt$' >"$TMP/stray"
if [ ! -s "$TMP/stray" ]; then ok "s: no temporary left behind"; else notok "s: no temporary left behind" "$(cat "$TMP/stray")"; fi
$T send-keys -t $PANE q
tcheck "offline: q exits 0" 'EXIT=0' 10
$T kill-server 2>/dev/null

# ---- K 8, a worker zoomed: the same check on --frame text (the canvas
# the terminal shows), where the tables have twice the rows
for v in overview balance heatmap queues; do
    for sz in 80x24 120x40; do
        "$ELDR" dash "$SMALL" --rate 800 -k 8 --zoom --worker 6 --view $v --frame "$TMP/k8-$v.${sz%x*}" \
            --width ${sz%x*} --height ${sz#*x} 2>/dev/null
    done
    fits "k8-$v" --skip-numbers 'cursor L|activations here'
done

# ---- live: eldrd --proxy over stand-ins, decoder 3 dead; ids with one prefix
"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --layers all --seed 1 >/dev/null 2>&1
standins scr --prefill 1 --decode 3 --chunks 1 --chunk-gap 0 --decode-delay 0.3
dead_port; DEAD="http://127.0.0.1:$DEADPORT"
start screens -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$DC,$DEAD" --workers decode-worker-a,decode-worker-b,decode-worker-c,decode-worker-d \
    --tau 2 --eject-after 1 --eject-time 600 || exit 0
# at once, slow: the band (tau 2: every worker) spreads them onto the dead one
CURLS=""
for i in $(seq 1 12); do
    curl -s --max-time 10 -o /dev/null -X POST "$URL/v1/completions" -H 'x-request-id: batch-20261207-run-000'"$i" \
        --data "{\"prompt\": \"w$i x y\", \"max_tokens\": 2, \"slow\": true}" &
    CURLS="$CURLS $!"
done
for p in $CURLS; do wait $p; done
curl -s --max-time 10 -o "$TMP/snap.json" "$URL/v1/snapshot"
check "live fixture: 12 routed, one decoder ejected" jq_py "$TMP/snap.json" \
    "sum(w['routed'] for w in j['workers']) >= 12 and j['pool']['decode'][3]['state'] == 'ejected'"

$T new-session -d -s $PANE -x 80 -y 24 "env PS1='PROMPT\$ ' TERM=xterm-256color LANG=C.UTF-8 sh -i" &&
    wait_for 'PROMPT\$' 5 || { notok "dash_screens: tmux new-session (live)"; exit 0; }
$T send-keys -t $PANE "$ELDR dash --attach $URL --interval 0.5; echo EXIT=\$?" Enter
tcheck "live dash opens at 80x24" 'live tau [0-9.]+ K 4' 10
# the clock: a header's age, polls and uptime, an ejection's time left
LIVE_SKIP="--skip ^live --skip polled.every --skip uptime --skip ejected --skip history --skip until"
for v in 1:overview 2:balance 3:heatmap 4:queues 5:scatter 6:rho 7:decisions 8:drift; do
    k=${v%%:*}; name=${v#*:}
    $T send-keys -t $PANE "$k"
    wait_for "\\[$k $name\\]" 5
    sleep 0.3
    narrow_wide "live-$name" "\\[$k $name\\]"
    fits "live-$name" $LIVE_SKIP
    fits_narrow "live-$name" "\[$k $name\]" $LIVE_SKIP
done
# ids batch-20261207-run-0001 .. -00012: the column keeps their tails;
# a row's id is the end of its decision's request_id (the retried one
# shows twice, as it is twice in eldrd's ring)
curl -s --max-time 10 -o "$TMP/snap2.json" "$URL/v1/snapshot"
$PY - "$TMP/live-decisions.80" "$TMP/snap2.json" <<'PYEOF' >"$TMP/ids.out" 2>&1
import json, re, sys
full = {d["seq"]: d["request_id"] for d in json.load(open(sys.argv[2]))["decisions"]}
rows = [l.split()[:2] for l in open(sys.argv[1]) if re.match(r"^ +\d+ \S+ \S+ +[a-z][a-z0-9-]+ ", l)]
assert len(rows) >= 8, rows
for seq, shown in rows:
    rid = full[int(seq)]
    assert shown == rid or (shown.startswith("...") and rid.endswith(shown[3:])), (shown, rid)
assert len({s for _, s in rows}) == len({full[int(q)] for q, _ in rows}), rows
PYEOF
if [ $? -eq 0 ]; then ok "live decisions at 80x24: each id's tail kept, distinct ids look distinct"
else notok "live decisions at 80x24: each id's tail kept, distinct ids look distinct" "$(tail -2 "$TMP/ids.out")" \
    "$(sed -n 3,8p "$TMP/live-decisions.80")"; fi
# names of one fleet share their start: the tables keep their tails
for n in balance overview queues drift; do
    if $PY - "$TMP/live-$n.80" <<'PYEOF'
import re, sys
names = re.findall(r"^ +>?(\S*worker-[a-d]|\.\.\.\S*-[a-d]) ", open(sys.argv[1]).read(), re.M)
assert len(names) == 4 and len(set(names)) == 4, names
PYEOF
    then ok "live $n at 80x24: the 4 worker names differ (tails kept)"
    else notok "live $n at 80x24: the 4 worker names differ (tails kept)" "$(sed -n 3,12p "$TMP/live-$n.80")"; fi
done
$T send-keys -t $PANE 1
wait_for '\[1 overview\]' 5
help_clean "live overview" '/^live\|polled every\|uptime\|ejected\|until/d'
$T send-keys -t $PANE q
tcheck "live: q exits 0" 'EXIT=0' 10

# ---- live at K 8, 80x24: the decisions view shows every worker's load
# whole (issue: "33 33 33..." cut the other five). eldrd over 8 stand-in
# decoders, 88 slow requests at once: the loads seen reach two digits.
"$ELDR" fit "$SMALL" -k 8 -o "$TMP/m8.h5" --layers all --seed 1 >/dev/null 2>&1
standins k8 --prefill 1 --decode 8 --chunks 1 --chunk-gap 0 --decode-delay 15
start k8 -m "$TMP/m8.h5" --proxy --prefill "$PF" --decode "$DC" --tau 2 --max-conns-per-ip 200 || exit 0
CURLS=""
for i in $(seq 1 88); do
    curl -s --max-time 20 -o /dev/null -X POST "$URL/v1/completions" -H "x-request-id: k8-run-$i" \
        --data "{\"prompt\": \"w$i x y\", \"max_tokens\": 2, \"slow\": true}" &
    CURLS="$CURLS $!"
done
i=0   # every request routed (eldrd's counter), the slow ones still in flight
while [ $i -lt 100 ]; do
    curl -s --max-time 5 -o "$TMP/k8snap.json" "$URL/v1/snapshot"
    $PY -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(sum(w['routed'] for w in j['workers']) < 88)" \
        "$TMP/k8snap.json" 2>/dev/null && break
    sleep 0.1; i=$((i + 1))
done
$T new-session -d -s k8 -x 80 -y 24 "env PS1='PROMPT\$ ' TERM=xterm-256color LANG=C.UTF-8 sh -i" &&
    PANE=k8 wait_for 'PROMPT\$' 5 || { notok "dash_screens: tmux new-session (K 8)"; exit 0; }
PANE=k8
$T send-keys -t $PANE "$ELDR dash --router-snapshot $TMP/k8snap.json; echo EXIT=\$?" Enter
tcheck "K 8 snapshot opens at 80x24" 'snapshot tau [0-9.]+ K 8' 10
$T send-keys -t $PANE 7
wait_for '\[7 decisions\]' 5
sleep 0.3
screen >"$TMP/k8dec.80"
# each decision row's 8 loads, whole, on its row or the line under it, in
# the snapshot's order; two-digit loads among them; nothing over 80
$PY - "$TMP/k8dec.80" "$TMP/k8snap.json" <<'PYEOF' >"$TMP/k8.out" 2>&1
import json, re, sys
lines = open(sys.argv[1]).read().split("\n")
dec = {d["seq"]: d for d in json.load(open(sys.argv[2]))["decisions"]}
assert all(len(l) <= 80 for l in lines), [l for l in lines if len(l) > 80]
rows = [(i, int(m.group(1))) for i, l in enumerate(lines) for m in [re.match(r"^ +(\d+) \S+ ", l)] if m]
assert len(rows) >= 6, rows
two = 0
for i, seq in rows:
    loads = " ".join(str(v) for v in dec[seq]["loads"])
    assert len(dec[seq]["loads"]) == 8, dec[seq]["loads"]
    shown = lines[i] + "\n" + (lines[i + 1] if i + 1 < len(lines) else "")
    assert re.search(r"(^|[ :])" + re.escape(loads) + r"( |$)", shown, re.M), (seq, loads, shown)
    two += any(v >= 10 for v in dec[seq]["loads"])
assert two >= 1, "no two-digit loads on the screen"
print("rows", len(rows), "two-digit", two)
PYEOF
if [ $? -eq 0 ]; then ok "K 8 decisions at 80x24: every worker's load whole ($(cat "$TMP/k8.out"))"
else notok "K 8 decisions at 80x24: every worker's load whole" "$(tail -3 "$TMP/k8.out")" \
    "$(sed -n 3,12p "$TMP/k8dec.80")"; fi
$T send-keys -t $PANE q
tcheck "K 8: q exits 0" 'EXIT=0' 10
for p in $CURLS; do kill $p 2>/dev/null; done
