#!/bin/sh
# tests/lua/run.sh - the Lua tests: every tests/lua/test_*.lua and every
# samples/*.lua, each run by `$BIN/eldr run`. Test files print their own
# "ok - " / "not ok - " lines; a sample counts as one check (exit 0 and
# some output). A script that dies is reported as "not ok". LUA_SKIP
# names test files not to run (`make asan`: the three that run whole
# simulations, fits and the samples again; printed as skipped).
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${BIN:-bin}
ELDR="$ROOT/$BIN/eldr"
DATA="$ROOT/../shared/data/gptoss20b-routing.h5"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$ROOT" || exit 2

for t in tests/lua/test_*.lua; do
    name=$(basename "$t" .lua)
    case " $LUA_SKIP " in *" $name "*) echo "# skip $name (LUA_SKIP)"; continue ;; esac
    mkdir -p "$TMP/$name"
    timeout 300 "$ELDR" run "$t" "$DATA" "$TMP/$name" "$ROOT" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    cat "$TMP/out"
    if [ "$rc" -ne 0 ] && ! grep -q '^not ok - ' "$TMP/out"; then
        echo "not ok - $name exited $rc"
        sed 's/^/#   /' "$TMP/err" | head -20
    fi
done

# samples on the shared trace with their own defaults (arg[1] is the
# trace, as `eldr run` fills arg); test_samples.lua checks their output
for s in samples/*.lua; do
    [ -f "$s" ] || continue
    name=$(basename "$s" .lua)
    if timeout 300 "$ELDR" run "$s" "$DATA" >"$TMP/out" 2>"$TMP/err" && [ -s "$TMP/out" ]; then
        echo "ok - sample $name"
    else
        echo "not ok - sample $name"
        sed 's/^/#   /' "$TMP/err" | head -20
    fi
done

# the `run` and `repl` subcommands themselves
check() { if [ "$1" = 0 ]; then echo "ok - $2"; else echo "not ok - $2"; fi; }
"$ELDR" run --help >"$TMP/out" 2>&1
check $? "eldr run --help exits 0"
grep -q "usage: eldr run" "$TMP/out"; check $? "eldr run --help prints usage"
"$ELDR" repl --help >"$TMP/out" 2>&1
check $? "eldr repl --help exits 0"
for case in "none" "missing" "syntax" "option"; do
    case $case in
        none) "$ELDR" run >"$TMP/out" 2>"$TMP/err" ;;
        missing) "$ELDR" run "$TMP/nope.lua" >"$TMP/out" 2>"$TMP/err" ;;
        syntax) printf 'x = = 1\n' >"$TMP/bad.lua"; "$ELDR" run "$TMP/bad.lua" >"$TMP/out" 2>"$TMP/err" ;;
        option) "$ELDR" run --frobnicate >"$TMP/out" 2>"$TMP/err" ;;
    esac
    rc=$?
    [ "$rc" -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ]
    check $? "eldr run, $case: exit 2 with one stderr line"
done
printf 'local function f() error("boom") end\nf()\n' >"$TMP/boom.lua"
"$ELDR" run "$TMP/boom.lua" >"$TMP/out" 2>"$TMP/err"
[ $? -eq 1 ] && grep -q "boom" "$TMP/err" && grep -q "stack traceback" "$TMP/err"
check $? "eldr run: a runtime error prints a traceback, exit 1"
printf 'print(arg[0], arg[1], arg[2], select("#", ...))\n' >"$TMP/args.lua"
out=$("$ELDR" run "$TMP/args.lua" a b)
[ "$out" = "$(printf '%s\ta\tb\t2' "$TMP/args.lua")" ]
check $? "eldr run: arg and ... as in lua"
printf 'print(require("eldr") == eldr)\n' | "$ELDR" run - >"$TMP/out" 2>&1
grep -q true "$TMP/out"; check $? "eldr run -: script from stdin"
"$ELDR" repl --bogus >"$TMP/out" 2>"$TMP/err"
[ $? -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ]
check $? "eldr repl, bad option: exit 2 with one stderr line"

# Ctrl-C stops eldr.advise's grid (its threads poll the cancel flag):
# a grid of minutes ends within seconds of SIGINT
printf 'local t = eldr.load(arg[1])\nio.write("started\\n"); io.flush()\neldr.advise(t, {rate = 60, seeds = 400})\nprint("finished")\n' >"$TMP/int.lua"
"$ELDR" run "$TMP/int.lua" "$DATA" >"$TMP/int.out" 2>"$TMP/int.err" &
pid=$!
n=0
while [ "$n" -lt 100 ] && ! grep -q started "$TMP/int.out" 2>/dev/null; do sleep 0.1; n=$((n + 1)); done
sleep 1
kill -INT "$pid" 2>/dev/null
n=0
while [ "$n" -lt 50 ] && kill -0 "$pid" 2>/dev/null; do sleep 0.1; n=$((n + 1)); done
if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"; wait "$pid" 2>/dev/null
    echo "not ok - Ctrl-C stops eldr.advise within 5 s"
else
    wait "$pid"
    rc=$?
    [ "$rc" -eq 1 ] && grep -q interrupted "$TMP/int.err" && ! grep -q finished "$TMP/int.out"
    check $? "Ctrl-C stops eldr.advise within 5 s"
fi
