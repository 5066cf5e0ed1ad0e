#!/bin/sh
# tests/cli/advise.sh - `eldr advise` and the honest-number options it
# shares with sim and sweep, on the real gpt-oss-20b routing data:
#   the verdict is a grid row, and it follows the documented rule
#   (re-derived in Python by verdict_oracle.py from the per-seed values,
#   also with each margin moved and with --compare-fleets);
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

ARGS="--rate 60 --tau 0,0.1,0.2 --workers 4 --seeds 4"
ORACLE="import sys; sys.path.insert(0, '$ROOT/tests/cli'); import verdict_oracle"
"$ELDR" advise "$DATA" $ARGS --json >"$TMP/a.json" 2>"$TMP/a.err"
json_assert "advise: json keys" "$TMP/a.json" "
rec = j['recommendation']; v = j['verdict']
for k in ('policy','tau','workers','rate','tpot_p50_ms','tpot_p99_ms','tokens_per_s','sentence',
          'conditions','eldr_beats_baseline','grid_index'):
    assert k in rec, k
for k in ('answer','why','head','reason','rule','K','baseline','baselines','comparisons',
          'p50_gain_pct','p99_margin_pct','tps_margin_pct','p50_ci_corrected','throughput'):
    assert k in v, k
assert len(j['grid']) == 3 + 3, len(j['grid'])
assert j['seeds'] == 4 and j['split']['mode'] == 'random' and j['split']['seed'] == 1
assert j['split']['calib_rows'] == 224 and j['split']['eval_rows'] == 225
for r in j['grid']:
    for k in ('policy','tau','workers','rate','tpot_p50_ms','tpot_p50_ms_ci95','vs_best_pct',
              'vs_best_pct_ci95','tpot_p99_ms_per_seed','tokens_per_s_per_seed'):
        assert k in r, k"
json_assert "advise: the recommendation is a grid row" "$TMP/a.json" "
rec = j['recommendation']; g = j['grid'][rec['grid_index']]
assert (g['policy'], g['tau'], g['workers'], g['rate']) == (rec['policy'], rec['tau'], rec['workers'], rec['rate'])
assert g['tpot_p50_ms'] == rec['tpot_p50_ms'] and j['verdict']['grid_index'] == rec['grid_index']
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
# the rule of docs/advise.md, written again in Python (verdict_oracle.py)
json_assert "advise: the verdict, re-derived (every baseline, p99, throughput, splits)" "$TMP/a.json" "
$ORACLE
v = j['verdict']; o = verdict_oracle.decide(j['grid'], 4)
assert (v['answer'], v['why'], v['grid_index'], v['comparisons']) == (o['answer'], o['why'], o['row'], o['m']), (v, o)
assert v['K'] == 4 and v['baselines'] == 'jsq,rr,p2c' and v['baseline'] == o['baseline']
assert (v['p50_gain_pct'], v['p99_margin_pct'], v['tps_margin_pct']) == (1.0, 5.0, 1.0)
assert j['recommendation']['eldr_beats_baseline'] == (v['answer'] == 'win')"
json_assert "advise: the answer is said, with why" "$TMP/a.json" "
v = j['verdict']; rec = j['recommendation']
assert v['head'] == ('use tau %g at K 4' % rec['tau'] if v['answer'] == 'win' else
                     ('keep %s at K 4' if v['answer'] == 'keep' else 'tie at K 4: keep %s') % rec['policy']), v['head']
assert 'Bonferroni-corrected over 3 settings' in v['rule'] and 'K fixed at 4' in v['rule']
assert 'req/s' in rec['conditions'] and 'steady state' in v['throughput']
assert 'each drawing its arrivals and its random calibration split' in rec['conditions']
assert v['reason'] == rec['sentence']"
# the same grid, margins moved: the oracle follows each
for M in "--p99-margin 0" "--tps-margin 0" "--min-gain 50"; do
    "$ELDR" advise "$DATA" $ARGS $M --json >"$TMP/m.json" 2>/dev/null
    json_assert "advise $M: the verdict, re-derived" "$TMP/m.json" "
$ORACLE
v = j['verdict']; a = '$M'.split(); x = float(a[1])
kw = {'--p99-margin': 'p99', '--tps-margin': 'tps', '--min-gain': 'p50'}[a[0]]
o = verdict_oracle.decide(j['grid'], 4, **{kw: x})
assert (v['answer'], v['why'], v['grid_index']) == (o['answer'], o['why'], o['row']), (v, o)"
done
json_assert "advise --min-gain 50: keep the baseline, and say how close ELDR came" "$TMP/m.json" "
v = j['verdict']
assert v['answer'] == 'keep' and v['why'] == 'no_gain' and v['p50_gain_pct'] == 50
assert v['head'].startswith('keep ') and 'the closest' in v['reason'], v['reason']"

json_assert "advise: the regime runs at 1/2 x, 2 x the rate and the shortest output" "$TMP/a.json" "
r = j['regime']; c = r['conditions']
assert [x['condition'] for x in c] == ['half_rate', 'double_rate', 'shortest_output']
e = j['grid'][r['setting']]
assert c[0]['rate'] == e['rate'] / 2 and c[1]['rate'] == e['rate'] * 2
assert c[2]['output_tokens'] == 32     # the shortest decode_tokens of the trace
for x in c:
    assert x['ran'] and x['holds'] == (x['why'] == 'ok')
    assert not x['holds'] or (x['ci95'][1] < 0 and x['ci95'][1] <= -1.0)
assert r['text'].startswith('holds at ') or r['text'].startswith('no win at')"

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

expect_fail2 "advise: bad --min-gain" "--min-gain" "$ELDR" advise "$DATA" --rate 60 --min-gain -1
expect_fail2 "advise: bad --p99-margin" "--p99-margin" "$ELDR" advise "$DATA" --rate 60 --p99-margin x
expect_fail2 "advise: bad --tps-margin" "--tps-margin" "$ELDR" advise "$DATA" --rate 60 --tps-margin -2
expect_fail2 "advise: the fleet has one K" "--compare-fleets" "$ELDR" advise "$DATA" --rate 60 --workers 4,8
expect_fail2 "sweep: --compare-fleets is advise's" "unknown option" "$ELDR" sweep "$DATA" --rate 60 --workers 4 --compare-fleets

# comparing fleets, on request: K is a knob, each K against its own baselines
"$ELDR" advise "$DATA" --rate 60 --tau 0.1,0.2 --workers 4,8 --seeds 3 --compare-fleets --json >"$TMP/f.json" 2>/dev/null
json_assert "advise --compare-fleets: every K competes, re-derived" "$TMP/f.json" "
$ORACLE
v = j['verdict']; o = verdict_oracle.decide(j['grid'], 0)
assert v['K'] == 'every' and v['comparisons'] == 4 == o['m']
assert (v['answer'], v['why'], v['grid_index']) == (o['answer'], o['why'], o['row']), (v, o)
assert 'fleets compared' in v['rule']"

"$ELDR" advise "$DATA" $ARGS --threads 1 --json >"$TMP/a1.json" 2>/dev/null
json_assert "advise: same grid on 1 thread" "$TMP/a1.json" "
k = json.load(open('$TMP/a.json'))
assert [r['tpot_p50_ms_per_seed'] for r in j['grid']] == [r['tpot_p50_ms_per_seed'] for r in k['grid']]
assert j['recommendation'] == k['recommendation']"

expect_status "advise: text" 0 "$ELDR" advise "$DATA" $ARGS
expect_out "advise: one verdict line" "^verdict: (use tau [0-9.]+ at K 4|keep [a-z0-9]+ at K 4|tie at K 4: keep [a-z0-9]+): "
expect_out "advise: the rule, with the baselines and margins" "^rule: a setting wins when, against every baseline .jsq,rr,p2c., its TPOT p50 gains >= 1.0%, its p99 rises <= 5.0% and its throughput falls <= 1.0%"
expect_out "advise: conditions, steady-state throughput" "^conditions: Poisson 60 req/s, the trace's output lengths, K 4 .--workers.*throughput at steady state"
expect_out "advise: the regime" "^regime of "
expect_out "advise: where it holds" "^  (holds at|no win at)"
expect_out "advise: the advised row is marked" "<- advised"
expect_out "advise: the split is named" "random split .seed 1.: 224 calibration, 225 evaluation rows"

"$ELDR" advise "$DATA" --rate 60 --tau 0,0.1 --workers 1 --seeds 3 --json >"$TMP/k1.json" 2>/dev/null
json_assert "advise K = 1: keep the baseline, honestly" "$TMP/k1.json" "
rec = j['recommendation']; v = j['verdict']
assert rec['policy'] != 'eldr' and rec['tau'] is None and not rec['eldr_beats_baseline']
assert v['answer'] == 'keep' and v['why'] == 'no_gain' and v['head'].startswith('keep '), v
assert all(r['vs_best_pct'] == 0 for r in j['grid'])"

expect_fail2 "advise: one seed refused" "at least 2 seeds" "$ELDR" advise "$DATA" --rate 60 --seeds 1
expect_fail2 "advise: bad split" "--split: 'first'" "$ELDR" advise "$DATA" --rate 60 --split first
expect_fail2 "advise: no split" "calib-split 0" "$ELDR" advise "$DATA" --rate 60 --calib-split 0
expect_fail2 "advise: --csv is sweep's" "unknown option" "$ELDR" advise "$DATA" --rate 60 --csv x.csv
expect_fail2 "advise: bad seeds" "--seeds" "$ELDR" advise "$DATA" --rate 60 --seeds 0
expect_fail2 "advise: missing trace" "absent.h5" "$ELDR" advise "$TMP/absent.h5" --rate 60
