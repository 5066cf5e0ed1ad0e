#!/bin/sh
# tests/cli/faults.sh - fault tests (docs/reliability.md, issue 8):
#
#  1. A write that fails midway (disk full: an LD_PRELOAD wrapper built
#     here makes write(2) to regular files fail with ENOSPC after N bytes;
#     file too large: RLIMIT_FSIZE with SIGXFSZ ignored) leaves the old
#     file byte-identical, no temporary behind, a non-zero exit and one
#     clear stderr line. For `eldr fit -o`, `eldr gen -o`, `eldr import -o`
#     and `eldr model export|import -o`, failing at byte 0, in the middle
#     and at the last byte.
#  2. kill -9 at random moments during `eldr fit -o` (half of them while
#     the temporary is being written, slowed down by the same wrapper)
#     never leaves a torn target: it is the old model or a complete new
#     one, and `eldr info` says valid.
#  3. Traces whose header claims a terabyte (dense rows, token rows, label
#     names), written by h5py as chunked datasets without data, are refused
#     with one line before any allocation: peak RSS stays small.
. "$ROOT/tests/cli/lib.sh"
PY=/usr/bin/python3
CC=${CC:-cc}
# the wrapper is LD_PRELOADed into sanitized builds too
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
export ASAN_OPTIONS

# ---- the write wrapper ------------------------------------------------
cat >"$TMP/failwrite.c" <<'EOF'
/* write(2) on regular files (fd > 2) fails with ENOSPC once
 * ELDR_FAIL_AFTER bytes have been written; with ELDR_SLOW_WRITE_US set,
 * each such write moves at most 512 bytes and first sleeps that long. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static ssize_t (*real_write)(int, const void *, size_t);
static long long budget = -1, slow_us;

ssize_t write(int fd, const void *buf, size_t n)
{
    struct stat st;
    if (!real_write) {
        const char *a = getenv("ELDR_FAIL_AFTER"), *s = getenv("ELDR_SLOW_WRITE_US");
        real_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
        budget = a ? atoll(a) : -1;
        slow_us = s ? atoll(s) : 0;
    }
    if (fd <= 2 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return real_write(fd, buf, n);
    if (slow_us > 0) {
        usleep((useconds_t)slow_us);
        if (n > 512)
            n = 512;
    }
    if (budget >= 0) {
        if (budget == 0) {
            errno = ENOSPC;
            return -1;
        }
        if ((long long)n > budget)
            n = (size_t)budget;
        budget -= (long long)n;
    }
    return real_write(fd, buf, n);
}
EOF
if $CC -shared -fPIC -O1 -o "$TMP/failwrite.so" "$TMP/failwrite.c" -ldl 2>"$TMP/cc.err"; then
    ok "build the write wrapper"
else
    notok "build the write wrapper" "$(head -c 300 "$TMP/cc.err")"
fi
WRAP="$TMP/failwrite.so"

SMALL="$TMP/small.h5"
"$ELDR" gen -o "$SMALL" --requests 120 --layers 6 --experts 16 --top-k 2 --domains 3 \
    --prompt-tokens 32 --decode-tokens 16 --seed 3 >/dev/null 2>&1
[ -f "$DATA" ] || DATA=$SMALL
if "$ELDR" info "$SMALL" >/dev/null 2>&1; then ok "small trace for the fault tests"; else
    notok "small trace for the fault tests"; fi

# temps_of TARGET: how many "TARGET.tmp.*" files exist
temps_of() {
    ls "$1".tmp.* 2>/dev/null | wc -l
}

# fail_write NAME TARGET BYTES CMD...: with write(2) failing after BYTES
# bytes, CMD must fail (exit != 0, one stderr line naming the target and
# the cause), TARGET keep its old bytes, and no temporary remain.
fail_write() {
    fw_name=$1; target=$2; bytes=$3; shift 3
    before=$(sha256sum "$target" | cut -d' ' -f1)
    LD_PRELOAD="$WRAP" ELDR_FAIL_AFTER=$bytes "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    after=$(sha256sum "$target" | cut -d' ' -f1)
    lines=$(wc -l <"$TMP/err")
    temps=$(temps_of "$target")
    if [ "$rc" -ne 0 ] && [ "$lines" -eq 1 ] && [ "$before" = "$after" ] && [ "$temps" -eq 0 ] &&
        grep -q "No space left on device" "$TMP/err" && grep -qF "$(basename "$target")" "$TMP/err"; then
        ok "$fw_name"
    else
        notok "$fw_name" "exit $rc, $lines stderr lines, old file kept: $([ "$before" = "$after" ] && echo yes || echo NO), $temps temporaries" \
            "$(head -c 300 "$TMP/err")"
    fi
}

# fail_points NAME TARGET CMD...: a clean run measures the size written,
# then fail_write at byte 0, the middle, and the last byte.
fail_points() {
    fp_name=$1; target=$2; shift 2
    cp "$target" "$TMP/keep"
    "$@" >/dev/null 2>&1
    size=$(stat -c %s "$target")
    cp "$TMP/keep" "$target"
    for at in 0 $((size / 2)) $((size - 1)); do
        fail_write "$fp_name: disk full after $at of $size bytes" "$target" "$at" "$@"
    done
}

# --- 1. disk full while writing ---
"$ELDR" fit "$SMALL" -k 3 --layers all -o "$TMP/model.h5" >/dev/null 2>&1
fail_points "fit -o" "$TMP/model.h5" "$ELDR" fit "$SMALL" -k 4 --layers all --seed 9 -o "$TMP/model.h5"
if "$ELDR" info "$TMP/model.h5" >/dev/null 2>&1; then ok "fit -o: the old model still loads"; else
    notok "fit -o: the old model still loads" "$(cat "$TMP/err")"; fi

cp "$SMALL" "$TMP/trace.h5"
fail_points "gen -o" "$TMP/trace.h5" "$ELDR" gen -o "$TMP/trace.h5" --requests 50 --layers 4 \
    --experts 8 --top-k 2 --seed 4
if "$ELDR" info "$TMP/trace.h5" >/dev/null 2>&1; then ok "gen -o: the old trace still loads"; else
    notok "gen -o: the old trace still loads"; fi

JSONL="$ROOT/tests/fixtures/import/good.jsonl"
fail_points "import -o" "$TMP/trace.h5" "$ELDR" import "$JSONL" -o "$TMP/trace.h5"

"$ELDR" model export "$TMP/model.h5" -o "$TMP/model.json" >/dev/null 2>&1
fail_points "model export -o" "$TMP/model.json" "$ELDR" model export "$TMP/model.h5" \
    -o "$TMP/model.json"
fail_points "model import -o" "$TMP/model.h5" "$ELDR" model import "$TMP/model.json" \
    -o "$TMP/model.h5" --tau 0.2

# file too large: RLIMIT_FSIZE (ulimit -f counts 512-byte blocks), SIGXFSZ
# ignored so write(2) returns EFBIG instead of killing the process
before=$(sha256sum "$TMP/model.h5" | cut -d' ' -f1)
(trap '' XFSZ; ulimit -f 8; exec "$ELDR" fit "$SMALL" -k 4 --layers all -o "$TMP/model.h5") \
    >/dev/null 2>"$TMP/err"
rc=$?
after=$(sha256sum "$TMP/model.h5" | cut -d' ' -f1)
if [ "$rc" -ne 0 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && [ "$before" = "$after" ] &&
    [ "$(temps_of "$TMP/model.h5")" -eq 0 ] && grep -q "File too large" "$TMP/err"; then
    ok "fit -o past RLIMIT_FSIZE: EFBIG, old model kept, no temporary"
else
    notok "fit -o past RLIMIT_FSIZE: EFBIG, old model kept, no temporary" "exit $rc" "$(head -c 300 "$TMP/err")"
fi

# --- 2. kill -9 during fit -o ---
# fit the real data (about a second: load, selection, K-means, write) and
# kill it at a random moment; in the second half, wait until the
# temporary exists (writes slowed to 512 bytes per 2 ms) and kill then.
"$ELDR" fit "$DATA" -k 4 --layers all -o "$TMP/kill.h5" --seed 1 >/dev/null 2>&1
old=$(sha256sum "$TMP/kill.h5" | cut -d' ' -f1)
"$ELDR" fit "$DATA" -k 4 --layers all -o "$TMP/new.h5" --seed 2 >/dev/null 2>&1
"$ELDR" model export "$TMP/new.h5" -o "$TMP/new.json" >/dev/null 2>&1
# same_fit A.json B.json: the same centroids, sizes and mask (the files
# differ in their creation time, so bytes cannot be compared)
same_fit() {
    $PY -c "
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
sys.exit(0 if all(a[k] == b[k] for k in ('centroids', 'sizes', 'layer_mask')) else 1)" "$1" "$2"
}
cp "$TMP/kill.h5" "$TMP/old.h5"
torn=0; mid=0; kept=0; replaced=0; rounds=20
i=0
while [ $i -lt $rounds ]; do
    cp "$TMP/old.h5" "$TMP/kill.h5"
    if [ $i -lt 10 ]; then
        "$ELDR" fit "$DATA" -k 4 --layers all -o "$TMP/kill.h5" --seed 2 >/dev/null 2>&1 &
        pid=$!
        sleep "$(awk -v s=$i 'BEGIN { srand(s + 1); printf "%.3f", rand() * 1.2 }')"
    else
        LD_PRELOAD="$WRAP" ELDR_SLOW_WRITE_US=2000 \
            "$ELDR" fit "$DATA" -k 4 --layers all -o "$TMP/kill.h5" --seed 2 >/dev/null 2>&1 &
        pid=$!
        n=0
        while [ "$(temps_of "$TMP/kill.h5")" -eq 0 ] && [ $n -lt 500 ] && kill -0 $pid 2>/dev/null; do
            sleep 0.01; n=$((n + 1))
        done
        [ "$(temps_of "$TMP/kill.h5")" -gt 0 ] && mid=$((mid + 1))
        sleep "$(awk -v s=$i 'BEGIN { srand(s + 1); printf "%.3f", rand() * 0.05 }')"
    fi
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    got=$(sha256sum "$TMP/kill.h5" 2>/dev/null | cut -d' ' -f1)
    if ! "$ELDR" info "$TMP/kill.h5" >/dev/null 2>&1; then torn=$((torn + 1))
    elif [ "$got" = "$old" ]; then kept=$((kept + 1))
    elif "$ELDR" model export "$TMP/kill.h5" -o "$TMP/got.json" >/dev/null 2>&1 &&
        same_fit "$TMP/got.json" "$TMP/new.json"; then replaced=$((replaced + 1))
    else torn=$((torn + 1)); fi
    rm -f "$TMP"/kill.h5.tmp.*
    i=$((i + 1))
done
if [ $torn -eq 0 ]; then
    ok "kill -9 during fit -o, $rounds rounds: never torn (old kept $kept, new complete $replaced)"
else
    notok "kill -9 during fit -o: $torn torn results in $rounds rounds"
fi
if [ $mid -ge 5 ]; then ok "kill -9 landed while the temporary was written ($mid of 10)"; else
    notok "kill -9 landed while the temporary was written ($mid of 10, wanted >= 5)"; fi

# --- 3. headers that claim a terabyte ---
if $PY - "$TMP" <<'EOF' 2>"$TMP/py.err"
import sys, h5py, numpy as np
d = sys.argv[1]
def base(path, n, L=24, E=32, k=4):
    f = h5py.File(path, "w")
    f.attrs["format"] = "eldr-trace"; f.attrs["version"] = 1
    f.attrs["layers"] = L; f.attrs["experts"] = E; f.attrs["top_k"] = k
    return f
# dense: N x 24 x 32 uint16 = 2^40 bytes, chunked, nothing written
n = (1 << 40) // (24 * 32 * 2)
f = base(d + "/tb_dense.h5", n)
f.create_dataset("prefill_counts", (n, 24, 32), "u2", chunks=(1, 24, 32))
f.create_dataset("prompt_tokens", (n,), "i4", chunks=(4096,))
f.close()
# token rows: 2 requests whose offsets claim 2^36 token rows of 24 x 4 ids
f = base(d + "/tb_tokens.h5", 2)
f.create_dataset("prefill_counts", data=np.zeros((2, 24, 32), "u2"))
f.create_dataset("prompt_tokens", data=np.zeros(2, "i4"))
T = 1 << 36
f.create_dataset("tokens/prefill_experts", (T, 24, 4), "u2", chunks=(1, 24, 4))
f.create_dataset("tokens/prefill_offsets", data=np.array([0, T // 2, T], "i8"))
f.close()
# label names: 2^31 - 1 of them (16 GiB of pointers alone)
f = base(d + "/tb_labels.h5", 2)
f.create_dataset("prefill_counts", data=np.zeros((2, 24, 32), "u2"))
f.create_dataset("prompt_tokens", data=np.zeros(2, "i4"))
f.create_dataset("label", data=np.zeros(2, "i4"))
f.create_dataset("label_names", ((1 << 31) - 1,), h5py.string_dtype(), chunks=(1024,))
f.close()
EOF
then ok "terabyte headers written by h5py"; else notok "terabyte headers written by h5py" "$(tail -3 "$TMP/py.err")"; fi

# refused NAME FILE: eldr info exits 2 with one line, having allocated
# nothing big: peak RSS below 300 MB (ASan's shadow included). Should the
# promise break, a cap keeps the machine safe: 4 GB of address space, or
# under ASan (which reserves terabytes of shadow) its hard RSS limit.
if ldd "$ELDR" 2>/dev/null | grep -q libasan; then
    CAP_ASAN="${ASAN_OPTIONS}:hard_rss_limit_mb=2048:allocator_may_return_null=1"
    CAP_VM=unlimited
else
    CAP_ASAN=$ASAN_OPTIONS
    CAP_VM=4194304
fi
refused() {
    name=$1; file=$2
    (ulimit -v $CAP_VM; ASAN_OPTIONS=$CAP_ASAN exec /usr/bin/time -f "%M" -o "$TMP/rss" \
        "$ELDR" info "$file") >"$TMP/out" 2>"$TMP/err"
    rc=$?
    rss=$(tail -1 "$TMP/rss")
    # the message must be the loader's memory refusal ("needs N GiB"), not
    # a failed allocation caught by the cap
    if [ "$rc" -eq 2 ] && [ "$(wc -l <"$TMP/err")" -eq 1 ] && [ "${rss:-999999}" -lt 307200 ] &&
        grep -q "GiB" "$TMP/err"; then
        ok "$name: refused, peak RSS $((rss / 1024)) MB"
    else
        notok "$name" "exit $rc (want 2), peak RSS ${rss} KB" "$(head -c 300 "$TMP/err")"
    fi
}
if [ -x /usr/bin/time ]; then
    refused "dense rows claiming 1 TiB" "$TMP/tb_dense.h5"
    refused "token rows claiming 2^36 x 24 x 4 ids" "$TMP/tb_tokens.h5"
    refused "2^31 - 1 label names" "$TMP/tb_labels.h5"
else
    notok "/usr/bin/time is needed to measure peak RSS"
fi
