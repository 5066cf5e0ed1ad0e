#!/bin/sh
# tests/e2e/picker_health.sh - the gateway picker's readiness, one answer
# on both screens (src/router/engine/readiness.h; docs/gateway.md,
# "Health"): grpc.health.v1 (asked by the Envoy stand-in,
# tests/gateway/envoy.js) and GET /healthz on the same fleet:
# - a prefill-less fleet (decode endpoints only) is ready: SERVING, 200;
# - a fleet whose every prefill is ejected is still ready (llm-d's
#   disaggregation falls back to decode alone): SERVING, 200 "degraded"
#   listing them;
# - a fleet with no decode worker in rotation is not: NOT_SERVING for "",
#   readiness and the ext_proc service (liveness stays SERVING), 503 naming
#   decode with Retry-After; a pick is still answered (panic routing);
# - draining: NOT_SERVING, and /healthz on a kept connection 503 draining.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs picker_health
standin_prereqs picker_health
# health TARGET SERVICE: the status the picker answers ("" = the server)
health() { envoy health --target "$1" --service "$2" --expect any --timeout 5 2>&1 |
    $PY -c "import json,sys; print(json.loads(sys.stdin.readline()).get('status'))"; }
# hz NAME EXPR: GET /healthz on $URL, EXPR on (status, j)
hz() {
    st=$(curl -s --max-time 5 -o "$TMP/hz" -D "$TMP/hzh" -w '%{http_code}' "$URL/healthz")
    if $PY -c "import json,sys; st=int(sys.argv[1]); j=json.load(open(sys.argv[2])); h=open(sys.argv[3]).read().lower(); sys.exit(0 if ($2) else 1)" \
        "$st" "$TMP/hz" "$TMP/hzh"; then ok "$1"; else notok "$1" "HTTP $st" "$(head -c 400 "$TMP/hz")"; fi
}
# serving NAME TARGET WANT SERVICE...: each service answers WANT
serving() {
    n=$1; t=$2; want=$3; shift 3; bad=""
    for svc in "$@"; do got=$(health "$t" "$svc"); [ "$got" = "$want" ] || bad="$bad '$svc':$got"; done
    if [ -z "$bad" ]; then ok "$n"; else notok "$n" "wanted $want:$bad"; fi
}

"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --variant count --layers all --seed 1 >/dev/null 2>&1
printf '{"model": "m", "prompt": "p"}' >"$TMP/plain.json"
# the decode endpoints alone, and the same with two prefill pods
cp "$GW/endpoints.json" "$TMP/eps.json"
$PY -c "
import json, sys
j = json.load(open(sys.argv[1]))
j['endpoints'] += [{'name': 'p%d' % i, 'address': '10.0.1.%d' % (i + 1), 'port': '8000',
                    'labels': {'llm-d.ai/role': 'prefill'}} for i in range(2)]
json.dump(j, open(sys.argv[2], 'w'))" "$TMP/eps.json" "$TMP/eps_pd.json"

# --- a prefill-less fleet ------------------------------------------------------
XP=$(free_port)
start dec -m "$TMP/m.h5" --ext-proc "127.0.0.1:$XP" --endpoints "$TMP/eps.json" --eject-after 1 \
    --eject-time 30 || exit 0
T="127.0.0.1:$XP"; DECPID=$PID
serving "a prefill-less fleet is ready: SERVING (\"\", liveness)" "$T" SERVING "" liveness
hz "... and /healthz says the same: 200 ok, decode 4 of 4, no prefill role" \
    "st == 200 and j['status'] == 'ok' and j['in_rotation'] == {'decode': {'in_rotation': 4, 'of': 4}}"

# --- no decode worker in rotation: each answers 503 through Envoy once -----------
for i in 1 2 3; do
    envoy pick --target "$T" --body-file "$TMP/plain.json" --subset "10.0.0.$i:8000" \
        --response-status 503 --quiet >/dev/null 2>&1
done
serving "three of four decode workers ejected: still SERVING" "$T" SERVING ""
hz "... /healthz 200 degraded, decode 1 of 4" \
    "st == 200 and j['status'] == 'degraded' and j['in_rotation']['decode'] == {'in_rotation': 1, 'of': 4}"
envoy pick --target "$T" --body-file "$TMP/plain.json" --subset "10.0.0.4:8000" \
    --response-status 503 --quiet >/dev/null 2>&1
serving "no decode worker in rotation: NOT_SERVING (\"\", readiness, ext_proc)" "$T" NOT_SERVING \
    "" readiness envoy.service.ext_proc.v3.ExternalProcessor
serving "... liveness stays SERVING" "$T" SERVING liveness
hz "... and /healthz says the same: 503 naming decode, with Retry-After" \
    "st == 503 and j['role'] == 'decode' and j['in_rotation']['decode']['in_rotation'] == 0 and 'retry-after:' in h"
envoy pick --target "$T" --body-file "$TMP/plain.json" >"$TMP/p" 2>&1
check "... a pick is still answered with an endpoint (every worker used: panic routing)" \
    $PY -c "import json,sys; j=json.loads(open(sys.argv[1]).readline()); sys.exit(0 if j.get('endpoint','').startswith('10.0.0.') else 1)" "$TMP/p"

# --- every prefill ejected --------------------------------------------------------
XP2=$(free_port)
start pd -m "$TMP/m.h5" --ext-proc "127.0.0.1:$XP2" --endpoints "$TMP/eps_pd.json" \
    --prefill-workers p0,p1 --eject-after 1 --eject-time 30 || exit 0
T2="127.0.0.1:$XP2"
serving "a fleet with prefill pods: SERVING" "$T2" SERVING ""
hz "... /healthz 200 ok, prefill 2 of 2 and decode 4 of 4" \
    "st == 200 and j['status'] == 'ok' and j['in_rotation'] == {'prefill': {'in_rotation': 2, 'of': 2}, 'decode': {'in_rotation': 4, 'of': 4}}"
for i in 1 2; do
    envoy pick --target "$T2" --body-file "$TMP/plain.json" --header "EPP-Profile=prefill" \
        --response-status 503 --quiet >/dev/null 2>&1
done
hz "every prefill ejected: /healthz 200 degraded, prefill 0 of 2, both listed" \
    "st == 200 and j['status'] == 'degraded' and j['in_rotation']['prefill']['in_rotation'] == 0 and sorted(j['ejected']) == ['prefill p0', 'prefill p1']"
serving "... and the picker stays SERVING (llm-d falls back to decode alone)" "$T2" SERVING \
    "" readiness

# --- draining: a stream mid-body holds the drain ----------------------------------
head -c 200000 /dev/zero | tr '\0' 'a' | $PY -c "import json,sys; print(json.dumps({'model':'m','prompt':sys.stdin.read()}))" >"$TMP/big.json"
envoy cancel --target "$T2" --body-file "$TMP/big.json" --after-bytes 50000 --wait-ms 4000 >"$TMP/hold" 2>&1 &
HOLD=$!
$PY - "$PORT" "$PID" "$T2" "$GW/envoy.js" >"$TMP/drain" 2>&1 <<'PYEOF'
import http.client, json, os, signal, subprocess, sys, time
port, pid, target, envoy = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
c.request("GET", "/healthz")
r = c.getresponse(); r.read()
print("before", r.status)
time.sleep(0.7)
os.kill(pid, signal.SIGTERM)
time.sleep(0.5)
c.request("GET", "/healthz")     # the kept connection: the listener no longer accepts
r = c.getresponse()
print("healthz", r.status, json.loads(r.read()).get("status"))
h = subprocess.run(["node", envoy, "health", "--target", target, "--expect", "any", "--timeout",
                    "3"], capture_output=True, text=True, timeout=20)
print("grpc", json.loads(h.stdout.splitlines()[0]).get("status"))
PYEOF
check "draining: /healthz on a kept connection 503 draining, health NOT_SERVING" \
    grep -qz 'before 200.*healthz 503 draining.*grpc NOT_SERVING' "$TMP/drain"
wait $HOLD
clean_exit pd
PID=$DECPID; clean_exit dec
