#!/bin/sh
# tests/e2e/soak_short.sh - the soak test (tests/soak/soak.sh) for 20 s, so
# that `make test` and `make asan` run it (under ASan at 200 routes/s, with
# LeakSanitizer at eldrd's exit in place of the RSS rule). Swaps every 2 s
# so that the warm-up (10 s) holds the first persisted models' one-time
# libhdf5 growth. `make soak` runs the full 5 minutes.
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SOAK_SECONDS=20 SOAK_WARMUP=10 SOAK_SWAP_EVERY=2 exec sh "$ROOT/tests/soak/soak.sh"
