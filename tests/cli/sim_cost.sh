#!/bin/sh
# tests/cli/sim_cost.sh - the cost rule (eldr-cost, issue 33) in the
# workbench: `eldr sim --policy eldr-cost` (no model needed, mixed with
# eldr, the aligned table, --json's rules, --seeds), `eldr sweep` and
# `eldr advise --cost-rule` (one eldr-cost row per cell, weighed as one
# more ELDR setting under the same Bonferroni correction; the other rows
# unchanged by it; the same numbers as `eldr sim --seeds`), and the bad
# combinations (exit 2, one line).
. "$ROOT/tests/cli/lib.sh"
PY=/usr/bin/python3
T="$TMP/t.h5"
"$ELDR" gen -o "$T" --requests 300 --layers 8 --experts 32 --top-k 4 --domains 4 \
    --prompt-tokens 32 --decode-tokens 24 --seed 5 --arrival-rate 80 >/dev/null 2>&1 ||
    notok "sim_cost: gen fixture"

# ---- help and bad input ----
expect_status "sim --help" 0 "$ELDR" sim --help
expect_out "sim --help: eldr-cost and its meaning" "eldr-cost:"
expect_status "sweep --help" 0 "$ELDR" sweep --help
expect_out "sweep --help: --cost-rule" "--cost-rule +also run eldr-cost"
expect_status "advise --help" 0 "$ELDR" advise --help
expect_out "advise --help: --cost-rule" "--cost-rule +also run eldr-cost"
expect_fail2 "sim: unknown policy lists eldr-cost" "eldr-cost" "$ELDR" sim "$T" --policy eldr-costs
expect_fail2 "sim: eldr-cost twice" "appears twice" "$ELDR" sim "$T" --policy eldr-cost,jsq,eldr-cost
expect_fail2 "sim: --prefix-mode needs eldr, not eldr-cost" "the eldr policy must be in --policy" \
    "$ELDR" sim "$T" --policy eldr-cost --prefix-mode all
expect_fail2 "sweep: eldr-cost is not a baseline" "eldr-cost is --cost-rule" \
    "$ELDR" sweep "$T" --workers 4 --baselines jsq,eldr-cost
expect_fail2 "advise: eldr-cost is not a baseline" "eldr-cost is --cost-rule" \
    "$ELDR" advise "$T" --workers 4 --baselines eldr-cost --cost-rule
expect_fail2 "advise: --cost-rule takes no value" "unknown option|doesn't allow" \
    "$ELDR" advise "$T" --workers 4 --cost-rule=1

# ---- sim ----
# eldr-cost alone: no model is fitted or needed
"$ELDR" sim "$T" --policy eldr-cost --workers 4 --rate 80 --json >"$TMP/c.json" 2>"$TMP/err" ||
    notok "sim: eldr-cost alone runs" "$(head -c 300 "$TMP/err")"
json_assert "sim: eldr-cost alone, no model, every decision by the cost rule" "$TMP/c.json" "
p = j['policies']; assert len(p) == 1 and p[0]['name'] == 'eldr-cost', p
assert j['model'] is None, j['model']
assert p[0]['rules'] == {'cost': j['requests']}, p[0]['rules']
assert sum(p[0]['served']) == j['requests'] and len(p[0]['served']) == 4
assert p[0]['tpot_p50_ms'] > 0"

# mixed with eldr (which fits a model) and the balancers: the same
# eldr-cost run, and the table's columns line up
"$ELDR" sim "$T" --policy eldr,eldr-cost,jsq --workers 4 --rate 80 --json >"$TMP/m.json" 2>"$TMP/err"
json_assert "sim: eldr-cost beside eldr equals eldr-cost alone" "$TMP/m.json" "
c = json.load(open('$TMP/c.json'))['policies'][0]
p = {x['name']: x for x in j['policies']}
assert list(p) == ['eldr', 'eldr-cost', 'jsq'], list(p)
assert j['model'] == 'fitted'
for k in ('tpot_p50_ms', 'tpot_p99_ms', 'served', 'rules', 'steps'):
    assert p['eldr-cost'][k] == c[k], (k, p['eldr-cost'][k], c[k])
assert j['baseline'] == 'jsq'"
"$ELDR" sim "$T" --policy eldr,eldr-cost,jsq --workers 4 --rate 80 >"$TMP/m.txt" 2>"$TMP/err"
if $PY - "$TMP/m.txt" <<'EOF'; then ok "sim: the table and served lines align with eldr-cost"; else notok "sim: the table and served lines align with eldr-cost" "$(cat "$TMP/m.txt")"; fi
import re, sys
lines = open(sys.argv[1]).read().splitlines()
head = next(i for i, l in enumerate(lines) if l.startswith("policy "))
rows = lines[head:head + 5]                    # 2 header lines, 3 policies
assert [r.split()[0] for r in rows[2:]] == ["eldr", "eldr-cost", "jsq"], rows
# every value column ends where the header's column ends
ends = lambda l: [m.end() for m in re.finditer(r"\S+", l)]
h = ends(rows[0].replace("tpot p", "tpot_p").replace("queue p", "queue_p").replace("vs best", "vs_best"))
for r in rows[2:]:
    assert ends(r)[1:] == h[1:], (r, ends(r), h)
served = lines[lines.index("served per worker:") + 1:][:3]
cols = {re.search(r"\s\d", s).start() for s in served}
assert len(cols) == 1 and [s.split()[0] for s in served] == ["eldr", "eldr-cost", "jsq"], served
EOF

"$ELDR" sim "$T" --policy eldr-cost,jsq --workers 4 --rate 80 >"$TMP/c.txt" 2>"$TMP/err"
expect_in "sim: the report says what the rule predicts with and sees" "$TMP/c.txt" \
    "^eldr-cost: predicts with the simulated cost model \(the documented defaults\), max batch 256, from the in-flight prefill counts only$"

# With no expert term (b = d = 0) cost_k = t0 + L a + c (2 B_k + 1): the
# rule is least-loaded, lowest index on ties - eldr at tau 2 (a band of
# every worker) decides alike, request for request; with the documented
# model the expert term moves decisions.
printf '{"format": "eldr-cost", "version": 1, "t0": 0.0015, "a": 0, "b": 0, "c": 2.5e-05, "d": 0}\n' >"$TMP/flat.json"
"$ELDR" sim "$T" --policy eldr,eldr-cost --tau 2 --workers 4 --rate 200 --cost "$TMP/flat.json" \
    --json >"$TMP/flat.out" 2>"$TMP/err"
json_assert "sim: with no expert cost eldr-cost is least-loaded (= eldr at tau 2)" "$TMP/flat.out" "
e, c = j['policies']
assert e['served'] == c['served'] and e['tpot_p50_ms'] == c['tpot_p50_ms'], (e['served'], c['served'])
assert c['rules'] == {'cost': j['requests']} and e['rules'] != c['rules']"
"$ELDR" sim "$T" --policy eldr,eldr-cost --tau 2 --workers 4 --rate 200 --json >"$TMP/def.out" 2>"$TMP/err"
json_assert "sim: with the documented cost model the expert term moves decisions" "$TMP/def.out" "
e, c = j['policies']
assert e['served'] != c['served'], (e['served'], c['served'])"

# --seeds: the first seed repeats the single run; intervals are there
"$ELDR" sim "$T" --policy eldr-cost,jsq --workers 4 --rate 80 --seeds 3 --json >"$TMP/s.json" 2>"$TMP/err"
json_assert "sim --seeds: eldr-cost's first seed is the single run, with a CI" "$TMP/s.json" "
c = json.load(open('$TMP/c.json'))['policies'][0]
p = {x['name']: x for x in j['policies']}['eldr-cost']
assert len(p['tpot_p50_ms_per_seed']) == 3
assert abs(p['tpot_p50_ms_per_seed'][0] - c['tpot_p50_ms']) < 1e-9, (p['tpot_p50_ms_per_seed'], c['tpot_p50_ms'])
lo, hi = p['tpot_p50_ms_ci95']; assert lo < p['tpot_p50_ms'] < hi
assert p['vs_baseline_tpot_p50_pct_ci95'] is not None"

# ---- sweep and advise ----
ARGS="--workers 2,4 --rate 40,120 --tau 0,0.1 --seeds 3 --threads 2"
"$ELDR" sweep "$T" $ARGS --json >"$TMP/w0.json" 2>"$TMP/err"
"$ELDR" sweep "$T" $ARGS --cost-rule --json --csv "$TMP/w.csv" >"$TMP/w1.json" 2>"$TMP/err" ||
    notok "sweep --cost-rule runs" "$(head -c 300 "$TMP/err")"
json_assert "sweep --cost-rule: one eldr-cost row per cell, after the taus; the rest unchanged" "$TMP/w1.json" "
w0 = json.load(open('$TMP/w0.json'))['rows']; w1 = j['rows']
assert not any(r['policy'] == 'eldr-cost' for r in w0)
assert len(w1) == len(w0) + 4, (len(w1), len(w0))
rest = [r for r in w1 if r['policy'] != 'eldr-cost']
for a, b in zip(rest, w0):
    assert (a['policy'], a['workers'], a['rate'], a['tau']) == (b['policy'], b['workers'], b['rate'], b['tau'])
    assert a['tpot_p50_ms_per_seed'] == b['tpot_p50_ms_per_seed'], a['policy']
per = len(w1) // 4
for c in range(4):
    cell = w1[c * per:(c + 1) * per]
    assert cell[-1]['policy'] == 'eldr-cost' and cell[-1]['tau'] is None, cell[-1]
    assert len({(r['workers'], r['rate']) for r in cell}) == 1
    assert cell[-1]['vs_best_pct'] is not None"
expect_in "sweep --cost-rule: the CSV has the eldr-cost rows" "$TMP/w.csv" "^4,120,eldr-cost,,3,"

# the same numbers as eldr sim --seeds on one cell
"$ELDR" sim "$T" --policy eldr-cost --workers 4 --rate 120 --seeds 3 --json >"$TMP/s4.json" 2>"$TMP/err"
json_assert "sweep --cost-rule: eldr-cost's seeds equal eldr sim --seeds" "$TMP/w1.json" "
s = json.load(open('$TMP/s4.json'))['policies'][0]
r = [r for r in j['rows'] if r['policy'] == 'eldr-cost' and r['workers'] == 4 and r['rate'] == 120][0]
assert r['tpot_p50_ms_per_seed'] == s['tpot_p50_ms_per_seed'], (r['tpot_p50_ms_per_seed'], s['tpot_p50_ms_per_seed'])"

# advise: the fleet's one K (--compare-fleets for both), eldr-cost one more candidate
"$ELDR" advise "$T" $ARGS --compare-fleets --cost-rule --json >"$TMP/a.json" 2>"$TMP/err" ||
    notok "advise --cost-rule runs" "$(head -c 300 "$TMP/err")"
json_assert "advise --cost-rule: eldr-cost is a candidate of the correction" "$TMP/a.json" "
g = j['grid']; v = j['verdict']
cand = [r for r in g if r['policy'] in ('eldr', 'eldr-online', 'eldr-cost')]
assert v['comparisons'] == len(cand) == 4 * 3, v['comparisons']
for r in g:
    assert ('vs_best_pct_ci95_corrected' in r) == (r in cand), r['policy']"
json_assert "advise --cost-rule: the verdict, re-derived over eldr and eldr-cost rows" "$TMP/a.json" "
import sys; sys.path.insert(0, '$ROOT/tests/cli'); import verdict_oracle
g = j['grid']; v = j['verdict']
o = verdict_oracle.decide(g, 0)
assert (v['answer'], v['why'], v['grid_index'], v['comparisons']) == (o['answer'], o['why'], o['row'], o['m']), (v, o)
e = g[v['setting']]
name = 'eldr-cost' if e['policy'] == 'eldr-cost' else 'tau %g' % e['tau']
assert name in v['reason'], (name, v['reason'])"

if [ -f "$DATA" ]; then
    # the real trace: the text report names eldr-cost as a setting
    "$ELDR" advise "$DATA" --workers 4 --rate 60 --tau 0.1 --seeds 3 --cost-rule \
        >"$TMP/r.txt" 2>"$TMP/err"
    expect_in "advise --cost-rule on gpt-oss: an eldr-cost row" "$TMP/r.txt" "^ +4 +60 eldr-cost +- +[0-9]"
    expect_in "advise --cost-rule on gpt-oss: corrected over 2 settings" "$TMP/r.txt" "corrected over 2 settings"
    expect_in "advise --cost-rule on gpt-oss: the regime line names its setting" "$TMP/r.txt" \
        "^regime of (the closest, )?(eldr-cost, K 4 \\(|tau 0.1, K 4 \\(eldr; )rerun"
fi
