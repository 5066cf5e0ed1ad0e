#!/bin/sh
# tests/e2e/tour_live.sh - the README tour's second block, the lines that
# need a running engine or router (issue 22, item 6), as typed but for the
# address: 127.0.0.1:8470 becomes a free port, the proxy's URL
# placeholders become unreachable stand-ins (tests/e2e/proxy.sh drives a
# real exchange), the gateway picker's port a free one (tests/e2e/gateway.sh
# drives it), and the capture's engine is a closed port, where it must
# fail as an engine that does not answer, not as a usage error. The router
# lines start, answer /healthz and are stopped; replay, push and the attached
# dashboard run against the first one. t.h5 and m.h5 come from the tour's
# own first-block lines.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs "tour (live)"
export PATH="$ROOT/$BIN:$PATH"
D="$TMP/tour" && mkdir -p "$D" && ln -s "$ROOT/samples" "$D/samples"   # the tour runs from the root
(cd "$D" && eldr gen -o t.h5 --requests 2000 --domains 6 && eldr fit t.h5 -k 8 -o m.h5 --calib-split 0.5) \
    >/dev/null 2>&1 || { notok "tour (live): t.h5 and m.h5 from the tour"; exit 0; }
awk '/^## A tour of the commands/ { on = 1 } on && /^```/ { n++; next } on && n == 3' \
    "$ROOT/README.md" | sed 's/  *#.*$//' | grep -E '^(eldr|eldrd) ' >"$TMP/lines"
count=$(wc -l <"$TMP/lines")
if [ "$count" -eq 8 ]; then ok "tour (live): 8 lines need an engine or router"; else
    notok "tour (live): 8 lines need an engine or router" "found $count"; fi

P=$(free_port)
# wait_up PORT: /healthz answers within 10 s
wait_up() {
    i=0
    while [ $i -lt 100 ]; do
        curl -s --max-time 1 "http://127.0.0.1:$1/healthz" >/dev/null 2>&1 && return 0
        sleep 0.1; i=$((i + 1))
    done
    return 1
}
# a router line in the background on port $2 until the next one
serve() { # LINE PORT
    (cd "$D" && exec sh -c "exec $1" >"$TMP/serve.log" 2>&1) &
    SPID=$!
    PIDS="$PIDS $SPID"
    if wait_up "$2"; then ok "tour (live): $1"; else notok "tour (live): $1" "$(tail -c 300 "$TMP/serve.log")"; fi
}
stop() { kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; }
# dead engines on ports held bound (dead_port): eight free_port calls
# could name one port twice ("--decode: name ... given twice")
dead_port; dead="http://127.0.0.1:$DEADPORT"
decs=""
for i in 1 2 3 4 5 6 7 8; do
    dead_port; decs="$decs${decs:+,}http://127.0.0.1:$DEADPORT"
done
printf '{"prompt": "hello"}\n' >"$D/p.jsonl"
router=""
while IFS= read -r line; do
    run=$(echo "$line" | sed "s|127\.0\.0\.1:8470|127.0.0.1:$P|g")
    case "$line" in
    "eldr capture "*)
        cport=$(free_port)
        run=$(echo "$run" | sed "s|127\.0\.0\.1:8000|127.0.0.1:$cport|")
        (cd "$D" && sh -c "$run" </dev/null >"$TMP/out" 2>"$TMP/err")
        rc=$?
        if [ "$rc" -ne 0 ] && ! grep -qiE 'unknown option|usage' "$TMP/err" && grep -q "127.0.0.1:$cport" "$TMP/err"; then
            ok "tour (live): $line (its flags parse; no engine: exit $rc)"
        else notok "tour (live): $line" "exit $rc" "$(head -c 300 "$TMP/err")"; fi ;;
    "eldrd "*"--proxy"*)
        stop
        Q=$(free_port)
        run=$(echo "$run" | sed "s|--decode URL,\.\.\.|--decode $decs|; s|--prefill URL|--prefill $dead|")
        serve "$run --listen 127.0.0.1:$Q" "$Q"
        stop ;;
    "eldrd "*"--ext-proc"*)
        stop
        Q=$(free_port)
        run=$(echo "$run" | sed "s|127\.0\.0\.1:9002|127.0.0.1:$(free_port)|")
        serve "$run --listen 127.0.0.1:$Q" "$Q"
        stop
        serve "eldrd -m m.h5 --listen 127.0.0.1:$P" "$P" ;;   # back for replay and dash
    "eldrd "*"--listen"*)
        serve "$run" "$P"
        router=1 ;;
    "eldrd "*)
        stop
        Q=$(free_port)
        serve "$run --listen 127.0.0.1:$Q" "$Q"
        stop
        serve "eldrd -m m.h5 --listen 127.0.0.1:$P" "$P" ;;   # back for replay and dash
    "eldr dash "*)
        (cd "$D" && sh -c "$run --frame $TMP/frame.txt" </dev/null >"$TMP/out" 2>"$TMP/err")
        rc=$?
        if [ "$rc" -eq 0 ] && grep -q 'Router' "$TMP/frame.txt"; then ok "tour (live): $line"
        else notok "tour (live): $line" "exit $rc" "$(head -c 300 "$TMP/err")"; fi ;;
    *)
        (cd "$D" && sh -c "$run" </dev/null >"$TMP/out" 2>"$TMP/err")
        rc=$?
        if [ "$rc" -eq 0 ]; then ok "tour (live): $line"; else
            notok "tour (live): $line" "exit $rc" "$(head -c 300 "$TMP/err")"; fi ;;
    esac
done <"$TMP/lines"
[ -n "$router" ] || notok "tour (live): the router line ran"
stop
