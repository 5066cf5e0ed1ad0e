#!/bin/sh
# tests/eval/cost_grid.sh - the cost rule against the band rule and every
# balancer (issue 33's "done when"): `eldr sim --policy
# eldr,eldr-cost,random,rr,jsq,p2c --seeds 20 --json` over a grid of fleet
# sizes and rates, on the real gpt-oss-20b trace and on three `eldr gen`
# traces (weak and strong locality; short answers on the reference
# geometry), then one markdown table (cost_table.py) as docs/routing.md
# shows it. About two minutes on two cores.
#
#   sh tests/eval/cost_grid.sh [OUTDIR]     (BIN=bin by default)
BIN=${BIN:-bin}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$(mktemp -d)}
REAL=$ROOT/../shared/data/gptoss20b-routing.h5
mkdir -p "$OUT" || exit 2
grid() {  # name trace "K:R ..."
    mkdir -p "$OUT/$1"
    for kr in $3; do
        K=${kr%:*}; R=${kr#*:}
        "$BIN/eldr" sim "$2" --policy eldr,eldr-cost,random,rr,jsq,p2c --workers "$K" \
            --rate "$R" --seeds 20 --json >"$OUT/$1/k${K}_r${R}.json" || exit 1
    done
}
gen() {  # name flags...
    n=$1; shift
    [ -f "$OUT/$n.h5" ] || "$BIN/eldr" gen -o "$OUT/$n.h5" --requests 1000 "$@" >/dev/null || exit 1
}
if [ -f "$REAL" ]; then
    grid gptoss20b "$REAL" "4:20 4:60 4:120 8:60 8:120 8:240"
else
    echo "cost_grid: $REAL not found; the real trace's rows are left out" >&2
fi
gen weak --domains 4 --domain-strength 0.3 --seed 5
gen strong --domains 4 --domain-strength 2.5 --seed 6
gen short --domains 6 --layers 48 --experts 128 --top-k 8 --prompt-tokens 128 \
    --decode-tokens 32 --seed 8
G="4:20 4:60 4:120 4:240 8:60 8:120 8:240 8:480"
grid gen-weak "$OUT/weak.h5" "$G"
grid gen-strong "$OUT/strong.h5" "$G"
grid gen-short "$OUT/short.h5" "$G"
python3 "$ROOT/tests/eval/cost_table.py" "$OUT"
