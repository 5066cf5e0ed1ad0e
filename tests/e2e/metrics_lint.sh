#!/bin/sh
# tests/e2e/metrics_lint.sh - GET /metrics in every mode of eldrd (plain,
# --proxy with stock and eldr_sig prefills, --ext-proc, --load-from vllm)
# is clean by `promtool check metrics` (Debian's prometheus package): every
# family has HELP and TYPE, names and labels are well formed, counters end
# in _total (issue 31, item 4). promtool is shown to fail a page without
# HELP first, so that a checker that passes everything fails here.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs metrics_lint
if ! command -v promtool >/dev/null; then
    notok "promtool installed (make deps installs Debian's prometheus)"; exit 0
fi
printf '# TYPE x_total counter\nx_total 1\n' | promtool check metrics >/dev/null 2>&1 &&
    notok "promtool fails a family without HELP" || ok "promtool fails a family without HELP"

"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --variant count --layers all --seed 1 >/dev/null 2>&1
lint() { # NAME: promtool on $URL/metrics
    curl -s --max-time 10 "$URL/metrics" >"$TMP/metrics.txt"
    if [ -s "$TMP/metrics.txt" ] && promtool check metrics <"$TMP/metrics.txt" >"$TMP/lint" 2>&1; then
        ok "$1: /metrics is promtool-clean ($(grep -c '^# HELP' "$TMP/metrics.txt") families)"
    else
        notok "$1: /metrics is promtool-clean" "$(head -c 600 "$TMP/lint")"
    fi
}

start plain -m "$TMP/m.h5" --prefill-workers p0,p1 || exit 0
curl -s --max-time 5 -o /dev/null "$URL/v1/route" --data '{"request_id":"a","sparse":[[0,1,4]]}'
lint "plain"
stop

standins stock --prefill 1 --decode 4 --routed npy --chunks 1 --chunk-gap 0
start proxy -m "$TMP/m.h5" --proxy --pd-protocol vllm --prefill "$PF" --decode "$DC" \
    --health-interval 1 || exit 0
curl -s --max-time 10 -o /dev/null "$URL/v1/completions" --data '{"prompt":"a b c","max_tokens":2}'
lint "--proxy, a stock prefill"
stop
standins sig --prefill 1 --decode 4 --chunks 1 --chunk-gap 0
start proxy2 -m "$TMP/m.h5" --proxy --prefill "$PF" --decode "$DC" || exit 0
curl -s --max-time 10 -o /dev/null "$URL/v1/completions" --data '{"prompt":"a b c","max_tokens":2}'
lint "--proxy, eldr_sig"
stop

start xp -m "$TMP/m.h5" --ext-proc "127.0.0.1:$(free_port)" \
    --endpoints "$ROOT/tests/gateway/endpoints.json" || exit 0
lint "--ext-proc"
stop

echo '{"d0": {"running": 3, "waiting": 1}, "d1": {"running": 0, "waiting": 0},
  "d2": "missing", "d3": {"running": 1, "waiting": 2}}' >"$TMP/loads.json"
$PY "$ROOT/tests/e2e/fake_vllm.py" "$TMP/loads.json" "$TMP/vport" 60 &
PIDS="$PIDS $!"
i=0; while [ ! -s "$TMP/vport" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
V="http://127.0.0.1:$(cat "$TMP/vport")"
start vllm -m "$TMP/m.h5" --workers d0,d1,d2,d3 --load-from vllm \
    --worker-urls "$V/d0,$V/d1,$V/d2,$V/d3" --poll-ms 100 || exit 0
sleep 0.5
lint "--load-from vllm"
stop
