#!/bin/sh
# tests/cli/install.sh - `make install` into a temporary DESTDIR and PREFIX
# (issue 30, item 6: "make install ships no docs"): the binaries, the Lua
# modules where the installed eldr finds them (no ELDR_LUA_PATH, no source
# tree beside it), the man pages (man -l renders them), bash completion
# under both names, README.md and docs/*.md; then `make uninstall` leaves
# no file behind. The build is taken as it is (make -o all: nothing is
# rebuilt here, so the test runs on whichever $BIN the runner tests).
. "$ROOT/tests/cli/lib.sh"
D="$TMP/dest"
P=/opt/eldr-test
M="env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -C $ROOT -o all BIN=$BIN DESTDIR=$D PREFIX=$P"
if $M install >"$TMP/install.out" 2>&1; then ok "make install DESTDIR PREFIX"; else
    notok "make install DESTDIR PREFIX" "$(tail -c 400 "$TMP/install.out")"; fi
R="$D$P"
for f in bin/eldr bin/eldrd share/man/man1/eldr.1 share/man/man8/eldrd.8 \
    share/bash-completion/completions/eldr share/bash-completion/completions/eldrd \
    share/doc/eldr/README.md share/doc/eldr/signatures.md share/eldr/lua/eldr/report.lua; do
    if [ -s "$R/$f" ]; then ok "installed $f"; else notok "installed $f" "missing or empty"; fi
done
ndocs=$(ls "$ROOT"/docs/*.md | wc -l)
got=$(ls "$R"/share/doc/eldr/*.md | wc -l)
if [ "$got" -eq $((ndocs + 1)) ]; then ok "share/doc/eldr: README.md and the $ndocs docs/*.md"; else
    notok "share/doc/eldr: README.md and the $ndocs docs/*.md" "$got files"; fi
for f in eldr eldrd; do
    if [ -x "$R/bin/$f" ] && cmp -s "$R/bin/$f" "$ROOT/$BIN/$f"; then ok "bin/$f is $BIN/$f, executable"; else
        notok "bin/$f is $BIN/$f, executable"; fi
done
# the installed eldr finds its Lua modules beside it, in share/eldr/lua
cat >"$TMP/mods.lua" <<'LUA'
print(package.searchpath("eldr.report", package.path))
print(type(eldr.report.table))
LUA
(cd "$TMP" && env -u ELDR_LUA_PATH "$R/bin/eldr" run "$TMP/mods.lua") >"$TMP/lua.out" 2>&1
if grep -q "^$R/bin/../share/eldr/lua/eldr/report.lua$" "$TMP/lua.out" && grep -q '^function$' "$TMP/lua.out"; then
    ok "the installed eldr loads eldr.report from share/eldr/lua"; else
    notok "the installed eldr loads eldr.report from share/eldr/lua" "$(head -c 300 "$TMP/lua.out")"; fi
for page in man1/eldr.1 man8/eldrd.8; do
    if MANWIDTH=80 MANPAGER=cat man -l "$R/share/man/$page" 2>"$TMP/man.err" | grep -q 'EXIT STATUS' &&
        [ ! -s "$TMP/man.err" ]; then ok "man -l the installed $page"; else
        notok "man -l the installed $page" "$(head -c 300 "$TMP/man.err")"; fi
done
got=$(PATH="$R/bin:$PATH" bash -c 'source "$1"; COMP_WORDS=(eldr fit x.h5 --cl); COMP_CWORD=3; _eldr; echo "${COMPREPLY[*]}"' \
    comp "$R/share/bash-completion/completions/eldr" 2>&1)
if [ "$got" = "--clusters" ]; then ok "the installed completion completes (eldr fit --cl: $got)"; else
    notok "the installed completion completes" "got '$got'"; fi
if $M uninstall >"$TMP/uninstall.out" 2>&1; then ok "make uninstall"; else
    notok "make uninstall" "$(tail -c 400 "$TMP/uninstall.out")"; fi
left=$(find "$D" -type f -o -type l | head -5)
if [ -z "$left" ]; then ok "make uninstall leaves no file"; else notok "make uninstall leaves no file" "$left"; fi
for d in share/eldr share/doc/eldr; do
    if [ ! -e "$R/$d" ]; then ok "make uninstall removes $d"; else notok "make uninstall removes $d"; fi
done
