#!/bin/sh
# tests/cli/rho.sh - `eldr rho`: --help, the --json keys and their laws
# (mask 0-based and sorted, n_star == len(mask) after greedy, curve one
# number per layer with its peak at N*), --all-variants ordering and the
# unavailable gate_logit, determinism for a seed, the text curve, and the
# exit-2 cases with exactly one stderr line. On the real gpt-oss-20b trace
# (skipped when absent) the all-pairs rho of count_idf must be the value an
# independent numpy/scipy computation gives (0.7737564, data/README.md
# rounds it to 0.77).
. "$ROOT/tests/cli/lib.sh"
PY=/usr/bin/python3

SMALL="$TMP/small.h5"
"$ELDR" gen -o "$SMALL" --requests 200 --layers 8 --experts 16 --top-k 2 --domains 3 \
    --prompt-tokens 32 --decode-tokens 16 --seed 5 >/dev/null 2>&1
NODEC="$TMP/nodecode.h5"
"$ELDR" gen -o "$NODEC" --requests 50 --layers 4 --experts 8 --top-k 2 \
    --prompt-tokens 16 --decode-tokens 0 --seed 5 >/dev/null 2>&1

# json_check NAME FILE PYEXPR: ok when PYEXPR (j = the parsed JSON) holds.
json_check() {
    if $PY -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($3) else 1)" \
        "$2" 2>"$TMP/py.err"; then ok "$1"; else notok "$1" "$(head -c 300 "$TMP/py.err")"; fi
}

expect_status "rho --help exits 0" 0 "$ELDR" rho --help
expect_out "rho --help prints usage" "usage: eldr rho TRACE"

# one variant, all layers (the default)
expect_status "rho default" 0 "$ELDR" rho "$SMALL" --json
cp "$TMP/out" "$TMP/all.json"
json_check "rho --json keys" "$TMP/all.json" \
    "all(k in j for k in ('variant','rho','mask','n_star','curve')) and j['variant']=='count_idf'"
json_check "rho all layers: mask 0..L-1, n_star L, curve empty" "$TMP/all.json" \
    "j['mask']==list(range(8)) and j['n_star']==8 and j['curve']==[] and -1<=j['rho']<=1"
json_check "rho pairs: drawn 30000, i == j dropped" "$TMP/all.json" \
    "j['pairs_drawn']==30000 and 29700<j['pairs']<30000"

# greedy
expect_status "rho --layers auto" 0 "$ELDR" rho "$SMALL" --layers auto --json --seed 3
cp "$TMP/out" "$TMP/auto.json"
json_check "greedy: curve per layer, peak at N*, mask sorted" "$TMP/auto.json" \
    "len(j['curve'])==8 and j['n_star']==1+j['curve'].index(max(j['curve'])) \
     and len(j['mask'])==j['n_star'] and j['mask']==sorted(j['mask']) \
     and abs(j['rho']-max(j['curve']))<1e-12 and sorted(j['order'][:j['n_star']])==j['mask']"
"$ELDR" rho "$SMALL" --layers auto --json --seed 3 --threads 1 >"$TMP/auto1.json" 2>/dev/null
json_check "greedy: same result for a seed, any thread count" "$TMP/auto1.json" \
    "(lambda a: a['curve']==j['curve'] and a['mask']==j['mask'])(json.load(open('$TMP/auto.json')))"

# a layer list, ranges, any order
expect_status "rho --layers LIST" 0 "$ELDR" rho "$SMALL" --layers 5,0-2 --variant binary --json
json_check "layer list: sorted 0-based mask" "$TMP/out" \
    "j['mask']==[0,1,2,5] and j['n_star']==4 and j['variant']=='binary'"

# all pairs, CI
expect_status "rho --pairs all --ci" 0 "$ELDR" rho "$SMALL" --pairs all --ci --ci-samples 200 --json
json_check "all pairs: N(N-1)/2 and a CI around rho" "$TMP/out" \
    "j['pairs']==200*199//2 and j['ci'][0]<=j['rho']<=j['ci'][1] and j['ci'][1]-j['ci'][0]<0.2"

# all variants: best first, gate_logit unavailable when absent
expect_status "rho --all-variants" 0 "$ELDR" rho "$SMALL" --all-variants --json --pairs 5000
json_check "all variants: a list, best first, rho_all beside" "$TMP/out" \
    "isinstance(j,list) and len(j)==6 and (lambda a: [x['rho'] for x in a]==sorted([x['rho'] for x in a],reverse=True))([x for x in j if x['available']]) \
     and all(x['rho']>=x['curve'][-1]-1e-12 and abs(x['curve'][-1]-x['rho_all'])<1e-9 for x in j if x['available'])"
json_check "all variants: gates the trace lacks are unavailable, listed last" "$TMP/out" \
    "[x['variant'] for x in j if not x['available']]==['gate_prob','gate_logit'] and not j[-1]['available']"

expect_status "rho --curve text" 0 "$ELDR" rho "$SMALL" --layers auto --curve
expect_out "text curve marks N*" "<- N\\*"
expect_out "text plot has its axis" "layers kept"

# bad input: exit 2, one line
expect_fail2 "no decode_counts" "rho needs decode_counts" "$ELDR" rho "$NODEC"
expect_fail2 "layer out of range" "layers: value out of range" "$ELDR" rho "$SMALL" --layers 0,9
expect_fail2 "layer listed twice" "twice" "$ELDR" rho "$SMALL" --layers 1,1
expect_fail2 "layer list garbage" "layers: .1,x. is not a list" "$ELDR" rho "$SMALL" --layers 1,x
expect_fail2 "unknown variant" "unknown variant" "$ELDR" rho "$SMALL" --variant idf
expect_fail2 "variant without its data" "gate_logit" "$ELDR" rho "$SMALL" --variant gate_logit
expect_fail2 "bad --pairs" "pairs: 0 out of range" "$ELDR" rho "$SMALL" --pairs 0
expect_fail2 "bad --seed" "seed: -1 out of range" "$ELDR" rho "$SMALL" --seed -1
expect_fail2 "--all-variants with a layer list" "does not apply" "$ELDR" rho "$SMALL" --all-variants --layers 0,1
expect_fail2 "missing file" "nosuch" "$ELDR" rho "$TMP/nosuch.h5"
expect_fail2 "no trace given" "no trace" "$ELDR" rho
expect_fail2 "unknown option" "unknown option" "$ELDR" rho "$SMALL" --frobnicate

if [ -f "$DATA" ]; then
    expect_status "real trace, all pairs" 0 "$ELDR" rho "$DATA" --pairs all --json
    json_check "real trace: rho(count_idf) equals numpy's 0.7737564" "$TMP/out" \
        "j['pairs']==100576 and abs(j['rho']-0.77375640046415)<1e-6"
    expect_status "real trace, all variants" 0 "$ELDR" rho "$DATA" --all-variants --json
    json_check "real trace: gate_logit unavailable, five variants ranked" "$TMP/out" \
        "[x['variant'] for x in j if not x['available']]==['gate_logit'] and sum(x['available'] for x in j)==5"
else
    echo "# real trace absent: its checks skipped"
fi

# progress: greedy selection draws its steps on a terminal's stderr, stdout
# (--json to a file here) stays clean, and nothing shows without a terminal
on_tty "$TMP/ts" "'$ELDR' rho '$SMALL' --layers auto --json >'$TMP/pj.json'"
expect_in "progress on a terminal: greedy steps" "$TMP/ts" "eldr rho: layer selection \[#+\] 8/8"
$PY -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j['n_star'] >= 1 else 1)" \
    "$TMP/pj.json" && ok "progress on a terminal: --json stdout stays clean" ||
    notok "progress on a terminal: --json stdout stays clean" "$(head -c 300 "$TMP/pj.json")"
on_tty "$TMP/ts2" "'$ELDR' rho '$SMALL' --all-variants >/dev/null"
expect_in "progress with --all-variants names the variant" "$TMP/ts2" "layer selection \(count_idf\)"
"$ELDR" rho "$SMALL" --layers auto >"$TMP/out" 2>"$TMP/err"
expect_not_in "no progress bar when stderr is not a terminal" "$TMP/err" "layer selection"
