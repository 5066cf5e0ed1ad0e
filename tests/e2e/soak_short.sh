#!/bin/sh
# tests/e2e/soak_short.sh - the soak test (tests/soak/soak.sh) for 20 s, so
# that `make test` and `make asan` run it (under ASan at 200 routes/s, with
# LeakSanitizer at eldrd's exit in place of the RSS rule). `make soak`
# runs the full 5 minutes.
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
SOAK_SECONDS=20 SOAK_WARMUP=6 exec sh "$ROOT/tests/soak/soak.sh"
