#!/usr/bin/python3
"""tests/cli/help_options.py - the options a --help text (on stdin) defines,
one line, sorted: those in its usage lines and in the option column (up to
the first run of two spaces) of the lines that begin with an option; not
the ones its prose only mentions. --long: the long options only.
Used by tests/cli/man.sh and tests/cli/completion.sh."""
import re
import sys

opts, usage = set(), False
for line in sys.stdin.read().split('\n'):
    if line.startswith('usage:'):
        usage = True
    elif usage and not line.startswith(' '):
        usage = False
    if usage:
        part = line
    elif re.match(r'^ {1,4}-', line):
        part = re.split(r'\s{2,}', line.strip(), maxsplit=1)[0]
    else:
        continue
    opts.update(re.findall(r'(?:^|[\[\] ,|])(--?[A-Za-z][A-Za-z0-9-]*)', part))
if '--long' in sys.argv[1:]:
    opts = {o for o in opts if o.startswith('--')}
print(' '.join(sorted(opts)))
