#!/bin/sh
# tests/cli/costfit.sh - `eldr costfit`: the committed fixtures of
# tests/fixtures/costfit (made by make_profile.py from known coefficients)
# are recovered - within tolerance with noise, exactly without - and agree
# with numpy's lstsq on the same CSV; the cost file is written atomically
# and holds the fit; bad input exits 2 with one stderr line.
. "$ROOT/tests/cli/lib.sh"
PY=/usr/bin/python3
FIX="$ROOT/tests/fixtures/costfit"

json_check() { # FILE PYEXPR: j = the parsed JSON file
    $PY -c "import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if ($2) else 1)" "$1"
}
check() { # NAME COMMAND...
    n=$1; shift
    if "$@" 2>"$TMP/check.err"; then ok "$n"; else notok "$n" "$(head -c 300 "$TMP/check.err")"; fi
}

expect_status "costfit --help" 0 "$ELDR" costfit --help
expect_out "costfit --help shows usage" "usage: eldr costfit"

expect_status "costfit noisy profile" 0 "$ELDR" costfit "$FIX/profile.csv" -o "$TMP/cost.json"
expect_out "prints R^2" "^R\^2 0\.99"
expect_out "prints worst residuals" "^worst residuals:"
expect_out "names the intercept" "t0 \+ L\*a"

"$ELDR" costfit "$FIX/profile.csv" --json >"$TMP/fit.json" 2>/dev/null
# truth: t0 + 8 a = 1.52e-3, b = 3e-6, c = 25e-6, d = 5e-9 (make_profile.py)
check "noisy fit recovers the truth" json_check "$TMP/fit.json" \
    "abs(j['intercept_s']-1.52e-3)<0.05*1.52e-3 and abs(j['coefficients']['b']-3e-6)<0.05*3e-6 \
     and abs(j['coefficients']['c']-25e-6)<0.02*25e-6 and abs(j['coefficients']['d']-5e-9)<0.03*5e-9 \
     and j['r2']>0.999 and len(j['worst'])==5 and j['fitted']==['t0','b','c','d']"
check "cost file holds the fit" json_check "$TMP/cost.json" \
    "j['format']=='eldr-cost' and j['version']==1 and j['a']==0 and j['layers']==8 \
     and abs(j['t0']-j['intercept_s'])<1e-15 and 'note' in j"

# oracle: numpy least squares on the same CSV
cat >"$TMP/oracle.py" <<'PYEOF'
import json, sys
import numpy as np
rows = [l for l in open(sys.argv[1]) if l.strip() and not l.startswith('#')]
head = rows[0].strip().split(',')
X = np.array([[float(v) for v in l.split(',')] for l in rows[1:]])
col = {h: i for i, h in enumerate(head)}
usum = sum(X[:, col[f'U{l}']] for l in range(8))
A = np.column_stack([np.ones(len(X)), usum, X[:, col['batch']], X[:, col['kv_tokens']]])
y = X[:, col['step_ms']] * 1e-3
beta = np.linalg.lstsq(A, y, rcond=None)[0]
j = json.load(open(sys.argv[2]))['coefficients']
got = [j['t0'], j['b'], j['c'], j['d']]
sys.exit(0 if all(abs(g - w) <= 1e-6 * abs(w) for g, w in zip(got, beta)) else 1)
PYEOF
check "agrees with numpy lstsq (1e-6)" $PY "$TMP/oracle.py" "$FIX/profile.csv" "$TMP/fit.json"

"$ELDR" costfit "$FIX/depth.csv" --json -o "$TMP/depth.json" >"$TMP/depth_fit.json" 2>/dev/null
check "noise-free depth profile: t0 and a apart, exact (1e-9)" json_check "$TMP/depth.json" \
    "all(abs(j[k]-v)<=1e-9*v for k,v in dict(t0=1.2e-3,a=40e-6,b=3.0e-6,c=25e-6).items()) and j['d']==0"

# bad input: one line, exit 2
printf 'batch,U_sum,layers,step_ms\n64,100,8,5\n64,200,8,6\n64,300,8,7\n' >"$TMP/const.csv"
expect_fail2 "constant batch is rank-deficient" "rank-deficient: column \"batch\" is constant" \
    "$ELDR" costfit "$TMP/const.csv" -o "$TMP/never.json"
check "no cost file after a failed fit" test ! -e "$TMP/never.json"
printf 'batch,U0,step_ms\n1,2,3\n1,oops,3\n' >"$TMP/bad.csv"
expect_fail2 "bad number names line and column" "line 3: column \"U0\"" \
    "$ELDR" costfit "$TMP/bad.csv"
expect_fail2 "missing file" "cannot open" "$ELDR" costfit "$TMP/absent.csv"
expect_fail2 "no profile argument" "missing PROFILE" "$ELDR" costfit
expect_fail2 "unknown option" "unknown option" "$ELDR" costfit "$FIX/profile.csv" --bogus
expect_fail2 "bad --worst" "worst" "$ELDR" costfit "$FIX/profile.csv" --worst x
expect_fail2 "unwritable output" "write|create" \
    "$ELDR" costfit "$FIX/profile.csv" -o "$TMP/no/such/dir/cost.json"
