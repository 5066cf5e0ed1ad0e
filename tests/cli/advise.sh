#!/bin/sh
# tests/cli/advise.sh - `eldr advise` and the honest-number options it
# shares with sim and sweep, on the real gpt-oss-20b routing data:
#   the recommendation is a grid row, and it follows the documented rule
#   (re-derived here in Python from the grid's own rows and CIs);
#   the CIs match Student's t over the per-seed values (scipy oracle);
#   an honest "keep the baseline" when ELDR cannot win (K = 1);
#   results independent of --threads; the sentence and JSON keys; exit 2.
. "$ROOT/tests/cli/lib.sh"
PY=/usr/bin/python3

expect_status "advise --help" 0 "$ELDR" advise --help
expect_out "advise --help: usage" "usage: eldr advise"
expect_out "advise --help: --seeds" "--seeds N"
expect_out "advise --help: --split" "--split MODE"

if [ ! -f "$DATA" ]; then
    echo "# $DATA absent: the data checks are skipped"
    exit 0
fi

ARGS="--rate 60 --tau 0,0.1,0.2 --workers 4,8 --seeds 4"
"$ELDR" advise "$DATA" $ARGS --json >"$TMP/a.json" 2>"$TMP/a.err"
json_assert "advise: json keys" "$TMP/a.json" "
rec = j['recommendation']
for k in ('policy','tau','workers','rate','tpot_p50_ms','vs_best_baseline_pct','ci95','sentence'):
    assert k in rec, k
assert len(j['grid']) == 2 * (3 + 3), len(j['grid'])
assert j['seeds'] == 4 and j['split']['mode'] == 'random' and j['split']['seed'] == 1
assert j['split']['calib_rows'] == 224 and j['split']['eval_rows'] == 225
for r in j['grid']:
    for k in ('policy','tau','workers','rate','tpot_p50_ms','tpot_p50_ms_ci95','vs_best_pct','vs_best_pct_ci95'):
        assert k in r, k"
json_assert "advise: the recommendation is a grid row" "$TMP/a.json" "
rec = j['recommendation']; g = j['grid'][rec['grid_index']]
assert (g['policy'], g['tau'], g['workers'], g['rate']) == (rec['policy'], rec['tau'], rec['workers'], rec['rate'])
assert g['tpot_p50_ms'] == rec['tpot_p50_ms'] and g['vs_best_pct'] == rec['vs_best_baseline_pct']
assert (rec['tau'] is None) == (rec['policy'] != 'eldr')"
json_assert "advise: CIs are Student t over the seeds" "$TMP/a.json" "
from scipy import stats
import math
for r in j['grid']:
    x = r['tpot_p50_ms_per_seed']; n = len(x); m = sum(x) / n
    s = math.sqrt(sum((v - m) ** 2 for v in x) / (n - 1))
    h = stats.t.ppf(0.975, n - 1) * s / math.sqrt(n)
    lo, hi = r['tpot_p50_ms_ci95']
    assert abs(m - r['tpot_p50_ms']) < 1e-6 and abs(lo - (m - h)) < 2e-3 * max(h, 1e-9) + 1e-6, (lo, m - h)"
json_assert "advise: the rule, re-derived" "$TMP/a.json" "
g = j['grid']; rec = j['recommendation']
# paired improvement per seed against the cell's best baseline
for r in g:
    cell = [b for b in g if b['workers'] == r['workers'] and b['rate'] == r['rate'] and b['policy'] != 'eldr']
    best = min(cell, key=lambda b: b['tpot_p50_ms'])
    d = [100 * (a - b) / b for a, b in zip(r['tpot_p50_ms_per_seed'], best['tpot_p50_ms_per_seed'])]
    assert abs(sum(d) / len(d) - r['vs_best_pct']) < 1e-6
# Bonferroni over the ELDR rows (scipy's t), then: whole corrected interval
# at least min_gain better; the lowest corrected upper bound wins
from scipy import stats
eldr = [i for i, r in enumerate(g) if r['policy'] == 'eldr']
m = len(eldr); n = j['seeds']; gain = j['min_gain_pct']
assert gain == 1.0 and rec['comparisons'] == m and rec['correction'] == 'bonferroni'
def corrected(r):
    lo, hi = r['vs_best_pct_ci95']; half = (hi - lo) / 2
    # the 95% half-width is eldr's t table value (3 decimals) times se
    se = half / round(stats.t.ppf(0.975, n - 1), 3)
    w = stats.t.ppf(1 - 0.025 / m, n - 1) * se
    return r['vs_best_pct'] - w, r['vs_best_pct'] + w
for i in eldr:
    lo, hi = corrected(g[i]); clo, chi = g[i]['vs_best_pct_ci95_corrected']
    assert abs(lo - clo) < 1e-3 and abs(hi - chi) < 1e-3, (i, lo, clo, hi, chi)
best = min(eldr, key=lambda i: (corrected(g[i])[1], g[i]['vs_best_pct']))
assert rec['closest_eldr'] == best, (rec['closest_eldr'], best)
if corrected(g[best])[1] < 0 and corrected(g[best])[1] <= -gain:
    assert rec['eldr_beats_baseline'] and rec['grid_index'] == best
    assert rec['ci95'][1] < 0 and 'best worst case' in rec['why']
else:
    assert not rec['eldr_beats_baseline'] and rec['policy'] != 'eldr'
    assert rec['grid_index'] == [i for i, r in enumerate(g) if r['workers'] == g[best]['workers']
        and r['policy'] == rec['policy']][0]"

json_assert "advise: p99, throughput, why and conditions beside p50" "$TMP/a.json" "
rec = j['recommendation']
for k in ('tpot_p99_ms', 'tokens_per_s', 'why', 'conditions', 'eldr_ci95_corrected'):
    assert k in rec, k
assert 'Bonferroni' in rec['why'] and 'req/s' in rec['conditions']
assert 'each drawing its arrivals and its random calibration split' in rec['conditions']
assert 'p99' in rec['sentence'] and 'throughput' in rec['sentence'] or not rec['eldr_beats_baseline']"

json_assert "advise: the regime runs at 1/2 x, 2 x the rate and the shortest output" "$TMP/a.json" "
r = j['regime']; c = r['conditions']
assert [x['condition'] for x in c] == ['half_rate', 'double_rate', 'shortest_output']
e = j['grid'][r['setting']]
assert c[0]['rate'] == e['rate'] / 2 and c[1]['rate'] == e['rate'] * 2
assert c[2]['output_tokens'] == 32     # the shortest decode_tokens of the trace
for x in c:
    assert x['ran'] and x['holds'] == (x['ci95'][1] < 0 and x['ci95'][1] <= -j['min_gain_pct'])
assert r['text'].startswith('holds at ') or r['text'].startswith('no gain of')"

# the regime's half rate, independently: eldr sim on the same setting and seeds
$PY -c "import json,sys; j=json.load(open(sys.argv[1])); e=j['grid'][j['regime']['setting']]; print(e['workers'], e['tau'], e['rate'] / 2)" "$TMP/a.json" >"$TMP/setting"
read -r RK RT RR <"$TMP/setting"
"$ELDR" sim "$DATA" --policy eldr,jsq,rr,p2c --workers "$RK" --tau "$RT" --rate "$RR" --seeds 4 --json >"$TMP/half.json" 2>/dev/null
json_assert "advise: the half-rate rerun = eldr sim at that rate" "$TMP/half.json" "
a = json.load(open('$TMP/a.json'))['regime']['conditions'][0]
e = [p for p in j['policies'] if p['name'] == 'eldr'][0]
assert j['baseline'] == a['best_baseline'], (j['baseline'], a['best_baseline'])
assert abs(e['vs_baseline_tpot_p50_pct'] - a['vs_best_baseline_pct']) < 1e-6
assert abs(e['vs_baseline_tpot_p50_pct_ci95'][1] - a['ci95'][1]) < 1e-6"

"$ELDR" advise "$DATA" $ARGS --min-gain 50 --json >"$TMP/g50.json" 2>/dev/null
json_assert "advise --min-gain 50: keep the baseline, and say how close ELDR came" "$TMP/g50.json" "
rec = j['recommendation']
assert j['min_gain_pct'] == 50 and not rec['eldr_beats_baseline'] and rec['policy'] != 'eldr'
assert rec['sentence'].startswith('keep ') and 'the closest' in rec['sentence'], rec['sentence']
assert 'none gains at least 50.0%' in rec['why'], rec['why']"
expect_fail2 "advise: bad --min-gain" "--min-gain" "$ELDR" advise "$DATA" --rate 60 --min-gain -1
expect_fail2 "sweep: --min-gain is advise's" "unknown option" "$ELDR" sweep "$DATA" --rate 60 --workers 4 --min-gain 1

"$ELDR" advise "$DATA" $ARGS --threads 1 --json >"$TMP/a1.json" 2>/dev/null
json_assert "advise: same grid on 1 thread" "$TMP/a1.json" "
k = json.load(open('$TMP/a.json'))
assert [r['tpot_p50_ms_per_seed'] for r in j['grid']] == [r['tpot_p50_ms_per_seed'] for r in k['grid']]
assert j['recommendation'] == k['recommendation']"

expect_status "advise: text" 0 "$ELDR" advise "$DATA" $ARGS
expect_out "advise: one recommendation line" "^recommendation"
expect_out "advise: why" "^why: of 6 ELDR settings"
expect_out "advise: conditions" "^conditions: Poisson 60 req/s, the trace's output lengths"
expect_out "advise: the regime" "^regime of "
expect_out "advise: where it holds" "^  (holds at|no gain of)"
expect_out "advise: the advised row is marked" "<- advised"
expect_out "advise: the split is named" "random split .seed 1.: 224 calibration, 225 evaluation rows"

"$ELDR" advise "$DATA" --rate 60 --tau 0,0.1 --workers 1 --seeds 3 --json >"$TMP/k1.json" 2>/dev/null
json_assert "advise K = 1: keep the baseline, honestly" "$TMP/k1.json" "
rec = j['recommendation']
assert rec['policy'] != 'eldr' and rec['tau'] is None and not rec['eldr_beats_baseline']
assert rec['sentence'].startswith('keep '), rec['sentence']
assert all(r['vs_best_pct'] == 0 for r in j['grid'])"

expect_fail2 "advise: one seed refused" "at least 2 seeds" "$ELDR" advise "$DATA" --rate 60 --seeds 1
expect_fail2 "advise: bad split" "--split: 'first'" "$ELDR" advise "$DATA" --rate 60 --split first
expect_fail2 "advise: no split" "calib-split 0" "$ELDR" advise "$DATA" --rate 60 --calib-split 0
expect_fail2 "advise: --csv is sweep's" "unknown option" "$ELDR" advise "$DATA" --rate 60 --csv x.csv
expect_fail2 "advise: bad seeds" "--seeds" "$ELDR" advise "$DATA" --rate 60 --seeds 0
expect_fail2 "advise: missing trace" "absent.h5" "$ELDR" advise "$TMP/absent.h5" --rate 60
