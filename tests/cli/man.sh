#!/bin/sh
# tests/cli/man.sh - the man pages docs/man/eldr.1 and docs/man/eldrd.8
# (issue 30, item 6) cannot drift from the binaries:
# - every command of `eldr --help` has its section (.SS "eldr NAME");
# - every option an `eldr NAME --help` defines (its usage lines and the
#   lines that start with an option) is in that command's section, every
#   option of `eldrd --help` in eldrd.8's OPTIONS;
# - every exit status a --help text's "Exit" paragraph names is in the
#   command's "Exit status:" paragraph of the man page, and the EXIT STATUS
#   sections hold 0-3 and 130 (eldr), 0-2 (eldrd);
# - groff renders both without a warning (-ww), and so does man -l.
. "$ROOT/tests/cli/lib.sh"
ELDRD="$ROOT/$BIN/eldrd"
MAN1="$ROOT/docs/man/eldr.1"
MAN8="$ROOT/docs/man/eldrd.8"
PY=/usr/bin/python3

"$ELDR" --help >"$TMP/eldr.help" 2>&1
cmds=$(eldr_commands)
n=$(echo "$cmds" | wc -w)
if [ "$n" -ge 16 ]; then ok "eldr --help lists $n commands"; else notok "eldr --help lists the commands" "$n: $cmds"; fi
for c in $cmds; do
    "$ELDR" "$c" --help >"$TMP/help.$c" 2>&1
    $PY "$ROOT/tests/cli/help_options.py" <"$TMP/help.$c" >"$TMP/opts.$c"
done
"$ELDRD" --help >"$TMP/help.eldrd" 2>&1
$PY "$ROOT/tests/cli/help_options.py" <"$TMP/help.eldrd" >"$TMP/opts.eldrd"
$PY "$ROOT/tests/cli/help_options.py" <"$TMP/eldr.help" >"$TMP/opts.top"

# the check itself: prints one "ok - ..." or "not ok - ..." per item
cat >"$TMP/check.py" <<'EOF'
import re, sys

def plain(roff):
    """The man page's text as a reader sees it: font escapes gone, \- a -."""
    t = re.sub(r'\\f[BIRP]', '', roff)
    return t.replace('\\-', '-').replace('\\&', '').replace('\\e', '\\')

def sections(roff, kind):
    """{name: text} of the .SH (kind 'SH') or .SS (kind 'SS') sections."""
    out, name, buf = {}, None, []
    for line in roff.split('\n'):
        m = re.match(r'^\.(SH|SS)\s+"?([^"]*)"?\s*$', line)
        if m:
            if name is not None:
                out[name] = '\n'.join(buf)
            name, buf = (m.group(2) if m.group(1) == kind else None), []
            continue
        buf.append(line)
    if name is not None:
        out[name] = '\n'.join(buf)
    return out

def help_options(name):
    """The options a --help defines (tests/cli/help_options.py's answer)."""
    return set(open('%s/opts.%s' % (tmp, name)).read().split())

def exit_codes(text):
    """The statuses an 'Exit' paragraph names: '0 every ...', '; 2 bad'."""
    m = re.search(r'^Exit[^\n]*(\n[^\n]+)*', text, re.M)
    if not m:
        return set()
    para = m.group(0).replace('\n', ' ')
    return set(re.findall(r'(?:^|[:;,(]\s*|\s)(\d{1,3})\s+(?=[a-z-])', para)) - {'401', '403'}

def ok(name, good, detail=''):
    print(('ok - ' if good else 'not ok - ') + name)
    if not good and detail:
        print('#   ' + detail)

tmp, man1, man8 = sys.argv[1], sys.argv[2], sys.argv[3]
cmds = sys.argv[4:]
r1, r8 = open(man1).read(), open(man8).read()
ss = {k: plain(v) for k, v in sections(r1, 'SS').items()}
sh1 = {k: plain(v) for k, v in sections(r1, 'SH').items()}
sh8 = {k: plain(v) for k, v in sections(r8, 'SH').items()}

top = help_options('top')
miss = sorted(o for o in top if o not in sh1.get('SYNOPSIS', ''))
ok('eldr.1 SYNOPSIS has eldr --help\'s options (%s)' % ' '.join(sorted(top)), not miss, 'missing: %s' % miss)
for c in cmds:
    text = open('%s/help.%s' % (tmp, c)).read()
    sec = ss.get('eldr ' + c)
    if sec is None:
        ok('eldr.1 has a section for eldr %s' % c, False, 'no .SS "eldr %s"' % c)
        continue
    opts = help_options(c)
    miss = sorted(o for o in opts if not re.search(r'(?<![\w-])' + re.escape(o) + r'(?![\w-])', sec))
    ok('eldr.1: eldr %s: its %d options' % (c, len(opts)), not miss and len(opts) >= 1, 'missing: %s' % miss)
    codes = exit_codes(text)
    if codes:
        m = re.search(r'Exit status:([^\n]*(\n[^.\n][^\n]*)*)', sec)
        said = set(re.findall(r'\b(\d{1,3})\b', m.group(1))) if m else set()
        ok('eldr.1: eldr %s: exit statuses %s' % (c, ','.join(sorted(codes, key=int))),
           codes <= said, 'the section says %s' % sorted(said))
opts = help_options('eldrd')
miss = sorted(o for o in opts if not re.search(r'(?<![\w-])' + re.escape(o) + r'(?![\w-])', sh8.get('OPTIONS', '')))
ok('eldrd.8 OPTIONS: eldrd --help\'s %d options' % len(opts), not miss and len(opts) >= 50, 'missing: %s' % miss)
codes = exit_codes(open(tmp + '/help.eldrd').read())
have8 = set(re.findall(r'^\.B (\d+)$', sections(r8, 'SH').get('EXIT STATUS', ''), re.M))
ok('eldrd.8 EXIT STATUS: eldrd --help\'s statuses %s' % ','.join(sorted(codes)), codes and codes <= have8,
   'the page lists %s' % sorted(have8))
for page, sh, want in (('eldr.1', sh1, ['0', '1', '2', '3', '130']), ('eldrd.8', sh8, ['0', '1', '2'])):
    es = sh.get('EXIT STATUS', '')
    have = re.findall(r'^\.B (\d+)$', es, re.M)
    ok('%s EXIT STATUS lists %s' % (page, ' '.join(want)), have == want, 'lists %s' % have)
    for s in ('NAME', 'SYNOPSIS', 'DESCRIPTION', 'ENVIRONMENT', 'FILES', 'SEE ALSO'):
        ok('%s has %s' % (page, s), s in sh)
EOF
$PY "$TMP/check.py" "$TMP" "$MAN1" "$MAN8" $cmds

# the pages render without a warning
for page in "$MAN1" "$MAN8"; do
    name=$(basename "$page")
    if groff -ww -z -man "$page" >"$TMP/groff.out" 2>&1 && [ ! -s "$TMP/groff.out" ]; then
        ok "$name: groff -ww -z -man, no warning"; else
        notok "$name: groff -ww -z -man, no warning" "$(head -c 400 "$TMP/groff.out")"; fi
    if command -v man >/dev/null 2>&1; then
        MANWIDTH=80 MANPAGER=cat man -l "$page" >"$TMP/man.out" 2>"$TMP/man.err"
        rc=$?
        if [ "$rc" -eq 0 ] && [ ! -s "$TMP/man.err" ] && [ "$(wc -l <"$TMP/man.out")" -gt 50 ]; then
            ok "$name: man -l renders ($(wc -l <"$TMP/man.out") lines)"; else
            notok "$name: man -l renders" "exit $rc" "$(head -c 300 "$TMP/man.err")"; fi
    fi
    if command -v mandoc >/dev/null 2>&1; then
        if mandoc -T lint -W warning "$page" >"$TMP/lint.out" 2>&1; then ok "$name: mandoc -T lint"; else
            notok "$name: mandoc -T lint" "$(head -c 400 "$TMP/lint.out")"; fi
    fi
done

# the pages name the version the binaries print
want=$(sed -n 's/^#define ELDR_VERSION "\(.*\)"$/\1/p' "$ROOT/src/core/version.h")
for page in "$MAN1" "$MAN8"; do
    if grep -q "^\.TH [A-Z]* [18] \"[0-9-]*\" \"eldr $want\"" "$page"; then ok "$(basename "$page"): .TH says eldr $want"; else
        notok "$(basename "$page"): .TH says eldr $want" "$(grep '^\.TH' "$page")"; fi
done
