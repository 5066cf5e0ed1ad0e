#!/bin/sh
# tests/cli/version.sh - `eldr --version` and `eldrd --version`: one line,
# "NAME VERSION", the version being the one in src/core/version.h (also
# Lua's eldr.version), exit 0, nothing on stderr; eldrd needs no model for it.
. "$ROOT/tests/cli/lib.sh"
ELDRD="$ROOT/$BIN/eldrd"
WANT=$(sed -n 's/^#define ELDR_VERSION "\(.*\)"$/\1/p' "$ROOT/src/core/version.h")
[ -n "$WANT" ] && ok "version.h defines ELDR_VERSION ($WANT)" || notok "version.h defines ELDR_VERSION"

one_line() { # NAME WANT-LINE CMD...
    name=$1; want=$2; shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ "$rc" -eq 0 ] && [ "$(cat "$TMP/out")" = "$want" ] && [ "$(wc -l <"$TMP/out")" -eq 1 ] &&
        [ ! -s "$TMP/err" ]; then ok "$name"; else
        notok "$name" "exit $rc, stdout '$(head -c 200 "$TMP/out")', stderr '$(head -c 200 "$TMP/err")'"; fi
}
one_line "eldr --version" "eldr $WANT" "$ELDR" --version
one_line "eldr -V" "eldr $WANT" "$ELDR" -V
one_line "eldrd --version (no model needed)" "eldrd $WANT" "$ELDRD" --version
one_line "eldrd -V" "eldrd $WANT" "$ELDRD" -V
"$ELDR" --help >"$TMP/out" 2>&1
expect_out "eldr --help mentions --version" "--version"
"$ELDRD" --help >"$TMP/out" 2>&1
expect_out "eldrd --help mentions --version" "--version"
echo 'print(eldr.version)' >"$TMP/v.lua"
one_line "Lua eldr.version is the same" "$WANT" "$ELDR" run "$TMP/v.lua"
