#!/bin/sh
# tests/e2e/conn_limits.sh - every connection limit says when it is hit
# (docs/reliability.md, "eldrd's limits"): with --max-conns 4 (the
# smallest) and --max-conns-per-ip 2, on the HTTP listener (libmicrohttpd's
# thread pool, and the event loop of --proxy) and on the ext_proc
# listener:
# - one address's third connection is closed at once, logged, and counted
#   as eldr_connections_refused_total{listener="public",
#   reason="max_conns_per_ip"};
# - a fifth connection to a full HTTP listener is not answered: it waits
#   in the kernel's accept queue (libmicrohttpd 0.9.75 stops polling the
#   listening socket at its limit), which eldr_listener_queue shows on the
#   admin listener with eldr_listener_connections at 4 and the time full
#   counting; once one of the four closes, it is served;
# - a fifth connection to the full ext_proc listener is closed at once,
#   logged, and counted as reason="max_conns".
# Clients bind 127.0.0.1, .2 and .3 (all loopback) to be three addresses.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs conn_limits

"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --variant count --layers all --seed 1 >/dev/null 2>&1
XP=$(free_port); ADM=$(free_port)
start pool -m "$TMP/m.h5" --max-conns 4 --max-conns-per-ip 2 --admin-listen "127.0.0.1:$ADM" \
    --ext-proc "127.0.0.1:$XP" --endpoints "$ROOT/tests/gateway/endpoints.json" || exit 0
POOL=$PORT; POOLLOG="$TMP/pool.log"; POOLPID=$PID
ADM2=$(free_port)
start loop -m "$TMP/m.h5" --max-conns 4 --max-conns-per-ip 4 --admin-listen "127.0.0.1:$ADM2" \
    --proxy --prefill "http://127.0.0.1:$(free_port)" \
    --decode "http://127.0.0.1:$(free_port),http://127.0.0.1:$(free_port),http://127.0.0.1:$(free_port),http://127.0.0.1:$(free_port)" \
    || exit 0
LOOP=$PORT
timeout 60 $PY - "$POOL" "$ADM" "$XP" "$POOLLOG" "$LOOP" "$ADM2" <<'PYEOF'
import re, socket, sys, time, urllib.request
POOL, ADM, XP, LOG, LOOP, ADM2 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], \
    sys.argv[5], int(sys.argv[6])
POOL, LOOP = int(POOL), int(LOOP)


def ok(name, cond, *why):
    print(("ok - " if cond else "not ok - ") + name)
    for w in ([] if cond else why):
        print("#   " + str(w)[:600])
    sys.stdout.flush()


def conn(port, src):
    s = socket.socket()
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s


def closed_at_once(s, wait=2.0):
    """The server closed s unread within wait seconds (EOF or reset)."""
    s.settimeout(wait)
    try:
        return s.recv(16) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def still_open(s, wait=0.5):
    s.settimeout(wait)
    try:
        s.recv(16)
        return False
    except socket.timeout:
        return True
    except OSError:
        return False


def served_after_close(held, waiting):
    """Close one of held: the first bytes of waiting's answer (5 s)."""
    held.pop().close()
    waiting.settimeout(5)
    try:
        return waiting.recv(64)
    except OSError as e:
        return repr(e).encode()


def metrics(adm):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % adm, timeout=5).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(eldr_(?:connections_refused_total|listener_[a-z_]+))\{(.*)\} (\S+)$", line)
        if m:
            out[(m.group(1), m.group(2))] = float(m.group(3))
    return out


def val(m, name, listener, reason=None):
    key = 'listener="%s"' % listener + (',reason="%s"' % reason if reason else "")
    return m.get((name, key))


def log_has(text, wait=2.0):
    t0 = time.time()
    while time.time() - t0 < wait:
        if text in open(LOG).read():
            return True
        time.sleep(0.05)
    return False


# --- the HTTP listener, libmicrohttpd's thread pool -----------------------------
m0 = metrics(ADM)
ok("every listener's refusal series are there from the start, at 0",
   all(val(m0, "eldr_connections_refused_total", l, r) == 0
       for l, r in [("public", "max_conns"), ("public", "max_conns_per_ip"),
                    ("admin", "max_conns_per_ip"), ("ext_proc", "max_conns"),
                    ("ext_proc", "setup_failed")]) and
   val(m0, "eldr_connections_refused_total", "ext_proc", "max_conns_per_ip") is None, m0)
ok("eldr_listener_max_connections: 4 on each listener",
   all(val(m0, "eldr_listener_max_connections", l) == 4 for l in ("public", "admin", "ext_proc")),
   m0)
held = [conn(POOL, "127.0.0.1") for _ in range(2)]
third = conn(POOL, "127.0.0.1")
ok("an address's third connection (--max-conns-per-ip 2) is closed at once", closed_at_once(third))
ok("... logged", log_has("refused a connection from 127.0.0.1 on the public listener: it holds 2 "
                         "already (--max-conns-per-ip)"))
held += [conn(POOL, "127.0.0.2") for _ in range(2)]
fifth = conn(POOL, "127.0.0.3")
fifth.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
ok("a fifth connection to the full listener (--max-conns 4) gets no answer: it waits",
   still_open(fifth, 1.0))
m = metrics(ADM)
ok("... eldr_listener_queue{listener=\"public\"} 1: the kernel holds it",
   val(m, "eldr_listener_queue", "public") == 1, m)
ok("... eldr_listener_connections{listener=\"public\"} 4, and the time full counts",
   val(m, "eldr_listener_connections", "public") == 4 and
   val(m, "eldr_listener_full_seconds_total", "public") > 0.5, m)
ok("... eldr_connections_refused_total{listener=\"public\",reason=\"max_conns_per_ip\"} 1",
   val(m, "eldr_connections_refused_total", "public", "max_conns_per_ip") == 1 and
   val(m, "eldr_connections_refused_total", "public", "max_conns") == 0, m)
ok("... logged: the listener is full, new connections wait",
   log_has("the public listener holds 4 connections (--max-conns): new ones wait in the "
           "kernel's accept queue until one closes"))
answer = served_after_close(held, fifth)
ok("once one of the four closes, the waiting connection is served (200)",
   answer.startswith(b"HTTP/1.1 200"), answer)
full_then = val(metrics(ADM), "eldr_listener_full_seconds_total", "public")
for s in held + [fifth]:
    s.close()
time.sleep(0.3)
m = metrics(ADM)
ok("with every connection closed, the queue is empty and the time full stops",
   val(m, "eldr_listener_queue", "public") == 0 and
   val(m, "eldr_listener_connections", "public") == 0 and
   abs(val(m, "eldr_listener_full_seconds_total", "public") - full_then) < 0.5, m, full_then)

# --- the ext_proc listener ------------------------------------------------------
g = [conn(XP, "127.0.0.1") for _ in range(4)]
time.sleep(0.2)
g5 = conn(XP, "127.0.0.1")
ok("a fifth connection to the full ext_proc listener is closed at once", closed_at_once(g5))
ok("... logged", log_has("on the ext_proc listener: it holds 4 already (--max-conns)"))
m = metrics(ADM)
ok("... eldr_connections_refused_total{listener=\"ext_proc\",reason=\"max_conns\"} 1",
   val(m, "eldr_connections_refused_total", "ext_proc", "max_conns") == 1 and
   val(m, "eldr_listener_connections", "ext_proc") == 4, m)
ok("... the HTTP listener's counts did not move",
   val(m, "eldr_connections_refused_total", "public", "max_conns_per_ip") == 1, m)
for s in g:
    s.close()
time.sleep(0.3)
g6 = conn(XP, "127.0.0.1")
g6.settimeout(2)
try:
    first = g6.recv(9)
except OSError as e:
    first = b""
ok("once they close, the ext_proc listener takes a connection again (its SETTINGS frame)",
   len(first) == 9 and first[3] == 4, first)
g6.close()

# --- the HTTP listener on the event loop (--proxy) ------------------------------
held = [conn(LOOP, "127.0.0.1") for _ in range(4)]
fifth = conn(LOOP, "127.0.0.1")
fifth.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
ok("--proxy (the event loop): a fifth connection waits too", still_open(fifth, 1.0))
m = metrics(ADM2)
ok("... eldr_listener_queue{listener=\"public\"} 1, 4 open, none refused",
   val(m, "eldr_listener_queue", "public") == 1 and
   val(m, "eldr_listener_connections", "public") == 4 and
   val(m, "eldr_connections_refused_total", "public", "max_conns") == 0, m)
answer = served_after_close(held, fifth)
ok("... and is served once one closes", answer.startswith(b"HTTP/1.1 "), answer)
for s in held + [fifth]:
    s.close()
PYEOF
[ $? -eq 124 ] && notok "conn_limits within 60 s"
clean_exit loop
PID=$POOLPID; clean_exit pool
