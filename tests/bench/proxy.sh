#!/bin/sh
# tests/bench/proxy.sh - eldrd --proxy against instant prefill and decode
# stand-ins ($BIN/pd_instant, which answer precomputed bodies), on 2
# cores (issue 13): proxied non-streaming requests per second (wrk), eldrd's
# own CPU per proxied request (user + system over the wrk run, divided by
# the requests: the upstream stand-ins and wrk are other processes), and
# the time to first byte that the proxy adds to a stream (p50 and p99 of
# TTFB through eldrd minus TTFB of the prefill stand-in asked directly,
# request by request, sequentially). The model: L = 24 layers, E = 32
# experts, K = 4 (the shared gpt-oss-20b trace's geometry), fitted on a
# generated trace. Prints TSV rows (what, size, seconds, rate) on stdout.
# Environment: BIN (default bin), WRK_SECONDS (10), WRK_CONNECTIONS (32),
# ELDRD_THREADS (2).
BIN=${BIN:-bin}
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SECS=${WRK_SECONDS:-10}
CONNS=${WRK_CONNECTIONS:-32}
THREADS=${ELDRD_THREADS:-2}
PY=/usr/bin/python3
command -v wrk >/dev/null || { echo "proxy bench: wrk not installed; skipped" >&2; exit 0; }
for b in eldr eldrd pd_instant; do
    [ -x "$ROOT/$BIN/$b" ] || { echo "proxy bench: needs $BIN/$b; skipped" >&2; exit 0; }
done
TMP=$(mktemp -d)
PIDS=""
trap 'for p in $PIDS; do kill -9 $p 2>/dev/null; done; rm -rf "$TMP"' EXIT
"$ROOT/$BIN/eldr" gen -o "$TMP/t.h5" --requests 400 --layers 24 --experts 32 --top-k 4 \
    --domains 4 --seed 5 >/dev/null &&
    "$ROOT/$BIN/eldr" fit "$TMP/t.h5" -k 4 -o "$TMP/m.h5" >/dev/null || {
    echo "proxy bench: fixture failed" >&2; exit 1; }
"$ROOT/$BIN/pd_instant" "$TMP/ports" 24 32 &
PIDS="$PIDS $!"
i=0; while [ ! -s "$TMP/ports" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
read -r PP DP <"$TMP/ports"
P="http://127.0.0.1:$PP"
D="http://127.0.0.1:$DP"
PORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
URL="http://127.0.0.1:$PORT"
# four decode workers, all the one instant stand-in (distinct URLs by path
# would change the request path; 127.0.0.1-4 name the same socket)
. "$ROOT/tests/bench/wrk.inc"
"$ROOT/$BIN/eldrd" -m "$TMP/m.h5" --listen "127.0.0.1:$PORT" --threads "$THREADS" --quiet \
    --proxy --prefill "$P" --decode "$D,http://127.0.0.2:$DP,http://127.0.0.3:$DP,http://127.0.0.4:$DP" \
    --max-conns-per-ip 1000 &
DPID=$!
PIDS="$PIDS $DPID"
wait_up "proxy bench"
curl -s --max-time 5 "$URL/v1/completions" -d '{"prompt":"warm up","max_tokens":8}' >"$TMP/warm"
grep -q '"choices"' "$TMP/warm" || { echo "proxy bench: a proxied request failed:" >&2;
    cat "$TMP/warm" >&2; exit 1; }
wrk_cpu "proxy bench" wrk_proxy.lua "64-token prompt, K=4, c=$CONNS" "$URL" \
    "eldrd CPU per proxied request (user+sys)"
# the stock handoff (--pd-protocol vllm): eldr_sig in the transfer, then a
# stock vLLM's routed experts (no eldr_sig) read by eldrd, one after the
# other on fresh stand-ins, so that the two rows differ only in the signal
for mode in vllm-sig vllm-routed; do
    rm -f "$TMP/ports.$mode"
    "$ROOT/$BIN/pd_instant" "$TMP/ports.$mode" 24 32 "$mode" &
    SPID=$!
    i=0; while [ ! -s "$TMP/ports.$mode" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    read -r SPP SDP <"$TMP/ports.$mode"
    SPORT=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    SURL="http://127.0.0.1:$SPORT"
    "$ROOT/$BIN/eldrd" -m "$TMP/m.h5" --listen "127.0.0.1:$SPORT" --quiet --proxy \
        --pd-protocol vllm --prefill "http://127.0.0.1:$SPP" \
        --decode "http://127.0.0.1:$SDP,http://127.0.0.2:$SDP,http://127.0.0.3:$SDP,http://127.0.0.4:$SDP" \
        --max-conns-per-ip 1000 &
    SDPID=$!
    PIDS="$PIDS $SPID $SDPID"
    (URL=$SURL; DPID=$SDPID; wait_up "proxy bench ($mode)"
     curl -s --max-time 5 "$URL/v1/completions" -d '{"prompt":"warm up","max_tokens":8}' >"$TMP/warm"
     grep -q '"choices"' "$TMP/warm" || { echo "proxy bench ($mode): a proxied request failed:" >&2;
         cat "$TMP/warm" >&2; exit 1; }
     case $mode in
     vllm-sig) what="eldr_sig in the transfer" ;;
     *) what="a stock prefill's routed experts (.npy)" ;;
     esac
     export WRK_LABEL="eldrd --proxy --pd-protocol vllm, $what"
     wrk_cpu "proxy bench ($mode)" wrk_proxy.lua "64-token prompt, K=4, c=$CONNS" "$URL" \
         "eldrd CPU per proxied request (user+sys), $what")
    kill -9 $SPID $SDPID 2>/dev/null
done
# time to first byte added to a stream
$PY - "$URL" "$P" <<'PYEOF'
import socket, sys, time, urllib.parse
def ttfb(url, body):
    u = urllib.parse.urlparse(url)
    s = socket.create_connection((u.hostname, u.port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    req = ("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           "Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body)).encode()
    t = time.perf_counter()
    s.sendall(req)
    s.recv(1)
    dt = time.perf_counter() - t
    s.close()
    return dt
words = " ".join("tok%d" % i for i in range(64))
stream = '{"prompt":"%s","max_tokens":8,"stream":true}' % words
plain = '{"prompt":"%s","max_tokens":8}' % words
added = []
for i in range(1000):
    d = ttfb(sys.argv[2], plain)
    p = ttfb(sys.argv[1], stream)
    added.append(p - d)
added.sort()
t = sum(added)
print("eldrd --proxy TTFB added to a stream, p50\t1000 streams\t%.3f\t%.3f ms" % (t, added[500] * 1e3))
print("eldrd --proxy TTFB added to a stream, p99\t1000 streams\t%.3f\t%.3f ms" % (t, added[990] * 1e3))
PYEOF
