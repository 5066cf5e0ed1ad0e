#!/bin/sh
# tests/bench/advise.sh - `eldr advise`'s grid, both cores, wall time of the
# whole command (load, split, fits, every cell under every seed):
#   3 tau x 2 K x 5 seeds on the shared real trace (target < 3 s);
#   5 tau x 4 K x 2 seeds on 1000 evaluated requests x 512 decode tokens,
#   48 layers, 128 experts, top-8 (target < 20 s; the trace is generated
#   once into build/, 2000 rows of which the random split evaluates 1000).
# Rows: what, size, seconds, rate (cells/s; a cell = one policy, one seed).
ELDR="$ROOT/$BIN/eldr"
DATA="$ROOT/../shared/data/gptoss20b-routing.h5"
now() { date +%s.%N; }
row() { # WHAT SIZE T0 T1 CELLS
    awk -v w="$1" -v s="$2" -v a="$3" -v b="$4" -v c="$5" \
        'BEGIN { t = b - a; printf "%s\t%s\t%.4f\t%.1f cells/s\n", w, s, t, c / t }'
}
if [ -f "$DATA" ]; then
    t0=$(now)
    "$ELDR" advise "$DATA" --rate 60 --tau 0,0.1,0.2 --workers 4,8 --compare-fleets --seeds 5 --json \
        >/dev/null || echo "bench: advise on the real trace failed" >&2
    t1=$(now)
    row "advise grid, real trace" "3 tau x 2 K x 5 seeds (+3 baselines), 225 req" "$t0" "$t1" 60
fi
big="$ROOT/build/bench_advise_48x128.h5"
if [ ! -f "$big" ]; then
    mkdir -p "$ROOT/build"
    "$ELDR" gen -o "$big" --requests 2000 --layers 48 --experts 128 --top-k 8 --domains 8 \
        --prompt-tokens 128 --decode-tokens 512 --seed 5 >/dev/null 2>&1 ||
        { echo "bench: gen for advise failed" >&2; exit 0; }
fi
t0=$(now)
"$ELDR" advise "$big" --rate 60 --tau 0,0.05,0.1,0.2,0.4 --workers 4,8,12,16 --compare-fleets --seeds 2 \
    --output-tokens 512 --json >/dev/null || echo "bench: advise 48x128 failed" >&2
t1=$(now)
row "advise grid, L48 E128 top-8" "5 tau x 4 K x 2 seeds (+3 baselines), 1000 req x 512 tok" \
    "$t0" "$t1" 64
