#!/bin/sh
# tests/cli/completion.sh - bash completion (docs/completion/eldr.bash,
# issue 30, item 6), driven as bash drives it: COMP_WORDS and COMP_CWORD
# set, _eldr or _eldrd called, COMPREPLY read.
# - the first word: the commands of `eldr --help`, --help, --version;
# - `eldr CMD --`: exactly the options CMD's --help defines (read here
#   independently, by Python, from the option column of the help text);
#   `eldrd --`: eldrd's;
# - the values of --policy, --variant, --split, --view, ... and that each
#   value offered is one the command's --help names;
# - file names by kind: traces, models, Lua scripts, profiles, directories.
. "$ROOT/tests/cli/lib.sh"
ELDRD="$ROOT/$BIN/eldrd"
COMP="$ROOT/docs/completion/eldr.bash"
PY=/usr/bin/python3

if bash -n "$COMP" 2>"$TMP/syntax"; then ok "eldr.bash: bash -n"; else notok "eldr.bash: bash -n" "$(cat "$TMP/syntax")"; fi

# comp FUNC WORD...: the completions of the last WORD, sorted, on one line
# (run in $TMP/files, where the file-name cases find their files)
mkdir -p "$TMP/files/sub" && cd "$TMP/files" &&
    touch a.h5 b.npz c.lua d.csv e.json f.yaml g.txt && cd "$ROOT" || exit 1
comp() {
    f=$1; shift
    (cd "$TMP/files" && bash -c '
        source "$1"; f=$2; shift 2
        COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=()
        "$f"; printf "%s\n" "${COMPREPLY[@]}"' comp "$COMP" "$f" "$@") 2>>"$TMP/comp.err" |
        sort | tr '\n' ' ' | sed 's/ $//'
}
# same NAME GOT WANT
same() {
    if [ "$2" = "$3" ]; then ok "$1"; else notok "$1" "got:  $2" "want: $3"; fi
}

E="$ROOT/$BIN/eldr"
cmds=$(eldr_commands)
want=$(printf '%s\n' $cmds --help --version | sort | tr '\n' ' ' | sed 's/ $//')
same "eldr <Tab>: the commands of eldr --help" "$(comp _eldr "$E" "")" "$want"
same "eldr s<Tab>: sim sweep" "$(comp _eldr "$E" s)" "sim sweep"

for c in $cmds; do
    want=$("$E" "$c" --help | $PY "$ROOT/tests/cli/help_options.py" --long)
    got=$(comp _eldr "$E" "$c" --)
    n=$(echo "$want" | wc -w)
    if [ "$n" -ge 1 ]; then same "eldr $c --<Tab>: its $n long options" "$got" "$want"; else
        notok "eldr $c --help defines options" "none found"; fi
done
want=$("$ELDRD" --help | $PY "$ROOT/tests/cli/help_options.py" --long)
same "eldrd --<Tab>: its $(echo "$want" | wc -w) long options" "$(comp _eldrd "$ELDRD" --)" "$want"
same "eldrd --ad<Tab>" "$(comp _eldrd "$ELDRD" --ad)" "--admin-listen --admin-token-file"
same "eldr fit --c<Tab>" "$(comp _eldr "$E" fit t.h5 --c)" "--calib-split --clusters"

# values: offered, and each one named by the command's --help
value() { # CMD OPT PREFIX WANT
    got=$(comp _eldr "$E" "$1" x.h5 "$2" "$3")
    same "eldr $1 $2 $3<Tab>: $4" "$got" "$4"
    "$E" "$1" --help >"$TMP/h"
    for w in $got; do
        if ! grep -q -- "$w" "$TMP/h"; then notok "eldr $1 --help names $2's value $w"; fi
    done
}
value sim --policy e "eldr eldr-cost eldr-online"
value sim --policy "" "domain eldr eldr-cost eldr-online jsq p2c random rr"
value fit --variant c "count count_idf"
value fit --split "" "head random stratified"
value dash --view t "tradeoff"
value dash --metric "" "p50 p99 tps"
value sweep --baselines "" "domain jsq p2c random rr"
value capture --engine "" "auto sglang vllm"
value capture --endpoint "" "chat completions generate"
value import --format "" "frames jsonl npy npz"
value sim --prefix-mode "" "all cache cold uncached"
same "eldrd --policy <Tab>" "$(comp _eldrd "$ELDRD" --policy "")" "band cost"
same "eldrd --load-from <Tab>" "$(comp _eldrd "$ELDRD" --load-from "")" "own vllm"
same "eldr sim x.h5 --rate <Tab>: a number, nothing offered" "$(comp _eldr "$E" sim x.h5 --rate "")" ""
same "eldr dash x.h5 -k <Tab>: a number (the metavariable of -k, --clusters K)" "$(comp _eldr "$E" dash x.h5 -k "")" ""
same "eldr gen --top-k <Tab>: a number (metavariable k)" "$(comp _eldr "$E" gen --top-k "")" ""
same "eldr sim x.h5 --json <Tab>: a flag, then the files again" "$(comp _eldr "$E" sim x.h5 --json "")" "a.h5 b.npz sub"
same "eldr sim x.h5 --require-full-routing <Tab>: a flag (its one-space description is no value)" \
    "$(comp _eldr "$E" sim x.h5 --require-full-routing "")" "a.h5 b.npz sub"
same "eldrd --listen <Tab>: an address, nothing offered" "$(comp _eldrd "$ELDRD" --listen "")" ""
same "eldrd --proxy <Tab>: a flag, then the options" "$(comp _eldrd "$ELDRD" --proxy "" | wc -w)" \
    "$("$ELDRD" --help | $PY "$ROOT/tests/cli/help_options.py" | wc -w)"

# file names by kind (directories always, to walk a path)
same "eldr sim <Tab>: traces" "$(comp _eldr "$E" sim "")" "a.h5 b.npz sub"
same "eldr sim x.h5 -m <Tab>: models" "$(comp _eldr "$E" sim x.h5 -m "")" "a.h5 e.json sub"
same "eldr run <Tab>: Lua scripts" "$(comp _eldr "$E" run "")" "c.lua sub"
same "eldr costfit <Tab>: profiles" "$(comp _eldr "$E" costfit "")" "d.csv sub"
same "eldr import <Tab>: captures" "$(comp _eldr "$E" import "")" "b.npz sub"
same "eldr model <Tab>" "$(comp _eldr "$E" model "")" "export import"
same "eldr model import <Tab>: centroid JSON" "$(comp _eldr "$E" model import "")" "e.json sub"
same "eldr dash x.h5 --frame <Tab>" "$(comp _eldr "$E" dash x.h5 --frame "")" "g.txt sub"
same "eldrd -m <Tab>: models" "$(comp _eldrd "$ELDRD" -m "")" "a.h5 e.json sub"
same "eldrd --endpoints <Tab>" "$(comp _eldrd "$ELDRD" --endpoints "")" "e.json f.yaml sub"
same "eldrd --state-dir <Tab>: directories" "$(comp _eldrd "$ELDRD" --state-dir "")" "sub"
same "eldr sim s<Tab>: into a directory" "$(comp _eldr "$E" sim s)" "sub"
if [ ! -s "$TMP/comp.err" ]; then ok "completion: nothing on stderr"; else
    notok "completion: nothing on stderr" "$(head -c 300 "$TMP/comp.err")"; fi
