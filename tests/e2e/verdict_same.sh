# tests/e2e/verdict_same.sh - one verdict on every screen (issue 30, item
# 1): on the same trace and settings (K 4, tau 0, 0.05, 0.1, 0.2 - view
# 7's taus -, Poisson 60 req/s, 5 seeds, the seeded split redrawn per
# seed), `eldr advise`, eldr.advise and eldr.sweep in Lua (`eldr run
# tests/lua/verdict_words.lua`) and the interactive dashboard's view 7
# (tmux, a real terminal, captured at 80x24 and at 120x40) say the same
# words: "verdict: <head>: <reason>", where the dashboard may cut the
# reason to its two lines but never the head. samples/small.h5 gives
# "keep jsq"; the shared gpt-oss-20b trace, when present, a win ("use tau
# ..."), so both kinds of answer are compared. With one seed (no interval)
# every screen says "no verdict at K 4: one seed gives no interval: ...":
# `eldr sweep` (its default: one seed; also with a pinned split and -m),
# eldr.sweep's one-split paths (the default split, split_seed, a model)
# and view 7 of `eldr dash --seeds 1`. Every wait is bounded.
. "$ROOT/tests/cli/lib.sh"
SAMPLE="$ROOT/samples/small.h5"
TMUX_NAME=eldr-verdict PANE=dash
. "$ROOT/tests/e2e/tmux.inc"
PY=/usr/bin/python3

if ! command -v tmux >/dev/null 2>&1 || [ ! -f "$SAMPLE" ]; then
    notok "verdict_same e2e: tmux or $SAMPLE missing"
    exit 0
fi
cleanup() { $T kill-server 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT

# the CLI's verdict line and its head
cli() { # cli NAME TRACE: $TMP/NAME.cli (the line), $TMP/NAME.head
    "$ELDR" advise "$2" --rate 60 --workers 4 --tau 0,0.05,0.1,0.2 --seeds 5 >"$TMP/$1.txt" \
        2>/dev/null
    grep '^verdict: ' "$TMP/$1.txt" >"$TMP/$1.cli"
    "$ELDR" advise "$2" --rate 60 --workers 4 --tau 0,0.05,0.1,0.2 --seeds 5 --json \
        2>/dev/null | $PY -c "import json,sys; print(json.load(sys.stdin)['verdict']['head'])" \
        >"$TMP/$1.head"
    if [ -s "$TMP/$1.cli" ] && grep -qF "verdict: $(cat "$TMP/$1.head"): " "$TMP/$1.cli"; then
        ok "$1: eldr advise gives a verdict, the same in text and JSON"
    else notok "$1: eldr advise gives a verdict" "$(head -c 300 "$TMP/$1.txt")"; fi
}

# eldr.advise and eldr.sweep: the very same line
lua() { # lua NAME TRACE
    timeout 120 "$ELDR" run "$ROOT/tests/lua/verdict_words.lua" "$2" 60 5 >"$TMP/$1.lua" 2>&1
    for fn in advise sweep; do
        if grep -qxF "$fn: $(cat "$TMP/$1.cli")" "$TMP/$1.lua"; then
            ok "$1: eldr.$fn in Lua says the words of eldr advise"
        else notok "$1: eldr.$fn in Lua says the words of eldr advise" \
            "$(cat "$TMP/$1.cli")" "$(head -c 600 "$TMP/$1.lua")"; fi
    done
    if grep -q '^advise: answer [a-z]*, why [a-z_0-9]*, baselines jsq,rr,p2c, m 4$' "$TMP/$1.lua"; then
        ok "$1: Lua names the baselines and m"; else notok "$1: Lua names the baselines and m" \
            "$(cat "$TMP/$1.lua")"; fi
}

# one seed: `eldr sweep` (text and JSON) with the default split, the split
# pinned, and a model's recipe: "no verdict", the same words each time
cli_one() { # cli_one NAME TRACE MODEL
    "$ELDR" sweep "$2" --rate 60 --workers 4 --tau 0,0.05,0.1,0.2 >"$TMP/$1.txt" 2>/dev/null
    grep '^verdict: ' "$TMP/$1.txt" >"$TMP/$1.cli"
    "$ELDR" sweep "$2" --rate 60 --workers 4 --tau 0,0.05,0.1,0.2 --json 2>/dev/null |
        $PY -c "import json,sys; v=json.load(sys.stdin)['verdicts'][0]; print(v['head']); print(v['answer'], v['why'])" \
        >"$TMP/$1.json"
    head -1 "$TMP/$1.json" >"$TMP/$1.head"
    if grep -q '^verdict: no verdict at K 4: one seed gives no interval: ' "$TMP/$1.cli" &&
        [ "$(sed -n 2p "$TMP/$1.json")" = "none one_seed" ] &&
        grep -qF "verdict: $(cat "$TMP/$1.head"): " "$TMP/$1.cli"; then
        ok "$1: eldr sweep with one seed says no verdict, the same in text and JSON"
    else notok "$1: eldr sweep with one seed says no verdict" "$(cat "$TMP/$1.cli" "$TMP/$1.json")"; fi
    "$ELDR" sweep "$2" --rate 60 --workers 4 --tau 0,0.05,0.1,0.2 --split-seed 1 2>/dev/null |
        grep '^verdict: ' >"$TMP/$1.pinned"
    if cmp -s "$TMP/$1.cli" "$TMP/$1.pinned"; then ok "$1: eldr sweep --split-seed 1: the same words"
    else notok "$1: eldr sweep --split-seed 1: the same words" "$(cat "$TMP/$1.pinned")"; fi
    "$ELDR" sweep "$2" -m "$3" --rate 60 --workers 4 --tau 0,0.05,0.1,0.2 2>/dev/null |
        grep '^verdict: ' >"$TMP/$1.model"
    if grep -q '^verdict: no verdict at K 4: one seed gives no interval: ' "$TMP/$1.model"; then
        ok "$1: eldr sweep -m with one seed says no verdict"
    else notok "$1: eldr sweep -m with one seed says no verdict" "$(cat "$TMP/$1.model")"; fi
    timeout 120 "$ELDR" run "$ROOT/tests/lua/verdict_words.lua" "$2" 60 1 "$3" >"$TMP/$1.lua" 2>&1
    for p in sweep:cli sweep-pinned:cli sweep-model:model; do
        tag=${p%%:*}; want=$TMP/$1.${p#*:}
        if grep -qxF "$tag: $(cat "$want")" "$TMP/$1.lua" &&
            grep -qx "$tag: answer none, why one_seed" "$TMP/$1.lua"; then
            ok "$1: eldr.sweep ($tag) with one seed says the words of eldr sweep"
        else notok "$1: eldr.sweep ($tag) with one seed says the words of eldr sweep" \
            "$(cat "$want")" "$(head -c 600 "$TMP/$1.lua")"; fi
    done
}

# the dashboard at W x H: key 7, then the verdict's lines (up to "rule:"),
# joined, must start with the head and be a prefix of the CLI's line
dash() { # dash NAME TRACE W H [SEEDS]
    $T new-session -d -s next -x "$3" -y "$4" "env PS1='PROMPT\$ ' TERM=xterm-256color sh -i" || {
        notok "$1: tmux new-session"; return; }
    $T kill-session -t dash 2>/dev/null
    $T rename-session -t next dash
    wait_for 'PROMPT\$' 5
    $T send-keys -t dash "$ELDR dash $2 --rate 60 --seeds ${5:-5}; echo EXIT=\$?" Enter
    wait_for '1 overview' 60
    $T send-keys -t dash 7
    if ! wait_for '^ rule: beat each of ' 120; then
        notok "$1 at $3x$4: view 7 shows a verdict" "$(screen | head -12)"
        $T send-keys -t dash q; return
    fi
    screen >"$TMP/$1.$3.pane"
    if $PY - "$TMP/$1.$3.pane" "$TMP/$1.cli" "$TMP/$1.head" <<'EOF'
import sys
pane = open(sys.argv[1]).read().splitlines()
cli = open(sys.argv[2]).read().strip()
head = open(sys.argv[3]).read().strip()
i = next(k for k, l in enumerate(pane) if l.startswith(' verdict: '))
lines = []
for l in pane[i:]:
    if l.startswith(' rule: '):
        break
    lines.append(l.strip())
shown = ' '.join(lines).rstrip('\u2026').rstrip('.').rstrip()
assert shown.startswith('verdict: ' + head + ': '), (shown, head)
assert cli.startswith(shown), (shown, cli)
EOF
    then ok "$1 at $3x$4: view 7 says the words of eldr advise"
    else notok "$1 at $3x$4: view 7 says the words of eldr advise" "$(cat "$TMP/$1.cli")" \
        "$(grep -A2 '^ verdict' "$TMP/$1.$3.pane")"; fi
    if grep -q '^ rule: beat each of jsq,rr,p2c by 1.0% p50, lose <= 5.0% p99, <= 1.0% tok/s; m 4' \
        "$TMP/$1.$3.pane"; then ok "$1 at $3x$4: the baselines, margins and m on the screen"
    else notok "$1 at $3x$4: the baselines, margins and m on the screen" \
        "$(grep '^ rule' "$TMP/$1.$3.pane")"; fi
    $T send-keys -t dash q
    wait_for 'EXIT=0' 10 || notok "$1 at $3x$4: q quits with status 0" "$(screen | tail -3)"
}

# answer NAME PATTERN WHAT: the CLI's verdict is the kind expected here
answer() {
    if grep -q "$2" "$TMP/$1.cli"; then ok "$1: $3"; else notok "$1: $3" "$(cat "$TMP/$1.cli")"; fi
}

cli small "$SAMPLE"
answer small '^verdict: keep jsq at K 4: ' "ELDR slower than jsq here: keep jsq"
lua small "$SAMPLE"
dash small "$SAMPLE" 80 24
dash small "$SAMPLE" 120 40

"$ELDR" fit "$SAMPLE" -k 4 -o "$TMP/m.h5" --seed 1 >/dev/null 2>&1
cli_one one "$SAMPLE" "$TMP/m.h5"
dash one "$SAMPLE" 80 24 1

if [ -f "$DATA" ]; then
    cli real "$DATA"
    answer real '^verdict: use tau [0-9.]* at K 4: ' "a win on the shared trace"
    lua real "$DATA"
    dash real "$DATA" 80 24
else
    echo "# $DATA absent: the win case is skipped"
fi
