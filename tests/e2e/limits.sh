#!/bin/sh
# tests/e2e/limits.sh - eldrd's limits against slow and greedy clients
# (issue 20, items 3, 4, 6, 8): the body budget (100 connections each
# holding all but the last byte of an 8 MB body cost under 200 MB of RSS;
# past the budget, 503 when the upload ends), the per-endpoint body limits,
# the header deadline (connections trickling headers are closed, so others
# get in), the per-address count (IPv6 by /64, in a network namespace of
# its own), the open-files limit at start, and ambiguous framing. Every
# server binds loopback on a free port (the IPv6 part in its own network
# namespace); every curl and wait is bounded; about 30 s in all.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs "eldrd limits"

"$ROOT/bin/eldr" fit "$SMALL" -k 4 -o "$TMP/m.h5" --layers all >/dev/null 2>&1 ||
    { notok "fit the fixture model"; exit 0; }
rss() { awk '/^VmRSS/ {print $2}' "/proc/$PID/status"; }
hwm() { awk '/^VmHWM/ {print $2}' "/proc/$PID/status"; }
metric() { # NAME: its value in /metrics ($URL)
    curl -s --max-time 5 "$URL/metrics" | awk -v n="$1" '$1 == n { print $2 }'
}

# ---- the body budget: 100 holders of 8 MB bodies (item 3) --------------------
start budget -m "$TMP/m.h5" || exit 0
R0=$(rss)
$PY - "$PORT" "$TMP" >"$TMP/holders.out" 2>&1 <<'EOF' &
import os, socket, sys, threading, time
port, tmp = int(sys.argv[1]), sys.argv[2]
N, SIZE = 100, 8 << 20
chunk = b" " * (1 << 20)
socks, status, sent = [None] * N, [None] * N, []
deadline = time.time() + 90   # never outlive the test: its shell may be gone
def hold(i):
    s = socket.create_connection(("127.0.0.1", port), timeout=40,
                                 source_address=("127.0.0.%d" % (11 + i % 4), 0))
    s.sendall(b"POST /v1/route HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % SIZE)
    left = SIZE - 1                          # all but the last byte
    while left:
        n = min(left, len(chunk)); s.sendall(chunk[:n]); left -= n
    socks[i] = s
    sent.append(i)
    while not os.path.exists(tmp + "/go"):
        if time.time() > deadline or not os.path.isdir(tmp):
            os._exit(1)
        time.sleep(0.05)
    s.sendall(b" ")
    try:
        status[i] = s.recv(4096).split(b"\r\n")[0].decode()
    except OSError as e:
        status[i] = "error " + str(e)
ts = [threading.Thread(target=hold, args=(i,)) for i in range(N)]
for t in ts: t.start()
while len(sent) < N and any(t.is_alive() for t in ts): time.sleep(0.05)
open(tmp + "/sent", "w").write("%d\n" % len(sent))
for t in ts: t.join(60)
codes = [st.split(" ")[1] if st and st.startswith("HTTP/1.1") else str(st) for st in status]
print("503", codes.count("503"), "other", N - codes.count("503"), sorted(set(codes)))
EOF
HOLD=$!; PIDS="$PIDS $HOLD"
i=0; while [ ! -s "$TMP/sent" ] && [ $i -lt 400 ]; do sleep 0.1; i=$((i + 1)); done
# eldrd has read every byte when each holder is either held whole or refused
i=0
while [ $i -lt 100 ]; do
    held=$(metric eldr_body_bytes); refused=$(metric eldr_body_budget_refusals_total)
    [ $(( ${held:-0} / 8388608 + ${refused:-0} )) -ge 100 ] && break
    sleep 0.2; i=$((i + 1))
done
sleep 1   # the last reserved bytes land
R1=$(rss); H1=$(hwm)
echo "# budget: $(cat "$TMP/sent" 2>/dev/null | tr -d '\n') holders sent; RSS $R0 -> $R1 kB (peak $H1 kB); held $held bytes, $refused refused"
check "100 holders of 8 MB bodies sent all but their last byte" test "$(cat "$TMP/sent" 2>/dev/null)" = 100
check "eldr_body_bytes is within --body-budget (128 MiB): $held" test "${held:-0}" -le 134217728
check "... and the rest were refused: $refused" test "$(( ${held:-0} / 8388608 + ${refused:-0} ))" -ge 100
case "$BIN" in
*asan*) ok "RSS: not judged under ASan (its quarantine keeps freed memory; $R1 kB)" ;;
*) check "eldrd's RSS stays under 200 MB with 100 holders: peak $H1 kB (now $R1 kB)" test "$H1" -lt 204800 ;;
esac
touch "$TMP/go"
i=0; while kill -0 $HOLD 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
check "the refused ones get 503 when their upload ends, the held ones their answer" \
    grep -Eq "^503 $refused other $((100 - refused)) \['400', '503'\]" "$TMP/holders.out"
check "the refusals are logged (at most one line a second)" \
    grep -q "503 POST /v1/route from 127.0.0.1[1-4]: the request bodies held reached --body-budget (134217728 bytes)" "$TMP/budget.log"
check "the bytes go back when the requests end" test "$(metric eldr_body_bytes)" -eq 0
req POST /v1/route '{"request_id": "after", "sparse": [[0, 1, 3]]}'
expect_http "routes are served after it" 200
stop

start small -m "$TMP/m.h5" --body-budget 2097152 --max-body 1048576 --max-kv-body 1048576 \
    --max-model-body 1048576 || exit 0
$PY - "$PORT" >"$TMP/two.out" 2>&1 <<'EOF'
import socket, sys, time
port = int(sys.argv[1])
# two 1 MB bodies fill the 2 MB budget (each takes 1 MiB + 1 byte): the
# second is refused; its answer comes when its upload ends
a = socket.create_connection(("127.0.0.1", port), timeout=10)
a.sendall(b"POST /v1/route HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n" + b" " * 1048000)
time.sleep(0.5)
b = socket.create_connection(("127.0.0.1", port), timeout=10)
b.sendall(b"POST /v1/kv-events HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n" + b" " * 1048576)
ans = b""
while b"\r\n\r\n" not in ans or not ans.endswith(b"}"):
    got = b.recv(4096)
    if not got: break
    ans += got
print(ans.decode(errors="replace"))
print("closed after" if b.recv(1) == b"" else "kept")
EOF
check "a body past the budget: 503" grep -q "^HTTP/1.1 503" "$TMP/two.out"
check "... JSON naming --body-budget" grep -q '"param":"body".*--body-budget\|--body-budget.*"param":"body"' "$TMP/two.out"
check "... and the connection closes" grep -q "^closed after" "$TMP/two.out"
stop

# per-endpoint limits: their defaults, refused from Content-Length
start perroute -m "$TMP/m.h5" || exit 0
$PY - "$PORT" >"$TMP/limits.out" 2>&1 <<'EOF'
import socket, sys
for path, n in (("PUT /v1/model", 33554433), ("POST /v1/kv-events", 1048577),
                ("POST /v1/route", 8388609), ("PUT /v1/model", 33554432)):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
    s.sendall(b"%s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (path.encode(), n))
    s.settimeout(1)
    try:
        print(path, n, s.recv(4096).decode(errors="replace").replace("\r\n", " "))
    except socket.timeout:
        print(path, n, "waits for its body")
EOF
check "PUT /v1/model over 32 MiB: 413 from its length" grep -q "^PUT /v1/model 33554433 HTTP/1.1 413.*33554432 bytes" "$TMP/limits.out"
check "POST /v1/kv-events over 1 MiB: 413" grep -q "^POST /v1/kv-events 1048577 HTTP/1.1 413.*1048576 bytes" "$TMP/limits.out"
check "POST /v1/route over 8 MiB: 413" grep -q "^POST /v1/route 8388609 HTTP/1.1 413.*8388608 bytes" "$TMP/limits.out"
check "a 32 MiB model is taken (eldrd waits for its body)" grep -q "^PUT /v1/model 33554432 waits" "$TMP/limits.out"
stop

# ---- the header deadline (item 4) ---------------------------------------------
# 20 connections trickle headers a byte every 0.3 s and fill --max-conns 20;
# another client's request waits in the listen queue until they are closed
start slowloris -m "$TMP/m.h5" --threads 1 --max-conns 20 --max-conns-per-ip 20 \
    --header-timeout 2 --timeout 30 || exit 0
$PY - "$PORT" >"$TMP/loris.out" 2>&1 <<'EOF' &
import socket, sys, time
port = int(sys.argv[1]); socks = []
t0 = time.time()
for i in range(20):
    s = socket.create_connection(("127.0.0.1", port), timeout=2); s.sendall(b"G"); socks.append(s)
closed = {}
while time.time() - t0 < 7 and len(closed) < len(socks):
    for i, s in enumerate(socks):
        if i in closed: continue
        try:
            s.send(b"E")
            s.setblocking(False)
            try:
                if s.recv(1) == b"": closed[i] = time.time() - t0
            except BlockingIOError:
                pass
            s.setblocking(True)
        except OSError:
            closed[i] = time.time() - t0
    time.sleep(0.3)
t = sorted(closed.values())
print("closed", len(closed), "first %.1f last %.1f" % (t[0], t[-1]) if t else "")
EOF
LORIS=$!; PIDS="$PIDS $LORIS"
sleep 0.5
t0=$(date +%s%N)
curl -s --max-time 6 --interface 127.0.0.2 -o "$TMP/body" -w '%{http_code}' "$URL/healthz" >"$TMP/status"
t1=$(date +%s%N)
wait $LORIS
ms=$(( (t1 - t0) / 1000000 ))
echo "# slowloris: $(cat "$TMP/loris.out"); another client answered after $ms ms"
expect_http "another address gets /healthz while 20 connections trickle headers" 200
check "... once they are closed, not at once ($ms ms)" test "$ms" -gt 500
check "the 20 trickling connections are closed near --header-timeout 2 s" \
    sh -c "awk '/^closed 20 first/ { f = 1; good = (\$4 >= 1.5 && \$6 <= 4.5) } END { exit !(f && good) }' '$TMP/loris.out'"
check "eldr_header_timeouts_total counts them" test "$(metric eldr_header_timeouts_total)" -ge 20
check "the log says so" grep -q "whose request headers took more than 2 s (--header-timeout); the first from 127.0.0.1" "$TMP/slowloris.log"
# a kept-alive connection has --header-timeout for its next request too;
# one whose headers came keeps its body's own deadline
$PY - "$PORT" >"$TMP/keep.out" 2>&1 <<'EOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=6)
s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
print(s.recv(4096).split(b"\r\n")[0].decode())
t0 = time.time()
print("idle closed after %.1f" % (time.time() - t0) if s.recv(1) == b"" else "idle kept")
EOF
check "an idle kept-alive connection is closed at --header-timeout" \
    sh -c "grep -q '^HTTP/1.1 200' '$TMP/keep.out' && awk '/^idle closed after/ { f = 1; good = (\$4 >= 1.5 && \$4 <= 4.5) } END { exit !(f && good) }' '$TMP/keep.out'"
stop

# in proxy mode libmicrohttpd runs on the event loop: the sweeper's
# shutdown reaches it there too
start loopmode -m "$TMP/m.h5" --proxy --prefill http://127.0.0.1:1 \
    --decode http://127.0.0.1:1,http://127.0.0.1:2,http://127.0.0.1:3,http://127.0.0.1:4 \
    --header-timeout 1 || exit 0
$PY - "$PORT" >"$TMP/loop.out" 2>&1 <<'EOF'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"POST /v1/completions HTTP/1.1\r\n")
t0 = time.time()
print("closed after %.1f" % (time.time() - t0) if s.recv(1) == b"" else "answered")
EOF
check "proxy mode (the loop): a connection without its headers is closed at --header-timeout 1 s" \
    awk '/^closed after/ { f = 1; good = ($3 >= 0.7 && $3 <= 3) } END { exit !(f && good) }' "$TMP/loop.out"
stop

# ---- one address, its connections (item 4) -------------------------------------
start perip -m "$TMP/m.h5" --max-conns-per-ip 4 || exit 0
$PY - "$PORT" >"$TMP/perip.out" 2>&1 <<'EOF'
import socket, sys, time
port = int(sys.argv[1]); socks = []
for i in range(6):
    s = socket.create_connection(("127.0.0.1", port), timeout=2)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n"); socks.append(s)   # headers not done
time.sleep(0.5)
seen = []
for s in socks:
    s.setblocking(False)
    try:
        seen.append("closed" if s.recv(1) == b"" else "data")
    except BlockingIOError:
        seen.append("open")
    except ConnectionResetError:
        seen.append("reset")
print(" ".join(seen))
EOF
check "the 5th and 6th connections of one address: closed at once (reset), not queued" \
    grep -Eq "^open open open open (reset|closed) (reset|closed)$" "$TMP/perip.out"
check "eldr_connections_refused_per_ip_total counts them" test "$(metric eldr_connections_refused_per_ip_total)" -eq 2
check "the refusal is logged" grep -q "refused a connection from 127.0.0.1 on the public listener: it holds 4 already (--max-conns-per-ip)" "$TMP/perip.log"
stop
# IPv6: one /64 is one address. Its own network namespace, where other
# IPv6 addresses can sit on lo without touching the machine's.
if unshare -n true 2>/dev/null && command -v ip >/dev/null; then
    unshare -n sh -c '
        ip link set lo up && ip -6 addr add fd00:0:0:1::a/128 dev lo nodad &&
        ip -6 addr add fd00:0:0:1::b/128 dev lo nodad &&
        ip -6 addr add fd00:0:0:2::a/128 dev lo nodad || exit 9
        "$1" -m "$2" --listen "[::1]:8470" --max-conns-per-ip 2 2>"$3/v6.log" &
        p=$!; i=0
        while [ $i -lt 50 ] && ! curl -s --max-time 1 -g "http://[::1]:8470/healthz" >/dev/null; do sleep 0.1; i=$((i + 1)); done
        "$4" - <<EOF
import socket, time
socks, seen = [], []
for src in ("fd00:0:0:1::a", "fd00:0:0:1::a", "fd00:0:0:1::b", "fd00:0:0:2::a", "fd00:0:0:2::a"):
    s = socket.socket(socket.AF_INET6); s.settimeout(2); s.bind((src, 0))
    s.connect(("::1", 8470)); s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n"); socks.append(s)
time.sleep(0.5)
for s in socks:
    s.setblocking(False)
    try: seen.append("closed" if s.recv(1) == b"" else "data")
    except BlockingIOError: seen.append("open")
    except ConnectionResetError: seen.append("reset")
print(" ".join(seen))
EOF
        kill $p' sh "$ELDRD" "$TMP/m.h5" "$TMP" "$PY" >"$TMP/v6.out" 2>&1
    check "IPv6: the 3rd connection of one /64 (from another address in it) is refused, another /64 is not" \
        grep -Eq "^open open (reset|closed) open open$" "$TMP/v6.out"
    check "... and the log names its /64" grep -q "refused a connection from fd00:0:0:1::b (its /64)" "$TMP/v6.log"
else
    ok "IPv6 per /64: skipped (no network namespace here)"
    ok "... its log line: skipped"
fi

# ---- the open-files limit (item 6) -----------------------------------------------
P=$(free_port)
expect_fail2 "--max-conns 1000 under ulimit -n 512: exit 2, one line" \
    "may hold 1064 file descriptors.*open-files limit of 512 \(ulimit -n; hard limit 512\)" \
    sh -c "ulimit -n 512 && exec '$ELDRD' -m '$TMP/m.h5' --listen 127.0.0.1:$P"
expect_fail2 "proxy mode counts its upstream connections: --max-conns 500, 1 prefill and 4 decoders under 4000" \
    "may hold 4064 file descriptors \(--max-conns 500, with the proxy's upstream connections" \
    sh -c "ulimit -n 4000 && exec '$ELDRD' -m '$TMP/m.h5' --listen 127.0.0.1:$P --max-conns 500 \
        --max-conns-per-ip 64 --proxy --prefill http://127.0.0.1:1 \
        --decode http://127.0.0.1:1,http://127.0.0.1:2,http://127.0.0.1:3,http://127.0.0.1:4"
HARD=$(sh -c 'ulimit -Hn')
if [ "$HARD" != unlimited ] && [ "$HARD" -gt 1200 ]; then
    PORT=$(free_port); URL="http://127.0.0.1:$PORT"
    sh -c "ulimit -Sn 256 && exec '$ELDRD' -m '$TMP/m.h5' --listen 127.0.0.1:$PORT" 2>"$TMP/nofile.log" &
    PID=$!; PIDS="$PIDS $PID"
    i=0; while [ $i -lt 50 ] && ! curl -s --max-time 1 "$URL/healthz" >/dev/null 2>&1; do sleep 0.1; i=$((i + 1)); done
    check "a soft limit of 256 under a hard one of $HARD: raised to it, and eldrd serves" \
        sh -c "awk '/^Max open files/ { exit !(\$4 == $HARD && \$5 == $HARD) }' /proc/$PID/limits"
    check "... and says so" grep -q "open files: soft limit raised from 256 to the hard limit, $HARD" "$TMP/nofile.log"
    stop
else
    ok "raise the soft open-files limit: skipped (hard limit $HARD)"
    ok "... its log line: skipped"
fi

# ---- framing and addresses (item 8) --------------------------------------------------
start framing -m "$TMP/m.h5" || exit 0
$PY - "$PORT" >"$TMP/te.out" 2>&1 <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
# a length and a coding, then a request smuggled in the "body" as one of
# them frames it
s.sendall(b'POST /v1/finish HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n'
          b'0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n')
got = b""
while True:
    try:
        part = s.recv(4096)
    except OSError:
        break
    if not part: break
    got += part
print(got.decode(errors="replace"))
print("answers", got.count(b"HTTP/1.1 "))
EOF
check "Transfer-Encoding with Content-Length: 400" grep -q "^HTTP/1.1 400" "$TMP/te.out"
check "... JSON naming Transfer-Encoding" grep -q '"param":"Transfer-Encoding"' "$TMP/te.out"
check "... with Connection: close, and nothing after it is answered" \
    sh -c "grep -qi '^Connection: close' '$TMP/te.out' && grep -q '^answers 1$' '$TMP/te.out'"
stop
P=$(free_port)
"$ELDRD" -m "$TMP/m.h5" --listen "[::ffff:127.0.0.1]:$P" 2>"$TMP/mapped.log" &
PID=$!; PIDS="$PIDS $PID"
i=0; while [ $i -lt 50 ] && ! curl -s --max-time 1 "http://127.0.0.1:$P/healthz" >/dev/null 2>&1; do sleep 0.1; i=$((i + 1)); done
check "--listen [::ffff:127.0.0.1]:PORT serves 127.0.0.1:PORT" curl -sf --max-time 2 "http://127.0.0.1:$P/healthz"
stop
$PY -c 'import socket,sys,time; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); time.sleep(5)' "$P" &
BUSY=$!; PIDS="$PIDS $BUSY"
sleep 0.3
expect_fail2 "a port in use: exit 2, one line saying so" \
    "^eldrd: --listen 127.0.0.1:$P: cannot listen there: Address already in use$" \
    "$ELDRD" -m "$TMP/m.h5" --listen "127.0.0.1:$P"
kill $BUSY 2>/dev/null
