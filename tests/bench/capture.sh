#!/bin/sh
# tests/bench/capture.sh - how many requests a second `eldr capture`
# sustains against an engine that answers at once (issue 12: at least
# 2,000 req/s on 2 cores with 64-token prompts, 48 layers and top-8). The
# stand-in is $BIN/capture_engine (tests/bench/capture_engine.c): one
# precomputed answer with 64 prompt and 16 generated tokens of routing.
# One row per encoding: the rate is captured requests over the time from
# the first send to the last answer (the summary's requests_per_s); the
# trace is assembled and written after that, outside the rate.
# Environment: BIN (default bin), CAPTURE_REQUESTS (4000),
# CAPTURE_CONCURRENCY (32).
BIN=${BIN:-bin}
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
N=${CAPTURE_REQUESTS:-4000}
CONC=${CAPTURE_CONCURRENCY:-32}
PY=/usr/bin/python3
if [ ! -x "$ROOT/$BIN/eldr" ] || [ ! -x "$ROOT/$BIN/capture_engine" ]; then
    echo "capture bench: needs $BIN/eldr and $BIN/capture_engine; skipped" >&2
    exit 0
fi
TMP=$(mktemp -d)
EPID=""
trap '[ -n "$EPID" ] && kill $EPID 2>/dev/null; rm -rf "$TMP"' EXIT
# 64-word prompts with distinct ids
awk -v n="$N" 'BEGIN { for (i = 0; i < n; i++) { s = "w" i; for (j = 1; j < 64; j++) s = s " t" j;
    printf "{\"id\": \"b%d\", \"prompt\": \"%s\"}\n", i, s } }' >"$TMP/p.jsonl"
for enc in object npy lists; do
    rm -f "$TMP/port"
    "$ROOT/$BIN/capture_engine" "$TMP/port" $enc 64 48 8 16 &
    EPID=$!
    i=0; while [ ! -s "$TMP/port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    t0=$(date +%s.%N)
    "$ROOT/$BIN/eldr" capture --server "http://127.0.0.1:$(cat "$TMP/port")" \
        --prompts "$TMP/p.jsonl" -o "$TMP/t.h5" --experts 128 --concurrency "$CONC" --json \
        >"$TMP/out" 2>"$TMP/err" || { echo "capture bench ($enc) failed: $(head -c 300 "$TMP/err")" >&2; }
    t1=$(date +%s.%N)
    kill $EPID 2>/dev/null; wait $EPID 2>/dev/null; EPID=""
    awk -v enc=$enc -v n="$N" -v wall="$(echo "$t1 - $t0" | bc)" -F'[:,]' '
        /"requests_per_s"/ { r = $2 } /"seconds"/ { s = $2 } /"captured"/ { c = $2 }
        END { if (c + 0 == n + 0) {
            printf "capture %s (64 tok, 48 L, top-8, C=%s)\t%d req\t%.4f\t%.0f req/s\n", enc, '"$CONC"', n, s, r
            printf "capture %s, whole command (trace written)\t%d req\t%.4f\t%.0f req/s\n", enc, n, wall, n / wall } }' "$TMP/out"
done
