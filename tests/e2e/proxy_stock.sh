#!/bin/sh
# tests/e2e/proxy_stock.sh - eldrd --proxy --pd-protocol vllm in front of a
# STOCK vLLM prefill (no eldr_sig; started with --enable-return-routed-
# experts), issue 29: the signature comes from the prefill answer's routed
# experts (tests/e2e/fake_pd.py --routed, as vLLM >= 0.22 and 0.21 write
# them), prefix-cached rows (-1, vLLM 0.21) are filled from eldrd's
# signature cache, every decision equals the band rule on the prompt's
# routed experts (an independent oracle in numpy, 30 of 30), explain says
# where the signal came from, and the routing never reaches the client.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs proxy_stock

"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --variant count --layers all --seed 1 >/dev/null 2>&1
check "fixture: a K=4 count model over every layer" test -s "$TMP/m.h5"

# vLLM >= 0.22: choices[0].routed_experts, a base64 .npy
standins npy --prefill 1 --decode 4 --routed npy --chunks 2 --chunk-gap 0.05
start npy -m "$TMP/m.h5" --proxy --pd-protocol vllm --prefill "$PF" --decode "$DC" --tau 0 || exit 0
NPY=$URL
# vLLM 0.21 with its prefix cache: prompt_routed_experts, cached rows -1
standins lists --prefill 1 --decode 4 --routed lists --prefix-cache --chunks 2 --chunk-gap 0.05
LISTS_PF=$PF; LISTS_DC=$DC
start lists -m "$TMP/m.h5" --proxy --pd-protocol vllm --prefill "$PF" --decode "$DC" --tau 0 || exit 0
LISTS=$URL
# a second eldrd on the same (by then warm) engine: its cache is empty
start cold -m "$TMP/m.h5" --proxy --pd-protocol vllm --prefill "$LISTS_PF" --decode "$LISTS_DC" \
    --tau 0 || exit 0
COLD=$URL
expect_fail2 "--block-size 0" "--block-size" "$ELDRD" -m "$TMP/m.h5" --block-size 0 --listen 127.0.0.1:1
expect_fail2 "--block-size 256 (past the cache's 255)" "--block-size" \
    "$ELDRD" -m "$TMP/m.h5" --block-size 256 --listen 127.0.0.1:1

$PY "$ROOT/tests/e2e/proxy_stock_check.py" "$TMP/m.h5" "$NPY" "$TMP/npy.jsonl" "$LISTS" \
    "$TMP/lists.jsonl" "$COLD"
