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
    expect_fail2 "sim real: no arrival_s" "arrival_s" "$ELDR" sim "$DATA" --policy rr
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
