#!/bin/sh
# tests/cli/tour.sh - the README's tour runs as typed (issue 22, item 6):
# every `eldr` line of its first block, in a fresh directory that holds
# only a link to the repository's samples/, with bin/ on the PATH. Two
# lines need a terminal: the dashboard runs as one frame (--frame), the
# REPL reads an empty stdin. Each line must exit 0.
. "$ROOT/tests/cli/lib.sh"
export PATH="$ROOT/$BIN:$PATH"
mkdir -p "$TMP/tour" && ln -s "$ROOT/samples" "$TMP/tour/samples"
awk '/^## A tour of the commands/ { on = 1 } on && /^```/ { n++; next } on && n == 1' \
    "$ROOT/README.md" | sed 's/  *#.*$//' | grep '^eldr ' >"$TMP/lines"
count=$(wc -l <"$TMP/lines")
if [ "$count" -ge 15 ]; then ok "tour: $count eldr lines found in README.md"; else
    notok "tour: eldr lines found in README.md" "only $count"; fi
while IFS= read -r line; do
    case "$line" in
        "eldr dash "*) run="$line --frame $TMP/frame.txt --seeds 1" ;;
        *) run="$line" ;;
    esac
    (cd "$TMP/tour" && sh -c "$run" </dev/null >"$TMP/out" 2>"$TMP/err")
    rc=$?
    if [ "$rc" -eq 0 ]; then ok "tour: $line"; else
        notok "tour: $line" "exit $rc" "$(tail -c 300 "$TMP/err")"; fi
done <"$TMP/lines"
for f in capture.npz fit.json drift.h5 profile.csv; do
    size=$(wc -c <"$ROOT/samples/$f")
    if [ "$size" -lt 1048576 ]; then ok "tour: samples/$f is small ($size bytes)"; else
        notok "tour: samples/$f is small" "$size bytes"; fi
done
