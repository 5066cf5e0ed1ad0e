#!/bin/sh
# tests/cli/sim_tokens.sh - `eldr sim` reads a trace's recorded decode
# token rows from the file as it admits each request (trace_tokens.h,
# docs/memory.md), and gives exactly the numbers of the trace held whole:
# eldr.simulate on a loaded trace (eldr run), which keeps every row in
# memory, under three splits, one and two threads, and --seeds with one
# split; and the activation pools (traces without token rows) within
# --max-memory: when they do not fit beside the loaded rows they are
# sampled on admission, said in one line on stderr, in the report and in
# --json ("pools"), with the same results as kept pools.
. "$ROOT/tests/cli/lib.sh"

T="$TMP/t.h5"
"$ELDR" gen -o "$T" --requests 240 --layers 6 --experts 16 --top-k 2 --domains 3 \
    --prompt-tokens 16 --decode-tokens 24 --tokens --seed 4 >/dev/null 2>&1

# One Lua run: every setting's policies on the loaded trace, each number
# printed whole (%.17g) as "SETTING POLICY FIELD VALUE"; --json prints
# them to 10 significant digits.
cat >"$TMP/mem.lua" <<'EOF'
local t = eldr.load(arg[1])
local settings = {
  {name = "random", opts = {}},
  {name = "stratified", opts = {split = "stratified"}},
  {name = "head", opts = {split = "head", calib_split = 60}},
}
local fields = {"tpot_p50_ms", "tpot_p95_ms", "tpot_p99_ms", "tpot_mean_ms", "queue_p50_ms",
                "queue_p99_ms", "distinct_per_step", "reuse", "imbalance", "steps", "tokens",
                "mean_batch", "makespan_s", "mean_in_system"}
for _, s in ipairs(settings) do
  local o = {policy = {"eldr", "rr", "jsq", "p2c"}, workers = 3, rate = 50}
  for k, v in pairs(s.opts) do o[k] = v end
  local res, info = eldr.simulate(t, o)
  print(s.name, "-", "requests", info.eval_rows)
  for _, p in ipairs(res) do
    for _, f in ipairs(fields) do print(s.name, p.policy, f, string.format("%.17g", p[f])) end
    print(s.name, p.policy, "served", table.concat(p.served, ","))
  end
end
EOF
expect_status "eldr.simulate on the loaded trace" 0 "$ELDR" run "$TMP/mem.lua" "$T"
cp "$TMP/out" "$TMP/mem.txt"

# the same settings read from the file, at one and two threads
same_as_memory() {   # NAME SETTING JSON
    if /usr/bin/python3 - "$TMP/mem.txt" "$2" "$3" 2>"$TMP/py.err" <<'EOF'
import json, sys
want = {}
for line in open(sys.argv[1]):
    s, p, f, v = line.split('\t')
    if s == sys.argv[2]:
        want[(p, f)] = v.strip()
j = json.load(open(sys.argv[3]))
assert j['activations'] == 'recorded', j['activations']
assert str(j['requests']) == want[('-', 'requests')], (j['requests'], want[('-', 'requests')])
names = {'distinct_per_step': 'distinct_experts_per_step'}
n = 0
for q in j['policies']:
    for (p, f), v in want.items():
        if p != q['name']:
            continue
        got = q[names.get(f, f)]
        if f == 'served':
            assert ','.join(map(str, got)) == v, (p, f, got, v)
        else:
            # --json prints 10 significant digits (JSON_REAL_PRECISION)
            assert float(got) == float('%.10g' % float(v)), (p, f, repr(got), v)
        n += 1
assert n == 4 * 15, n
EOF
    then ok "$1"; else notok "$1" "$(tail -c 400 "$TMP/py.err")"; fi
}
for th in 1 2; do
    expect_status "sim from the file, random split, --threads $th" 0 "$ELDR" sim "$T" \
        --policy eldr,rr,jsq,p2c --workers 3 --rate 50 --threads $th --json
    same_as_memory "random split, --threads $th: the numbers of the trace held whole" random \
        "$TMP/out"
done
expect_status "sim from the file, stratified split" 0 "$ELDR" sim "$T" \
    --policy eldr,rr,jsq,p2c --workers 3 --rate 50 --split stratified --threads 2 --json
same_as_memory "stratified split: the numbers of the trace held whole" stratified "$TMP/out"
expect_status "sim from the file, head split" 0 "$ELDR" sim "$T" \
    --policy eldr,rr,jsq,p2c --workers 3 --rate 50 --split head --calib-split 60 --json
same_as_memory "head split: the numbers of the trace held whole" head "$TMP/out"
# --seeds on one split: every seed's runs read from the file; the first
# seed's numbers are the single run's (head split: not redrawn)
expect_status "sim --seeds 2 from the file" 0 "$ELDR" sim "$T" --policy eldr,rr,jsq,p2c \
    --workers 3 --rate 50 --split head --calib-split 60 --seeds 2 --threads 2 --json
json_assert "--seeds 2: each policy's first seed is the single run" "$TMP/out" "
for line in open('$TMP/mem.txt'):
    s, p, f, v = line.rstrip('\n').split('\t')
    if s == 'head' and f == 'tpot_p50_ms':
        q = [x for x in j['policies'] if x['name'] == p][0]
        assert q['tpot_p50_ms_per_seed'][0] == float('%.10g' % float(v)), (p, v)"

# ---- the activation pools within --max-memory ----
S="$TMP/s.h5"   # no token rows: activations sampled from the counts
"$ELDR" gen -o "$S" --requests 300 --layers 8 --experts 16 --top-k 2 --domains 3 \
    --decode-tokens 40 --seed 5 >/dev/null 2>&1
expect_status "sim, pools kept" 0 "$ELDR" sim "$S" --policy eldr,rr,p2c --rate 50 --json
cp "$TMP/out" "$TMP/kept.json"
json_assert "pools kept: no note" "$TMP/kept.json" "
assert j['pools'] is None and j['sample'] is None and j['activations'] == 'sampled', j"
# the rows (about 0.5 KiB each, 300 of them) fit in 200 KiB; the pools
# (150 rows x up to 32 token rows x 16 one-byte ids) do not fit beside them
expect_status "sim --max-memory 200K" 0 "$ELDR" sim "$S" --policy eldr,rr,p2c --rate 50 \
    --json --max-memory 200K
cp "$TMP/out" "$TMP/small.json"
expect_in "pools: one line on stderr" "$TMP/err" \
    "^eldr sim: .*s\.h5: activation pools \([0-9.]+ KiB\) sampled on admission, not kept: [0-9.]+ (KiB|B) of the budget 200 KiB is left beside the loaded rows$"
if [ "$(wc -l <"$TMP/err")" -eq 1 ]; then ok "pools: the only stderr line"; else
    notok "pools: the only stderr line" "$(cat "$TMP/err")"; fi
json_assert "pools on admission: noted in --json, every row simulated, the same numbers" \
    "$TMP/small.json" "
kept = json.load(open('$TMP/kept.json'))
assert j['pools'].startswith('activation pools ('), j['pools']
assert j['sample'] is None, j['sample']
del j['pools'], kept['pools']
assert j == kept"
expect_status "sim --max-memory 200K text" 0 "$ELDR" sim "$S" --policy eldr,rr,p2c \
    --rate 50 --max-memory 200K
expect_out "pools: a line of the report" "^activation pools \([0-9.]+ KiB\) sampled on admission"
# with --seeds the grid's runs keep within the budget too, and agree
expect_status "sim --seeds 2 --split head, pools kept" 0 "$ELDR" sim "$S" --policy rr,p2c \
    --rate 50 --seeds 2 --split head --json
cp "$TMP/out" "$TMP/kept2.json"
expect_status "sim --seeds 2 --split head --max-memory 200K" 0 "$ELDR" sim "$S" \
    --policy rr,p2c --rate 50 --seeds 2 --split head --json --max-memory 200K
json_assert "--seeds 2: pools on admission give the same numbers" "$TMP/out" "
kept = json.load(open('$TMP/kept2.json'))
assert j['pools'] is not None and kept['pools'] is None
del j['pools'], kept['pools']
assert j == kept"
