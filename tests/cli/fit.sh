#!/bin/sh
# tests/cli/fit.sh - `eldr fit`, `eldr info MODEL`, `eldr model export|import`.
#
# Fits on a small generated trace and on the real gpt-oss-20b routing data;
# checks the --json keys and the laws they must obey (sizes sum to the rows
# fitted, none above ceil(N/K)); determinism for a seed; the JSON export /
# import round trip; the exit-2 cases; left-out all-zero signatures; and
# the exactness handle: `--iters 0 --init-rows` reports the objective of
# the optimal balanced assignment, which must equal scipy's
# linear_sum_assignment on the N x (K*cap) expansion, with signatures and
# IDF recomputed independently in numpy from the trace.
. "$ROOT/tests/cli/lib.sh"
PY=/usr/bin/python3

# A small trace: the committed sample when present, else a generated one.
SMALL="$ROOT/samples/small.h5"
if [ ! -f "$SMALL" ]; then
    SMALL="$TMP/small.h5"
    "$ELDR" gen -o "$SMALL" --requests 300 --layers 8 --experts 16 --top-k 2 \
        --domains 3 --prompt-tokens 48 --decode-tokens 24 --seed 5 >/dev/null 2>&1
fi

# json_check FILE PYEXPR: evaluate PYEXPR with j = the parsed JSON file.
json_check() {
    $PY -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"
}
check() { # NAME COMMAND...: ok when COMMAND succeeds
    n=$1; shift
    if "$@" 2>"$TMP/check.err"; then ok "$n"; else notok "$n" "$(head -c 300 "$TMP/check.err")"; fi
}

expect_status "fit --help" 0 "$ELDR" fit --help
expect_out "fit --help shows usage" "usage: eldr fit"
expect_status "model --help" 0 "$ELDR" model --help
expect_out "model --help shows usage" "usage: eldr model"

# --- small trace, automatic layer selection ---
expect_status "fit small (auto layers)" 0 "$ELDR" fit "$SMALL" -k 3 -o "$TMP/s.h5"
expect_out "fit prints sizes" "^sizes: w0="
expect_out "fit prints the stage times" "^seconds: load .* recipe .* selection .* signatures .* fit .* write .* total"
expect_status "info small model" 0 "$ELDR" info "$TMP/s.h5"
expect_out "info says valid" "valid +yes"
expect_out "info shows the calibration hash" "calib sha256 [0-9a-f]{64}"
sha=$(sha256sum "$SMALL" | cut -d' ' -f1)
expect_out "calibration hash is the trace file's sha256" "calib sha256 $sha"

# --- real data, K = 4 ---
if [ -f "$DATA" ]; then
    "$ELDR" fit "$DATA" -k 4 -o "$TMP/r.h5" --json >"$TMP/r.json" 2>"$TMP/err"
    if [ $? -eq 0 ]; then ok "fit real data K=4"; else notok "fit real data K=4" "$(cat "$TMP/err")"; fi
    check "fit --json keys" json_check "$TMP/r.json" \
        "all(k in j for k in ('k','sizes','objective','rho','mask','n_star','seconds')) and \
         all(s in j['seconds'] for s in ('recipe','signatures','selection','fit','write','total'))"
    check "fit --json laws: K=4, sizes sum to 449, none above 113, N* = |mask|" json_check "$TMP/r.json" \
        "j['k']==4 and sum(j['sizes'])==449 and max(j['sizes'])<=113 and \
         j['n_star']==len(j['mask']) and j['mask']==sorted(j['mask']) and 0.5<j['rho']<1 and \
         0<j['objective']<449"
    "$ELDR" info "$TMP/r.h5" --json >"$TMP/ri.json" 2>"$TMP/err"
    check "info --json of the real model" json_check "$TMP/ri.json" \
        "j['k']==4 and j['valid'] and j['variant']=='count_idf' and j['layers']==24 and \
         j['experts']==32 and j['top_k']==4 and j['calib_rows']==449 and abs(j['tau']-0.1)<1e-12"
    # determinism: same seed, same centroids (bit for bit through the JSON)
    "$ELDR" fit "$DATA" -k 4 -o "$TMP/r2.h5" --json >"$TMP/r2.json" 2>/dev/null
    "$ELDR" model export "$TMP/r.h5" -o "$TMP/r.cj" >/dev/null 2>&1
    "$ELDR" model export "$TMP/r2.h5" -o "$TMP/r2.cj" >/dev/null 2>&1
    check "fit is deterministic for a seed" $PY -c "
import json,sys
a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2]))
sys.exit(0 if a['centroids']==b['centroids'] and a['layer_mask']==b['layer_mask'] else 1)" "$TMP/r.cj" "$TMP/r2.cj"
    expect_status "K = N on 40 calibration rows" 0 "$ELDR" fit "$DATA" -k 40 --calib-split 40 \
        --layers all -o "$TMP/kn.h5" --json
    check "K = N: every cluster holds one request, objective 0" json_check "$TMP/out" \
        "j['sizes']==[1]*40 and abs(j['objective'])<1e-4 and j['calib_rows']==40"
    expect_status "K = 1 on a fraction" 0 "$ELDR" fit "$DATA" -k 1 --calib-split 0.25 \
        --layers 0,3-5 --variant sqrt_count -o "$TMP/k1.h5" --json
    check "K = 1: one cluster of all 112 rows" json_check "$TMP/out" \
        "j['sizes']==[112] and j['mask']==[0,3,4,5] and j['variant']=='sqrt_count'"
    expect_status "unbalanced fit" 0 "$ELDR" fit "$DATA" -k 4 --unbalanced --layers all \
        --calib-split 200 --workers a,b,c,d -o "$TMP/u.h5" --json
    check "unbalanced: sizes sum to 200, worker names kept" json_check "$TMP/out" \
        "sum(j['sizes'])==200 and j['workers']==['a','b','c','d'] and not j['balanced']"
    expect_fail2 "K > N exits 2" "K = 250 exceeds the 200" "$ELDR" fit "$DATA" -k 250 --calib-split 200 -o "$TMP/x.h5"
    expect_fail2 "K above the one K range exits 2" "-k: 500 out of range \\[1, 256\\]" "$ELDR" fit "$DATA" -k 500 -o "$TMP/x.h5"
    expect_fail2 "missing gate dataset exits 2" "gate_logit" "$ELDR" fit "$DATA" -k 2 \
        --variant gate_logit --layers all -o "$TMP/x.h5"
fi

# --- export / import round trip ---
expect_status "model export" 0 "$ELDR" model export "$TMP/s.h5" -o "$TMP/s.json"
check "export has the reference keys" json_check "$TMP/s.json" \
    "all(k in j for k in ('L','e','k','variant','layer_mask','sig_idf','centroids')) and len(j['centroids'])==3"
expect_status "model import" 0 "$ELDR" model import "$TMP/s.json" -o "$TMP/s2.h5"
expect_status "model export again" 0 "$ELDR" model export "$TMP/s2.h5" -o "$TMP/s2.json"
check "export -> import -> export is byte-identical" cmp -s "$TMP/s.json" "$TMP/s2.json"
expect_status "info of the imported model" 0 "$ELDR" info "$TMP/s2.h5"

# a reference-style JSON written by hand: L=4, e=3, top-2, mask {1,3},
# the full 4x3 idf (sliced on import), two unit centroids
cat >"$TMP/ref.json" <<'JSON'
{"L": 4, "e": 3, "k": 2, "variant": "count_idf", "layer_mask": [0, 1, 0, 1],
 "sig_idf": [[0.5, 0.5, 0.5], [0.1, 0.2, 0.3], [0.5, 0.5, 0.5], [0.4, 0.5, 0.6]],
 "centroids": [[0.6, 0.8, 0, 0, 0, 0], [0, 0, 0, 0, 0.6, 0.8]]}
JSON
expect_status "import a hand-written reference JSON" 0 "$ELDR" model import "$TMP/ref.json" \
    -o "$TMP/ref.h5" --workers decode-0,decode-1 --tau 0.2 --json
"$ELDR" info "$TMP/ref.h5" --json >"$TMP/refi.json" 2>&1
check "imported reference: mask [1,3], K 2, names and tau" json_check "$TMP/refi.json" \
    "j['mask']==[1,3] and j['k']==2 and j['workers']==['decode-0','decode-1'] and j['tau']==0.2"
"$ELDR" model export "$TMP/ref.h5" -o "$TMP/ref2.json" >/dev/null 2>&1
check "re-exported idf is the mask's slice" json_check "$TMP/ref2.json" \
    "[round(x,6) for x in j['sig_idf']]==[0.1,0.2,0.3,0.4,0.5,0.6]"
sed 's/0.6, 0.8, 0, 0, 0, 0/0.6, 0.9, 0, 0, 0, 0/' "$TMP/ref.json" >"$TMP/bad.json"
expect_fail2 "import refuses a non-unit centroid" "bad.json: centroids row 0 has L2 norm" \
    "$ELDR" model import "$TMP/bad.json" -o "$TMP/bad.h5"
check "no model written after a refused import" test ! -e "$TMP/bad.h5"
expect_fail2 "import refuses duplicate workers" "workers\[1\] 'x' repeats" \
    "$ELDR" model import "$TMP/ref.json" -o "$TMP/bad.h5" --workers x,x
expect_fail2 "export of a trace (not a model) exits 2" "format is 'eldr-trace'" \
    "$ELDR" model export "$SMALL" -o "$TMP/x.json"
printf 'garbage' >"$TMP/junk.h5"
expect_fail2 "info of a non-HDF5 file exits 2" "junk.h5" "$ELDR" info "$TMP/junk.h5"

# --- bad input ---
expect_fail2 "K = 0 exits 2" "fit: -k: 0 out of range" "$ELDR" fit "$SMALL" -k 0 -o "$TMP/x.h5"
expect_fail2 "bad variant exits 2" "fit: --variant: 'cosine' is not a variant" \
    "$ELDR" fit "$SMALL" -k 2 --variant cosine -o "$TMP/x.h5"
expect_fail2 "missing file exits 2" "nope.h5" "$ELDR" fit "$TMP/nope.h5" -k 2 -o "$TMP/x.h5"
expect_fail2 "layer out of range exits 2" "fit: --layers: value out of range" \
    "$ELDR" fit "$SMALL" -k 2 --layers 0,999 -o "$TMP/x.h5"
expect_fail2 "malformed layer list exits 2" "fit: --layers: 'a,b' is not a list" \
    "$ELDR" fit "$SMALL" -k 2 --layers a,b -o "$TMP/x.h5"
expect_fail2 "--iters 0 without --init-rows exits 2" "fit: --iters 0 needs --init-rows" \
    "$ELDR" fit "$SMALL" -k 2 --iters 0
expect_fail2 "wrong number of --init-rows exits 2" "2 rows given for K = 3" \
    "$ELDR" fit "$SMALL" -k 3 --init-rows 1,2 -o "$TMP/x.h5"
expect_fail2 "wrong number of --workers exits 2" "fit: --workers: 2 names given for K = 3" \
    "$ELDR" fit "$SMALL" -k 3 --workers a,b -o "$TMP/x.h5"
expect_fail2 "unwritable output exits 2" "no/such/dir" \
    "$ELDR" fit "$SMALL" -k 2 --layers all -o "$TMP/no/such/dir/m.h5"
expect_fail2 "unknown option exits 2" "unknown option" "$ELDR" fit "$SMALL" -k 2 --bogus

# --- traces that need care: no decode counts, all-zero signatures ---
$PY - "$SMALL" "$TMP/nodec.h5" "$TMP/zero.h5" <<'PY'
import sys, shutil, h5py
src, nodec, zero = sys.argv[1:4]
shutil.copy(src, nodec)
with h5py.File(nodec, "a") as f:
    for name in ("decode_counts", "decode_tokens", "tokens"):
        if name in f:
            del f[name]
shutil.copy(src, zero)
with h5py.File(zero, "a") as f:
    # rows 5 and 9 get an empty prompt: all-zero counts (conservation holds)
    for r in (5, 9):
        c = f["prefill_counts"][r]
        c[...] = 0
        f["prefill_counts"][r] = c
        f["prompt_tokens"][r] = 0
    for name in ("tokens", "gate_prob", "gate_logit"):
        if name in f:
            del f[name]
PY
expect_fail2 "--layers auto without decode_counts exits 2" "pass --layers" \
    "$ELDR" fit "$TMP/nodec.h5" -k 2 -o "$TMP/x.h5"
expect_status "--layers all without decode_counts fits (rho unknown)" 0 \
    "$ELDR" fit "$TMP/nodec.h5" -k 2 --layers all -o "$TMP/nd.h5" --json
check "rho is null without decode_counts" json_check "$TMP/out" "j['rho'] is None"
expect_status "all-zero signatures are left out" 0 "$ELDR" fit "$TMP/zero.h5" -k 3 -o "$TMP/z.h5" --json
check "left-out rows reported in --json" json_check "$TMP/out" \
    "j['zero_rows']==[5,9] and sum(j['sizes'])==j['fit_rows']==j['calib_rows']-2"
if grep -q "left out 2 requests with an all-zero signature under the mask (rows 5, 9)" "$TMP/err"; then
    ok "left-out rows reported on stderr"; else notok "left-out rows reported on stderr" "$(cat "$TMP/err")"; fi
expect_fail2 "an all-zero init row exits 2" "initial row 5 .* all-zero" \
    "$ELDR" fit "$TMP/zero.h5" -k 2 --iters 0 --init-rows 5,6

# --- exactness: --iters 0 --init-rows against scipy's Hungarian ---
cat >"$TMP/oracle.py" <<'PY'
# objective of the optimal balanced assignment, recomputed from the trace:
# count_idf signatures (IDF over the first n rows), centroids = the
# signatures of the init rows, scipy.optimize.linear_sum_assignment on the
# N x (K*cap) matrix (each cluster repeated cap = ceil(N/K) times).
import sys, math, h5py, numpy as np
from scipy.optimize import linear_sum_assignment
path, n, layers, init = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
with h5py.File(path, "r") as f:
    c = f["prefill_counts"][:n].astype(np.float64)
L = c.shape[1]
mask = list(range(L)) if layers == "all" else [int(x) for x in layers.split(",")]
df = (c > 0).sum(axis=0)
idf = np.log((n + 1) / (df + 1))
x = (c * idf)[:, mask, :].reshape(n, -1)
x /= np.linalg.norm(x, axis=1, keepdims=True)
rows = [int(r) for r in init.split(",")]
mu = x[rows]
K = len(rows)
cap = -(-n // K)
cost = 1.0 - x @ mu.T
r, col = linear_sum_assignment(np.repeat(cost, cap, axis=1))
print("%.12f" % cost[r, col // cap].sum())
PY
exact() { # NAME TRACE N LAYERS INIT
    name=$1; tr=$2; n=$3; lay=$4; init=$5
    "$ELDR" fit "$tr" -k "$(echo "$init" | tr , '\n' | wc -l)" --calib-split "$n" --split head \
        --layers "$lay" --iters 0 --init-rows "$init" --json >"$TMP/ex.json" 2>"$TMP/err"
    want=$($PY "$TMP/oracle.py" "$tr" "$n" "$lay" "$init" 2>&1)
    got=$($PY -c "import json,sys; print(json.load(open(sys.argv[1]))['objective'])" "$TMP/ex.json" 2>&1)
    if $PY -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if abs(a-b)<=1e-6*abs(b) else 1)" \
        "$got" "$want" 2>/dev/null; then ok "$name (eldr $got, scipy $want)"; else
        notok "$name" "eldr: $got" "scipy: $want" "$(head -c 300 "$TMP/err")"; fi
}
exact "exact balanced assignment, small trace, K=3" "$SMALL" 250 all 0,100,200
if [ -f "$DATA" ]; then
    exact "exact balanced assignment, real data, K=4" "$DATA" 449 all 0,100,200,300
    exact "exact balanced assignment, real data, K=7 on 301 rows, masked" "$DATA" 301 \
        0,5,6,7,13 3,50,99,150,200,250,300
fi

# which rows calibrated: recorded in the model (calib_split), shown by info
if [ -f "$DATA" ]; then
    "$ELDR" fit "$DATA" -k 2 --layers all -o "$TMP/pa.h5" >/dev/null 2>&1
    "$ELDR" fit "$DATA" -k 2 --layers all --calib-split 100 -o "$TMP/pr.h5" >/dev/null 2>&1
    "$ELDR" fit "$DATA" -k 2 --layers all --calib-split 100 --split head -o "$TMP/ph.h5" >/dev/null 2>&1
    "$ELDR" fit "$DATA" -k 2 --layers all --calib-split 0.5 --split stratified --split-seed 4 \
        -o "$TMP/ps.h5" >/dev/null 2>&1
    for m in "pa:all" "pr:random 100 seed 1" "ph:head 100" "ps:stratified 224 seed 4"; do
        expect_status "fit provenance ${m%%:*}" 0 "$ELDR" info "$TMP/${m%%:*}.h5"
        expect_out "fit provenance ${m%%:*}: calib rows ${m#*:}" "calib rows +${m#*:}\$"
    done
    "$ELDR" info "$TMP/pr.h5" --json >"$TMP/pr.json" 2>/dev/null
    if $PY -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j['calib_split']=='random 100 seed 1' and j['calib_rows']==100 else 1)" "$TMP/pr.json"; then
        ok "fit provenance in info --json"; else notok "fit provenance in info --json" "$(head -c 300 "$TMP/pr.json")"; fi
    expect_fail2 "fit: bad --split" "--split: 'last'" "$ELDR" fit "$DATA" -k 2 --calib-split 100 --split last
fi

# progress: on a terminal every stage draws the bar (layer selection steps,
# signatures, k-means rounds) on stderr while --json on stdout stays clean;
# without a terminal stderr has no bar
on_tty "$TMP/ts" "'$ELDR' fit '$SMALL' -k 4 -o '$TMP/pm.h5' --json >'$TMP/pj.json'"
expect_in "progress on a terminal: layer selection steps" "$TMP/ts" "eldr fit: layer selection \[#+\] 16/16"
expect_in "progress on a terminal: k-means rounds" "$TMP/ts" "eldr fit: k-means \[#+\] 50/50"
expect_in "progress on a terminal: signatures" "$TMP/ts" "eldr fit: signatures"
json_check "$TMP/pj.json" "j['k'] == 4" && ok "progress on a terminal: --json stdout stays clean" ||
    notok "progress on a terminal: --json stdout stays clean" "$(head -c 300 "$TMP/pj.json")"
"$ELDR" fit "$SMALL" -k 4 -o "$TMP/pm.h5" >"$TMP/out" 2>"$TMP/err"
expect_not_in "no progress bar when stderr is not a terminal" "$TMP/err" "layer selection|k-means|\\["
