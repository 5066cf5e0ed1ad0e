#!/bin/sh
# tests/lua/run.sh - the Lua tests: every tests/lua/test_*.lua and every
# samples/*.lua, each run by `$BIN/eldr run`. Test files print their own
# "ok - " / "not ok - " lines; a sample counts as one check (exit 0 and
# some output). A script that dies is reported as "not ok".
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${BIN:-bin}
ELDR="$ROOT/$BIN/eldr"
DATA="$ROOT/../shared/data/gptoss20b-routing.h5"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$ROOT" || exit 2

for t in tests/lua/test_*.lua; do
    name=$(basename "$t" .lua)
    mkdir -p "$TMP/$name"
    timeout 300 "$ELDR" run "$t" "$DATA" "$TMP/$name" "$ROOT" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    cat "$TMP/out"
    if [ "$rc" -ne 0 ] && ! grep -q '^not ok - ' "$TMP/out"; then
        echo "not ok - $name exited $rc"
        sed 's/^/#   /' "$TMP/err" | head -20
    fi
done

# samples: small arguments so that the whole set stays quick
for s in samples/*.lua; do
    [ -f "$s" ] || continue
    name=$(basename "$s" .lua)
    if timeout 300 "$ELDR" run "$s" "$DATA" "$TMP" >"$TMP/out" 2>"$TMP/err" && [ -s "$TMP/out" ]; then
        echo "ok - sample $name"
    else
        echo "not ok - sample $name"
        sed 's/^/#   /' "$TMP/err" | head -20
    fi
done
