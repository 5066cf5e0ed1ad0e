# tests/cli/valgrind.sh - a few commands under valgrind's memcheck: no
# invalid access, no definite leak (the promise is "valgrind-clean"; the
# Lua scripts and eldrd were checked by hand, see docs/reliability.md).
# Skipped under the ASan build, which valgrind cannot run.
. "$ROOT/tests/cli/lib.sh"
SAMPLE="$ROOT/samples/small.h5"
case "$BIN" in *asan*) echo "# skipped under ASan"; exit 0 ;; esac
if ! command -v valgrind >/dev/null 2>&1; then
    notok "valgrind is installed (make deps)"; exit 0
fi
VG="valgrind -q --leak-check=full --errors-for-leak-kinds=definite --error-exitcode=9"

vg() { # NAME WANT CMD...: exit WANT under memcheck (9 = an error), nothing reported
    name=$1; want=$2; shift 2
    timeout 300 $VG "$@" >"$TMP/vg.out" 2>"$TMP/vg.err"
    rc=$?
    if [ "$rc" -eq "$want" ] && ! grep -q '^==[0-9]*==' "$TMP/vg.err"; then ok "valgrind: $name"; else
        notok "valgrind: $name" "exit $rc" "$(grep '^==' "$TMP/vg.err" | head -20)"; fi
}

vg "info" 0 "$ELDR" info "$SAMPLE"
vg "fit -o" 0 "$ELDR" fit "$SAMPLE" -k 4 -o "$TMP/m.h5"
vg "sim" 0 "$ELDR" sim "$SAMPLE" -m "$TMP/m.h5" --policy eldr,rr,jsq
vg "model export" 0 "$ELDR" model export "$TMP/m.h5" -o "$TMP/m.json"
vg "gen --tokens --prefix-groups" 0 "$ELDR" gen -o "$TMP/p.h5" --requests 50 --layers 4 \
    --experts 16 --top-k 2 --prefix-groups 3 --prefix-blocks 2 --tokens
vg "run a Lua script" 0 "$ELDR" run "$ROOT/tests/lua/test_kmeans.lua"
vg "Lua seeds, advise, progress errors" 0 "$ELDR" run "$ROOT/tests/lua/vg_seeds.lua" "$SAMPLE"
FIX="$ROOT/tests/fixtures/import"
vg "info of the reference's capture (.npz in memory)" 0 "$ELDR" info "$FIX/good_reference.npz"
vg "import of proxy frames" 0 "$ELDR" import "$FIX/good_capture.frames" --top-k 2 --layers 3 \
    --experts 8 -o "$TMP/frames.h5"
"$ELDR" model export "$TMP/m.h5" -o "$TMP/r.json" >/dev/null
vg "import of a fit JSON, top-k from a trace" 0 "$ELDR" model import "$TMP/r.json" \
    --trace "$SAMPLE" -o "$TMP/r.h5"
vg "a refused capture (the exit-2 path)" 2 "$ELDR" import "$FIX/bad_gate_sum.npz" -o "$TMP/x.h5"
printf 'neither a trace nor a model\n' >"$TMP/junk.h5"
vg "a bad file (the exit-2 path)" 2 "$ELDR" info "$TMP/junk.h5"
