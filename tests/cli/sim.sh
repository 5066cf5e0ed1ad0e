#!/bin/sh
# tests/cli/sim.sh - `eldr sim`: help, bad input (exit 2, one stderr line),
# the table, --json (checked by /usr/bin/python3), determinism, --csv
# (complete files, nothing temporary left), a given model, and the real
# gpt-oss-20b trace when it is there.
. "$ROOT/tests/cli/lib.sh"
PY=/usr/bin/python3
T="$TMP/t.h5"
"$ELDR" gen -o "$T" --requests 400 --layers 8 --experts 32 --top-k 4 --domains 4 \
    --prompt-tokens 32 --decode-tokens 24 --seed 3 --arrival-rate 50 >/dev/null 2>&1 ||
    notok "sim: gen fixture"

expect_status "sim --help" 0 "$ELDR" sim --help
expect_out "sim --help: usage" "^usage: eldr sim"
expect_fail2 "sim: no trace" "no trace" "$ELDR" sim
expect_fail2 "sim: missing file" "nope.h5" "$ELDR" sim "$TMP/nope.h5" --rate 5
expect_fail2 "sim: bad policy" "'lru' is not a policy" "$ELDR" sim "$T" --policy eldr,lru
expect_fail2 "sim: repeated policy" "appears twice" "$ELDR" sim "$T" --policy rr,rr
expect_fail2 "sim: rate and concurrency" "exclude" "$ELDR" sim "$T" --rate 5 --concurrency 3
expect_fail2 "sim: bad rate" "--rate" "$ELDR" sim "$T" --rate -2
expect_fail2 "sim: bad workers" "--workers" "$ELDR" sim "$T" --workers 0
expect_fail2 "sim: bad split" "--calib-split" "$ELDR" sim "$T" --calib-split 1.5
expect_fail2 "sim: negative split" "--calib-split" "$ELDR" sim "$T" --calib-split -3
expect_fail2 "sim: unknown option" "unknown option" "$ELDR" sim "$T" --frobnicate
echo '{"format":"eldr-cost","version":1,"t0":-1}' >"$TMP/bad_cost.json"
expect_fail2 "sim: bad cost file" "cost" "$ELDR" sim "$T" --cost "$TMP/bad_cost.json"
: >"$TMP/afile"
expect_fail2 "sim: csv not a directory" "not a directory" "$ELDR" sim "$T" --csv "$TMP/afile"

expect_status "sim: table" 0 "$ELDR" sim "$T" --policy eldr,rr,jsq,p2c,random,domain
expect_out "sim: random and domain are reference only" "^vs best: against (jsq|rr|p2c), the best of the baselines jsq,rr,p2c given .*; random, domain: reference only"

# the comparison's baselines are the verdict's (jsq, rr, p2c): random runs
# for reference, never the baseline, with one seed or many (as eldr advise)
"$ELDR" sim "$T" --rate 50 --seeds 3 --policy eldr,random --json >"$TMP/ref.json" 2>/dev/null
"$ELDR" sim "$T" --rate 50 --seeds 3 --policy eldr,random >"$TMP/ref.txt" 2>/dev/null
"$ELDR" sim "$T" --rate 50 --seeds 3 --json >"$TMP/all.json" 2>/dev/null
if $PY - "$TMP/ref.json" "$TMP/all.json" <<'EOF'; then ok "sim --seeds: random is reference only (JSON)"; else notok "sim --seeds: random is reference only (JSON)" "$(head -c 300 "$TMP/ref.json")"; fi
import json, sys
r = json.load(open(sys.argv[1])); a = json.load(open(sys.argv[2]))
assert r["baseline"] is None and r["baselines"] == "jsq,rr,p2c" and r["reference_only"] == ["random"], r
assert all(p["vs_baseline_tpot_p50_pct"] is None for p in r["policies"])
assert {p["name"]: p["role"] for p in r["policies"]} == {"eldr": "candidate", "random": "reference"}
assert a["baseline"] in ("jsq", "rr", "p2c") and a["reference_only"] == ["random"]
by = {p["name"]: p for p in a["policies"]}
mean = lambda n: sum(by[n]["tpot_p50_ms_per_seed"])
best = a["baseline"]
assert mean(best) == min(mean(n) for n in ("jsq", "rr", "p2c")), best   # the lowest (ties: the first)
b = by[best]["tpot_p50_ms_per_seed"]; x = by["random"]["tpot_p50_ms_per_seed"]
want = sum(100 * (u - v) / v for u, v in zip(x, b)) / len(b)
assert abs(by["random"]["vs_baseline_tpot_p50_pct"] - want) < 1e-6   # shown against the baseline
EOF
if grep -q "^vs best: no baseline among the policies: give one of jsq,rr,p2c (--policy); random: reference only" "$TMP/ref.txt" &&
    grep -q "max/mean    (none)" "$TMP/ref.txt"; then ok "sim --seeds: the table says random is reference only"
else notok "sim --seeds: the table says random is reference only" "$(tail -8 "$TMP/ref.txt")"; fi
expect_out "sim: table has eldr" "^eldr +[0-9]"
expect_out "sim: table has domain" "^domain +[0-9]"
expect_out "sim: table names the baseline" "vs best"

"$ELDR" sim "$T" --json --policy eldr,rr,jsq --workers 3 >"$TMP/a.json" 2>"$TMP/err"
"$ELDR" sim "$T" --json --policy eldr,rr,jsq --workers 3 >"$TMP/b.json" 2>>"$TMP/err"
if cmp -s "$TMP/a.json" "$TMP/b.json"; then ok "sim: deterministic"; else
    notok "sim: deterministic" "two runs differ"; fi
if $PY - "$TMP/a.json" <<'EOF'; then ok "sim --json: keys and laws"; else notok "sim --json: keys and laws"; fi
import json, sys
d = json.load(open(sys.argv[1]))
assert d["workers"] == 3 and d["requests"] == 200, d
names = [p["name"] for p in d["policies"]]
assert names == ["eldr", "rr", "jsq"], names
for p in d["policies"]:
    for k in ("tpot_p50_ms", "tpot_p99_ms", "queue_p50_ms", "distinct_experts_per_step",
              "reuse", "imbalance", "served"):
        assert k in p, k
    assert len(p["served"]) == 3 and sum(p["served"]) == 200, p["served"]
    assert p["tpot_p50_ms"] <= p["tpot_p99_ms"]
    assert 4 <= p["distinct_experts_per_step"] <= 32
    assert p["reuse"] >= 1 and p["imbalance"] >= 1
rr = d["policies"][1]
assert max(rr["served"]) - min(rr["served"]) <= 1, rr["served"]
assert d["baseline"] in ("rr", "jsq")
EOF

expect_status "sim --csv" 0 "$ELDR" sim "$T" --policy eldr,rr --csv "$TMP/csv" --concurrency 16
missing=""
for f in summary.csv eldr_steps.csv eldr_inflight.csv eldr_requests.csv eldr_heat.csv \
    rr_steps.csv rr_inflight.csv rr_requests.csv rr_heat.csv; do
    [ -s "$TMP/csv/$f" ] || missing="$missing $f"
done
if [ -z "$missing" ] && ! ls "$TMP/csv" | grep -q tmp; then ok "sim --csv: files"; else
    notok "sim --csv: files" "missing:$missing" "$(ls "$TMP/csv")"; fi
if $PY - "$TMP/csv" <<'EOF'; then ok "sim --csv: contents"; else notok "sim --csv: contents"; fi
import csv, sys
d = sys.argv[1]
s = list(csv.DictReader(open(d + "/summary.csv")))
assert [r["policy"] for r in s] == ["eldr", "rr"]
req = list(csv.DictReader(open(d + "/rr_requests.csv")))
assert len(req) == 200
# closed loop at 16: never more than 16 in the system
inf = {}
top = 0
for r in csv.DictReader(open(d + "/rr_inflight.csv")):
    inf[r["worker"]] = int(r["inflight"])
    top = max(top, sum(inf.values()))
assert top == 16, top
# heat: every activation of every token: tokens * k * L
tokens = sum(int(r["tokens"]) for r in req)
heat = sum(int(r["activations"]) for r in csv.DictReader(open(d + "/rr_heat.csv")))
assert heat == tokens * 4 * 8, (heat, tokens)
steps = list(csv.DictReader(open(d + "/rr_steps.csv")))
assert sum(int(r["batch"]) for r in steps) == tokens
EOF

# a given model decides K; a different --workers is refused
"$ELDR" fit "$T" -k 3 -o "$TMP/m.h5" --calib-split 200 >/dev/null 2>&1
expect_status "sim -m: runs" 0 "$ELDR" sim "$T" -m "$TMP/m.h5" --policy eldr,jsq
expect_out "sim -m: workers from the model" "workers 3"
expect_fail2 "sim -m: workers mismatch" "K = 3" "$ELDR" sim "$T" -m "$TMP/m.h5" --workers 4

if [ -f "$DATA" ]; then
    # one rule for the rate: the trace's arrival_s, else 20 req/s, said so
    expect_status "sim real: no arrival_s, no --rate: the default rate" 0 "$ELDR" sim "$DATA" --policy rr
    expect_out "sim real: the default rate is stated" "Poisson 20 req/s \(the default: the trace has no arrival_s; --rate R\)"
    "$ELDR" sim "$DATA" --policy rr --json >"$TMP/dr.json" 2>/dev/null
    if $PY -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(not (j['rate_default'] is True and j['arrivals'].startswith('Poisson 20 req/s')))" "$TMP/dr.json"; then
        ok "sim real --json: rate_default"; else notok "sim real --json: rate_default"; fi
    "$ELDR" sweep "$DATA" --workers 4 --tau 0.1 --baselines rr >"$TMP/out" 2>/dev/null
    expect_out "sweep real: the same default rate, stated" "^rate: 20 req/s, the default \(.*has no arrival_s"
    "$ELDR" dash "$DATA" --frame - --width 100 --height 26 --seeds 1 >"$TMP/out" 2>/dev/null
    expect_out "dash real: the same default rate, stated" "arrivals +Poisson 20 req/s \(default: no arrival_s\)"
    "$ELDR" sim "$DATA" --workers 4 --rate 60 --policy eldr,rr,jsq --json >"$TMP/real.json" \
        2>"$TMP/err"
    if $PY - "$TMP/real.json" <<'EOF'; then ok "sim real: eldr fewer experts/step"; else notok "sim real: eldr fewer experts/step" "$(cat "$TMP/err")"; fi
import json, sys
d = json.load(open(sys.argv[1]))
u = {p["name"]: p["distinct_experts_per_step"] for p in d["policies"]}
print("# distinct experts/step:", u)
assert d["activations"] == "recorded"
assert u["eldr"] < u["rr"] and u["eldr"] < u["jsq"], u
EOF
else
    ok "sim real: skipped ($DATA absent)"
fi

# ---- honest numbers: the split, seeds and CIs, the in-sample warning ----
if [ -f "$DATA" ]; then
    "$ELDR" sim "$DATA" --rate 60 --policy eldr,rr,jsq --seeds 4 --json >"$TMP/s4.json" 2>"$TMP/err"
    if $PY - "$TMP/s4.json" <<'EOF'; then ok "sim --seeds: means and Student-t CIs"; else notok "sim --seeds: means and Student-t CIs" "$(cat "$TMP/err")"; fi
import json, sys, math
from scipy import stats
d = json.load(open(sys.argv[1]))
assert d["seeds"] == 4 and d["split"]["mode"] == "random" and d["split"]["seed"] == 1
for p in d["policies"]:
    x = p["tpot_p50_ms_per_seed"]; n = len(x); m = sum(x) / n
    assert n == 4 and abs(m - p["tpot_p50_ms"]) < 1e-6
    h = stats.t.ppf(0.975, n - 1) * math.sqrt(sum((v - m) ** 2 for v in x) / (n - 1)) / math.sqrt(n)
    lo, hi = p["tpot_p50_ms_ci95"]
    assert abs(lo - (m - h)) < 1e-3 * h + 1e-6 and abs(hi - (m + h)) < 1e-3 * h + 1e-6
    assert p["vs_baseline_tpot_p50_pct_ci95"] is not None
b = [p for p in d["policies"] if p["name"] == d["baseline"]][0]
assert b["vs_baseline_tpot_p50_pct"] == 0
EOF
    "$ELDR" sim "$DATA" --rate 60 --policy eldr,rr,jsq --json >"$TMP/s1.json" 2>/dev/null
    if $PY - "$TMP/s1.json" "$TMP/s4.json" <<'EOF'; then ok "sim: seed 1 of --seeds 4 is the one-seed run"; else notok "sim: seed 1 of --seeds 4 is the one-seed run"; fi
import json, sys
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
for p, q in zip(a["policies"], b["policies"]):
    assert p["name"] == q["name"] and abs(p["tpot_p50_ms"] - q["tpot_p50_ms_per_seed"][0]) < 1e-6
    assert p["tpot_p50_ms_ci95"] is None
EOF
    expect_status "sim --seeds: text" 0 "$ELDR" sim "$DATA" --rate 60 --policy eldr,rr --seeds 3
    expect_out "sim --seeds: CI column" "tpot p50 +95% CI"
    expect_out "sim --seeds: says so" "means, 95% CI over 3 seeds \(1-3\), each drawing its arrivals and its random calibration split"
    expect_out "sim: the split is named" "random split .seed 1.: 224 calibration, 225 evaluation rows"
    "$ELDR" sim "$DATA" --rate 60 --policy rr --split head --csv "$TMP/hc" >/dev/null 2>&1
    "$ELDR" sim "$DATA" --rate 60 --policy rr --csv "$TMP/rc" >/dev/null 2>&1
    "$ELDR" sim "$DATA" --rate 60 --policy rr --split stratified --json >"$TMP/st.json" 2>/dev/null
    if $PY - "$TMP/hc/rr_requests.csv" "$TMP/rc/rr_requests.csv" "$TMP/st.json" "$DATA" <<'EOF'; then ok "sim --split: head, random, stratified rows"; else notok "sim --split: head, random, stratified rows"; fi
import csv, json, sys, h5py
head = sorted(int(r["row"]) for r in csv.DictReader(open(sys.argv[1])))
rand = sorted(int(r["row"]) for r in csv.DictReader(open(sys.argv[2])))
assert head == list(range(224, 449)), head[:3]
assert len(rand) == 225 and len(set(rand)) == 225 and rand != head
lab = h5py.File(sys.argv[4])["label"][:]
st = json.load(open(sys.argv[3]))
assert st["split"]["mode"] == "stratified" and st["split"]["calib_rows"] == 224
# the random split holds out rows of every label; head does not
assert len(set(lab[rand])) == len(set(lab)) and len(set(lab[head])) < len(set(lab))
EOF
    "$ELDR" fit "$DATA" -k 4 -o "$TMP/all.h5" >/dev/null 2>&1
    "$ELDR" fit "$DATA" -k 4 -o "$TMP/half.h5" --calib-split 224 >/dev/null 2>&1
    "$ELDR" sim "$DATA" -m "$TMP/all.h5" --rate 60 --policy eldr,rr >/dev/null 2>"$TMP/w1"
    if grep -q "225 of the 225 evaluated rows are among its calibration rows, so the results are in-sample" "$TMP/w1"; then ok "sim: in-sample warning"; else notok "sim: in-sample warning" "$(cat "$TMP/w1")"; fi
    "$ELDR" sim "$DATA" -m "$TMP/half.h5" --rate 60 --policy eldr,rr >/dev/null 2>"$TMP/w2"
    if [ ! -s "$TMP/w2" ]; then ok "sim: no warning on the model's held-out rows"; else notok "sim: no warning on the model's held-out rows" "$(cat "$TMP/w2")"; fi
    "$ELDR" sim "$DATA" -m "$TMP/half.h5" --rate 60 --policy eldr,rr --split-seed 2 >/dev/null 2>"$TMP/w3"
    if grep -Eq "[0-9]+ of the 225 evaluated rows .* partly in-sample" "$TMP/w3"; then ok "sim: partly in-sample warning"; else notok "sim: partly in-sample warning" "$(cat "$TMP/w3")"; fi
    expect_fail2 "sim: --seeds with --prefix-mode" "prefix-caching what-if runs one seed" \
        "$ELDR" sim "$DATA" --seeds 3 --prefix-mode all --rate 10
    expect_fail2 "sim: bad --split" "--split: 'tail'" "$ELDR" sim "$DATA" --rate 60 --split tail
    expect_fail2 "sim: bad --seeds" "--seeds" "$ELDR" sim "$DATA" --rate 60 --seeds 0
fi

# progress bars on a terminal only (script(1) gives the command a tty)
if [ -f "$DATA" ] && command -v script >/dev/null; then
    script -qc "'$ELDR' sim '$DATA' --rate 60 --policy rr,eldr --seeds 3 >/dev/null" /dev/null \
        >"$TMP/tty.out" 2>&1
    if grep -q "load *\[#" "$TMP/tty.out" && grep -q "seeds *\[#" "$TMP/tty.out"; then
        ok "sim: load and seeds bars on a terminal"; else notok "sim: load and seeds bars on a terminal" "$(head -c 300 "$TMP/tty.out")"; fi
    "$ELDR" sim "$DATA" --rate 60 --policy rr,eldr --seeds 3 >/dev/null 2>"$TMP/notty.err"
    if [ ! -s "$TMP/notty.err" ]; then ok "sim: no bar without a terminal"; else notok "sim: no bar without a terminal" "$(head -c 300 "$TMP/notty.err")"; fi
fi
