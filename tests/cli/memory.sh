#!/bin/sh
# tests/cli/memory.sh - --max-memory (docs/memory.md) on fit, rho, sim and
# dash: a budget smaller than the trace opens it anyway, on a chunk sample
# the output names ("sampled N of M rows (budget B)"), exit 0, with sane
# results; the default budget samples nothing and gives the same results
# as a generous explicit one; sim's rows straight from the file equal the
# whole-trace split (--seeds with a redrawn split keeps that path); bad
# values exit 2 with one line naming the option.
. "$ROOT/tests/cli/lib.sh"

T="$TMP/t.h5"
"$ELDR" gen -o "$T" --requests 600 --layers 8 --experts 16 --top-k 2 --domains 4 \
    --seed 3 >/dev/null 2>&1
M="$TMP/m.h5"
"$ELDR" fit "$T" -k 4 -o "$M" >/dev/null 2>&1

# fit: a row costs its counts (512 B here) plus a float signature over
# every layer (512 B): 100 KiB holds about 95 of 600
expect_status "fit --max-memory 100K exits 0" 0 "$ELDR" fit "$T" -k 4 -o "$TMP/ms.h5" \
    --max-memory 100K --json
cp "$TMP/out" "$TMP/fit.json"
expect_in "fit says it sampled (stderr)" "$TMP/err" \
    "eldr fit: .*sampled [0-9]+ of 600 rows \(budget 100 KiB\), drawn as whole chunks of 64 rows"
json_assert "fit json: the sample, its rows, a model" "$TMP/fit.json" "
assert j['sample'].startswith('sampled %d of 600 rows' % j['calib_rows']), j['sample']
assert 4 <= j['calib_rows'] <= 100, j['calib_rows']
assert sum(j['sizes']) + len(j['zero_rows']) == j['calib_rows']
assert -1 <= j['rho'] <= 1"
expect_status "fit text names the sample" 0 "$ELDR" fit "$T" -k 4 -o "$TMP/ms.h5" \
    --max-memory 100K
expect_out "fit text: sampled" "^sampled [0-9]+ of 600 rows \(budget 100 KiB\)"
expect_status "fit default budget" 0 "$ELDR" fit "$T" -k 4 -o "$TMP/md.h5" --json
json_assert "fit default budget: every row, no sample" "$TMP/out" "
assert j['sample'] is None and j['calib_rows'] == 600"

# rho
expect_status "rho --max-memory 100K exits 0" 0 "$ELDR" rho "$T" --max-memory 100K
expect_out "rho says it sampled" "^rho on a chunk sample: sampled [0-9]+ of 600 rows"
expect_status "rho --json sampled" 0 "$ELDR" rho "$T" --max-memory 100K --json
json_assert "rho json: sample and a rho" "$TMP/out" "
assert j['sample'].startswith('sampled'), j
assert -1 <= j['rho'] <= 1"

# sim: the default budget simulates every evaluation row, as 1G does
expect_status "sim default budget" 0 "$ELDR" sim "$T" -m "$M" --rate 50 --json
cp "$TMP/out" "$TMP/full.json"
json_assert "sim default: all 300 evaluation rows, no sample" "$TMP/full.json" "
assert j['sample'] is None and j['requests'] == 300, (j['sample'], j['requests'])"
expect_status "sim --max-memory 1G" 0 "$ELDR" sim "$T" -m "$M" --rate 50 --json \
    --max-memory 1G
if cmp -s "$TMP/out" "$TMP/full.json"; then ok "sim: a budget that holds the trace changes nothing"
else notok "sim: a budget that holds the trace changes nothing" "$(diff "$TMP/out" "$TMP/full.json" | head -5)"; fi

# sim under a budget: 300 calibration rows take about 100 KiB of 200
expect_status "sim --max-memory 200K exits 0" 0 "$ELDR" sim "$T" -m "$M" --rate 50 --json \
    --max-memory 200K
cp "$TMP/out" "$TMP/small.json"
expect_in "sim says it sampled (stderr)" "$TMP/err" \
    "eldr sim: .*sampled [0-9]+ of 300 rows \(budget 200 KiB\)"
json_assert "sim json: a stated sample, sane results" "$TMP/small.json" "
full = json.load(open('$TMP/full.json'))
assert j['sample'] == 'sampled %d of 300 rows (budget 200 KiB)' % j['requests'], j['sample']
assert 0 < j['requests'] < 300
assert j['split']['eval_rows'] == j['requests']
for p, q in zip(j['policies'], full['policies']):
    assert p['name'] == q['name']
    assert 0.5 < p['tpot_p50_ms'] / q['tpot_p50_ms'] < 2, (p['tpot_p50_ms'], q['tpot_p50_ms'])"
expect_status "sim text names the sample" 0 "$ELDR" sim "$T" -m "$M" --rate 50 \
    --max-memory 200K
expect_out "sim text: sampled" "^sampled [0-9]+ of 300 rows \(budget 200 KiB\)"

# the whole-trace path (a split redrawn per seed) samples the trace itself
expect_status "sim --seeds 2 (no model) --max-memory 200K" 0 "$ELDR" sim "$T" --rate 50 \
    --seeds 2 --json --max-memory 200K --policy eldr,random
json_assert "sim --seeds 2: sampled of the 600 rows" "$TMP/out" "
assert j['sample'].startswith('sampled '), j['sample']
assert ' of 600 rows' in j['sample'], j['sample']"

# dash
expect_status "dash --frame --max-memory 100K exits 0" 0 "$ELDR" dash "$T" -m "$M" \
    --frame "$TMP/f.txt" --max-memory 100K --width 80 --height 24
expect_in "dash says it sampled (stderr)" "$TMP/err" "eldr dash: .*sampled [0-9]+ of 600 rows"
expect_in "dash frame written" "$TMP/f.txt" "overview"
# a budget that holds the rows but not every activation pool: the pools
# over what it leaves are sampled at each admission, said once, and the
# frame is the same as at the default budget
expect_status "dash --frame, default budget" 0 "$ELDR" dash "$T" -m "$M" --no-cache \
    --frame "$TMP/fd.txt" --width 80 --height 24
expect_status "dash --frame --max-memory 600K exits 0" 0 "$ELDR" dash "$T" -m "$M" --no-cache \
    --frame "$TMP/fp.txt" --max-memory 600K --width 80 --height 24
expect_in "dash says the pools are not kept (stderr)" "$TMP/err" \
    "eldr dash: note: .*activation pools over [0-9.]+ KiB are sampled at each admission, not kept: the budget 600 KiB leaves [0-9.]+ KiB beside the loaded rows"
expect_not_in "... and samples no row" "$TMP/err" "sampled [0-9]+ of"
if cmp -s "$TMP/fd.txt" "$TMP/fp.txt"; then ok "dash: pools sampled at admission, the same frame"
else notok "dash: pools sampled at admission, the same frame" "$(diff "$TMP/fd.txt" "$TMP/fp.txt" | head -5)"; fi
expect_status "dash --frame --max-memory 1G: no note" 0 "$ELDR" dash "$T" -m "$M" --no-cache \
    --frame "$TMP/fg.txt" --max-memory 1G --width 80 --height 24
expect_not_in "dash 1G: pools kept, no note" "$TMP/err" "activation pools"

# bad values: exit 2, one line naming the option
for v in abc 0 12Q -5 1.5G "" 99999999999T; do
    expect_fail2 "sim --max-memory '$v'" "--max-memory" "$ELDR" sim "$T" --max-memory "$v"
done
expect_fail2 "fit --max-memory x" "--max-memory: 'x' is not a byte count" \
    "$ELDR" fit "$T" -k 2 -o "$TMP/x.h5" --max-memory x
expect_fail2 "rho --max-memory 0" "--max-memory: '0' is no memory" "$ELDR" rho "$T" --max-memory 0
expect_fail2 "dash --max-memory 4X" "--max-memory" "$ELDR" dash "$T" --frame - --max-memory 4X
expect_status "suffixes: 1m, 64KiB, 2gb" 0 sh -c \
    "'$ELDR' rho '$T' --max-memory 1m >/dev/null && '$ELDR' rho '$T' --max-memory 64KiB >/dev/null && '$ELDR' rho '$T' --max-memory 2gb >/dev/null"
