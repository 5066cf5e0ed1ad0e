#!/bin/sh
# tests/e2e/readiness.sh - readiness that tells the truth (issue 31, item
# 1; docs/reliability.md, "Readiness"): with every decoder out of
# rotation, /healthz answers 503 naming the role with Retry-After (so
# Kubernetes takes the pod out of its Service) while /livez stays 200, and
# a request, streamed or not, gets 503 with Retry-After before any byte;
# once something answers on the decoders' ports the probes bring them
# back and both turn 200. The same for the prefills; the picker's
# readiness counts its endpoints.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs readiness

"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --variant count --layers all --seed 1 >/dev/null 2>&1
P1=$(free_port); P2=$(free_port); P3=$(free_port); P4=$(free_port)
DEADDC="http://127.0.0.1:$P1,http://127.0.0.1:$P2,http://127.0.0.1:$P3,http://127.0.0.1:$P4"
standins live --prefill 1 --decode 4 --chunks 1 --chunk-gap 0
LIVEPF=$PF; LIVEDC=$DC
start nodc -m "$TMP/m.h5" --proxy --prefill "$LIVEPF" --decode "$DEADDC" --eject-after 1 \
    --eject-time 30 --health-interval 0.2 || exit 0
NODC=$URL
start nopf -m "$TMP/m.h5" --proxy --prefill "http://127.0.0.1:$(free_port)" --decode "$LIVEDC" \
    --eject-after 1 --eject-time 30 --health-interval 0.2 || exit 0
NOPF=$URL
start xp -m "$TMP/m.h5" --ext-proc "127.0.0.1:$(free_port)" \
    --endpoints "$ROOT/tests/gateway/endpoints.json" || exit 0
XP=$URL
$PY - "$NODC" "$NOPF" "$XP" "$P1,$P2,$P3,$P4" "$ROOT" "$SMALL" "$TMP" <<'PYEOF'
import http.client, json, subprocess, sys, time, urllib.parse
NODC, NOPF, XP, PORTS, ROOT, SMALL, TMP = sys.argv[1:8]


def ok(name, cond, *why):
    print(("ok - " if cond else "not ok - ") + name)
    for w in ([] if cond else why):
        print("#   " + str(w)[:600])
    sys.stdout.flush()


def call(url, method, path, body=None):
    u = urllib.parse.urlparse(url)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    c.request(method, path, json.dumps(body) if body is not None else None)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict(r.getheaders()), data


def wait(cond, secs):
    end = time.time() + secs
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


ok("with every decoder dead, /healthz turns 503 (the probes eject them, no request needed)",
   wait(lambda: call(NODC, "GET", "/healthz")[0] == 503, 5), call(NODC, "GET", "/healthz"))
st, hd, data = call(NODC, "GET", "/healthz")
j = json.loads(data)
ok("... naming the role, with the counts and Retry-After",
   j.get("role") == "decode" and j.get("in_rotation", {}).get("decode") == {"in_rotation": 0, "of": 4}
   and j.get("in_rotation", {}).get("prefill") == {"in_rotation": 1, "of": 1} and
   0 < int(hd.get("Retry-After", "0")) <= 30, j, hd)
st, hd, data = call(NODC, "GET", "/livez")
ok("... while /livez stays 200", st == 200 and json.loads(data)["status"] == "alive", st, data)
for stream in (False, True):
    st, hd, data = call(NODC, "POST", "/v1/completions",
                        {"prompt": "x y", "max_tokens": 4, "stream": stream})
    ok("a %s request gets 503 with Retry-After before any byte (no prefill token, no SSE)"
       % ("streamed" if stream else "plain"),
       st == 503 and "Retry-After" in hd and not data.startswith(b"data:") and
       json.loads(data)["error"].get("param") == "decode", st, hd, data[:200])
# revive: stand-ins on the dead ports; the probes put them back
proc = subprocess.Popen(["/usr/bin/python3", ROOT + "/tests/e2e/fake_pd.py", SMALL,
                         TMP + "/revive.ports", TMP + "/revive.jsonl", "--prefill", "0",
                         "--decode", "4", "--bind-decode", PORTS, "--max-seconds", "60"])
try:
    ok("once the decoders answer again, /healthz is 200 with every decoder in rotation",
       wait(lambda: call(NODC, "GET", "/healthz")[0] == 200, 8) and
       json.loads(call(NODC, "GET", "/healthz")[2]).get("in_rotation", {}).get("decode") ==
       {"in_rotation": 4, "of": 4}, call(NODC, "GET", "/healthz"))
    st, hd, data = call(NODC, "POST", "/v1/completions", {"prompt": "x y", "max_tokens": 4})
    ok("... and a request is served (200)", st == 200, st, data[:200])
finally:
    proc.kill()
ok("with the only prefill dead, /healthz is 503 naming prefill",
   wait(lambda: call(NOPF, "GET", "/healthz")[0] == 503, 5) and
   json.loads(call(NOPF, "GET", "/healthz")[2]).get("role") == "prefill",
   call(NOPF, "GET", "/healthz"))
st, hd, data = call(XP, "GET", "/healthz")
ok("the picker's /healthz counts its decode endpoints in rotation",
   st == 200 and json.loads(data).get("in_rotation") == {"decode": {"in_rotation": 4, "of": 4}},
   st, data)
PYEOF
