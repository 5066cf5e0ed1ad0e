#!/bin/sh
# tests/run.sh - run every test and end with one line "N passed, N failed".
#
# Unit tests: each $BIN/test_* is a cmocka binary; its own summary lines
# are counted (a binary that dies before its summary counts as one failure).
# Script tests: each tests/cli/*.sh (and later tests/lua, tests/e2e) prints
# "ok - NAME" or "not ok - NAME" lines, TAP style; they are counted.
# Environment: BIN (default bin) picks the build (bin-asan for `make asan`);
# RUN_SKIP lists script tests not to run (`make asan` leaves out the ones
# whose code the unit tests already run under the sanitizers; each skip
# is printed). Every line ends with the test's wall time.
BIN=${BIN:-bin}
export BIN
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export ROOT
cd "$ROOT" || exit 2

now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.1f s", b - a}'; }

# one TEST OUT: run one test, write its report line(s) to OUT and its
# counts ("passed failed") to OUT.n
# Each test gets its own empty result cache (the dashboard's, dash_cache.h):
# never the user's ~/.cache, never another test's entries.
one() {
    t=$1; out=$2; log="$out.log"; t0=$(now)
    ELDR_CACHE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/eldr-cache.XXXXXX")
    export ELDR_CACHE_DIR
    case "$t" in
    *.sh)
        timeout 900 sh "$t" >"$log" 2>&1
        rc=$?
        p=$(grep -c '^ok - ' "$log")
        f=$(grep -c '^not ok - ' "$log")
        if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
            f=1
            echo "not ok - $t exited $rc" >>"$log"
        fi
        if [ "$f" -ne 0 ]; then
            { echo "FAIL $t:"; grep -v '^ok - ' "$log" | sed 's/^/    /' | tail -40; } >"$out"
        else
            echo "ok   $t: $p passed ($(took "$t0"))" >"$out"
        fi ;;
    *)
        timeout 600 "$t" >"$log" 2>&1
        rc=$?
        p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
        f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
        if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
            f=1
        fi
        if [ "$f" -ne 0 ]; then
            { echo "FAIL $(basename "$t") (exit $rc):"; sed 's/^/    /' "$log" | tail -40; } >"$out"
        else
            echo "ok   $(basename "$t"): $p passed ($(took "$t0"))" >"$out"
        fi ;;
    esac
    echo "$p $f" >"$out.n"
    rm -f "$log"
    rm -rf "$ELDR_CACHE_DIR"
}

# `sh tests/run.sh --one TEST OUT`: the lanes below call this
if [ "${1:-}" = --one ]; then
    one "$2" "$3"
    exit 0
fi

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Two lanes, then one. Phase 1 runs, two at a time, the tests that assert
# no time: the unit tests but the router's (timers, sockets), the CLI
# scripts, the Lua tests, and the end-to-end tests whose servers are only
# compared with an oracle or a stand-in (capture, refpar_route, attach,
# the live tour, the Envoy stand-in's self-test). Phase 2 runs the rest
# one at a time, alone on the machine as before: the end-to-end tests with
# deadlines, rates, RSS bounds, tmux or network namespaces, and the
# router's unit tests.
# RUN_JOBS=1 runs everything one at a time.
lane1=""; lane2=""
for t in "$BIN"/test_*; do
    [ -x "$t" ] || continue
    case "$(basename "$t")" in
    test_router_*) lane2="$lane2 $t" ;;
    *) lane1="$lane1 $t" ;;
    esac
done
for s in tests/cli/*.sh tests/lua/run.sh tests/e2e/*.sh; do
    [ -f "$s" ] || continue
    case "$s" in */lib.sh) continue ;; esac   # sourced helpers, not a test
    case " $RUN_SKIP " in *" $s "*) echo "skip $s (RUN_SKIP)"; continue ;; esac
    case "$s" in
    tests/e2e/capture.sh|tests/e2e/refpar_route.sh|tests/e2e/attach.sh|\
    tests/e2e/tour_live.sh|tests/e2e/gateway_standin.sh) lane1="$lane1 $s" ;;
    tests/e2e/*) lane2="$lane2 $s" ;;
    *) lane1="$lane1 $s" ;;
    esac
done
i=0
for t in $lane1 $lane2; do
    i=$((i + 1))
    echo "$(printf '%04d' $i) $t"
done >"$dir/order"
n1=$(echo $lane1 | wc -w)
echo "running $n1 tests two at a time, then $(($(wc -l <"$dir/order") - n1)) one at a time"
# xargs appends each line's two words ("NNNN TEST") after sh -c's $0 $1
head -n "$n1" "$dir/order" | xargs -P "${RUN_JOBS:-2}" -L 1 sh -c \
    'sh "$0/tests/run.sh" --one "$3" "$1/$2"' "$ROOT" "$dir"
passed=0
failed=0
# report K TEST: print a finished test's lines and add its counts
report() {
    if [ -f "$dir/$1" ]; then
        cat "$dir/$1"
        read -r p f <"$dir/$1.n"
    else
        echo "FAIL $2: no report (the runner did not run it)"
        p=0; f=1
    fi
    passed=$((passed + p))
    failed=$((failed + f))
}
head -n "$n1" "$dir/order" >"$dir/phase1"
tail -n +"$((n1 + 1))" "$dir/order" >"$dir/phase2"
while read -r k t; do report "$k" "$t"; done <"$dir/phase1"
while read -r k t; do
    sh "$ROOT/tests/run.sh" --one "$t" "$dir/$k" </dev/null
    report "$k" "$t"
done <"$dir/phase2"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
