#!/bin/sh
# tests/bench/scale.sh - issue 34's production-size figures: the workbench
# on a 20,000-request trace of the reference geometry, beside the
# yardstick and the figures before the work (docs/memory.md).
#
# The trace is the issue's own command (`eldr gen --requests 20000
# --layers 48 --experts 128 --top-k 8 --domains 8 --seed 3`, 166 MB),
# generated once into build/ (about a minute) and its model fitted once.
# The yardstick is h5py reading prefill_counts and decode_counts whole,
# the data any analysis of the trace must read. Each command runs once,
# wall clock, with the dashboard's caches empty (ELDR_CACHE_DIR is a fresh
# directory); peak memory is GNU time's maximum resident set (KiB), divided by
# the trace's 20,000 requests.
#
# The earlier figures are issue 34's table, measured on this machine at
# 23d7981 (fit 3.9 s 0.96 GB, sim 25.5 s 1.43 GB, dash --seeds 5 90.8 s
# 1.82 GB; the yardstick then read 2.2 s); for the dashboard without a
# model (a split per seed) main at 35739e0 (docs/memory.md: 23.5 s wall,
# 26.3 s CPU at load 1.8, about 9x the yardstick then; 2,472,328 KiB).
#
# Rows: what, size, seconds, "N.Nx the yardstick, N KiB (N B) a request
# (was ...)"; issue 34's "40 KB a request" read as 40,000 B.
# ELDR_BENCH_SCALE=0 skips it (it takes a few minutes).
[ "${ELDR_BENCH_SCALE:-1}" = 0 ] && exit 0
ELDR="$ROOT/$BIN/eldr"
PY=/usr/bin/python3
TIME=/usr/bin/time
N=20000
[ -x "$TIME" ] || { echo "bench scale: GNU time (/usr/bin/time) missing; skipped" >&2; exit 0; }
"$PY" -c 'import h5py' 2>/dev/null ||
    { echo "bench scale: /usr/bin/python3 lacks h5py; skipped" >&2; exit 0; }
mkdir -p "$ROOT/build"
t="$ROOT/build/bench_scale_t20k.h5"
m="$ROOT/build/bench_scale_m20k.h5"
if [ ! -f "$t" ]; then
    echo "bench scale: generating the 20,000-request trace once (about a minute)" >&2
    "$ELDR" gen -o "$t" --requests $N --layers 48 --experts 128 --top-k 8 --domains 8 \
        --seed 3 >/dev/null 2>&1 || { echo "bench scale: gen failed" >&2; rm -f "$t"; exit 0; }
fi
if [ ! -f "$m" ]; then
    "$ELDR" fit "$t" -k 8 -o "$m" >/dev/null 2>&1 || { echo "bench scale: fit failed" >&2; exit 0; }
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export ELDR_CACHE_DIR="$tmp/cache"

# measure NAME CMD...: wall seconds and peak KB into $tmp/NAME
measure() {
    name=$1; shift
    rm -rf "$ELDR_CACHE_DIR"
    if ! "$TIME" -f "%e %M" -o "$tmp/$name" "$@" >/dev/null 2>"$tmp/$name.err"; then
        echo "bench scale: $name failed: $(tail -1 "$tmp/$name.err")" >&2
        return 1
    fi
    tail -1 "$tmp/$name" >"$tmp/$name.last"
}
measure yard "$PY" -c "import h5py, sys
f = h5py.File(sys.argv[1], 'r'); f['prefill_counts'][:]; f['decode_counts'][:]" "$t" || exit 0
read -r yard _ <"$tmp/yard.last"

# row WHAT SIZE NAME WAS
row() {
    [ -f "$tmp/$3.last" ] || return 0
    read -r s kb <"$tmp/$3.last"
    awk -v w="$1" -v z="$2" -v s="$s" -v kb="$kb" -v y="$yard" -v n=$N -v was="$4" \
        'BEGIN { printf "%s\t%s\t%.4f\t%.1fx the yardstick, %.1f KiB (%d B) a request (was %s)\n",
                 w, z, s, s / y, kb / n, kb * 1024 / n, was }'
}
printf 'scale: yardstick (h5py reads both count matrices)\t20,000 req, L48 E128\t%.4f\t1.0x, the 34 targets: fit, sim, first frame <= 4x; refined <= 12x; <= 40,000 B a request\n' "$yard"

measure fit "$ELDR" fit "$t" -k 8 -o "$tmp/m.h5"
row "scale: eldr fit -k 8" "20,000 req, L48 E128" fit "1.8x, 47 KiB"
measure sim "$ELDR" sim "$t" -m "$m" --rate 200 --policy eldr,random,rr,jsq,p2c --seeds 1
row "scale: eldr sim, 5 policies, 1 seed" "19,000 simulated req, 200 req/s" sim "12x, 71 KiB"
if "$ELDR" dash --help 2>&1 | grep -q -- '--first'; then
    measure first "$ELDR" dash "$t" -m "$m" --rate 200 --frame "$tmp/first.txt" --first
    row "scale: eldr dash, first frame" "the first look, 200 req/s" first "none before"
fi
measure dash "$ELDR" dash "$t" -m "$m" --rate 200 --seeds 5 --frame "$tmp/dash.txt"
row "scale: eldr dash --seeds 5, refined frame" "19,000 req x 5 seeds, 200 req/s" dash \
    "42x, 90 KiB"
measure nomodel "$ELDR" dash "$t" --rate 200 --seeds 5 --frame "$tmp/nomodel.txt"
row "scale: eldr dash --seeds 5, no model (a split per seed)" \
    "19,000 req x 5 seeds, 200 req/s" nomodel "9x, 123.6 KiB (126,583 B)"
exit 0
