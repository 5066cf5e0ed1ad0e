#!/bin/sh
# tests/cli/rooms.sh - no circles among the workbench's files (issue 30
# item 7, docs/architecture.md "Rooms"): tests/arch/rooms.py on this
# tree's headers and on the objects of this build (build/ for bin,
# build-asan/ for bin-asan): no call cycle between objects of src/core,
# src/lua, src/cli, src/repl, src/client, src/tui; no header that
# includes itself.
# Then the checker on a small tree made with each kind of circle (two
# core files that call each other, three Lua files in a ring, two
# headers that include each other), so a checker that passes everything
# fails here.
. "$ROOT/tests/cli/lib.sh"
case "$BIN" in
bin-asan) BUILDDIR=build-asan ;;
*) BUILDDIR=build ;;
esac
PY=/usr/bin/python3
$PY "$ROOT/tests/arch/rooms.py" "$ROOT" "$BUILDDIR"

B="$TMP/tree"
for d in core lua cli repl client; do mkdir -p "$B/src/$d" "$B/obj/src/$d"; done
printf 'void imp_b(void);\nvoid imp_a(void) { imp_b(); }\n' >"$B/src/core/ia.c"
printf 'void imp_a(void);\nvoid imp_b(void) { imp_a(); }\nvoid imp_c(void) {}\n' >"$B/src/core/ib.c"
printf 'void l_y(void);\nvoid l_x(void) { l_y(); }\n' >"$B/src/lua/lx.c"
printf 'void l_z(void);\nvoid l_y(void) { l_z(); }\n' >"$B/src/lua/ly.c"
printf 'void l_x(void);\nvoid l_z(void) { l_x(); }\n' >"$B/src/lua/lz.c"
printf 'void imp_c(void);\nint main(void) { imp_c(); return 0; }\n' >"$B/src/cli/m.c"
printf '#include "h2.h"\n' >"$B/src/core/h1.h"
printf '#include "h1.h"\n' >"$B/src/core/h2.h"
printf '#include "h1.h"\n' >"$B/src/core/h3.h"
for f in core/ia core/ib lua/lx lua/ly lua/lz cli/m; do
    cc -c "$B/src/$f.c" -o "$B/obj/src/$f.o" || notok "compile $f"
done
$PY "$ROOT/tests/arch/rooms.py" "$B" obj >"$TMP/bad" 2>&1
[ $? -ne 0 ] && ok "the checker fails a tree with circles" \
    || notok "the checker fails a tree with circles" "$(cat "$TMP/bad")"
expect_in "it names a two-file call cycle" "$TMP/bad" "cycle: core/ia.o <-> core/ib.o"
expect_in "it names the symbol that closes it" "$TMP/bad" "core/ib.o uses imp_a of core/ia.o"
expect_in "it names a three-file ring" "$TMP/bad" "cycle: lua/lx.o <-> lua/ly.o <-> lua/lz.o"
expect_in "it names a header cycle" "$TMP/bad" "cycle: h1.h <-> h2.h"
if grep -q "cli/m.o" "$TMP/bad"; then
    notok "a one-way call is no cycle" "$(cat "$TMP/bad")"
else ok "a one-way call is no cycle"; fi
