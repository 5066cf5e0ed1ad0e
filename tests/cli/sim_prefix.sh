#!/bin/sh
# tests/cli/sim_prefix.sh - `eldr sim --prefix-mode`: the prefix-caching
# what-if. Help, refusals (exit 2, one stderr line: a trace without block
# hashes, bad modes and options), the table, --json checked by
# /usr/bin/python3 (cache == cold in routing and metrics, uncached agrees
# less, real hits, exact recovery), capacity 0 (no hit: uncached == cold),
# prefix-aware prefill routing, and --csv file names.
. "$ROOT/tests/cli/lib.sh"
PY=/usr/bin/python3
P="$TMP/p.h5"
T="$TMP/t.h5"
"$ELDR" gen -o "$P" --requests 300 --layers 8 --experts 32 --top-k 4 --prefix-groups 10 \
    --prefix-blocks 6 --prompt-tokens 40 --decode-tokens 24 --tokens --seed 3 >/dev/null 2>&1 ||
    notok "sim prefix: gen prefix fixture"
"$ELDR" gen -o "$T" --requests 200 --layers 8 --experts 32 --top-k 4 --decode-tokens 24 \
    --seed 3 >/dev/null 2>&1 || notok "sim prefix: gen plain fixture"

expect_status "sim prefix: --help" 0 "$ELDR" sim --help
expect_out "sim prefix: --help names --prefix-mode" "--prefix-mode LIST"
expect_out "sim prefix: --help names --prefix-cache" "--prefix-cache BLOCKS"
expect_fail2 "sim prefix: trace without block hashes" "tokens/block_hashes" \
    "$ELDR" sim "$T" --rate 50 --prefix-mode all
expect_fail2 "sim prefix: bad mode" "'warm' is not a mode" \
    "$ELDR" sim "$P" --rate 50 --prefix-mode cold,warm
expect_fail2 "sim prefix: option without mode" "need --prefix-mode" \
    "$ELDR" sim "$P" --rate 50 --prefix-cache 10
expect_fail2 "sim prefix: no eldr policy" "eldr policy" \
    "$ELDR" sim "$P" --rate 50 --prefix-mode all --policy rr,jsq
expect_fail2 "sim prefix: bad capacity" "--prefix-cache" \
    "$ELDR" sim "$P" --rate 50 --prefix-mode all --prefix-cache -1
expect_fail2 "sim prefix: bad prefill workers" "--prefill-workers" \
    "$ELDR" sim "$P" --rate 50 --prefix-mode all --prefill-workers 0
expect_fail2 "sim prefix: bad prefill route" "not rr or prefix" \
    "$ELDR" sim "$P" --rate 50 --prefix-mode all --prefill-route hash
expect_fail2 "sim prefix: wrong block size" "block hashes for .*block-size" \
    "$ELDR" sim "$P" --rate 50 --prefix-mode all --block-size 8

expect_status "sim prefix: table" 0 "$ELDR" sim "$P" --rate 200 --prefix-mode all
expect_out "sim prefix: eldr-uncached row" "^eldr-uncached +[0-9]"
expect_out "sim prefix: hit rate line" "hit rate [0-9.]+% of [0-9]+ blocks"
expect_out "sim prefix: exact recovery" "equal cold prefill counts in 150 of 150"

"$ELDR" sim "$P" --rate 200 --prefix-mode all --policy eldr,rr --json >"$TMP/all.json" \
    2>"$TMP/err" || notok "sim prefix: --json run" "$(cat "$TMP/err")"
"$ELDR" sim "$P" --rate 200 --prefix-mode all --policy eldr,rr --json --prefix-cache 0 \
    >"$TMP/zero.json" 2>>"$TMP/err" || notok "sim prefix: --json capacity 0"
"$ELDR" sim "$P" --rate 200 --prefix-mode uncached --json --prefill-workers 3 \
    --prefill-route prefix >"$TMP/pre.json" 2>>"$TMP/err" || notok "sim prefix: prefill route"
if $PY - "$TMP/all.json" "$TMP/zero.json" "$TMP/pre.json" <<'EOF'; then ok "sim prefix --json: laws"; else notok "sim prefix --json: laws"; fi
import json, sys
a, z, pre = (json.load(open(f)) for f in sys.argv[1:4])
pol = {p["name"]: p for p in a["policies"]}
assert list(pol) == ["eldr-cold", "eldr-cache", "eldr-uncached", "rr"], list(pol)
cold, cache, unc = pol["eldr-cold"], pol["eldr-cache"], pol["eldr-uncached"]
px = a["prefix"]
assert px["hit_rate"] > 0.3 and px["recovered_mismatches"] == 0, px
assert px["recovered_equal_cold"] == a["requests"] == 150
assert px["block_size"] == 16 and px["prefill_workers"] == 1 and px["evictions"] == 0
# cache routes exactly as cold: same workers, same metrics
assert cache["same_worker_as_cold"] == 1.0 and cache["signature_cosine_vs_cold"] > 0.999999
for k in ("tpot_p50_ms", "tpot_p99_ms", "queue_p50_ms", "distinct_experts_per_step",
          "reuse", "imbalance", "served"):
    assert cache[k] == cold[k], k
# uncached agrees measurably less
assert unc["signature_cosine_vs_cold"] < 0.99, unc["signature_cosine_vs_cold"]
assert unc["same_worker_as_cold"] < cache["same_worker_as_cold"]
assert "prefix_mode" not in pol["rr"]
print("# hit rate %.3f cached %.3f; uncached cos %.4f same %.3f" % (
    px["hit_rate"], px["cached_token_fraction"], unc["signature_cosine_vs_cold"],
    unc["same_worker_as_cold"]))
# capacity 0: nothing cached, every mode routes as cold
zp = {p["name"]: p for p in z["policies"]}
assert z["prefix"]["hit_rate"] == 0 and z["prefix"]["cached_tokens"] == 0
for m in ("eldr-cache", "eldr-uncached"):
    assert zp[m]["same_worker_as_cold"] == 1.0, m
    assert zp[m]["served"] == zp["eldr-cold"]["served"], m
# prefix-aware routing over 3 prefill workers keeps the hits of one cache
assert pre["prefix"]["hit_blocks"] == px["hit_blocks"], (pre["prefix"], px)
assert [p["name"] for p in pre["policies"]][0] == "eldr-uncached"
EOF

expect_status "sim prefix: --csv" 0 "$ELDR" sim "$P" --rate 200 --prefix-mode cache,uncached \
    --policy eldr --csv "$TMP/csv"
missing=""
for f in summary.csv eldr-cache_steps.csv eldr-cache_requests.csv eldr-uncached_heat.csv; do
    [ -s "$TMP/csv/$f" ] || missing="$missing $f"
done
if [ -z "$missing" ]; then ok "sim prefix --csv: files"; else
    notok "sim prefix --csv: files" "missing:$missing" "$(ls "$TMP/csv")"; fi
