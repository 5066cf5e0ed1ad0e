#!/bin/sh
# tests/e2e/framing.sh - strict HTTP/1.1 request framing (issue 31, item 5;
# RFC 9112, section 6; docs/http-api.md, "Errors"). framing_check.py sends
# raw bytes: every malformed Content-Length (a sign, a hex or non-ASCII
# digit, spaces inside or after, a list, empty, past 2^64 - 1) and the
# Transfer-Encoding cases (chunked not last or twice, a coding eldrd does
# not read, with a Content-Length), each on a fresh connection, after a
# valid request on a kept-alive one, pipelined behind one, and split after
# its request line beside another client's half-sent headers; each must get
# exactly one well-framed answer (one status line, Connection: close, a JSON
# error as long as its Content-Length) and then EOF. The Content-Length ones
# are refused by libmicrohttpd before eldrd's handler, whose own answer
# (0.9.75) repeats its head; eldrd answers them instead (http_framing.h).
# Valid requests (Content-Length, chunked) are still read, on one kept-alive
# connection. Both HTTP modes: the thread pool (plain) and the event loop
# (--proxy).
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs framing

"$ELDR" fit "$SMALL" -k 4 -o "$TMP/m.h5" --layers all >/dev/null 2>&1 ||
    { notok "fit a model for eldrd"; exit 0; }
dead() { echo "http://127.0.0.1:$(free_port)"; }

for mode in plain proxy; do
    if [ $mode = plain ]; then
        start plain -m "$TMP/m.h5" || exit 0
    else
        start proxy -m "$TMP/m.h5" --proxy --route-api --prefill "$(dead)" \
            --decode "$(dead),$(dead),$(dead),$(dead)" || exit 0
    fi
    timeout 120 $PY "$ROOT/tests/e2e/framing_check.py" "$PORT" >"$TMP/$mode.out" 2>&1
    sed -n 's/^\(not \)\{0,1\}ok - /&['"$mode"'] /p; s/^#/#/p' "$TMP/$mode.out" | grep -v '^# valid'
    refused=$(sed -n 's/^refused //p' "$TMP/$mode.out")
    check "[$mode] the checker ran to its end" test -n "$refused"
    curl -s --max-time 5 "$URL/metrics" >"$TMP/$mode.metrics"
    check "[$mode] each refusal at the headers counted in eldr_http_protocol_errors_total ($refused)" \
        grep -qx "eldr_http_protocol_errors_total $refused" "$TMP/$mode.metrics"
    req GET /livez
    expect_http "[$mode] eldrd serves on after them" 200
    stop
    check "[$mode] eldrd exits 0 on SIGTERM" test "$RC" -eq 0
done
