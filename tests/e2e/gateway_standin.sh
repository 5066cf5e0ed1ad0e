#!/bin/sh
# tests/e2e/gateway_standin.sh - the Envoy stand-in can fail: its own
# self-test (tests/gateway/selftest.sh) runs it against fake_epp.js, a
# correct fake that it must accept and fakes that misbehave one way each
# (a 70,000-byte chunk, a changed byte, a body answer before the header
# answer, header and metadata that differ, ...) that it must refuse with
# the reason. Its lines in TAP form. Needs no eldr binary: left out of
# `make asan`.
. "$ROOT/tests/cli/lib.sh"
if ! command -v node >/dev/null 2>&1 || [ ! -d "$ROOT/tests/gateway/node_modules/@grpc/grpc-js-xds" ]; then
    notok "stand-in prerequisites" "need node and tests/gateway/node_modules (make deps)"
    exit 0
fi
timeout 300 bash "$ROOT/tests/gateway/selftest.sh" >"$TMP/self" 2>&1
rc=$?
sed -n -e 's/^ok   /ok - stand-in: /p' -e 's/^FAIL /not ok - stand-in: /p' "$TMP/self"
grep -q '^gateway selftest: [0-9]* passed, 0 failed' "$TMP/self" ||
    notok "stand-in self-test summary (exit $rc)" "$(tail -5 "$TMP/self")"
