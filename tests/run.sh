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
passed=0
failed=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT

now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN {printf "%.1f s", b - a}'; }

for t in "$BIN"/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    t0=$(now)
    timeout 600 "$t" >"$log" 2>&1
    rc=$?
    p=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
    f=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$f" -ne 0 ]; then
        echo "FAIL $name (exit $rc):"
        sed 's/^/    /' "$log" | tail -40
    else
        echo "ok   $name: $p passed ($(took "$t0"))"
    fi
done

for s in tests/cli/*.sh tests/lua/run.sh tests/e2e/*.sh; do
    [ -f "$s" ] || continue
    case "$s" in */lib.sh) continue ;; esac   # sourced helpers, not a test
    case " $RUN_SKIP " in *" $s "*) echo "skip $s (RUN_SKIP)"; continue ;; esac
    t0=$(now)
    timeout 900 sh "$s" >"$log" 2>&1
    rc=$?
    p=$(grep -c '^ok - ' "$log")
    f=$(grep -c '^not ok - ' "$log")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
        echo "not ok - $s exited $rc" >>"$log"
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    if [ "$f" -ne 0 ]; then
        echo "FAIL $s:"
        grep -v '^ok - ' "$log" | sed 's/^/    /' | tail -40
    else
        echo "ok   $s: $p passed ($(took "$t0"))"
    fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
