#!/bin/sh
# tests/cli/layers.sh - the router's floors and rooms (docs/architecture.md,
# issue 19): tests/arch/layers.py on this tree's sources and on the objects
# of this build (build/ for bin, build-asan/ for bin-asan): includes only
# from allowed floors, symbols only from allowed floors, no link cycle, b64
# in the core. Then the checker itself on a small tree made to break each
# rule, so that a checker that passes everything fails here.
. "$ROOT/tests/cli/lib.sh"
case "$BIN" in
bin-asan) BUILDDIR=build-asan ;;
*) BUILDDIR=build ;;
esac
PY=/usr/bin/python3
$PY "$ROOT/tests/arch/layers.py" "$ROOT" "$BUILDDIR"

# a broken tree: api includes a pdproxy header, engine objects call each
# other in a cycle, net calls into engine
B="$TMP/tree"
for f in base net engine api pdproxy main; do mkdir -p "$B/src/router/$f" "$B/obj/src/router/$f"; done
mkdir -p "$B/src/core" "$B/src/cli" "$B/src/lua" "$B/src/repl" "$B/src/tui" "$B/src/client"
echo 'int core_fn(void);' >"$B/src/core/core.h"
echo 'void proxy_fn(void);' >"$B/src/router/pdproxy/px.h"
printf '#include "px.h"\nvoid api_fn(void) { proxy_fn(); }\n' >"$B/src/router/api/ep.c"
printf 'void a_fn(void);\nvoid b_fn(void) { a_fn(); }\n' >"$B/src/router/engine/b.c"
printf 'void b_fn(void);\nvoid a_fn(void) { b_fn(); }\n' >"$B/src/router/engine/a.c"
printf 'void a_fn(void);\nvoid n_fn(void) { a_fn(); }\n' >"$B/src/router/net/n.c"
printf 'all:\n\techo b64\n' >"$B/Makefile"
for f in engine/a engine/b net/n; do
    cc -c "$B/src/router/$f.c" -o "$B/obj/src/router/$f.o" || notok "compile $f"
done
$PY "$ROOT/tests/arch/layers.py" "$B" obj >"$TMP/bad" 2>&1
rc=$?
[ $rc -ne 0 ] && ok "the checker fails a broken tree" || notok "the checker fails a broken tree"
expect_grep() { # NAME PATTERN
    if grep -q -- "$2" "$TMP/bad"; then ok "$1"; else notok "$1" "$(cat "$TMP/bad")"; fi
}
expect_grep "it names an include across front ends" "api includes px.h of pdproxy"
expect_grep "it names a link cycle" "cycle: engine/a.o <-> engine/b.o"
expect_grep "it names a call upward (net into engine)" "net/n.o uses a_fn of engine/a.o"
expect_grep "it names b64 outside the core" "not ok - b64 is in the core"
