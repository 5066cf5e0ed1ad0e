#!/bin/sh
# tests/e2e/capture.sh - eldr capture against a stand-in engine
# (tests/e2e/fake_engine.py) that answers like vLLM and SGLang with
# routing drawn from the prompt: the captured trace equals the engine's
# routing exactly for every encoding (tests/e2e/capture_check.py, h5py),
# failed requests are retried and then named, a server that dies mid-run
# and Ctrl-C leave a trace of what was captured, bad answers exit 2 with
# no file, and the trace fits and simulates.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
[ -x "$ELDR" ] || ELDR="$ROOT/bin/eldr"
if ! $PY -c 'import numpy, h5py' 2>/dev/null; then
    notok "capture prerequisites" "need numpy/h5py under $PY"; exit 0
fi
FAKE="$ROOT/tests/e2e/fake_engine.py"
CHECK="$ROOT/tests/e2e/capture_check.py"

# prompts: 48 lines, 4 first words (domains), labels, ids; a chat set too
$PY - "$TMP/p.jsonl" "$TMP/chat.jsonl" <<'PYEOF'
import json, sys
words = ["alpha", "beta", "gamma", "delta"]
with open(sys.argv[1], "w") as f, open(sys.argv[2], "w") as g:
    for i in range(48):
        w = words[i % 4]
        text = w + " q%d " % i + " ".join("t%d" % j for j in range(1 + (i * 7) % 11))
        f.write(json.dumps({"id": "r%02d" % i, "prompt": text, "label": w}) + "\n")
        g.write(json.dumps({"id": "c%02d" % i, "messages": [{"role": "system", "content": w},
                            {"role": "user", "content": text}], "label": w}) + "\n")
PYEOF

# engine ARGS...: a fresh stand-in ($EURL, $EPID); truth in $TMP/truth.jsonl
engine() {
    rm -f "$TMP/port" "$TMP/truth.jsonl"
    $PY "$FAKE" "$TMP/port" "$TMP/truth.jsonl" --max-seconds 100 "$@" 2>"$TMP/engine.log" &
    EPID=$!
    PIDS="$PIDS $EPID"
    i=0; while [ ! -s "$TMP/port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    EURL="http://127.0.0.1:$(cat "$TMP/port")"
}
# maxid TRACE N: some expert id in the trace's tokens/ is above N
maxid() {
    $PY -c "
import h5py, sys
f = h5py.File(sys.argv[1], 'r')
sys.exit(0 if max(f['tokens/prefill_experts'][:].max(), f['tokens/decode_experts'][:].max()) > int(sys.argv[2]) else 1)" "$1" "$2"
}
halt() { kill $EPID 2>/dev/null; wait $EPID 2>/dev/null; return 0; }
cap() { # OUT ARGS...: eldr capture into OUT; status in $RC
    out=$1; shift
    "$ELDR" capture --server "$EURL" -o "$out" --max-tokens 8 "$@" >"$TMP/out" 2>"$TMP/err"
    RC=$?
}
# exact NAME FILE PROMPTS [--all]: the trace equals the engine's routing
exact() {
    if $PY "$CHECK" "$2" "$3" "$TMP/truth.jsonl" $4 >"$TMP/chk" 2>&1; then ok "$1"; else
        notok "$1" "$(cat "$TMP/chk" | head -c 400)" "$(head -c 300 "$TMP/err")"; fi
}

# --- every engine version, captured exactly ---
for eng in vllm-0.21 eldr-object vllm-main; do
    engine --engine $eng --experts 16 --layers 6 --topk 2
    cap "$TMP/$eng.h5" --prompts "$TMP/p.jsonl" --experts 16
    check "$eng: exit 0" test $RC -eq 0
    exact "$eng: counts, tokens and ids equal the engine's" "$TMP/$eng.h5" "$TMP/p.jsonl" --all
    halt
done
expect_in "vllm-main: summary names the encoding" "$TMP/out" "encoding npy"
engine --engine vllm-main --experts 300 --layers 3 --topk 4
cap "$TMP/npy16.h5" --prompts "$TMP/p.jsonl" --experts 300
check "vllm-main, 300 experts (a uint16 .npy): exit 0" test $RC -eq 0
exact "  ... equal the engine's" "$TMP/npy16.h5" "$TMP/p.jsonl" --all
check "  ... ids above 255 were in it" maxid "$TMP/npy16.h5" 255
halt
engine --engine eldr-object --layers 4 --topk 3 --experts 24
cap "$TMP/chat.h5" --prompts "$TMP/chat.jsonl" --experts 24 --json
check "vllm chat (messages): exit 0" test $RC -eq 0
exact "vllm chat: equal the engine's" "$TMP/chat.h5" "$TMP/chat.jsonl" --all
check "--json summary" jq_py "$TMP/out" "j['captured'] == 48 and j['failed'] == 0 and j['engine'] == 'vllm' and j['encoding'] == 'base64' and j['layers'] == 4 and j['top_k'] == 3 and j['experts'] == 24 and j['model'] == 'fake/moe-tiny'"
halt

# --- vLLM 0.21's prefix cache: cached prompt rows are -1; the request is kept ---
# 24 prompts behind 2 shared system prompts of 40 words (two whole blocks of
# 16 each): after the first of each, their first 32 rows come from the cache
$PY - "$TMP/sys.jsonl" <<'PYEOF'
import json, sys
with open(sys.argv[1], "w") as f:
    for i in range(24):
        sysp = " ".join("s%d_%d" % (i % 2, j) for j in range(40))
        f.write(json.dumps({"id": "s%02d" % i, "prompt": sysp + " question %d about %s" % (i, "xyz"[i % 3]),
                            "label": "sys%d" % (i % 2)}) + "\n")
PYEOF
engine --engine vllm-0.21 --prefix-cache --experts 16 --layers 4 --topk 2
cap "$TMP/pc.h5" --prompts "$TMP/sys.jsonl" --experts 16 --concurrency 1 --json
check "prefix cache (-1 rows): every request kept, exit 0" jq_py "$TMP/out" "j['captured'] == 24 and j['failed'] == 0"
exact "  ... routed rows, prefill_unrouted_tokens and decode equal the engine's" "$TMP/pc.h5" "$TMP/sys.jsonl" --all
check "  ... 22 requests with 32 unrouted rows each (the engine's truth: 704)" sh -c "
$PY -c \"import json,sys; t=[json.loads(l) for l in open(sys.argv[1])]; sys.exit(0 if sum(r['unrouted'] for r in t) == 704 and sum(r['unrouted'] > 0 for r in t) == 22 else 1)\" '$TMP/truth.jsonl' &&
$PY -c \"import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j['unrouted_requests'] == 22 and j['unrouted_tokens'] == 704 else 1)\" '$TMP/out'"
"$ELDR" info "$TMP/pc.h5" >"$TMP/info.txt" 2>&1
expect_in "  ... eldr info reports them" "$TMP/info.txt" "^unrouted   704 prompt tokens without routing \\(prefix-cache hits\\) in 22 requests"
expect_in "  ... and the trace is valid" "$TMP/info.txt" "validation valid"
check "  ... eldr rho accepts it" "$ELDR" rho "$TMP/pc.h5" --pairs 200 --seed 1
check "  ... eldr fit accepts it" "$ELDR" fit "$TMP/pc.h5" -k 2 -o "$TMP/pcm.h5" --seed 1
check "  ... eldr sim accepts it" "$ELDR" sim "$TMP/pc.h5" -m "$TMP/pcm.h5" --policy eldr --rate 20
row=$($PY -c "import h5py,sys; u=h5py.File(sys.argv[1],'r')['prefill_unrouted_tokens'][:]; print(int((u > 0).argmax()))" "$TMP/pc.h5")
for c in rho fit sim; do
    case $c in fit) extra="-k 2 -o $TMP/pcm2.h5";; sim) extra="-m $TMP/pcm.h5 --rate 20";; *) extra="";; esac
    expect_fail2 "  ... eldr $c --require-full-routing refuses it, naming the first row" \
        "pc.h5: prefill_unrouted_tokens row $row: 32 prompt tokens without routing \\(22 requests, 704 tokens" \
        "$ELDR" $c "$TMP/pc.h5" $extra --require-full-routing
done
check "  ... a fully routed trace passes --require-full-routing" "$ELDR" rho "$TMP/vllm-0.21.h5" \
    --pairs 200 --require-full-routing
halt
engine --engine vllm-0.21 --prefix-cache --experts 16 --layers 4 --topk 2
expect_fail2 "--require-full-routing: the first -1 row stops the run" \
    "prompt_routed_experts token 0 layer 0: expert id -1" \
    "$ELDR" capture --server "$EURL" -o "$TMP/pcf.h5" --prompts "$TMP/sys.jsonl" --max-tokens 8 \
    --experts 16 --concurrency 1 --require-full-routing
check "  ... and writes nothing" test ! -e "$TMP/pcf.h5"
halt
check "a trace without -1 rows has no prefill_unrouted_tokens" $PY -c "
import h5py, sys; sys.exit('prefill_unrouted_tokens' in h5py.File(sys.argv[1], 'r'))" "$TMP/vllm-0.21.h5"

# --- SGLang: /generate, and sglext on its OpenAI endpoints; int32, uint16, uint8 ---
engine --engine sglang --layers 5 --topk 2 --experts 12
cap "$TMP/sg2.h5" --prompts "$TMP/p.jsonl"
check "sglang: /get_model_info has no geometry, no --layers: exit 2" test $RC -eq 2
expect_in "  ... asks for --layers and --top-k" "$TMP/err" "give --layers and --top-k"
check "  ... and writes nothing" test ! -e "$TMP/sg2.h5"
cap "$TMP/sg.h5" --prompts "$TMP/p.jsonl" --layers 5 --top-k 2
check "sglang /generate with --layers/--top-k: exit 0" test $RC -eq 0
exact "sglang raw int32: equal the engine's" "$TMP/sg.h5" "$TMP/p.jsonl" --all
expect_in "E inferred: a warning says so" "$TMP/err" "warning: E = 12 is the largest expert id seen"
cap "$TMP/sgc.h5" --prompts "$TMP/chat.jsonl" --layers 5 --top-k 2 --experts 12 --json
check "sglang chat: response-level sglext.routed_experts read" jq_py "$TMP/out" "j['captured'] == 48 and j['failed'] == 0 and j['engine'] == 'sglang'"
exact "  ... equal the engine's" "$TMP/sgc.h5" "$TMP/chat.jsonl" --all
cap "$TMP/sgo.h5" --prompts "$TMP/p.jsonl" --layers 5 --top-k 2 --experts 12 --endpoint completions
check "sglang /v1/completions: exit 0" test $RC -eq 0
exact "  ... equal the engine's" "$TMP/sgo.h5" "$TMP/p.jsonl" --all
cap "$TMP/sg3.h5" --prompts "$TMP/p.jsonl" --layers 6 --top-k 2 --engine sglang
check "sglang with the wrong --layers: exit 2" test $RC -eq 2
halt
engine --engine sglang --layers 5 --topk 2 --experts 200 --wire-dtype uint8
cap "$TMP/sg8.h5" --prompts "$TMP/chat.jsonl" --layers 5 --top-k 2 --experts 200
check "sglang uint8 wire, 200 experts: exit 0" test $RC -eq 0
exact "  ... ids above 127 read unsigned, equal the engine's" "$TMP/sg8.h5" "$TMP/chat.jsonl" --all
check "  ... ids above 127 were in it" maxid "$TMP/sg8.h5" 127
halt
engine --engine sglang --layers 2 --topk 2 --experts 65535 --wire-dtype uint16
head -12 "$TMP/p.jsonl" >"$TMP/p12.jsonl"
cap "$TMP/sg16.h5" --prompts "$TMP/p12.jsonl" --layers 2 --top-k 2 --experts 65535
check "sglang uint16 wire, 65,535 experts: exit 0" test $RC -eq 0
exact "  ... equal the engine's" "$TMP/sg16.h5" "$TMP/p12.jsonl" --all
check "  ... ids above 32,767 were in it" maxid "$TMP/sg16.h5" 32767
halt

# --- the trace is usable ---
check "captured trace fits" "$ELDR" fit "$TMP/vllm-0.21.h5" -k 2 -o "$TMP/m.h5" --seed 1
check "captured trace simulates" "$ELDR" sim "$TMP/vllm-0.21.h5" -m "$TMP/m.h5" --policy eldr,rr --rate 20
check "captured trace: eldr info says valid" sh -c "'$ELDR' info '$TMP/vllm-main.h5' | grep -q 'validation valid'"

# --- pacing and the progress bar ---
engine
cap "$TMP/rate.h5" --prompts "$TMP/p12.jsonl" --rate 20 --concurrency 8
check "--rate 20: request i is never sent before i/20 s" $PY -c "
import h5py, numpy as np, sys
a = h5py.File(sys.argv[1], 'r')['arrival_s'][:]
sys.exit(0 if len(a) == 12 and np.all(a - a[0] >= np.arange(12) / 20 - 0.002) else 1)" "$TMP/rate.h5"
on_tty "$TMP/tty.txt" "'$ELDR' capture --server $EURL --prompts '$TMP/p.jsonl' -o '$TMP/tty.h5' --experts 16 --rate 40 >/dev/null"
expect_in "a progress bar on a terminal: done/total" "$TMP/tty.txt" "eldr capture: requests \\[#*\\.*\\] +[0-9]+/48"
expect_in "  ... with req/s and errors" "$TMP/tty.txt" "req/s  0 errors"
cap "$TMP/notty.h5" --prompts "$TMP/p12.jsonl" --experts 16
check "no progress bar without a terminal" test ! -s "$TMP/err"
halt

# --- retries ---
engine --fail-first 2 --fail-match beta
cap "$TMP/r.h5" --prompts "$TMP/p.jsonl" --experts 16 --json
check "two failed attempts are retried: every prompt captured" jq_py "$TMP/out" "j['captured'] == 48 and j['failed'] == 0 and j['failed_attempts'] == 24"
exact "  ... and equal the engine's" "$TMP/r.h5" "$TMP/p.jsonl" --all
halt
engine --fail-first 3 --fail-match beta
cap "$TMP/r3.h5" --prompts "$TMP/p.jsonl" --experts 16
check "three failed attempts: exit 1" test $RC -eq 1
expect_in "  ... the summary names a failed request" "$TMP/out" "failed: r01 \(line 2\): HTTP 500"
check "  ... the trace holds the 36 others" sh -c "'$ELDR' info '$TMP/r3.h5' | grep -Eq '^requests +36'"
exact "  ... equal the engine's" "$TMP/r3.h5" "$TMP/p.jsonl"
halt

# --- a server that dies mid-run ---
engine --die-after 20
cap "$TMP/d.h5" --prompts "$TMP/p.jsonl" --experts 16 --concurrency 1 --json
check "server dies after 20: exit 1" test $RC -eq 1
check "  ... 20 captured, 28 failed, all named" jq_py "$TMP/out" "j['captured'] == 20 and j['failed'] == 28 and len(j['failures']) == 28"
exact "  ... the 20 equal the engine's" "$TMP/d.h5" "$TMP/p.jsonl"
halt

# --- Ctrl-C: stop sending, wait for what is in flight, write it ---
engine --delay 0.1
"$ELDR" capture --server "$EURL" -o "$TMP/c.h5" --prompts "$TMP/p.jsonl" --experts 16 \
    --concurrency 2 --json >"$TMP/out" 2>"$TMP/err" &
CPID=$!
i=0   # until a few answers are in (bounded), so that the stop comes mid-run
while [ "$(cat "$TMP/truth.jsonl" 2>/dev/null | wc -l)" -lt 4 ] && [ $i -lt 100 ]; do
    sleep 0.1; i=$((i + 1))
done
kill -INT $CPID
wait $CPID; RC=$?
check "Ctrl-C: exit 130" test $RC -eq 130
check "  ... some captured, the rest unsent, none failed" jq_py "$TMP/out" "0 < j['captured'] < 48 and j['unsent'] == 48 - j['captured'] and j['failed'] == 0 and j['interrupted']"
exact "  ... what was captured is written and exact" "$TMP/c.h5" "$TMP/p.jsonl"
halt

# --- bad answers: exit 2, one line, no file (an old file stays as it was) ---
bad() { # NAME PATTERN ENGINE-ARGS...
    n=$1; pat=$2; shift 2
    engine "$@"
    cp "$TMP/vllm-0.21.h5" "$TMP/keep.h5"
    expect_fail2 "$n" "$pat" "$ELDR" capture --server "$EURL" -o "$TMP/keep.h5" \
        --prompts "$TMP/p.jsonl" --max-tokens 8 $BADARGS
    check "  ... the old file is untouched" cmp -s "$TMP/vllm-0.21.h5" "$TMP/keep.h5"
    halt
}
bad "no routed experts" "enable-return-routed-experts" --bad noroutes
bad "inconsistent shapes mid-run" "request [0-9]+\).*inconsistent shapes" --bad shape --bad-after 10
bad "unknown encoding quoted" "found \"hello, world\"" --bad garbage
BADARGS="--layers 6 --top-k 2"
bad "no routed experts (sglang)" "enable-return-routed-experts" --engine sglang --bad noroutes
bad "inconsistent shapes (sglang)" "inconsistent shapes" --engine sglang --bad shape
bad "a number where routes should be (sglang)" "found 42" --engine sglang --bad garbage
BADARGS=
bad "expert id -1" "expert id -1" --bad minus1
engine
expect_fail2 "ids above --experts" "expert id [0-9]+ is not below 4 \(--experts\)" \
    "$ELDR" capture --server "$EURL" -o "$TMP/x.h5" --prompts "$TMP/p.jsonl" --experts 4
check "  ... no file" test ! -e "$TMP/x.h5"
halt
PORT=$(free_port)
expect_status "unreachable server: exit 3, as every command finds no daemon" 3 \
    "$ELDR" capture --server "http://127.0.0.1:$PORT" -o "$TMP/x.h5" --prompts "$TMP/p.jsonl"
check "  ... one line: server unreachable" sh -c "[ \$(wc -l <'$TMP/err') -eq 1 ] && grep -q 'server unreachable' '$TMP/err'"
check "  ... no file" test ! -e "$TMP/x.h5"
# a web server that is not an engine: one clear line, exit 2, before any prompt
mkdir -p "$TMP/www"
PORT=$(free_port)
(cd "$TMP/www" && exec $PY -m http.server "$PORT" --bind 127.0.0.1) >/dev/null 2>&1 &
WWW=$!
i=0; while ! curl -s "http://127.0.0.1:$PORT/" >/dev/null 2>&1 && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
seq 1 400 | sed 's/.*/{"prompt": "p &"}/' >"$TMP/many.jsonl"
expect_fail2 "not an engine: exit 2 at once, one line" \
    "not an LLM engine: GET /v1/models answered 404" \
    "$ELDR" capture --server "http://127.0.0.1:$PORT" -o "$TMP/x.h5" --prompts "$TMP/many.jsonl"
check "  ... no file" test ! -e "$TMP/x.h5"
kill "$WWW" 2>/dev/null; wait "$WWW" 2>/dev/null

# --- dense layers: vLLM leaves a non-MoE layer's ids 0 for every token; they are left
# out of the trace and named (top-2, as DeepSeek's first dense layers) ---
for eng in vllm-main vllm-0.21; do
    engine --engine $eng --experts 16 --layers 6 --topk 2 --dense-layers 0,3
    cap "$TMP/dense-$eng.h5" --prompts "$TMP/p.jsonl" --experts 16 --json
    check "$eng, layers 0 and 3 dense: exit 0" test $RC -eq 0
    exact "  ... the 4 MoE layers equal the engine's" "$TMP/dense-$eng.h5" "$TMP/p.jsonl" --all
    check "  ... summary: dense_layers [0, 3] of 6, the trace 4 layers" jq_py "$TMP/out" \
        "j['dense_layers'] == [0, 3] and j['engine_layers'] == 6 and j['layers'] == 4"
    check "  ... trace attributes name them" $PY -c "
import h5py, sys
a = h5py.File(sys.argv[1], 'r').attrs
v = a['capture_dense_layers']
v = v.decode() if isinstance(v, bytes) else v
sys.exit(0 if v == '0,3' and int(a['capture_engine_layers']) == 6 and int(a['layers']) == 4 else 1)" "$TMP/dense-$eng.h5"
    halt
done
engine --engine vllm-main --experts 16 --layers 6 --topk 8 --dense-layers 5
cap "$TMP/dense5.h5" --prompts "$TMP/p.jsonl" --experts 16
expect_in "top-8, layer 5 dense: the text summary names it" "$TMP/out" "1 of the answers' 6 layers left out as dense \\(every id 0 in every answer\\): 5"
exact "  ... the 5 MoE layers equal the engine's" "$TMP/dense5.h5" "$TMP/p.jsonl" --all
check "  ... eldr fit takes the trace" "$ELDR" fit "$TMP/dense5.h5" -k 2 -o "$TMP/dense5-m.h5" --seed 1
halt
engine --engine vllm-main --experts 16 --layers 6 --topk 1 --dense-layers 2
cap "$TMP/top1.h5" --prompts "$TMP/p.jsonl" --experts 16 --json
check "top-1: a zero layer is kept (0 is a pick of expert 0; the proxy does the same)" jq_py "$TMP/out" \
    "j['dense_layers'] == [] and j['engine_layers'] == 6 and j['layers'] == 6"
exact "  ... equal the engine's, its zeros included" "$TMP/top1.h5" "$TMP/p.jsonl" --all
halt
engine --engine vllm-main --experts 16 --layers 6 --topk 2
cap "$TMP/nodense.h5" --prompts "$TMP/p.jsonl" --experts 16 --json
check "no dense layer: dense_layers [], engine_layers 6, attribute empty" sh -c "
$PY -c \"import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j['dense_layers'] == [] and j['engine_layers'] == 6 else 1)\" '$TMP/out' &&
$PY -c \"import h5py,sys; a=h5py.File(sys.argv[1],'r').attrs; v=a['capture_dense_layers']; sys.exit(0 if (v.decode() if isinstance(v, bytes) else v) == '' else 1)\" '$TMP/nodense.h5'"
halt
engine --engine vllm-main --experts 16 --layers 3 --topk 2 --dense-layers 0,1,2
expect_fail2 "every layer 0: no routing, exit 2" "every id of all 3 layers is 0 in every answer" \
    "$ELDR" capture --server "$EURL" -o "$TMP/x.h5" --prompts "$TMP/p.jsonl" --experts 16
check "  ... no file" test ! -e "$TMP/x.h5"
halt

# --- API key: an engine started with --api-key (vLLM's 401 on /v1, SGLang's on every path) ---
printf 'sk-test-SECRET-42\n' >"$TMP/key"
printf 'sk-wrong-SECRET-7\r\n' >"$TMP/wrongkey"
for eng in vllm-main sglang; do
    engine --engine $eng --api-key sk-test-SECRET-42
    [ $eng = sglang ] && KA="--layers 6 --top-k 2" || KA=
    expect_fail2 "$eng --api-key, no key: says it wants one, not 'not an engine'" \
        "GET /v1/models answered 401: the engine wants an API key \\(--api-key-file\\)" \
        "$ELDR" capture --server "$EURL" -o "$TMP/x.h5" --prompts "$TMP/p.jsonl" $KA
    expect_fail2 "$eng: a wrong key: refused, naming the file" \
        "answered 401: the key was refused \\(--api-key-file .*wrongkey\\)" \
        "$ELDR" capture --server "$EURL" -o "$TMP/x.h5" --prompts "$TMP/p.jsonl" $KA \
        --api-key-file "$TMP/wrongkey"
    check "  ... no key in anything printed" sh -c "! grep -q SECRET '$TMP/out' '$TMP/err'"
    cap "$TMP/key-$eng.h5" --prompts "$TMP/p.jsonl" --experts 16 $KA --api-key-file "$TMP/key"
    check "$eng: with the key (first line, newline stripped): exit 0" test $RC -eq 0
    exact "  ... equal the engine's" "$TMP/key-$eng.h5" "$TMP/p.jsonl" --all
    check "  ... the key is not printed" sh -c "! grep -q SECRET '$TMP/out' '$TMP/err'"
    halt
done
check "no file from the refused runs" test ! -e "$TMP/x.h5"
engine
: >"$TMP/emptykey"
printf '\nsk-on-line-2\n' >"$TMP/blankkey"
expect_fail2 "--api-key-file empty: exit 2 naming the file" "--api-key-file .*emptykey: the file is empty" \
    "$ELDR" capture --server "$EURL" -o "$TMP/x.h5" --prompts "$TMP/p.jsonl" --api-key-file "$TMP/emptykey"
expect_fail2 "--api-key-file with an empty first line" "blankkey: its first line is empty" \
    "$ELDR" capture --server "$EURL" -o "$TMP/x.h5" --prompts "$TMP/p.jsonl" --api-key-file "$TMP/blankkey"
expect_fail2 "--api-key-file missing" "--api-key-file .*nokey: No such file" \
    "$ELDR" capture --server "$EURL" -o "$TMP/x.h5" --prompts "$TMP/p.jsonl" --api-key-file "$TMP/nokey"
check "  ... no file" test ! -e "$TMP/x.h5"
halt

# --- bad input ---
engine
printf '{"prompt": "a b"}\n{"prompt": 3}\n' >"$TMP/bad.jsonl"
expect_fail2 "prompt not a string: names the line" "bad.jsonl line 2: \"prompt\" is not a string" \
    "$ELDR" capture --server "$EURL" -o "$TMP/x.h5" --prompts "$TMP/bad.jsonl"
printf '{"prompt": "a", "label": "x"}\n{"prompt": "b"}\n' >"$TMP/bad.jsonl"
expect_fail2 "labels on some lines only" "line 2: has no a label" \
    "$ELDR" capture --server "$EURL" -o "$TMP/x.h5" --prompts "$TMP/bad.jsonl"
expect_fail2 "messages to /v1/completions" "\"messages\" need the chat endpoint" \
    "$ELDR" capture --server "$EURL" -o "$TMP/x.h5" --prompts "$TMP/chat.jsonl" --endpoint completions
expect_fail2 "missing prompts file" "nope.jsonl: No such file" \
    "$ELDR" capture --server "$EURL" -o "$TMP/x.h5" --prompts "$TMP/nope.jsonl"
expect_fail2 "--engine unknown" "--engine: 'tgi'" \
    "$ELDR" capture --server "$EURL" -o "$TMP/x.h5" --prompts "$TMP/p.jsonl" --engine tgi
expect_fail2 "-o in a missing directory" "cannot write in that directory" \
    "$ELDR" capture --server "$EURL" -o "$TMP/no/x.h5" --prompts "$TMP/p.jsonl"
expect_fail2 "--server missing" "are required" "$ELDR" capture --prompts "$TMP/p.jsonl" -o "$TMP/x.h5"
check "no file from any of them" test ! -e "$TMP/x.h5"
halt

# --- the Lua binding: the same capture, through eldr.capture{} ---
engine --engine eldr-object
cat >"$TMP/cap.lua" <<LUAEOF
local t, s = eldr.capture{server = "$EURL", prompts = "$TMP/p.jsonl", experts = 16,
                          max_tokens = 8, concurrency = 4, output = "$TMP/lua.h5"}
print(t:info().n, s.captured, s.failed, s.engine, s.encoding)
local ok, err = pcall(eldr.capture, {server = "$EURL", prompts = "$TMP/p.jsonl", experts = 4,
                                      max_tokens = 8})
print(ok, err)
ok, err = pcall(eldr.capture, {server = "$EURL", prompts = "$TMP/p.jsonl", layer = 3})
print(ok, err)
LUAEOF
"$ELDR" run "$TMP/cap.lua" >"$TMP/lua.out" 2>&1
expect_in "eldr.capture: Trace and summary" "$TMP/lua.out" "^48	48	0	vllm	base64"
exact "eldr.capture: equal the engine's" "$TMP/lua.h5" "$TMP/p.jsonl" --all
expect_in "eldr.capture: a bad answer is a Lua error" "$TMP/lua.out" "false	eldr.capture: .*expert id [0-9]+ is not below 4"
expect_in "eldr.capture: unknown options are refused" "$TMP/lua.out" "false	eldr.capture: .*layer"
halt
