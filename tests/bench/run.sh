#!/bin/sh
# tests/bench/run.sh - run every benchmark and print one table.
#
# Each $BIN/bench_* binary, each tests/bench/*.sh script and each
# tests/bench/*_peer.py (run by
# /usr/bin/python3 when it has numpy) prints result rows on stdout as
# tab-separated "what<TAB>size<TAB>seconds<TAB>rate" lines (rate already
# carries its unit, e.g. "312.4 MB/s"); other lines go to stderr.
BIN=${BIN:-bin}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT" || exit 2
export BIN ROOT
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
for b in "$BIN"/bench_*; do
    [ -x "$b" ] || continue
    "$b" >>"$rows" || echo "bench: $b failed" >&2
done
# scripted benchmarks (tests/bench/*.sh, e.g. wrk against eldrd) print rows too
for s in tests/bench/*.sh; do
    [ "$s" = tests/bench/run.sh ] && continue
    sh "$s" >>"$rows" || echo "bench: $s failed" >&2
done
if /usr/bin/python3 -c 'import numpy, scipy, h5py' 2>/dev/null; then
    for p in tests/bench/*_peer.py; do
        [ -f "$p" ] || continue
        /usr/bin/python3 "$p" >>"$rows" || echo "bench: $p failed" >&2
    done
else
    echo "bench: /usr/bin/python3 lacks numpy/scipy/h5py; peer rows skipped" >&2
fi
awk -F'\t' 'NF >= 4 {
    w[NR] = $1; s[NR] = $2; t[NR] = $3; r[NR] = $4; n = NR
    if (length($1) > a) a = length($1); if (length($2) > b) b = length($2)
} END {
    if (a < 4) a = 4; if (b < 4) b = 4
    printf "%-" a "s  %-" b "s  %10s  %s\n", "what", "size", "time (s)", "rate"
    for (i = 1; i <= n; i++) if (i in w)
        printf "%-" a "s  %-" b "s  %10.4f  %s\n", w[i], s[i], t[i], r[i]
}' "$rows"
