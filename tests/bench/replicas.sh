#!/bin/sh
# tests/bench/replicas.sh - do two eldrd replicas that poll the same vLLM
# workers (--load-from vllm) make the same decisions in a burst?
#
# Two replicas, tau 2 (the load alone decides), each polling the stand-in
# workers (tests/e2e/fake_vllm.py) every 100 ms on its own clock. Bursts of
# 60 routes go to both replicas in the same order (a mirrored pair, as
# behind a proxy that may ask either); replica A's choice is what the
# workers receive, so their reported loads follow A's decisions. A row per
# run: how many of B's decisions equal A's. Without the routes sent since
# the last poll on top of each report, a burst between two polls would all
# land on the worker that looked least loaded, and the two replicas, whose
# polls fall at different moments, would disagree whenever a poll landed
# inside the burst.
#
# What it shows (docs/eldrd.md, "Load signal"): the burst lands evenly (the
# workers' loads end within one or two of each other), and where B differs from
# A it is a tie broken the other way between workers whose loads differ
# by one in the two views: a route that fell between a poll's request and
# the worker's reading of its gauge counts in one view and not the other.
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${BIN:-bin}
PY=/usr/bin/python3
TMP=$(mktemp -d)
PIDS=""
trap 'for p in $PIDS; do kill -9 $p 2>/dev/null; done; rm -rf "$TMP"' EXIT
"$ROOT/$BIN/eldr" fit "$ROOT/samples/small.h5" -k 4 -o "$TMP/m.h5" --seed 1 >/dev/null 2>&1 || exit 1
echo '{"d0":{"running":20,"waiting":0},"d1":{"running":20,"waiting":0},"d2":{"running":20,"waiting":0},"d3":{"running":20,"waiting":0}}' >"$TMP/loads.json"
$PY "$ROOT/tests/e2e/fake_vllm.py" "$TMP/loads.json" "$TMP/vport" 300 &
PIDS="$PIDS $!"
i=0; while [ ! -s "$TMP/vport" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
V="http://127.0.0.1:$(cat "$TMP/vport")"
ports=""
for r in a b; do
    port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    "$ROOT/$BIN/eldrd" -m "$TMP/m.h5" --listen "127.0.0.1:$port" --workers d0,d1,d2,d3 --tau 2 \
        --load-from vllm --worker-urls "$V/d0,$V/d1,$V/d2,$V/d3" --poll-ms 100 --quiet \
        2>"$TMP/$r.log" &
    PIDS="$PIDS $!"
    ports="$ports $port"
done
$PY - "$TMP/loads.json" $ports <<'PYEOF'
import http.client, json, os, random, sys, time
loads_file, pa, pb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def conn(p):
    for _ in range(100):
        try:
            c = http.client.HTTPConnection("127.0.0.1", p, timeout=5)
            c.request("GET", "/healthz"); c.getresponse().read(); return c
        except OSError:
            time.sleep(0.1)
    sys.exit("replica on port %d never answered" % p)
ca, cb = conn(pa), conn(pb)
def call(c, method, path, body=None):
    c.request(method, path, body=json.dumps(body) if body is not None else None)
    r = c.getresponse(); return r.status, json.loads(r.read() or b"{}")
true = [20, 20, 20, 20]
def publish():
    tmp = loads_file + ".tmp"
    json.dump({"d%d" % k: {"running": v, "waiting": 0} for k, v in enumerate(true)}, open(tmp, "w"))
    os.replace(tmp, loads_file)
rng = random.Random(7)
time.sleep(0.5)
agree_all = total = 0
for burst in range(5):
    agree = 0
    t0 = time.perf_counter()
    for i in range(60):
        body = {"request_id": "b%d-%d" % (burst, i), "sparse": [[0, rng.randrange(8), 5]]}
        sa, ja = call(ca, "POST", "/v1/route", body)
        sb, jb = call(cb, "POST", "/v1/route", body)
        if sa != 200 or sb != 200:
            sys.exit("route answered %d / %d" % (sa, sb))
        agree += ja["worker_index"] == jb["worker_index"]
        true[ja["worker_index"]] += 1
        publish()
        time.sleep(0.005)   # 60 routes over ~0.4 s: several polls land inside
    secs = time.perf_counter() - t0
    spread = max(true) - min(true)
    # the burst drains: both replicas finish, the workers go back to 20 each
    for i in range(60):
        call(ca, "POST", "/v1/finish", {"request_id": "b%d-%d" % (burst, i)})
        call(cb, "POST", "/v1/finish", {"request_id": "b%d-%d" % (burst, i)})
    true[:] = [20, 20, 20, 20]
    publish()
    time.sleep(0.5)
    agree_all += agree; total += 60
    print("eldrd replicas: same decision in a burst (run %d)\t60 routes\t%.4f\t%d/60 agree, load spread %d"
          % (burst + 1, secs, agree, spread))
print("eldrd replicas: same decision, all bursts\t%d routes\t0\t%.1f%% agree" % (total, 100.0 * agree_all / total))
PYEOF
