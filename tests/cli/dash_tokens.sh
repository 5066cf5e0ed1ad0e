#!/bin/sh
# tests/cli/dash_tokens.sh - `eldr dash` on a trace file with recorded
# decode token rows reads them from the file as its simulations admit
# requests (dash_tokens.h, docs/memory.md "The dashboard's token rows"),
# and draws exactly the frames of the same trace held whole: eldr.dash on a
# path from Lua (eldr run), which loads the trace with its token rows and
# hands it to the dashboard already loaded (the in-memory route). Both on
# the real trace (with and without -m, the refined frame; the views) and on
# a generated one with more simulated rows than a first look's 800 (the
# first look's sample copy and, without -m, the evaluation rows kept as an
# index of the whole trace). A file whose token rows are damaged after
# the load's checks fails in one line, exit 2: the CLI only meets them as
# it reads them.
. "$ROOT/tests/cli/lib.sh"
CC=${CC:-cc}
export ELDR_CACHE_DIR="$TMP/cache"

cat >"$TMP/d.lua" <<'EOF'
-- arg: trace, model or "-", "first" or "refined", view
local o = {frame = true, width = 100, height = 30, view = arg[4]}
if arg[2] ~= "-" then o.model = arg[2] end
o.first = arg[3] == "first"
io.write(eldr.dash(arg[1], o))
EOF

# same NAME TRACE MODEL|- first|refined VIEW: the CLI's frame (reader) is
# the Lua frame (rows in memory), byte for byte. The Lua run gets an empty
# cache, the CLI none: both compute.
same() {
    name=$1; tr=$2; m=$3; lvl=$4; view=$5
    set -- "$ELDR" dash "$tr" --no-cache --view "$view" --frame "$TMP/cli.txt"
    [ "$m" = - ] || set -- "$@" -m "$m"
    [ "$lvl" = first ] && set -- "$@" --first
    "$@" >/dev/null 2>"$TMP/cli.err"
    rc=$?
    rm -rf "$ELDR_CACHE_DIR"
    "$ELDR" run "$TMP/d.lua" "$tr" "$m" "$lvl" "$view" >"$TMP/lua.txt" 2>"$TMP/lua.err"
    lrc=$?
    if [ $rc -eq 0 ] && [ $lrc -eq 0 ] && [ -s "$TMP/cli.txt" ] && cmp -s "$TMP/cli.txt" "$TMP/lua.txt"
    then ok "$name"; else
        notok "$name" "exit $rc / $lrc" "$(head -c 300 "$TMP/cli.err") $(head -c 300 "$TMP/lua.err")" \
            "$(diff "$TMP/cli.txt" "$TMP/lua.txt" | head -6)"; fi
}

# ---- a generated trace: 2400 rows, 1400 simulated (> 800: a first look)
G="$TMP/g.h5"
"$ELDR" gen -o "$G" --requests 2400 --layers 4 --experts 16 --top-k 2 --domains 3 \
    --prompt-tokens 16 --decode-tokens 24 --tokens --arrival-rate 300 --seed 7 >/dev/null 2>&1
"$ELDR" fit "$G" -k 4 -o "$TMP/gm.h5" >/dev/null 2>&1
same "generated, no model, refined (eval an index of the trace)" "$G" - refined overview
same "generated, no model, first look (its sample copy)" "$G" - first overview
same "generated, -m, refined (eval kept in place)" "$G" "$TMP/gm.h5" refined heatmap
same "generated, -m, first look, heatmap" "$G" "$TMP/gm.h5" first heatmap
expect_in "the generated frames batch (routing is not moot)" "$TMP/cli.txt" "mean batch (1\.[1-9]|[2-9])"

# ---- the real trace
if [ -f "$DATA" ]; then
    "$ELDR" fit "$DATA" -k 4 -o "$TMP/m.h5" >/dev/null 2>&1
    same "real trace, no model, refined" "$DATA" - refined overview
    same "real trace, -m, refined, queues" "$DATA" "$TMP/m.h5" refined queues
    same "real trace, -m, first look, balance" "$DATA" "$TMP/m.h5" first balance
    # --max-memory prices the token rows as the readers' caches, not as
    # loaded rows: 50M holds the trace read this way (it held 284 of its 449
    # rows when they were loaded), and the frame is the default budget's
    "$ELDR" dash "$DATA" -m "$TMP/m.h5" --no-cache --frame "$TMP/full.txt" >/dev/null 2>&1
    expect_status "real trace, --max-memory 50M: exit 0" 0 "$ELDR" dash "$DATA" -m "$TMP/m.h5" \
        --no-cache --max-memory 50M --frame "$TMP/b50.txt"
    expect_not_in "... samples no row (the token rows are not loaded)" "$TMP/err" "sampled [0-9]+ of"
    expect_not_in "... and says nothing of activation pools (recorded rows are replayed, no pool)" \
        "$TMP/err" "activation pools"
    if cmp -s "$TMP/full.txt" "$TMP/b50.txt"; then ok "... the default budget's frame"
    else notok "... the default budget's frame" "$(diff "$TMP/full.txt" "$TMP/b50.txt" | head -4)"; fi
else
    ok "# SKIP the real trace is not here ($DATA)"
fi

# ---- damaged token rows: every token row's first id made bad in place
# (after the trace was written; a loader checks them, the CLI reads them
# at admission). range: the id E; dup: the id of its second pick.
cat >"$TMP/poke.c" <<'EOF'
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv)
{
    if (argc != 4)
        return 1;
    hid_t f = H5Fopen(argv[1], H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t d = f < 0 ? -1 : H5Dopen2(f, "tokens/decode_experts", H5P_DEFAULT);
    hid_t s = d < 0 ? -1 : H5Dget_space(d);
    hsize_t dims[3];
    if (s < 0 || H5Sget_simple_extent_dims(s, dims, NULL) != 3)
        return 1;
    size_t rows = (size_t)(dims[0] * dims[1]), k = (size_t)dims[2];
    unsigned short *v = malloc(rows * k * sizeof *v);
    if (!v || H5Dread(d, H5T_NATIVE_USHORT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
        return 1;
    for (size_t i = 0; i < rows; i++)
        v[i * k] = strcmp(argv[2], "range") ? v[i * k + 1] : (unsigned short)atoi(argv[3]);
    if (H5Dwrite(d, H5T_NATIVE_USHORT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
        return 1;
    free(v);
    H5Sclose(s), H5Dclose(d), H5Fclose(f);
    return 0;
}
EOF
# pkg-config's flags, else Debian's serial HDF5 (where the Makefile finds it)
HF=$(pkg-config --cflags --libs hdf5 2>/dev/null)
HF2="-I/usr/include/hdf5/serial -L/usr/lib/x86_64-linux-gnu/hdf5/serial -lhdf5"
if $CC -O1 -o "$TMP/poke" "$TMP/poke.c" $HF 2>"$TMP/cc.err" ||
    $CC -O1 -o "$TMP/poke" "$TMP/poke.c" $HF2 2>>"$TMP/cc.err"; then ok "build the HDF5 poke"
else notok "build the HDF5 poke" "$(head -c 300 "$TMP/cc.err")"; fi
for how in range dup; do
    cp "$G" "$TMP/bad.h5"
    "$TMP/poke" "$TMP/bad.h5" $how 16 || notok "poke $how"
    expect_fail2 "damaged token rows ($how), -m: one line, exit 2" \
        "^eldr dash: .*bad\.h5.*tokens/decode_experts" \
        "$ELDR" dash "$TMP/bad.h5" -m "$TMP/gm.h5" --no-cache --frame "$TMP/bad.txt"
    expect_fail2 "damaged token rows ($how), first look, no model: one line, exit 2" \
        "^eldr dash: .*bad\.h5.*tokens/decode_experts" \
        "$ELDR" dash "$TMP/bad.h5" --no-cache --first --frame "$TMP/bad.txt"
    # the loader (the in-memory route) refuses the same file when it loads it
    expect_status "damaged token rows ($how): the whole load refuses them too" 1 \
        "$ELDR" run "$TMP/d.lua" "$TMP/bad.h5" - refined overview
done
