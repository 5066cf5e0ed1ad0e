#!/bin/sh
# tests/e2e/soak_short.sh - the soak test (tests/soak/soak.sh) for 20 s, so
# that `make test` and `make asan` run it (under ASan at 200 routes/s, with
# LeakSanitizer at eldrd's exit in place of the RSS rule). `make soak`
# runs the full 5 minutes.
#
# glibc's dynamic mmap threshold makes each HTTP thread's arena keep about
# 6.5 MB once, after the first model persist (libhdf5's buffers) that runs
# on that thread, and which thread serves a PUT is up to libmicrohttpd: in
# 20 s that one-time step can land after the warm-up. A fixed threshold
# turns that policy off (the step shrinks to about 1 MB), so what the RSS
# rule sees here is eldr's own memory. The 5-minute run keeps glibc's
# defaults, with a one-minute warm-up of 20 swaps.
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
MALLOC_MMAP_THRESHOLD_=131072 SOAK_SECONDS=20 SOAK_WARMUP=10 SOAK_SWAP_EVERY=2 \
    exec sh "$ROOT/tests/soak/soak.sh"
