#!/bin/sh
# tests/e2e/push.sh - `eldr push` and Lua's Router:push against an eldrd
# with --admin-listen and an admin token (issue 30, item 4): the diff
# (each live worker's new cluster checked against a brute force over all
# 120 permutations of K = 5, tests/e2e/push_check.py, cosines too),
# --dry-run changing nothing, --yes pushing the aligned centroids under
# the live names (GET /v1/snapshot and the persisted model), the question
# on a terminal (n: nothing sent; y: pushed), no terminal and no --yes
# refused (exit 2), a missing or wrong token (exit 1, eldrd's 401
# message), the public listener (exit 2, naming --admin-listen), a model
# of another K or L/E (exit 2), a dead port (exit 3); then
# tests/e2e/push.lua with `eldr run` (attach{token_file}, push with and
# without the token, dry_run, wrong arguments). Bounded; about 10 s.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs "push"
[ -x "$ELDR" ] || { notok "push prerequisites" "need $ELDR"; exit 0; }
CHK="$PY $ROOT/tests/e2e/push_check.py"

# live: K = 5 over every layer; new: another split, seed and a short fit,
# so its clusters come in another order and differ a little
"$ELDR" fit "$SMALL" -k 5 -o "$TMP/live.h5" --seed 1 --layers all >/dev/null 2>&1
"$ELDR" fit "$SMALL" -k 5 -o "$TMP/new.h5" --seed 5 --split-seed 9 --iters 3 --layers all >/dev/null 2>&1
"$ELDR" fit "$SMALL" -k 4 -o "$TMP/k4.h5" --seed 1 --layers all >/dev/null 2>&1
"$ELDR" gen -o "$TMP/g.h5" --requests 200 --layers 8 --experts 16 --seed 3 >/dev/null 2>&1
"$ELDR" fit "$TMP/g.h5" -k 5 -o "$TMP/le.h5" --seed 1 --layers all >/dev/null 2>&1
"$ELDR" model export "$TMP/new.h5" -o "$TMP/new.json" >/dev/null 2>&1
check "fixtures: live and new K = 5 models, K = 4, L 8 E 16, the new one as JSON" \
    test -s "$TMP/live.h5" -a -s "$TMP/new.h5" -a -s "$TMP/k4.h5" -a -s "$TMP/le.h5" -a -s "$TMP/new.json"
PERM=$($CHK perm "$TMP/live.h5" "$TMP/new.h5")
check "oracle: one best permutation, not the identity" \
    sh -c "[ -n '$PERM' ] && [ '$PERM' != '0,1,2,3,4' ]"
printf 'adm1n-t0ken-0123456789abcdef\n' >"$TMP/admin.tok"
printf 'wr0ng-t0ken-0123456789abcdef\n' >"$TMP/wrong.tok"
printf 'short\n' >"$TMP/short.tok"
chmod 600 "$TMP"/*.tok
NAMES=n0,n1,n2,n3,n4

AP=$(free_port); AURL="http://127.0.0.1:$AP"
start push -m "$TMP/live.h5" --workers $NAMES --admin-listen "127.0.0.1:$AP" \
    --admin-token-file "$TMP/admin.tok" --state-dir "$TMP/state" --quiet || exit 0
generation() { # the admin listener's model generation
    curl -s --max-time 5 "$AURL/v1/snapshot?decisions=0" |
        $PY -c 'import json,sys; print(json.load(sys.stdin)["model"]["generation"])'
}

expect_status "push --help" 0 "$ELDR" push --help
expect_out "push --help shows usage and the token option" "usage: eldr push MODEL --to URL .*--token-file"
expect_fail2 "push without --to" "--to URL is required" "$ELDR" push "$TMP/new.h5"
expect_fail2 "push without a model" "no model file" "$ELDR" push --to "$AURL"
expect_fail2 "push a missing file" "nope.h5" "$ELDR" push "$TMP/nope.h5" --to "$AURL"
expect_fail2 "push with a token file too short" "short.tok: the token has 5 characters" \
    "$ELDR" push "$TMP/new.h5" --to "$AURL" --token-file "$TMP/short.tok" --dry-run
expect_fail2 "push to the public listener: exit 2 naming --admin-listen" \
    "$URL is eldrd's public listener.*--admin-listen address" \
    "$ELDR" push "$TMP/new.h5" --to "$URL" --dry-run
expect_status "push to a closed port: exit 3" 3 \
    "$ELDR" push "$TMP/new.h5" --to "http://127.0.0.1:$(free_port)" --dry-run --timeout 2
check "... one line: daemon unreachable" grep -q "daemon unreachable" "$TMP/err"

expect_status "--dry-run: exit 0" 0 "$ELDR" push "$TMP/new.h5" --to "$AURL" --dry-run
check "--dry-run: the diff names every live worker and says nothing was sent" sh -c "
    grep -q 'gets new cluster' '$TMP/out' && grep -q 'recipe unchanged' '$TMP/out' &&
    grep -q '^dry run: nothing sent' '$TMP/out' &&
    [ \$(grep -cE '^  n[0-4] ' '$TMP/out') -eq 5 ]"
expect_status "--dry-run --json: exit 0" 0 "$ELDR" push "$TMP/new.json" --to "$AURL" --dry-run --json
cp "$TMP/out" "$TMP/diff.json"
check "the diff's alignment is the brute force's, cosines as computed in numpy" \
    $CHK diff "$TMP/diff.json" "$PERM" "$NAMES" "$TMP/live.h5" "$TMP/new.h5"
check "--dry-run sends nothing: generation 1" test "$(generation)" = 1

expect_fail2 "no terminal and no --yes: exit 2" "stdin is not a terminal.*--yes" \
    "$ELDR" push "$TMP/new.h5" --to "$AURL" --token-file "$TMP/admin.tok"
check "... nothing sent" test "$(generation)" = 1
expect_status "no token: exit 1" 1 "$ELDR" push "$TMP/new.h5" --to "$AURL" --yes
check "... eldrd's 401 message" grep -q "HTTP 401: PUT /v1/model needs 'Authorization: Bearer <admin token>'" "$TMP/err"
expect_status "a wrong token: exit 1" 1 "$ELDR" push "$TMP/new.h5" --to "$AURL" --yes --token-file "$TMP/wrong.tok"
check "... eldrd's 401 message, generation still 1" sh -c \
    "grep -q 'HTTP 401' '$TMP/err' && [ $(generation) = 1 ]"
expect_fail2 "a model of K = 4: exit 2 naming both geometries" "K=4, the router serves L=16 E=64 K=5" \
    "$ELDR" push "$TMP/k4.h5" --to "$AURL" --yes --token-file "$TMP/admin.tok"
expect_fail2 "a model of L 8 E 16: exit 2" "has L=8 E=16 K=5, the router serves L=16 E=64" \
    "$ELDR" push "$TMP/le.h5" --to "$AURL" --yes --token-file "$TMP/admin.tok"

# on a terminal: "n" sends nothing, "y" pushes
printf 'n\n' | script -qec "'$ELDR' push '$TMP/new.h5' --to '$AURL' --token-file '$TMP/admin.tok' >'$TMP/tty_n.out'; echo rc=\$? >'$TMP/tty_n.rc'" "$TMP/tty_n.log" >/dev/null 2>&1
check "terminal, answer n: asked, exit 1 'not pushed', generation 1" sh -c "
    grep -q 'with the aligned model? \[y/N\]' '$TMP/tty_n.log' && grep -q 'not pushed' '$TMP/tty_n.log' &&
    grep -q rc=1 '$TMP/tty_n.rc' && [ $(generation) = 1 ]"
printf 'y\n' | script -qec "'$ELDR' push '$TMP/new.h5' --to '$AURL' --token-file '$TMP/admin.tok' >'$TMP/tty_y.out'; echo rc=\$? >'$TMP/tty_y.rc'" "$TMP/tty_y.log" >/dev/null 2>&1
check "terminal, answer y: pushed, generation 2" sh -c "
    grep -q rc=0 '$TMP/tty_y.rc' && grep -q '^pushed: generation 2' '$TMP/tty_y.out' && [ $(generation) = 2 ]"

expect_status "--yes with the token: exit 0" 0 "$ELDR" push "$TMP/new.h5" --to "$AURL" --yes --token-file "$TMP/admin.tok"
expect_out "... pushed: generation 3, persisted" "^pushed: generation 3, K 5, dim 1024, persisted to .*model.h5"
curl -s --max-time 5 -o "$TMP/snap.json" "$AURL/v1/snapshot?centroids=1&decisions=0"
check "the live centroids are the new model's in the brute force's order" \
    $CHK served "$TMP/snap.json" "$TMP/new.h5" "$PERM"
check "the persisted model carries the live names in the live order" $PY -c '
import h5py, sys
w = [x.decode() if isinstance(x, bytes) else x for x in h5py.File(sys.argv[1], "r")["workers"][()]]
sys.exit(0 if w == sys.argv[2].split(",") else 1)' "$TMP/state/model.h5" "$NAMES"
expect_status "the same model again, --dry-run --json" 0 "$ELDR" push "$TMP/new.h5" --to "$AURL" --dry-run --json
check "... every live worker finds its own centroid again (cos 1, the same matching)" jq_py "$TMP/out" \
    'all(abs(w["cos"] - 1) < 1e-5 for w in j["workers"]) and ",".join(str(w["new_cluster"]) for w in j["workers"]) == "'"$PERM"'" and j["answer"] is None'

timeout 60 "$ELDR" run "$ROOT/tests/e2e/push.lua" "$AURL" "$TMP/admin.tok" "$TMP/new.h5" "$PERM" \
    >"$TMP/lua.out" 2>"$TMP/lua.err"
rc=$?
cat "$TMP/lua.out"
[ $rc -eq 0 ] && ok "push.lua exits 0" || notok "push.lua exits 0" "exit $rc" "$(head -c 400 "$TMP/lua.err")"
stop
