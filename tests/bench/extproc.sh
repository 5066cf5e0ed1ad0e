#!/bin/sh
# tests/bench/extproc.sh - eldrd --ext-proc, the endpoint picker of an
# Envoy-based inference gateway (issue 23), driven by the Envoy stand-in
# (tests/gateway/envoy.js: Envoy's own ext_proc protos, its
# FULL_DUPLEX_STREAMED filter): picks per second and eldrd's own CPU per
# pick (user + system of every eldrd thread over the run, divided by the
# picks; the stand-in is another process), beside the same decisions
# through POST /v1/route (+ /v1/finish, by wrk). Target: at most 25 us of
# eldrd CPU per pick.
#
# The model: samples/small.h5 (L = 16, E = 64) fitted with K = 4, count
# variant, as tests/e2e/gateway.sh fits it. Each decode body is 4096
# bytes: an OpenAI completion request whose prompt is padded, with
# kv_transfer_params as llm-d's coordinator copies it from the prefill,
# eldr_sig among them (base64 of L*E = 1024 int16 counts: 2732 bytes).
# One stream a request: request_headers (with protocol_config and a
# metadata_context), the body in one chunk, the pick (header + envoy.lb
# metadata) and the body echoed back; then
#   "pick only": the stand-in half-closes (--no-response; eldrd finishes
#     the request when the stream ends);
#   "full exchange": response_headers and a 256-byte response_body, each
#     answered (the response side finishes the request).
# Then a number that does not depend on the machine: the instructions
# eldrd's event loop runs per pick (callgrind, counting only the loop's
# turns, where the picker and its transport run; the kernel's work is not
# counted), as the difference between a run of XP_CG_REQUESTS picks and
# one of a third as many, so that start-up and connection set-up cancel.
# Prints TSV rows (what, size, seconds, rate) on stdout, notes on stderr.
# Environment: BIN (default bin), XP_REQUESTS (12000 streams a run;
# fewer let the stand-in's connection ramp weigh on the per-pick CPU),
# XP_CG_REQUESTS (1800; 0 skips the callgrind row),
# XP_CONCURRENCY (64), XP_CONNECTIONS (2), WRK_SECONDS (5),
# WRK_CONNECTIONS (16), ELDRD_THREADS (2), ELDRD (the eldrd to measure;
# default $BIN/eldrd).
BIN=${BIN:-bin}
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
N=${XP_REQUESTS:-12000}
NCG=${XP_CG_REQUESTS:-1800}
CONC=${XP_CONCURRENCY:-64}
NCONN=${XP_CONNECTIONS:-2}
SECS=${WRK_SECONDS:-5}
CONNS=${WRK_CONNECTIONS:-16}
THREADS=${ELDRD_THREADS:-2}
PY=/usr/bin/python3
GW="$ROOT/tests/gateway"
SMALL="$ROOT/samples/small.h5"
for need in node wrk curl; do
    command -v $need >/dev/null || { echo "extproc bench: $need not installed; skipped" >&2; exit 0; }
done
if [ ! -d "$GW/node_modules/@grpc/grpc-js-xds" ]; then
    echo "extproc bench: tests/gateway/node_modules missing (make deps); skipped" >&2
    exit 0
fi
if [ ! -x "$ROOT/$BIN/eldrd" ] || [ ! -x "$ROOT/$BIN/eldr" ] || [ ! -f "$SMALL" ] ||
    ! $PY -c 'import h5py' 2>/dev/null; then
    echo "extproc bench: needs $BIN/eldr, $BIN/eldrd, $SMALL and h5py under $PY; skipped" >&2
    exit 0
fi
TMP=$(mktemp -d)
DPID=""
trap '[ -n "$DPID" ] && kill -9 $DPID 2>/dev/null; rm -rf "$TMP"' EXIT

"$ROOT/$BIN/eldr" fit "$SMALL" -k 4 -o "$TMP/m.h5" --variant count --layers all --seed 1 \
    >/dev/null 2>&1 || { echo "extproc bench: fixture failed" >&2; exit 1; }
# the K = 4 decode endpoints, JSON form (tests/gateway/endpoints.json)
cp "$ROOT/tests/gateway/endpoints.json" "$TMP/eps.json"
# N decode bodies of 4096 bytes (one a line) from the trace's prefill
# counts, and the route bodies' tails for wrk_route.lua: "counts":"..."}
$PY - "$SMALL" "$TMP" "$N" <<'PYEOF' || exit 1
import base64, json, sys
import h5py
with h5py.File(sys.argv[1], "r") as f:
    c = f["prefill_counts"][:].astype("<i2")
n = int(sys.argv[3])
with open(sys.argv[2] + "/bodies", "w") as b:
    for i in range(n):
        sig = base64.b64encode(c[i % len(c)].tobytes()).decode()
        kv = {"do_remote_prefill": True, "remote_engine_id": "pf-0",
              "remote_block_ids": [i, i + 1], "eldr_sig": sig}
        body = {"model": "m", "prompt": "", "max_tokens": 16, "kv_transfer_params": kv}
        pad = 4096 - len(json.dumps(body, separators=(",", ":")))
        assert pad > 0
        body["prompt"] = ("tok%d " % i * 1000)[:pad]
        line = json.dumps(body, separators=(",", ":"))
        assert len(line) == 4096, len(line)
        b.write(line + "\n")
with open(sys.argv[2] + "/routes", "w") as r:
    for row in c:
        r.write('"counts":"%s"}\n' % base64.b64encode(row.tobytes()).decode())
PYEOF

free_port() {
    $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
. "$ROOT/tests/bench/wrk.inc"
PORT=$(free_port)
XP=$(free_port)
URL="http://127.0.0.1:$PORT"
"${ELDRD:-$ROOT/$BIN/eldrd}" -m "$TMP/m.h5" --listen "127.0.0.1:$PORT" --threads "$THREADS" --quiet \
    --ext-proc "127.0.0.1:$XP" --endpoints "$TMP/eps.json" &
DPID=$!
wait_up "extproc bench"

# eldrd's CPU time in nanoseconds and its wake-ups, in one read: the sums
# over its threads of /proc/PID/task/TID/schedstat's run time (user +
# system, ns resolution; a run of 4000 picks at ~20 us is 80 ms, 8 clock
# ticks of /proc/PID/stat) and of its third number, the times a thread
# was switched in. eldrd's threads live as long as it does, so none is
# lost between reads. Without schedstat: /proc/PID/stat's ticks, and "-"
# for the wake-ups.
sched() {
    if [ -r "/proc/$DPID/task/$DPID/schedstat" ]; then
        cat /proc/"$DPID"/task/*/schedstat 2>/dev/null |
            awk '{s += $1; w += $3} END {printf "%.0f %.0f\n", s, w}'
    else
        awk -v hz="$(getconf CLK_TCK)" '{printf "%.0f -\n", ($14 + $15) * 1e9 / hz}' \
            "/proc/$DPID/stat"
    fi
}

# what this machine bills a thread for one sleep and wake-up (bench_wake.c)
WAKE_US=$("$ROOT/$BIN/bench_wake" --us 2>/dev/null || echo "")

# run LABEL ARGS...: one stand-in run over every body; rows: picks/s,
# eldrd CPU per pick, and its wake-ups a pick and the CPU per pick
# without what they are billed
run() {
    label=$1; shift
    read -r c0 w0 <<EOF
$(sched)
EOF
    timeout 120 node "$GW/envoy.js" pick --target "127.0.0.1:$XP" --body-lines "$TMP/bodies" \
        --chunk 16384 --concurrency "$CONC" --connections "$NCONN" --quiet "$@" \
        >"$TMP/out" 2>"$TMP/err"
    rc=$?
    read -r c1 w1 <<EOF
$(sched)
EOF
    if [ $rc -ne 0 ] || ! grep -q '"summary":true' "$TMP/out"; then
        echo "extproc bench: $label: the stand-in failed (exit $rc):" >&2
        head -c 2000 "$TMP/err" >&2; head -c 2000 "$TMP/out" >&2
        exit 1
    fi
    $PY - "$TMP/out" "$label" "$c0" "$c1" "4 KB body, K=4, c=$CONC" "$w0" "$w1" "$WAKE_US" <<'PYEOF'
import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
label, c0, c1, size = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
w0, w1, wake = sys.argv[6], sys.argv[7], sys.argv[8]
secs = j["elapsed_ms"] / 1e3
ok = j["ok"]
if j["failed"] or ok == 0 or sum(j["picks"].values()) != ok:
    sys.exit("extproc bench: %s: %s" % (label, json.dumps(j)))
cpu = (c1 - c0) / 1e3 / ok
wakes = (int(w1) - int(w0)) / ok if w0 != "-" else None
print("eldrd --ext-proc picks, %s (Envoy stand-in)\t%s\t%.3f\t%.0f picks/s" % (label, size, secs, ok / secs))
print("eldrd CPU per pick, %s (user+sys)\t%s\t%.3f\t%.1f us" % (label, size, secs, cpu))
if wakes is not None:
    print("eldrd wake-ups per pick, %s\t%s\t%.3f\t%.3f /pick" % (label, size, secs, wakes))
if wake and wakes is not None:
    print("eldrd CPU per pick less its wake-ups (estimate, %s us each), %s\t%s\t%.3f\t%.1f us"
          % (wake, label, size, secs, cpu - wakes * float(wake)))
PYEOF
}

# warm up, with the measured load: connections, the signature path, and
# the heap the loop's streams grow (its first-touch page faults were a
# third of a cold run's CPU)
timeout 120 node "$GW/envoy.js" pick --target "127.0.0.1:$XP" --body-lines "$TMP/bodies" \
    --chunk 16384 --concurrency "$CONC" --connections "$NCONN" --quiet >/dev/null 2>&1
run "pick only" --no-response
run "full exchange"
curl -s --max-time 5 "$URL/metrics" >"$TMP/met"
grep -q 'eldr_extproc_in_flight 0' "$TMP/met" ||
    echo "extproc bench: in flight not back to 0: $(grep extproc_in_flight "$TMP/met")" >&2

# the same decisions through POST /v1/route (+ /v1/finish), by wrk, with
# the machinery of wrk_route.sh (tests/bench/wrk.inc: eldrd's CPU per route)
export WRK_BODIES="$TMP/routes"
wrk_cpu "extproc bench (route)" wrk_route.lua "S*E=1024 K=4 c=$CONNS" "$URL" \
    "eldrd CPU per route+finish, same model (user+sys)" | grep -v 'latency\|failed'
kill -TERM $DPID 2>/dev/null
i=0; while kill -0 $DPID 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
DPID=""

# instructions per pick: eldrd under callgrind, the loop's turns counted
# (--toggle-collect=evloop_turn), NCG picks against NCG/3
cg_run() {
    n=$1; out="$TMP/cg.$n"
    CGP=$(free_port); CGX=$(free_port)
    valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect=evloop_turn \
        "${ELDRD:-$ROOT/$BIN/eldrd}" -m "$TMP/m.h5" --listen "127.0.0.1:$CGP" --threads "$THREADS" \
        --quiet --ext-proc "127.0.0.1:$CGX" --endpoints "$TMP/eps.json" 2>"$TMP/cg.err" &
    DPID=$!
    URL="http://127.0.0.1:$CGP"
    wait_up "extproc bench (callgrind)"
    head -n "$n" "$TMP/bodies" >"$TMP/cgbodies"
    timeout 300 node "$GW/envoy.js" pick --target "127.0.0.1:$CGX" --body-lines "$TMP/cgbodies" \
        --chunk 16384 --concurrency "$CONC" --connections "$NCONN" --quiet --no-response \
        >"$TMP/cgout" 2>&1 || { echo "extproc bench: the callgrind run failed" >&2; exit 1; }
    kill -TERM $DPID 2>/dev/null
    wait $DPID 2>/dev/null
    DPID=""
    awk '/^summary:|^totals:/ {print $2; exit}' "$out"
}
if [ "$NCG" -gt 0 ] && command -v valgrind >/dev/null && [ "$N" -ge "$NCG" ]; then
    few=$((NCG / 3))
    i_few=$(cg_run "$few")
    i_all=$(cg_run "$NCG")
    awk -v a="$i_all" -v b="$i_few" -v n="$((NCG - few))" -v size="4 KB body, K=4, c=$CONC" 'BEGIN {
        if (a > b && n > 0)
            printf "eldrd instructions per pick, pick only (callgrind, the loop)\t%s\t0\t%.0f instr\n",
                   size, (a - b) / n }'
elif [ "$NCG" -gt 0 ]; then
    echo "extproc bench: valgrind not installed; the instructions row is skipped" >&2
fi
