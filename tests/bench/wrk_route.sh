#!/bin/sh
# tests/bench/wrk_route.sh - route+finish over HTTP, driven by wrk, against
# eldrd on 127.0.0.1 (issue 7, item 10: at least 20000 routes/s with p99
# under 5 ms on 2 cores). The model has the issue's geometry: |S|*E = 2560
# (L = 20 layers, all kept, E = 128) and K = 16 workers, fitted on a
# generated trace; route bodies are the trace's dense prefill counts.
# Prints TSV rows (what, size, seconds, rate) on stdout, notes on stderr;
# the last row is eldrd's CPU time per route+finish pair.
# Then the same run with --window 16384 while a reader GETs /v1/window
# (all 16384 signatures) in a loop: the route p99 shows whether serving
# the window holds the routing lock (issue 15, item 8).
# Environment: BIN (default bin), WRK_SECONDS (10), WRK_CONNECTIONS (16),
# ELDRD_THREADS (2), ELDRD (the eldrd to measure; default $BIN/eldrd).
BIN=${BIN:-bin}
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SECS=${WRK_SECONDS:-10}
CONNS=${WRK_CONNECTIONS:-16}
THREADS=${ELDRD_THREADS:-2}
PY=/usr/bin/python3
for need in wrk curl; do
    command -v $need >/dev/null || { echo "wrk_route: $need not installed; skipped" >&2; exit 0; }
done
if [ ! -x "$ROOT/$BIN/eldrd" ] || [ ! -x "$ROOT/$BIN/eldr" ] || ! $PY -c 'import h5py' 2>/dev/null; then
    echo "wrk_route: needs $BIN/eldr, $BIN/eldrd and h5py under $PY; skipped" >&2
    exit 0
fi
TMP=$(mktemp -d)
DPID=""
trap '[ -n "$DPID" ] && kill -9 $DPID 2>/dev/null; rm -rf "$TMP"' EXIT

"$ROOT/$BIN/eldr" gen -o "$TMP/t.h5" --requests 1600 --layers 20 --experts 128 --top-k 8 \
    --domains 16 --seed 3 >/dev/null &&
    "$ROOT/$BIN/eldr" fit "$TMP/t.h5" -k 16 --layers all -o "$TMP/m.h5" >/dev/null || {
    echo "wrk_route: fixture failed" >&2; exit 1; }
# the route bodies' tails, one a line: "counts":"<base64 of int16 LE>"}
$PY - "$TMP/t.h5" "$TMP/bodies" <<'PYEOF' || exit 1
import base64, sys
import h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    c = f["prefill_counts"][:256].astype("<i2")
with open(sys.argv[2], "w") as out:
    for row in c:
        out.write('"counts":"%s"}\n' % base64.b64encode(row.tobytes()).decode())
PYEOF

PORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT"
ELDRD=${ELDRD:-$ROOT/$BIN/eldrd}
serve() { # ARGS...: eldrd on $PORT
    "$ELDRD" -m "$TMP/m.h5" --listen "127.0.0.1:$PORT" --threads "$THREADS" --quiet "$@" &
    DPID=$!
    wait_up wrk_route
}
. "$ROOT/tests/bench/wrk.inc"
serve
export WRK_BODIES="$TMP/bodies"
wrk_cpu wrk_route wrk_route.lua "S*E=2560 K=16 c=$CONNS" "$URL" \
    "eldrd CPU per route+finish (user+sys)"
kill -TERM $DPID 2>/dev/null
i=0; while kill -0 $DPID 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
DPID=""

# routes while the newest 256 signatures of the window (of 16384, 2560 floats
# each: 7 MB of JSON) are read in a loop
serve --window 16384
WRK_BODIES="$TMP/bodies" WRK_ROWS="$TMP/rows2" WRK_SIZE="--window 16384, GET /v1/window?n=256 looping" \
    timeout $((SECS + 30)) wrk -t2 -c"$CONNS" -d"${SECS}s" --latency \
    -s "$ROOT/tests/bench/wrk_route.lua" "$URL" >"$TMP/wrk2.out" 2>&1 &
WPID=$!
sleep 2                          # the window fills with routed signatures
end=$(( $(date +%s) + SECS - 3 ))
reads=0
while [ "$(date +%s)" -lt "$end" ]; do
    curl -s --max-time 10 -o /dev/null "$URL/v1/window?n=256" && reads=$((reads + 1))
done
wait $WPID
sed 's/^/wrk_route (window): /' "$TMP/wrk2.out" >&2
echo "wrk_route: $reads window reads during the run" >&2
sed 's/^eldrd route+finish/eldrd route+finish, window reads/' "$TMP/rows2"
kill -TERM $DPID 2>/dev/null
i=0; while kill -0 $DPID 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
DPID=""
