#!/bin/sh
# tests/cli/sim_threads.sh - `eldr sim --threads T` (issue 34, item 2):
# the policies of one run, and the seeds of --seeds, simulated on T
# threads give the same report, byte for byte, for any T (every run
# draws from its own seeded streams; the slots are read in --policy
# order); a sampled-activation trace and the real trace's recorded ones;
# a bad T is exit 2.
. "$ROOT/tests/cli/lib.sh"
T="$TMP/t.h5"
"$ELDR" gen -o "$T" --requests 300 --layers 8 --experts 32 --top-k 4 --domains 4 \
    --prompt-tokens 32 --decode-tokens 24 --seed 5 --arrival-rate 80 >/dev/null 2>&1 ||
    notok "sim_threads: gen fixture"
REAL="$ROOT/../shared/data/gptoss20b-routing.h5"
check() { n=$1; shift; if "$@" >/dev/null 2>&1; then ok "$n"; else notok "$n" "failed: $*"; fi; }
POL=eldr,eldr-cost,eldr-online,random,rr,jsq,p2c

expect_fail2 "--threads 0: exit 2" "--threads" "$ELDR" sim "$T" --threads 0
expect_fail2 "--threads x: exit 2" "--threads" "$ELDR" sim "$T" --threads x
expect_status "sim --help names --threads" 0 "$ELDR" sim --help
expect_out "... and says the results do not depend on it" "--threads T .*at once"

for th in 1 2 3; do
    "$ELDR" sim "$T" --policy $POL --workers 4 --rate 200 --threads $th --json \
        >"$TMP/g$th.json" 2>/dev/null
done
check "sampled activations: the report at 2 threads equals 1 thread's" cmp "$TMP/g1.json" "$TMP/g2.json"
check "... and 3 threads (more than the CPUs)" cmp "$TMP/g1.json" "$TMP/g3.json"
check "... with every policy in it" grep -q '"eldr-online"' "$TMP/g1.json"
for th in 1 2; do
    "$ELDR" sim "$T" --policy $POL --workers 4 --rate 200 --seeds 3 --threads $th --json \
        >"$TMP/s$th.json" 2>/dev/null
done
check "--seeds 3: the same at 1 and 2 threads" cmp "$TMP/s1.json" "$TMP/s2.json"
if [ -f "$REAL" ]; then
    for th in 1 2; do
        "$ELDR" sim "$REAL" --policy $POL --workers 4 --rate 60 --threads $th --json \
            >"$TMP/r$th.json" 2>/dev/null
    done
    check "the real trace's recorded activations: the same at 1 and 2 threads" \
        cmp "$TMP/r1.json" "$TMP/r2.json"
else
    notok "sim_threads: $REAL missing"
fi
