# bash completion for eldr and eldrd (docs/completion/eldr.bash; `make
# install` puts it in PREFIX/share/bash-completion/completions as eldr and
# eldrd). To try it without installing: source docs/completion/eldr.bash
#
# Commands and options are read from the programs' own --help texts, once
# per command and shell, so the completion cannot drift from the binary it
# completes: the options are the ones a --help defines (its usage lines and
# the lines that begin with an option), not the ones it mentions in prose.
# Values: the choices of the options that have a fixed set (--policy,
# --variant, --split, --view, ...); file names for the options that take a
# file and for the positional arguments (traces: .h5 .npz .jsonl .npy
# .frames .bin; models: .h5 .json; Lua scripts; profiles: .csv), always
# with directories, so that a path can be walked.

# _eldr_help_cols PROG [CMD]: the parts of PROG [CMD] --help that define
# options: its usage lines, and the option column (up to the first run of
# two spaces) of the lines that begin with an option
_eldr_help_cols() {
    "$@" --help 2>/dev/null | awk '
        /^usage:/ { usage = 1 }
        usage && !/^usage:/ && !/^ / { usage = 0 }
        {
            line = $0
            if (usage) { print line; next }
            # (mawk, the Debian awk, has no {m,n}: the indent is measured)
            if (match(line, /^ +-/) && RLENGTH <= 5) {
                sub(/^ +/, "", line)
                i = index(line, "  ")
                if (i > 0) line = substr(line, 1, i - 1)
                print line
            }
        }'
}

# _eldr_help_opts PROG [CMD]: the options PROG [CMD] --help defines, then
# a line "=", then those of them that take a value (followed by a
# metavariable: FILE, N, auto|all|LIST, k; not by words of a description)
_eldr_help_opts() {
    local cols
    cols=$(_eldr_help_cols "$@")
    printf '%s\n' "$cols" | grep -oE -- '(^|[][ ,|])--?[A-Za-z][A-Za-z0-9-]*' | sed 's/^[][ ,|]//' | sort -u
    echo =
    # a run of options ("-k, --clusters K") shares the metavariable after it
    printf '%s\n' "$cols" | tr '[],' '   ' | awk '{
        run = ""
        for (i = 1; i <= NF; i++) {
            if ($i ~ /^--?[A-Za-z]/) { run = run " " $i; continue }
            if (run != "" && ($i ~ /^[A-Z]/ || $i ~ /^[a-z]$/ || $i ~ /\|/)) {
                n = split(run, o, " ")
                for (j = 1; j <= n; j++) print o[j]
            }
            run = ""
        }
    }' | sort -u
}

# _eldr_cached KIND KEY PROG [CMD]: the options (KIND opts) or the options
# that take a value (KIND valued) of PROG [CMD], read once under KEY
_eldr_cached() {
    local kind=$1 key=$2 all
    shift 2
    if [[ -z ${_eldr_opts_cache[$key]+set} ]]; then
        all=$(_eldr_help_opts "$@")
        _eldr_opts_cache[$key]=$(printf '%s\n' "$all" | sed '/^=$/,$d' | tr '\n' ' ')
        _eldr_valued_cache[$key]=" $(printf '%s\n' "$all" | sed '1,/^=$/d' | tr '\n' ' ')"
    fi
    if [[ $kind == opts ]]; then printf '%s' "${_eldr_opts_cache[$key]}"
    else printf '%s' "${_eldr_valued_cache[$key]}"; fi
}
declare -gA _eldr_opts_cache _eldr_valued_cache 2>/dev/null ||
    declare -A _eldr_opts_cache _eldr_valued_cache

# _eldr_files CUR EXT...: directories, and the files whose names end in
# one of the extensions (all files when none is given)
_eldr_files() {
    local cur=$1 f ext
    shift
    compopt -o filenames 2>/dev/null
    local IFS=$'\n'
    COMPREPLY+=($(compgen -d -- "$cur"))
    for f in $(compgen -f -- "$cur"); do
        [[ -d $f ]] && continue
        if [[ $# -eq 0 ]]; then COMPREPLY+=("$f"); continue; fi
        for ext in "$@"; do
            if [[ $f == *"$ext" ]]; then COMPREPLY+=("$f"); break; fi
        done
    done
}

# _eldr_value PROG CMD PREV CUR: complete the value of option PREV; 0 when
# PREV takes a value (COMPREPLY set, maybe empty), 1 when it takes none
_eldr_value() {
    local prog=$1 cmd=$2 prev=$3 cur=$4 words=
    case $prev in
        -o|--output)
            case $cmd in
                model|costfit) _eldr_files "$cur" .json .h5 ;;
                *) _eldr_files "$cur" .h5 ;;
            esac
            return 0 ;;
        -m|--model|--router-snapshot) _eldr_files "$cur" .h5 .json; return 0 ;;
        --trace) _eldr_files "$cur" .h5 .npz .jsonl; return 0 ;;
        --prompts) _eldr_files "$cur" .jsonl .json; return 0 ;;
        --cost) _eldr_files "$cur" .json; return 0 ;;
        --csv)
            if [[ $cmd == sim ]]; then compopt -o filenames 2>/dev/null
                COMPREPLY=($(compgen -d -- "$cur")); else _eldr_files "$cur" .csv; fi
            return 0 ;;
        --frame) _eldr_files "$cur" .txt; return 0 ;;
        --token-file|--api-key-file) _eldr_files "$cur"; return 0 ;;
        --policy) words="eldr eldr-online eldr-cost random rr jsq p2c domain" ;;
        --baselines) words="random rr jsq p2c domain" ;;
        --variant) words="count_idf count sqrt_count binary gate_prob gate_prob_all gate_logit" ;;
        --split) words="random head stratified" ;;
        --layers) words="auto all" ;;
        --view) words="overview balance heatmap queues scatter rho tradeoff decisions drift" ;;
        --metric) words="p50 p99 tps" ;;
        --engine) words="vllm sglang auto" ;;
        --endpoint) words="completions chat generate" ;;
        --format) words="npz jsonl npy frames" ;;
        --prefix-mode) words="cold cache uncached all" ;;
        --prefill-route) words="rr prefix" ;;
        --pairs) words="all" ;;
        --to|--admin|--attach|--server|--push-to) words="http://127.0.0.1:" ;;
        *)
            # another option that takes a value (a number, a list, a name):
            # nothing to offer; one that takes none: not a value here
            [[ $(_eldr_cached valued "eldr $cmd" "$prog" "$cmd") == *" $prev "* ]] || return 1
            COMPREPLY=()
            return 0 ;;
    esac
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
    return 0
}

_eldr() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local prog=${COMP_WORDS[0]} cmd=${COMP_WORDS[1]} opts
    COMPREPLY=()
    if [[ $COMP_CWORD -eq 1 ]]; then
        local cmds
        cmds=$("$prog" --help 2>/dev/null | awk '/^commands:/ { on = 1; next }
            on && /^  [a-z]/ { print $1 } on && /^$/ { exit }')
        COMPREPLY=($(compgen -W "$cmds --help --version" -- "$cur"))
        return 0
    fi
    if [[ $cur == -* ]]; then
        opts=$(_eldr_cached opts "eldr $cmd" "$prog" "$cmd")
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        return 0
    fi
    if [[ $COMP_CWORD -gt 2 ]] && _eldr_value "$prog" "$cmd" "$prev" "$cur"; then
        return 0
    fi
    # positional arguments
    case $cmd in
        model)
            if [[ $COMP_CWORD -eq 2 ]]; then COMPREPLY=($(compgen -W "export import" -- "$cur"))
            elif [[ ${COMP_WORDS[2]} == import ]]; then _eldr_files "$cur" .json
            else _eldr_files "$cur" .h5; fi ;;
        run|repl)
            # the script, then its own arguments (files of any kind)
            if [[ $COMP_CWORD -eq 2 || ( $cmd == repl && $prev == --no-history ) ]]; then
                _eldr_files "$cur" .lua; else _eldr_files "$cur"; fi ;;
        costfit) _eldr_files "$cur" .csv ;;
        push) _eldr_files "$cur" .h5 .json ;;
        info) _eldr_files "$cur" .h5 .json ;;
        import) _eldr_files "$cur" .npz .jsonl .npy .frames .bin ;;
        gen|capture) ;;
        *) _eldr_files "$cur" .h5 .npz .jsonl .npy .frames .bin ;;
    esac
    return 0
}

_eldrd() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} opts
    COMPREPLY=()
    case $prev in
        -m|--model) _eldr_files "$cur" .h5 .json; return 0 ;;
        --state-dir) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -d -- "$cur")); return 0 ;;
        --cost) _eldr_files "$cur" .json; return 0 ;;
        --endpoints) _eldr_files "$cur" .yaml .yml .json; return 0 ;;
        --admin-token-file|--kv-token-file|--route-token-file|--upstream-api-key-file)
            _eldr_files "$cur"; return 0 ;;
        --policy) COMPREPLY=($(compgen -W "band cost" -- "$cur")); return 0 ;;
        --load-from) COMPREPLY=($(compgen -W "own vllm" -- "$cur")); return 0 ;;
        --pd-protocol) COMPREPLY=($(compgen -W "eldr vllm" -- "$cur")); return 0 ;;
        --stream-start) COMPREPLY=($(compgen -W "decoder prefill" -- "$cur")); return 0 ;;
    esac
    # the value of another option (a number, an address, a list): nothing
    if [[ $cur != -* && $(_eldr_cached valued eldrd "${COMP_WORDS[0]}") == *" $prev "* ]]; then
        return 0
    fi
    opts=$(_eldr_cached opts eldrd "${COMP_WORDS[0]}")
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
    return 0
}

complete -F _eldr eldr
complete -F _eldrd eldrd
