#!/bin/sh
# tests/e2e/repl_context.sh - the REPL's context completion and clean
# Ctrl-C (issue 30 item 6), in a real terminal (tmux, 80x24):
#  - after `x.` / `x:` Tab offers the fields / methods of the value x holds
#    (a table, an object through its metatable's __index, a string, an
#    indexed value res[1], info["split"]) and never the globals; nothing
#    after a number or a call;
#  - Ctrl-C during a Lua loop and during a binding prints one line
#    ("eldr: interrupted", or "eldr: eldr.gen: interrupted"), no traceback;
#    at a prompt with text it clears the line, at an empty prompt it
#    gives a fresh prompt; the REPL stays alive with its variables.
. "$ROOT/tests/cli/lib.sh"
TMUX_NAME=eldr-repl-context PANE=rc
. "$ROOT/tests/e2e/tmux.inc"
trap '$T kill-server 2>/dev/null; rm -rf "$TMP"' EXIT
command -v tmux >/dev/null 2>&1 || { notok "tmux is installed"; exit 1; }

tshell 80 24 || { notok "tmux session started"; exit 1; }
$T send-keys -t "$PANE" "cd '$ROOT' && HOME='$TMP' '$ELDR' repl" Enter
tcheck "the REPL starts" "^eldr>" 10
typeline() { $T send-keys -t "$PANE" -l "$1"; $T send-keys -t "$PANE" Enter; }
# the pane's last non-empty line
last() { screen | grep -v '^$' | tail -1 | sed 's/ *$//'; }
clear_pane() { $T send-keys -t "$PANE" C-u; $T send-keys -t "$PANE" C-l; sleep 0.2; }
# tab KEYS...: type KEYS literally and press Tab twice (lists when ambiguous)
tab() { clear_pane; $T send-keys -t "$PANE" -l "$1"; $T send-keys -t "$PANE" Tab Tab; sleep 0.4; }

typeline "t = eldr.load('$DATA')"
typeline "res, info = eldr.simulate(t, {workers = 2, rate = 8, output_tokens = 16, policy = {'jsq', 'rr'}})"
typeline "s = 'abc'; n = 5; print('ready')"
tcheck "the values are made" "^ready$" 30

tab "res[1].tpot_p5"
tcheck "res[1].tpot_p5<Tab>: a field of an indexed value" "eldr> res\[1\]\.tpot_p50_ms" 3
tab "res[1].queue_"
tcheck "res[1].queue_<Tab><Tab>: its fields listed" "queue_p99_ms" 3
screen | grep -q "collectgarbage" && notok "no globals after res[1]." "$(screen | tail -6)" \
    || ok "no globals after res[1]."
tab 'info["split"].te'
tcheck 'info["split"].te<Tab>: a string-keyed index' 'eldr> info\["split"\]\.text' 3
tab "t:sel"
tcheck "t:sel<Tab>: a method through the metatable's __index" "eldr> t:select" 3
tab "s:up"
tcheck "s:up<Tab>: a string's method" "eldr> s:upper" 3
tab "eldr.rho_c"
tcheck "eldr.rho_c<Tab>: a module field" "eldr> eldr\.rho_curve" 3
tab "n.pr"
if [ "$(last)" = "eldr> n.pr" ]; then ok "n.pr<Tab> (a number): nothing, not the global print"
else notok "n.pr<Tab> (a number): nothing, not the global print" "$(screen | tail -4)"; fi
tab "eldr.load('x').in"
if [ "$(last)" = "eldr> eldr.load('x').in" ]; then ok "after a call: nothing (no code runs)"
else notok "after a call: nothing (no code runs)" "$(screen | tail -4)"; fi
tab "collectgarb"
tcheck "a bare name still completes globals" "eldr> collectgarbage" 3
clear_pane

# Ctrl-C at a prompt with text: the line is cleared, a fresh prompt
$T send-keys -t "$PANE" -l "half typed"
sleep 0.2
$T send-keys -t "$PANE" C-c
sleep 0.3
if [ "$(last)" = "eldr>" ]; then ok "Ctrl-C clears a typed line"; else
    notok "Ctrl-C clears a typed line" "$(screen | tail -4)"; fi
$T send-keys -t "$PANE" C-c
sleep 0.3
if [ "$(last)" = "eldr>" ]; then ok "Ctrl-C at an empty prompt: a fresh prompt"; else
    notok "Ctrl-C at an empty prompt: a fresh prompt" "$(screen | tail -4)"; fi
typeline "1 + 1"
tcheck "the REPL is alive after Ctrl-C at the prompt" "^2$" 3

# Ctrl-C in a running Lua loop: one line, no traceback
clear_pane
typeline "while true do end"
sleep 0.5
$T send-keys -t "$PANE" C-c
tcheck "Ctrl-C stops a Lua loop with one line" "^eldr: interrupted$" 5
sleep 0.3
screen | grep -Eq "traceback|stdin:|\[C\]" && notok "no traceback after Ctrl-C in a loop" "$(screen | tail -8)" \
    || ok "no traceback after Ctrl-C in a loop"
# ... and in a binding (eldr.gen polls the flag)
clear_pane
typeline "big = eldr.gen{requests = 20000, layers = 16, experts = 64, top_k = 4, prompt_tokens = 2000, decode_tokens = 0}"
sleep 1.5
$T send-keys -t "$PANE" C-c
# (the hook's "interrupted" or eldr.gen's own, whichever comes first)
tcheck "Ctrl-C stops eldr.gen with one line" "^eldr: (eldr\.gen: )?interrupted$" 5
sleep 0.3
screen | grep -Eq "traceback|in function" && notok "no traceback after Ctrl-C in eldr.gen" "$(screen | tail -8)" \
    || ok "no traceback after Ctrl-C in eldr.gen"
typeline "print(big == nil, #t)"
tcheck "variables intact after the interrupts" "^true\s+449$" 3
# an ordinary error still has its traceback
typeline "error('boom')"
tcheck "an ordinary error keeps its traceback" "stack traceback" 3
typeline ":quit"
tcheck "the REPL leaves" 'PROMPT\$' 5
