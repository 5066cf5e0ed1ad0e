#!/bin/sh
# tests/cli/dash_progressive.sh - the dashboard's first look and its
# refinement (issue 34 item 1), and its result cache.
#
# On a 2400-request trace (1000 calibrate, 1400 simulated): --frame
# --first rests on a stratified 800 of the 1400 rows and one seed, and
# says so; the refined frame rests on every row and the seeds, and its
# numbers are those of `eldr sim --json` with the same rows, seeds and
# policies. The cache: where it lives (ELDR_CACHE_DIR, XDG_CACHE_HOME,
# HOME), never beside the trace, a hit gives the same frame (the default
# fit comes from the cache too), --no-cache
# neither reads nor writes it, a torn or edited entry is ignored with a
# note and recomputed, an unwritable cache is a note, not a failure.
. "$ROOT/tests/cli/lib.sh"
T="$TMP/trace/t.h5"
mkdir -p "$TMP/trace"
"$ELDR" gen -o "$T" --requests 2400 --layers 8 --experts 32 --top-k 4 --domains 4 \
    --decode-tokens 48 --prompt-tokens 64 --seed 5 >/dev/null 2>&1 || notok "progressive: gen"
chmod a-w "$TMP/trace"      # a read-only place: the cache must not go beside the trace
ELDR_CACHE_DIR="$TMP/cache"
export ELDR_CACHE_DIR
DASH="$ELDR dash $T --rate 800 --seeds 3 --width 100 --height 30"

# ---- the first look
$DASH --frame "$TMP/first.txt" --first --json >"$TMP/first.json" 2>"$TMP/err"
if [ $? -eq 0 ]; then ok "--first: exit 0"; else notok "--first: exit 0" "$(cat "$TMP/err")"; fi
json_assert "--first rests on 800 of the 1400 simulated rows and one seed" "$TMP/first.json" "
r = j['rests_on']
assert r['refined'] is False and r['rows'] == 800 and r['seeds'] == 1, r
assert j['sim_rows'] == 1400, j['sim_rows']
assert r['text'] == 'first look: stratified 800 of 1400 rows, 1 seed', r['text']
assert 'vs_best_baseline' not in j   # no interval from one seed"
expect_in "--first: the footer names the rows and the seed" "$TMP/first.txt" \
    'first look: stratified 800 of 1400 rows, 1 seed'
expect_in "--first: the header says FIRST LOOK" "$TMP/first.txt" '^eldr tau [0-9.]+ K 4 FIRST LOOK'
if ! ls "$TMP/cache"/dash-*.bin >/dev/null 2>&1; then ok "--first writes no results entry"; else
    notok "--first writes no results entry" "$(ls "$TMP/cache")"; fi
if ls "$TMP/cache"/fit-*.h5 "$TMP/cache"/fit-*.bin >/dev/null 2>&1; then
    ok "--first keeps the default fit"; else notok "--first keeps the default fit" "$(ls "$TMP/cache")"; fi

# ---- refined: every row, the seeds; equal to eldr sim
$DASH --frame "$TMP/ref.txt" --json >"$TMP/ref.json" 2>"$TMP/err"
if [ $? -eq 0 ]; then ok "refined frame: exit 0"; else notok "refined frame: exit 0" "$(cat "$TMP/err")"; fi
json_assert "refined frame rests on every row and 3 seeds" "$TMP/ref.json" "
r = j['rests_on']
assert r['refined'] is True and r['rows'] == 1400 and r['seeds'] == 3 and not r['from_cache'], r"
expect_not_in "refined frame: no FIRST LOOK" "$TMP/ref.txt" 'FIRST LOOK'
"$ELDR" sim "$T" --rate 800 --policy eldr,random,rr,jsq,p2c --seeds 3 --json >"$TMP/sim.json" \
    2>>"$TMP/err"
if /usr/bin/python3 - "$TMP/ref.json" "$TMP/sim.json" <<'PYEOF' 2>"$TMP/py.err"; then ok "refined frame = eldr sim --json (same rows, seeds, policies)"; else notok "refined frame = eldr sim --json (same rows, seeds, policies)" "$(tail -c 600 "$TMP/py.err")"; fi
import json, sys
d = json.load(open(sys.argv[1]))
s = json.load(open(sys.argv[2]))
assert s["requests"] == d["sim_rows"] == 1400 and s["seeds"] == d["seeds"] == 3
assert s["calib_rows"] == d["calib_rows"]
pol = {p["name"]: p for p in s["policies"]}
e = pol["eldr"]
# seed 0 of the grid is the run the views show
assert e["tpot_p50_ms_per_seed"][0] == d["current"]["tpot_p50_ms"], (e["tpot_p50_ms_per_seed"], d["current"])
assert e["served"] == d["current"]["routed"], (e["served"], d["current"]["routed"])
v = d["vs_best_baseline"]
assert abs(e["tpot_p50_ms"] - v["tpot_p50_ms"]) < 1e-9, (e["tpot_p50_ms"], v)
# the header's baseline (which one is the verdict's rule): its paired change
best = v["baseline"]
assert best in ("random", "rr", "jsq", "p2c"), best
b = pol[best]["tpot_p50_ms_per_seed"]
paired = [100 * (x - y) / y for x, y in zip(e["tpot_p50_ms_per_seed"], b)]
assert abs(sum(paired) / len(paired) - v["tpot_p50_pct"]) < 1e-6, (paired, v)
if s["baseline"] == best:
    assert abs(e["vs_baseline_tpot_p50_pct"] - v["tpot_p50_pct"]) < 1e-9
    lo, hi = e["vs_baseline_tpot_p50_pct_ci95"]
    assert abs(lo - v["tpot_p50_pct_ci95"][0]) < 1e-9 and abs(hi - v["tpot_p50_pct_ci95"][1]) < 1e-9
PYEOF
n=$(ls "$TMP/cache" | grep -c '^dash-[0-9a-f]\{64\}\.bin$')
if [ "$n" -eq 1 ]; then ok "refined: one entry in ELDR_CACHE_DIR"; else
    notok "refined: one entry in ELDR_CACHE_DIR" "$(ls -la "$TMP/cache")"; fi
if [ "$(ls -A "$TMP/trace")" = "t.h5" ]; then ok "nothing written beside the trace"; else
    notok "nothing written beside the trace" "$(ls -A "$TMP/trace")"; fi

# ---- a hit: the same frame and numbers, from the cache
$DASH --frame "$TMP/hit.txt" --json >"$TMP/hit.json" 2>"$TMP/err"
json_assert "the second open comes from the cache" "$TMP/hit.json" "
assert j['rests_on']['from_cache'] is True and j['rests_on']['refined'] is True, j['rests_on']"
if cmp -s "$TMP/ref.txt" "$TMP/hit.txt"; then ok "a cache hit draws the same frame"; else
    notok "a cache hit draws the same frame" "$(diff "$TMP/ref.txt" "$TMP/hit.txt" | head -6)"; fi
if /usr/bin/python3 -c "
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
for k in ('current', 'best_baseline', 'vs_best_baseline', 'sizes', 'K'):
    x, y = a[k], b[k]
    if k == 'vs_best_baseline':
        x = dict(x); y = dict(y); x.pop('seconds'); y.pop('seconds')
    assert x == y, (k, x, y)" "$TMP/ref.json" "$TMP/hit.json" 2>"$TMP/py.err"; then
    ok "a cache hit gives the same numbers"; else
    notok "a cache hit gives the same numbers" "$(tail -c 400 "$TMP/py.err")"; fi
# another setting is another entry
$DASH --frame "$TMP/t2.txt" --tau 0.2 --json >"$TMP/t2.json" 2>"$TMP/err"
json_assert "another tau is not a hit" "$TMP/t2.json" "
assert j['rests_on']['from_cache'] is False and j['current']['tau'] == 0.2, j['rests_on']"

# ---- a corrupt entry: ignored with a note, recomputed, written again
E=$(ls "$TMP/cache"/dash-*.bin | head -1)
for how in flip cut; do
    for f in "$TMP/cache"/dash-*.bin; do
        if [ $how = flip ]; then
            printf 'XXXX' | dd of="$f" bs=1 seek=300 conv=notrunc 2>/dev/null
        else
            head -c 150 "$f" >"$f.tmp" && mv "$f.tmp" "$f"
        fi
    done
    $DASH --frame "$TMP/c.txt" --json >"$TMP/c.json" 2>"$TMP/err"
    rc=$?
    if [ $rc -eq 0 ] && grep -q 'note: cache entry ignored (.*); recomputed: .*/dash-' "$TMP/err"; then
        ok "corrupt entry ($how): exit 0 and a note"; else
        notok "corrupt entry ($how): exit 0 and a note" "exit $rc" "$(cat "$TMP/err")"; fi
    json_assert "corrupt entry ($how): recomputed, the same numbers" "$TMP/c.json" "
r = json.load(open('$TMP/ref.json'))
assert j['rests_on']['from_cache'] is False
assert j['current'] == r['current'], (j['current'], r['current'])"
done
$DASH --frame "$TMP/c2.txt" --json >"$TMP/c2.json" 2>"$TMP/err"
json_assert "the recomputed entry is written again" "$TMP/c2.json" "
assert j['rests_on']['from_cache'] is True"
: >"$E.x"; mv "$E.x" "$E"    # an empty file
expect_status "an empty entry: exit 0" 0 $DASH --frame "$TMP/c3.txt"

# ---- the default fit's entry: a changed model file or a cut report is a
# note and a fit again, the same frame
for part in h5 bin; do
    rm -f "$TMP/cache"/dash-*.bin       # the results' entry would answer first
    for f in "$TMP/cache"/fit-*.$part; do
        if [ $part = h5 ]; then printf 'XXXX' | dd of="$f" bs=1 seek=2000 conv=notrunc 2>/dev/null
        else head -c 200 "$f" >"$f.tmp" && mv "$f.tmp" "$f"; fi
    done
    $DASH --frame "$TMP/fit.txt" 2>"$TMP/err"
    rc=$?
    # the frame's footer carries the note too: the rest is the same
    if [ $rc -eq 0 ] && grep -q 'note: cache entry ignored (.*); fitted again: .*/fit-' "$TMP/err" &&
        [ "$(head -n -1 "$TMP/ref.txt")" = "$(head -n -1 "$TMP/fit.txt")" ] &&
        tail -1 "$TMP/fit.txt" | grep -q 'cache entry '; then
        ok "a corrupt fit entry ($part): a note, fitted again, the same frame"; else
        notok "a corrupt fit entry ($part): a note, fitted again, the same frame" "exit $rc" \
            "$(cat "$TMP/err")" "$(diff "$TMP/ref.txt" "$TMP/fit.txt" | head -4)"; fi
done

# ---- --no-cache, XDG_CACHE_HOME, HOME
ELDR_CACHE_DIR="$TMP/nc" $DASH --frame "$TMP/nc.txt" --no-cache --json >"$TMP/nc.json" 2>"$TMP/err"
if [ ! -e "$TMP/nc" ]; then ok "--no-cache writes no cache"; else notok "--no-cache writes no cache" "$(ls -R "$TMP/nc")"; fi
json_assert "--no-cache reads none" "$TMP/nc.json" "assert j['rests_on']['from_cache'] is False"
if cmp -s "$TMP/ref.txt" "$TMP/nc.txt"; then ok "--no-cache: the same refined frame"; else
    notok "--no-cache: the same refined frame" "$(diff "$TMP/ref.txt" "$TMP/nc.txt" | head -6)"; fi
env -u ELDR_CACHE_DIR XDG_CACHE_HOME="$TMP/xdg" $DASH --frame "$TMP/x.txt" >/dev/null 2>&1
if ls "$TMP/xdg/eldr"/dash-*.bin >/dev/null 2>&1; then ok "XDG_CACHE_HOME/eldr holds the entry"; else
    notok "XDG_CACHE_HOME/eldr holds the entry" "$(ls -R "$TMP/xdg" 2>&1 | head -5)"; fi
env -u ELDR_CACHE_DIR -u XDG_CACHE_HOME HOME="$TMP/home" $DASH --frame "$TMP/h.txt" >/dev/null 2>&1
if ls "$TMP/home/.cache/eldr"/dash-*.bin >/dev/null 2>&1; then ok "else ~/.cache/eldr"; else
    notok "else ~/.cache/eldr" "$(ls -R "$TMP/home" 2>&1 | head -5)"; fi
# a cache that cannot be written: a note, the frame all the same
: >"$TMP/afile"
ELDR_CACHE_DIR="$TMP/afile/sub" $DASH --frame "$TMP/u.txt" >/dev/null 2>"$TMP/err"
rc=$?
if [ $rc -eq 0 ] && grep -q 'note: cache not written' "$TMP/err" && [ -s "$TMP/u.txt" ]; then
    ok "an unwritable cache: exit 0, a note, the frame"; else
    notok "an unwritable cache: exit 0, a note, the frame" "exit $rc" "$(cat "$TMP/err")"; fi

# ---- the cache is bounded: the oldest entries go first
P="$TMP/prune"
ELDR_CACHE_DIR="$P" $DASH --frame "$TMP/p1.txt" --tau 0.3 >/dev/null 2>&1
sz=$(cat "$P"/dash-*.bin | wc -c)
sleep 0.05
ELDR_CACHE_DIR="$P" ELDR_CACHE_MAX_BYTES=$((sz + sz / 2)) $DASH --frame "$TMP/p2.txt" --tau 0.35 \
    >/dev/null 2>&1
ELDR_CACHE_DIR="$P" $DASH --frame "$TMP/p3.txt" --tau 0.35 --json >"$TMP/p3.json" 2>&1
n=$(ls "$P" | grep -c '^dash-')
if [ "$n" -eq 1 ] && grep -q '"from_cache": true' "$TMP/p3.json"; then
    ok "over its bound the cache drops the oldest entry, keeps the newest"; else
    notok "over its bound the cache drops the oldest entry, keeps the newest" "$n entries" \
        "$(grep -o '"rests_on": {[^}]*}' "$TMP/p3.json")"; fi

# ---- the trace's own arrival times: the first arrivals (a draw would thin the load)
A="$TMP/arr.h5"
"$ELDR" gen -o "$A" --requests 2400 --layers 8 --experts 32 --top-k 4 --domains 4 \
    --decode-tokens 48 --prompt-tokens 64 --seed 5 --arrival-rate 200 >/dev/null 2>&1 ||
    notok "progressive: gen with arrival_s"
"$ELDR" dash "$A" --seeds 2 --frame "$TMP/a.txt" --first --json >"$TMP/a.json" 2>"$TMP/err"
json_assert "with arrival_s the first look is the first 800 arrivals" "$TMP/a.json" "
r = j['rests_on']
assert r['text'] == 'first look: the first 800 arrivals of 1400 rows, 1 seed', r['text']
assert r['rows'] == 800 and not r['refined'], r"

# ---- a trace of few rows: the first look is every row and one seed
S="$ROOT/samples/small.h5"
"$ELDR" dash "$S" --rate 800 --seeds 3 --frame "$TMP/s.txt" --first --json >"$TMP/s.json" 2>"$TMP/err"
json_assert "a small trace's first look: every row, one seed" "$TMP/s.json" "
r = j['rests_on']
assert r['refined'] is False and r['rows'] == j['sim_rows'] and r['seeds'] == 1, r
assert r['text'] == 'first look: %d rows, 1 seed' % j['sim_rows'], r['text']"

# ---- one set of runs: the refined views are the grid's seed 0 (grid.h,
# grid_seed0), not a run of their own. On a trace of few rows the first
# look is every row and one seed, run by the dashboard itself: the refined
# frame (--seeds 1, through the grid's hook) draws the same; with --seeds 3
# only the header (the intervals) differs, on one split (-m) and on a
# split redrawn per seed (no -m)
M="$TMP/small-m.h5"
"$ELDR" fit "$S" -k 4 -o "$M" >/dev/null 2>&1 || notok "progressive: fit small"
# (the queues: the runs' step logs; the heatmap: their heat matrices)
for case in "queues" "heatmap -m $M"; do
    v=${case%% *}
    mod=${case#"$v"}
    SD="$ELDR dash $S $mod --rate 800 --no-cache --view $v"
    $SD --seeds 1 --first --frame "$TMP/own-$v.txt" 2>/dev/null; a=$?
    $SD --seeds 1 --frame "$TMP/g1-$v.txt" 2>/dev/null; b=$?
    $SD --seeds 3 --frame "$TMP/g3-$v.txt" 2>/dev/null; c=$?
    name="view $v${mod:+ with -m}: the grid's seed 0 draws the dashboard's own runs"
    if [ $a -eq 0 ] && [ $b -eq 0 ] && [ $c -eq 0 ] && cmp -s "$TMP/own-$v.txt" "$TMP/g1-$v.txt" &&
        [ "$(sed 2d "$TMP/g1-$v.txt")" = "$(sed 2d "$TMP/g3-$v.txt")" ] &&
        ! cmp -s "$TMP/g1-$v.txt" "$TMP/g3-$v.txt"; then
        ok "$name"
    else
        notok "$name" "exit $a/$b/$c" "$(diff "$TMP/own-$v.txt" "$TMP/g1-$v.txt" | head -4)" \
            "$(diff "$TMP/g1-$v.txt" "$TMP/g3-$v.txt" | head -6)"
    fi
done

# ---- every view, a worker zoomed, K 8: a hit draws what the computed
# results drew (the zoom reads the per-worker arrays the entry keeps)
export ELDR_CACHE_DIR="$TMP/cache-views"
for v in overview balance heatmap queues scatter rho; do
    rm -rf "$ELDR_CACHE_DIR"
    "$ELDR" dash "$S" --rate 800 -k 8 --zoom --worker 6 --view $v --width 100 --height 40 \
        --frame "$TMP/cold-$v.txt" 2>"$TMP/err.cold"; a=$?
    "$ELDR" dash "$S" --rate 800 -k 8 --zoom --worker 6 --view $v --width 100 --height 40 \
        --frame "$TMP/warm-$v.txt" 2>"$TMP/err.warm"; b=$?
    if [ $a -eq 0 ] && [ $b -eq 0 ] && ls "$ELDR_CACHE_DIR"/dash-*.bin >/dev/null 2>&1 &&
        cmp -s "$TMP/cold-$v.txt" "$TMP/warm-$v.txt"; then
        ok "view $v, K 8, worker 6 zoomed: the cached frame is the computed one"
    else
        notok "view $v, K 8, worker 6 zoomed: the cached frame is the computed one" \
            "exit $a/$b; $(tail -2 "$TMP/err.warm"; diff "$TMP/cold-$v.txt" "$TMP/warm-$v.txt" | head -6)"
    fi
done
export ELDR_CACHE_DIR="$TMP/cache"

# ---- bad use
expect_fail2 "--first needs --frame" '--first needs --frame' "$ELDR" dash "$T" --first
expect_fail2 "--first with --attach" '--first and --no-cache apply to a trace only' \
    "$ELDR" dash --attach http://127.0.0.1:1 --first --frame -
chmod u+w "$TMP/trace"
