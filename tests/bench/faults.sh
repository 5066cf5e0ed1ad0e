#!/bin/sh
# tests/bench/faults.sh - the fault run (docs/reliability.md, "What a client
# sees under faults"): eldrd --proxy against stand-ins with every decoder
# dead, one flapping, one resetting its streams, one a blackhole; what the
# clients saw, as rows of `make bench` (tests/bench/faults_run.py).
BIN=${BIN:-bin}
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
[ -x "$ROOT/$BIN/eldrd" ] || { echo "faults bench: needs $BIN/eldrd; skipped" >&2; exit 0; }
/usr/bin/python3 -c 'import numpy, h5py' 2>/dev/null || {
    echo "faults bench: needs numpy and h5py under /usr/bin/python3; skipped" >&2; exit 0; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
timeout 300 /usr/bin/python3 "$ROOT/tests/bench/faults_run.py" "$ROOT" "$BIN" "$TMP"
