#!/bin/sh
# tests/fuzz/run.sh - run libFuzzer harnesses for FUZZ_SECONDS each and end
# with one line "N passed, N failed" (make fuzz, make fuzz-smoke).
#
# Usage: FUZZ_SECONDS=60 sh tests/fuzz/run.sh build-fuzz/fuzz_X ...
# Each harness starts from its seed corpus tests/fuzz/corpus/X (read only)
# and grows a working corpus in $FUZZ_BUILD/corpus/X, kept between runs.
# A harness passes when its run ends without a crash, leak, timeout or
# out-of-memory; a failure keeps the input as $FUZZ_BUILD/crash/X-* and
# prints the report's tail. Per harness: executions, working corpus size.
# JSON harnesses get tests/fuzz/json.dict as their dictionary. FUZZ_JOBS
# (default 2) harnesses run at once.
SECS=${FUZZ_SECONDS:-60}
FUZZ_BUILD=${FUZZ_BUILD:-build-fuzz}
cd "$(dirname "$0")/../.." || exit 2
mkdir -p "$FUZZ_BUILD/crash" "$FUZZ_BUILD/tmp"
# the harnesses' scratch files (fuzz.h) go here, not into /tmp
TMPDIR=$(cd "$FUZZ_BUILD/tmp" && pwd)
export TMPDIR
JOBS=${FUZZ_JOBS:-2}
RES=$(mktemp -d)
trap 'rm -rf "$RES" "$TMPDIR"' EXIT

# run_one BIN: one harness for SECS; its verdict and report tail go to
# $RES/<name>.out, its first line "ok - ..." or "not ok - ...".
run_one() {
    bin=$1
    name=$(basename "$bin" | sed 's/^fuzz_//')
    seeds=tests/fuzz/corpus/$name
    work=$FUZZ_BUILD/corpus/$name
    log=$RES/$name.log
    mkdir -p "$work"
    dict=
    case $name in
        jsonl|centroid_json|route_body|kv_events|routed|proxy_answer|proxy_request) dict=-dict=tests/fuzz/json.dict ;;
    esac
    # -timeout: one input may take 10 s (a stuck loop is a failure);
    # -rss_limit_mb: a lying header must not make us allocate 2 GB.
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        timeout $((SECS + 120)) "$bin" -max_total_time="$SECS" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 $dict \
        -artifact_prefix="$FUZZ_BUILD/crash/$name-" "$work" "$seeds" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    files=$(ls "$work" | wc -l)
    if [ "$rc" -eq 0 ]; then
        echo "ok - fuzz_$name: ${execs:-0} executions in ${SECS} s, corpus $files inputs" >"$RES/$name.out"
    else
        {
            echo "not ok - fuzz_$name: exit $rc after ${execs:-?} executions"
            grep -E 'ERROR|SUMMARY|broken promise|open after|refused|rows \[|Test unit written|#[0-9]+ in ' "$log" | head -30 |
                sed 's/^/#   /'
        } >"$RES/$name.out"
    fi
}

# JOBS harnesses at a time (each is single-threaded); the machine has 2 cores.
running=0
for bin in "$@"; do
    run_one "$bin" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then
        wait
        running=0
    fi
done
wait

passed=0
failed=0
for bin in "$@"; do
    name=$(basename "$bin" | sed 's/^fuzz_//')
    cat "$RES/$name.out"
    if head -1 "$RES/$name.out" | grep -q '^ok - '; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
    fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
