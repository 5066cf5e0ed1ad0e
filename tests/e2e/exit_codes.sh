#!/bin/sh
# tests/e2e/exit_codes.sh - the exit statuses README.md, `eldr --help`,
# the man pages and `eldrd --help` promise, against the binaries (issue
# 30, item 6: "Capture's dead-engine exit code is 2; the README says 3"):
#   eldr: 0 success, 2 bad input with one line on stderr (every command:
#   an unknown option, a missing file; an unknown command), 3 the server
#   does not answer (replay, push, dash --attach, capture), 1 other
#   failure (a Lua error in eldr run), and run's own statuses;
#   eldrd: 0 --help, --version and a drained SIGTERM, 2 refuses to start
#   (bad option, missing model, an address in use), one line; and the
#   particular 2s of docs/eldrd.md, dashboard.md, advise.md and replay.md.
# A port nothing listens on: a free one, closed again before it is used.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs exit_codes
dead_port; DEAD="http://127.0.0.1:$DEADPORT"

# status NAME WANT LINES CMD...: exit WANT, and (LINES = 1) one stderr line
status() {
    name=$1; want=$2; lines=$3; shift 3
    "$@" >"$TMP/out" 2>"$TMP/err" </dev/null
    got=$?
    n=$(wc -l <"$TMP/err")
    if [ "$got" -eq "$want" ] && { [ "$lines" = any ] || [ "$n" -eq "$lines" ]; }; then ok "$name"; else
        notok "$name" "exit $got (want $want), $n stderr lines (want $lines): $*" "$(head -c 300 "$TMP/err")"; fi
}

# the promise itself, where a newcomer reads it
tr '\n' ' ' <"$ROOT/README.md" | tr -s ' ' >"$TMP/readme.txt"
expect_in "README: 2 bad input, 3 a daemon or engine that does not answer, 1 other" "$TMP/readme.txt" \
    'Exit status 0 is success, 2 is bad input .* 3 is a daemon that does not answer \(`replay`, `push`, `dash --attach`; `capture` for an engine that does not answer\), 1 any other failure'
"$ELDR" --help 2>&1 | tr '\n' ' ' | tr -s ' ' >"$TMP/help.txt"
expect_in "eldr --help: 3 names replay, push, dash --attach and capture" "$TMP/help.txt" \
    '3 the server does not answer \(eldrd: replay, push, dash --attach; the engine: capture\)'

cmds=$(eldr_commands)
for c in $cmds; do
    status "eldr $c --help: 0" 0 0 "$ELDR" "$c" --help
    status "eldr $c --no-such-option: 2, one line" 2 1 "$ELDR" "$c" --no-such-option
done
for c in info rho fit sim sweep advise costfit run; do
    case $c in fit) extra="-k 2 -o $TMP/m.h5" ;; *) extra="" ;; esac
    status "eldr $c on a missing file: 2, one line" 2 1 "$ELDR" "$c" "$TMP/missing.h5" $extra
done
status "eldr with an unknown command: 2" 2 any "$ELDR" no-such-command
status "eldr --version: 0" 0 0 "$ELDR" --version

# 3: nothing answers at the address
"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" >/dev/null 2>&1
echo '{"prompt": "hello"}' >"$TMP/p.jsonl"
status "eldr replay, no daemon: 3, one line" 3 1 "$ELDR" replay "$SMALL" --to "$DEAD" --requests 2
status "eldr push, no daemon: 3, one line" 3 1 "$ELDR" push "$TMP/m.h5" --to "$DEAD" --yes
status "eldr dash --attach, no daemon: 3, one line" 3 1 "$ELDR" dash --attach "$DEAD" --frame "$TMP/f.txt"
status "eldr capture, no engine: 3, one line" 3 1 "$ELDR" capture --server "$DEAD" --prompts "$TMP/p.jsonl" \
    -o "$TMP/c.h5"
if [ ! -e "$TMP/c.h5" ]; then ok "eldr capture, no engine: nothing written"; else
    notok "eldr capture, no engine: nothing written" "$TMP/c.h5 exists"; fi

# eldr run: 1 a Lua error, 2 a script that does not compile, its own os.exit
echo 'error("boom")' >"$TMP/err.lua"
echo 'x = = 1' >"$TMP/syntax.lua"
echo 'os.exit(5)' >"$TMP/exit5.lua"
status "eldr run: a Lua error: 1" 1 any "$ELDR" run "$TMP/err.lua"
status "eldr run: a script that does not compile: 2, one line" 2 1 "$ELDR" run "$TMP/syntax.lua"
status "eldr run: the script's os.exit(5): 5" 5 0 "$ELDR" run "$TMP/exit5.lua"

# eldrd
status "eldrd --help: 0" 0 0 "$ELDRD" --help
status "eldrd --version: 0" 0 0 "$ELDRD" --version
status "eldrd --no-such-option: 2, one line" 2 1 "$ELDRD" --no-such-option
status "eldrd without -m: 2, one line" 2 1 "$ELDRD"
status "eldrd -m on a missing file: 2, one line" 2 1 "$ELDRD" -m "$TMP/missing.h5"
# and the docs' particular cases of 2 (docs/eldrd.md, dashboard.md, advise.md, replay.md)
echo '{' >"$TMP/bad.json"
status "eldrd --cost on a bad file: 2, one line (docs/eldrd.md)" 2 1 "$ELDRD" -m "$TMP/m.h5" \
    --cost "$TMP/bad.json" --listen "127.0.0.1:$(free_port)"
status "eldrd on a non-loopback address without a token: 2, one line (docs/eldrd.md)" 2 1 "$ELDRD" \
    -m "$TMP/m.h5" --listen "0.0.0.0:$(free_port)"
status "eldr dash --frame - --json: 2, one line (docs/dashboard.md)" 2 1 "$ELDR" dash "$SMALL" --frame - --json
status "eldr advise --baselines eldr-online: 2, one line (docs/advise.md)" 2 1 "$ELDR" advise "$SMALL" \
    --baselines eldr-online
if start first -m "$TMP/m.h5" --quiet; then
    status "eldrd on an address in use: 2, one line" 2 1 "$ELDRD" -m "$TMP/m.h5" --listen "127.0.0.1:$PORT" --quiet
    status "eldr push without a terminal and without --yes: 2, one line (docs/replay.md)" 2 1 \
        "$ELDR" push "$TMP/m.h5" --to "$URL"
    stop
    if [ "$RC" -eq 0 ]; then ok "eldrd: SIGTERM with nothing in progress: 0"; else
        notok "eldrd: SIGTERM with nothing in progress: 0" "exit $RC"; fi
fi
