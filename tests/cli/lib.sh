# tests/cli/lib.sh - helpers for the shell-level tests (sourced).
# Each check prints "ok - NAME" or "not ok - NAME" (counted by tests/run.sh).
BIN=${BIN:-bin}
ELDR="$ROOT/$BIN/eldr"
DATA="$ROOT/../shared/data/gptoss20b-routing.h5"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

ok() { echo "ok - $1"; }
notok() { echo "not ok - $1"; shift; for l in "$@"; do echo "#   $l"; done; }

# expect_status NAME STATUS CMD...: run CMD, compare the exit status.
expect_status() {
    name=$1; want=$2; shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"
    got=$?
    if [ "$got" -eq "$want" ]; then ok "$name"; else
        notok "$name" "exit $got, wanted $want: $*" "$(head -c 400 "$TMP/err")"; fi
}

# expect_fail2 NAME PATTERN CMD...: exit 2 with exactly one stderr line
# that matches PATTERN (grep -E).
expect_fail2() {
    name=$1; pat=$2; shift 2
    "$@" >"$TMP/out" 2>"$TMP/err"
    got=$?
    lines=$(wc -l <"$TMP/err")
    if [ "$got" -eq 2 ] && [ "$lines" -eq 1 ] && grep -Eq -- "$pat" "$TMP/err"; then ok "$name"; else
        notok "$name" "exit $got (want 2), $lines stderr lines (want 1), pattern '$pat'" \
            "$(head -c 400 "$TMP/err")"; fi
}

# expect_out NAME PATTERN: the last command's stdout matches PATTERN.
expect_out() {
    if grep -Eq -- "$2" "$TMP/out"; then ok "$1"; else
        notok "$1" "stdout lacks '$2'" "$(head -c 400 "$TMP/out")"; fi
}

# on_tty FILE CMDLINE: run the shell command line with stdin/stdout/stderr
# on a pseudo-terminal (script(1)); what the terminal saw goes to FILE
# (redirect stdout inside CMDLINE to keep it apart). Returns its status.
on_tty() {
    script -qec "$2" "$1" >/dev/null 2>&1 </dev/null
}

# expect_in NAME FILE PATTERN: FILE matches PATTERN (grep -E)
expect_in() {
    if grep -Eq -- "$3" "$2"; then ok "$1"; else
        notok "$1" "'$2' lacks '$3'" "$(tail -c 400 "$2" | tr '\r\033' '|~')"; fi
}

# expect_not_in NAME FILE PATTERN: FILE does not match PATTERN
expect_not_in() {
    if grep -Eq -- "$3" "$2"; then notok "$1" "'$2' has '$3'" "$(head -c 400 "$2")"; else
        ok "$1"; fi
}

# json_assert NAME FILE PYCODE: run PYCODE with j = FILE parsed as JSON
# (by /usr/bin/python3); ok unless it raises (assert inside).
json_assert() {
    if /usr/bin/python3 -c "import json,sys
j=json.load(open(sys.argv[1]))
$3" "$2" 2>"$TMP/py.err"; then ok "$1"; else notok "$1" "$(tail -c 400 "$TMP/py.err")"; fi
}

# eldr_commands: the commands `eldr --help` lists, one a line
eldr_commands() {
    "$ELDR" --help | awk '/^commands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { exit }'
}
