#!/bin/sh
# tests/cli/gen.sh - `eldr gen`: help, writing valid traces (plain, with
# tokens/prefixes/gates/arrivals), JSON summary, and bad flags (exit 2,
# one stderr line naming the flag, no file left behind).
. "$ROOT/tests/cli/lib.sh"
G="$ELDR gen"
SMALL="--requests 60 --layers 4 --experts 16 --top-k 2 --prompt-tokens 24 --decode-tokens 12"

expect_status "gen --help exits 0" 0 $G --help
expect_out "gen --help lists every flag with a default" ' --domain-strength X .*\(default 1\)'
expect_out "gen --help shows --prefix-groups" ' --prefix-groups'

expect_status "gen writes a trace" 0 $G -o "$TMP/a.h5" $SMALL --seed 3
expect_out "gen prints a summary line" '^wrote .*a\.h5: 60 requests, L=4 E=16 k=2'
expect_status "info accepts the generated trace" 0 "$ELDR" info "$TMP/a.h5"
expect_out "generated trace is valid" 'valid'
expect_out "generated trace has labels and decode" 'decode_counts'

expect_status "gen --json" 0 $G -o "$TMP/b.h5" $SMALL --json --gates --arrival-rate 5
expect_out "gen --json has requests" '"requests": 60'
expect_out "gen --json lists gate_prob" '"gate_prob"'
expect_out "gen --json lists arrival_s" '"arrival_s"'

expect_status "gen with prefixes and tokens" 0 $G -o "$TMP/c.h5" $SMALL --prefix-groups 3 \
    --prefix-blocks 2 --block-size 8 --json
expect_out "prefixes imply token datasets" '"tokens/block_hashes"'
expect_status "info validates the token datasets" 0 "$ELDR" info "$TMP/c.h5"
expect_out "token trace is valid" 'valid'

expect_status "gen with domain shares and bursts" 0 $G -o "$TMP/d.h5" $SMALL --domains 3 \
    --domain-shares 2,1,1 --arrival-rate 10 --burst-factor 4 --burst-period 2 --decode-tokens 0
expect_status "info on a prefill-only trace" 0 "$ELDR" info "$TMP/d.h5"

expect_fail2 "gen without -o" 'missing -o' $G $SMALL
expect_fail2 "gen unknown flag" "unknown option '--frobnicate'" $G -o "$TMP/x.h5" --frobnicate
expect_fail2 "gen flag without value" 'gen: --requests needs a value' $G -o "$TMP/x.h5" --requests
expect_fail2 "gen non-numeric value" "gen: --requests: 'many' is not an integer" $G -o "$TMP/x.h5" --requests many
expect_fail2 "gen --mix-prob out of range" 'gen: --mix-prob: 2 out of range' $G -o "$TMP/x.h5" --mix-prob 2
expect_fail2 "gen top-k above experts" 'gen: --top-k is 9' $G -o "$TMP/x.h5" --experts 8 --top-k 9
expect_fail2 "gen shares count" 'gen: --domain-shares has 2 values but --domains is 3' \
    $G -o "$TMP/x.h5" --domains 3 --domain-shares 1,2
expect_fail2 "gen bad shares" 'gen: --domain-shares: .*not a list' $G -o "$TMP/x.h5" --domain-shares 1,-2
expect_fail2 "gen bursts need arrivals" 'gen: --burst-factor needs --arrival-rate' $G -o "$TMP/x.h5" --burst-factor 3
expect_fail2 "gen prefix too long" 'gen: --prefix-blocks 5000 x --block-size 16' \
    $G -o "$TMP/x.h5" --prefix-groups 2 --prefix-blocks 5000
expect_fail2 "gen refuses a size beyond memory" 'needs .* GiB' \
    $G -o "$TMP/x.h5" --requests 1000000000 --layers 4096 --experts 4096
expect_fail2 "gen stray argument" "unexpected argument 'extra'" $G -o "$TMP/x.h5" extra
expect_fail2 "gen unwritable output" 'x\.h5' $G -o "$TMP/no/such/dir/x.h5" $SMALL
if [ -e "$TMP/x.h5" ] || [ -e "$TMP/no" ]; then notok "no file after bad input"; else ok "no file after bad input"; fi

# An output path that is not a regular file (a FIFO here; /dev/null in the
# incident that prompted this) must be refused, never renamed over.
mkfifo "$TMP/fifo"
expect_fail2 "gen refuses a non-regular output" 'not a regular file' $G -o "$TMP/fifo" $SMALL
if [ -p "$TMP/fifo" ]; then ok "the FIFO is still a FIFO"; else notok "the FIFO is still a FIFO"; fi
mkdir "$TMP/adir"
expect_fail2 "gen refuses a directory as output" 'not a regular file' $G -o "$TMP/adir" $SMALL
