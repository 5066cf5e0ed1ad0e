#!/bin/sh
# tests/cli/sweep.sh - `eldr sweep` on the real gpt-oss-20b routing data:
# the grid's shape (CSV rows = K x rate x (baselines + taus)), the
# calibration split (default 1000 capped at half the trace; counts and
# fractions), K = 1 making every policy equal, determinism, the change
# column being 0 for the best balancer, a model's recipe/K/tau taken with
# -m, and the exit-2 cases.
. "$ROOT/tests/cli/lib.sh"
PY=/usr/bin/python3

json_check() { # FILE PYEXPR: j = the parsed JSON file
    $PY -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"
}
check() { # NAME COMMAND...
    n=$1; shift
    if "$@" 2>"$TMP/check.err"; then ok "$n"; else notok "$n" "$(head -c 300 "$TMP/check.err")"; fi
}

expect_status "sweep --help" 0 "$ELDR" sweep --help
expect_out "sweep --help shows usage" "usage: eldr sweep"

if [ ! -f "$DATA" ]; then
    echo "# $DATA absent: the data checks are skipped"
    exit 0
fi
FAST="--output-tokens 48 --layers all"

expect_status "sweep grid" 0 "$ELDR" sweep "$DATA" --workers 2,4 --rate 4,8 --tau 0,0.1 \
    $FAST --csv "$TMP/grid.csv"
expect_out "table header" "K +rate +policy +tau +TPOT p50 +95% CI"
expect_out "split reported" "random split .seed 1.: 224 calibration, 225 evaluation rows"
check "csv: header + 2 K x 2 rates x (3 baselines + 2 taus) rows" \
    test "$(wc -l <"$TMP/grid.csv")" -eq 21
check "csv header" grep -q '^K,rate,policy,tau,seeds,tpot_p50_ms,tpot_p50_ci95_lo,tpot_p50_ci95_hi,tpot_p99_ms,queue_p50_ms,distinct_experts_per_step,reuse,imbalance,vs_best_pct,vs_best_ci95_lo,vs_best_ci95_hi$' "$TMP/grid.csv"

"$ELDR" sweep "$DATA" --workers 2,4 --rate 4,8 --tau 0,0.1 $FAST --json >"$TMP/g.json" 2>"$TMP/g.err"
check "json keys and split" json_check "$TMP/g.json" \
    "j['calib_rows']==224 and j['eval_rows']==225 and len(j['rows'])==20 and \
     all(set(['K','rate','policy','tau','tpot_p50_ms','tpot_p99_ms','queue_p50_ms', \
     'distinct_experts_per_step','reuse','imbalance','vs_best_pct'])<=set(r) for r in j['rows'])"
check "best balancer of each cell has vs_best 0" json_check "$TMP/g.json" \
    "all(min(r['vs_best_pct'] for r in j['rows'] if r['K']==K and r['rate']==R and r['policy']!='eldr')==0 \
     for K in (2,4) for R in (4.0,8.0))"
"$ELDR" sweep "$DATA" --workers 2,4 --rate 4,8 --tau 0,0.1 $FAST --csv "$TMP/grid2.csv" >/dev/null 2>&1
check "deterministic for a seed" cmp -s "$TMP/grid.csv" "$TMP/grid2.csv"
expect_out "sweep: one verdict per K (one seed: no verdict, said so)" "^verdict: no verdict at K 4: one seed gives no interval"
expect_out "sweep: the rule, each K on its own" "^rule: a setting wins when, against every baseline .jsq,rr,p2c.*each K judged on its own"
expect_out "sweep: throughput at steady state, said" "^throughput at steady state: the first 10% of arrivals"
check "json: a verdict per K, each at its K" json_check "$TMP/g.json" \
    "[v['K'] for v in j['verdicts']]==[2,4] and all(v['answer']=='none' and v['why']=='one_seed' for v in j['verdicts'])"
# with seeds: the same rule as advise (verdict_oracle.py re-derives it)
"$ELDR" sweep "$DATA" --workers 2,4 --rate 8 --tau 0,0.1 $FAST --seeds 3 --json >"$TMP/v.json" 2>/dev/null
check "sweep --seeds 3: each K's verdict, re-derived" $PY -c "
import json, sys; sys.path.insert(0, '$ROOT/tests/cli'); import verdict_oracle
j = json.load(open('$TMP/v.json'))
for v in j['verdicts']:
    o = verdict_oracle.decide(j['rows'], v['K'])
    assert (v['answer'], v['why'], v['grid_index'], v['comparisons']) == (o['answer'], o['why'], o['row'], o['m']), (v, o)
"

"$ELDR" sweep "$DATA" --workers 1 --rate 6 --tau 0,0.1,2 $FAST --json >"$TMP/k1.json" 2>/dev/null
check "K = 1: every policy equal" json_check "$TMP/k1.json" \
    "len(set(round(r['tpot_p50_ms'],9) for r in j['rows']))==1 and all(r['vs_best_pct']==0 for r in j['rows'])"

"$ELDR" sweep "$DATA" --workers 2 --rate 4 --tau 0.1 $FAST --calib-split 100 --json >"$TMP/s.json" 2>/dev/null
check "--calib-split count" json_check "$TMP/s.json" "j['calib_rows']==100 and j['eval_rows']==349"
"$ELDR" sweep "$DATA" --workers 2 --rate 4 --tau 0.1 $FAST --calib-split 0.25 --json >"$TMP/f.json" 2>/dev/null
check "--calib-split fraction" json_check "$TMP/f.json" "j['calib_rows']==112 and j['eval_rows']==337"
"$ELDR" sweep "$DATA" --workers 3 --rate 4 --tau 0.1 $FAST --baselines domain,jsq --json >"$TMP/d.json" 2>/dev/null
check "domain baseline (labels)" json_check "$TMP/d.json" "[r['policy'] for r in j['rows']]==['domain','jsq','eldr']"

# -m: the model's K, tau and layer mask
"$ELDR" fit "$DATA" -k 3 -o "$TMP/m.h5" --layers 0,5,9 --tau 0.07 >/dev/null 2>&1
"$ELDR" sweep "$DATA" -m "$TMP/m.h5" --rate 4 $FAST --json >"$TMP/m.json" 2>/dev/null
check "-m gives K, tau and mask" json_check "$TMP/m.json" \
    "j['mask']==[0,5,9] and all(r['K']==3 for r in j['rows']) and [r['tau'] for r in j['rows'] if r['policy']=='eldr']==[0.07]"

# bad input: one line, exit 2
expect_fail2 "no --workers and no model" "--workers" "$ELDR" sweep "$DATA" --rate 4
expect_fail2 "bad tau list" "--tau" "$ELDR" sweep "$DATA" --workers 2 --rate 4 --tau 0,x
expect_fail2 "negative rate" "--rate" "$ELDR" sweep "$DATA" --workers 2 --rate -1
expect_fail2 "unknown baseline" "unknown baseline 'fifo'" "$ELDR" sweep "$DATA" --workers 2 --rate 4 --baselines fifo
expect_fail2 "bad calib split" "calib-split" "$ELDR" sweep "$DATA" --workers 2 --rate 4 --calib-split 1.5
expect_fail2 "K above the calibration rows" "exceeds" "$ELDR" sweep "$DATA" --workers 200 --rate 4 --calib-split 100
expect_fail2 "missing trace" "absent.h5" "$ELDR" sweep "$TMP/absent.h5" --workers 2 --rate 4
expect_fail2 "missing cost file" "nocost.json" "$ELDR" sweep "$DATA" --workers 2 --rate 4 --cost "$TMP/nocost.json"
expect_fail2 "unknown option" "unknown option" "$ELDR" sweep "$DATA" --bogus
