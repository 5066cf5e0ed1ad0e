#!/bin/sh
# tests/cli/lua_insample.sh - eldr.simulate on a model's own calibration
# rows warns once on stderr (issue 30 item 6; the fields are checked by
# tests/lua/test_insample.lua): a model fitted by `eldr fit` on the same
# file (its SHA-256 and calib_split, insample.h) and a model fitted in
# Lua on the very Trace. Held-out rows (eldr fit --calib-split, the
# simulation on the other rows) and baselines-only runs stay silent.
. "$ROOT/tests/cli/lib.sh"
"$ELDR" fit "$DATA" -k 2 --layers all -o "$TMP/all.h5" >/dev/null 2>&1 \
    || notok "eldr fit on all rows"
"$ELDR" fit "$DATA" -k 2 --layers all --calib-split 200 --split head -o "$TMP/head.h5" \
    >/dev/null 2>&1 || notok "eldr fit on the head 200 rows"
cat >"$TMP/s.lua" <<'LUA'
local t = eldr.load(arg[1])
local m = eldr.load_model(arg[2])
local o = {model = m, rate = 8, output_tokens = 16, policy = arg[3] == "base" and {"jsq"} or nil}
if arg[3] == "tail" then o.split = "head"; o.calib_split = 200 end
if arg[3] == "lua" then m = eldr.fit(t, {k = 2, layers = "all"}); o.model = m end
local res, info = eldr.simulate(t, o)
if arg[3] == "twice" then res, info = eldr.simulate(t, o) end
print(string.format("in_sample=%s rows=%s eval=%d", tostring(info.in_sample),
                    tostring(info.in_sample_rows), info.eval_rows))
LUA
run() { "$ELDR" run "$TMP/s.lua" "$DATA" "$@" >"$TMP/out" 2>"$TMP/err"; }
check() { # NAME WANT_OUT WANT_WARNINGS
    n=$(grep -c 'warning: .*in-sample' "$TMP/err")
    if grep -q -- "$2" "$TMP/out" && [ "$n" -eq "$3" ]; then ok "$1"; else
        notok "$1" "out: $(cat "$TMP/out")" "stderr ($n warnings, want $3): $(head -c 400 "$TMP/err")"
    fi
}
run "$TMP/all.h5" whole
check "eldr fit on all rows, simulated on all: in-sample, one warning" \
    "in_sample=true rows=449 eval=449" 1
grep -q "449 of the 449 simulated rows are the model's own calibration rows" "$TMP/err" \
    && ok "the warning counts the rows" || notok "the warning counts the rows" "$(cat "$TMP/err")"
run "$TMP/head.h5" whole
check "eldr fit on the head 200, simulated on all 449: partly in-sample" \
    "in_sample=true rows=200 eval=449" 1
grep -q "partly in-sample" "$TMP/err" && ok "it says partly" || notok "it says partly" "$(cat "$TMP/err")"
run "$TMP/head.h5" tail
check "eldr fit on the head 200, simulated on the other 249: silent" \
    "in_sample=false rows=nil eval=249" 0
run "$TMP/all.h5" base
check "baselines only: silent" "in_sample=false" 0
run "$TMP/all.h5" twice
check "the same model on the same trace twice: one warning" "in_sample=true rows=449" 1
run "$TMP/head.h5" lua
check "eldr.fit on the Trace, simulated on it: one warning" "in_sample=true rows=449" 1
