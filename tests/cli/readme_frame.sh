# tests/cli/readme_frame.sh - the README's captured dashboard frame is what
# the command above it prints today (issue 30, item 5: it had gone stale).
# tests/cli/frames.py runs the block's "$ eldr dash ... --frame -" and
# compares; `make readme-frame` (frames.py write) puts the output back.
# Needs the real trace (../shared/data); without it, says so and skips.
. "$ROOT/tests/cli/lib.sh"
if [ ! -f "$DATA" ]; then
    echo "# $DATA absent: the README frame is not checked"
    exit 0
fi
/usr/bin/python3 "$ROOT/tests/cli/frames.py" check "$ELDR" "$ROOT/README.md"
