#!/bin/sh
# tests/bench/dash.sh - the dashboard's open and view 7 (issue 30 item 5:
# medium.h5 at 200 req/s opens in < 2 s and view 7 takes < 5 s; they took
# 11.4 s and 38 s) and its first look and refined frame (issue 34 item 1),
# each as wall-clock seconds of `eldr dash ... --frame`, with an empty
# cache and a warm one, beside the yardstick measured in the same run:
# h5py reading prefill_counts and decode_counts whole (the data any
# analysis of the trace must read). Rows: "what<TAB>size<TAB>s<TAB>note".
# samples/medium.h5 is made as `make samples` makes it. BENCH_DASH_TRACE
# and BENCH_DASH_MODEL add the rows of issue 34's larger trace (t20k.h5 +
# m20k.h5: first look <= 4x the yardstick, refined <= 12x; 90.8 s = 42x
# before).
BIN=${BIN:-bin}
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
ELDR="$ROOT/$BIN/eldr"
PY=/usr/bin/python3
M="$ROOT/samples/medium.h5"
if [ ! -x "$ELDR" ] || ! $PY -c 'import h5py' 2>/dev/null; then
    echo "dash bench: needs $ELDR and h5py under $PY; skipped" >&2
    exit 0
fi
[ -f "$M" ] || make -s -C "$ROOT" samples >/dev/null 2>&1
[ -f "$M" ] || { echo "dash bench: $M missing (make samples); skipped" >&2; exit 0; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
ELDR_CACHE_DIR="$TMP/cache"
export ELDR_CACHE_DIR

now() { date +%s.%N; }
# secs CMD...: run it (output dropped), print its wall-clock seconds
secs() {
    t0=$(now)
    "$@" >/dev/null 2>&1 || echo "dash bench: failed: $*" >&2
    awk -v a="$t0" -v b="$(now)" 'BEGIN {printf "%.3f", b - a}'
}
yardstick() {
    $PY - "$1" <<'PYEOF'
import sys, time, h5py
t = time.time()
with h5py.File(sys.argv[1], "r") as f:
    f["prefill_counts"][...]
    f["decode_counts"][...]
print("%.3f" % (time.time() - t))
PYEOF
}
# row WHAT SIZE SECONDS YARD NOTE
row() {
    x=$(awk -v s="$3" -v y="$4" 'BEGIN {printf "%.1fx the yardstick", s / y}')
    printf '%s\t%s\t%s\t%s; %s\n' "$1" "$2" "$3" "$x" "$5"
}

y=$(yardstick "$M")
printf 'h5py reads the counts (yardstick)\tmedium.h5\t%s\t-\n' "$y"
D="$ELDR dash $M --rate 200 --width 100 --height 30"
row "dash open, first look, cache empty" "medium.h5 200/s" \
    "$(secs $D --frame "$TMP/f" --first)" "$y" "target < 2 s; was 11.4 s"
rm -rf "$ELDR_CACHE_DIR"
row "dash open + view 7's first look grid, cache empty" "medium.h5 200/s" \
    "$(secs $D --frame "$TMP/f" --first --view tradeoff)" "$y" "target < 5 s; was 38 s"
rm -rf "$ELDR_CACHE_DIR"
row "dash open, refined, cache empty" "medium.h5 200/s" \
    "$(secs $D --frame "$TMP/f")" "$y" "every row, 5 seeds"
row "dash open, refined, cache warm" "medium.h5 200/s" \
    "$(secs $D --frame "$TMP/f")" "$y" "target < 2 s; was 11.4 s"
row "dash open + view 7's refined grid" "medium.h5 200/s" \
    "$(secs $D --frame "$TMP/f" --view tradeoff)" "$y" "every row, 5 seeds; was 38 s"

if [ -n "${BENCH_DASH_TRACE:-}" ] && [ -f "$BENCH_DASH_TRACE" ]; then
    rm -rf "$ELDR_CACHE_DIR"
    n=$(basename "$BENCH_DASH_TRACE")
    B="$ELDR dash $BENCH_DASH_TRACE ${BENCH_DASH_MODEL:+-m $BENCH_DASH_MODEL} --rate 200"
    y=$(yardstick "$BENCH_DASH_TRACE")
    printf 'h5py reads the counts (yardstick)\t%s\t%s\t-\n' "$n" "$y"
    row "dash first look, cache empty" "$n 200/s" "$(secs $B --frame "$TMP/f" --first)" \
        "$y" "target <= 4x"
    row "dash refined, 5 seeds, cache empty" "$n 200/s" \
        "$(secs $B --seeds 5 --frame "$TMP/f")" "$y" "target <= 12x; was 90.8 s = 42x"
    row "dash refined, 5 seeds, cache warm" "$n 200/s" \
        "$(secs $B --seeds 5 --frame "$TMP/f")" "$y" "the cache's hit"
fi
