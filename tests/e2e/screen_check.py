#!/usr/bin/env python3
"""tests/e2e/screen_check.py - checks a captured dashboard screen against
the same screen captured wider (issue 30, item 5: every view usable at
80x24).

    screen_check.py NARROW.txt WIDTH WIDE.txt [--skip REGEX]... [--skip-numbers REGEX]...

NARROW.txt is the screen (tmux capture-pane -p, or a --frame) at WIDTH
columns, WIDE.txt the same state at a larger size (120x40). It fails
(exit 1, one line per finding) when, on the narrow screen:
  - a line is longer than WIDTH columns;
  - a word was cut without an ellipsis ("..."): a token that the wide
    screen does not have but that is the start of one of its words
    ("activatio" for "activations"), or a token that runs into the last
    column and is not on the wide screen;
  - a number does not agree with the wide screen: every decimal number
    or percentage on the narrow screen ("0.161", "25.0%", "-0.6%") must be
    on the wide screen as it is ("0.16" for 0.161 fails).
Lines matching a --skip REGEX are left out on both screens (what changes
with the clock, as a live header's age); on lines matching a
--skip-numbers REGEX only the numbers are not compared (numbers that
depend on the layout, as a heatmap cell grouped by the width). Abbreviations the dashboard makes on
purpose (the tab bar's, the header's short labels) are not prefixes the
wide screen lacks: both sizes show them, or they are whole words.
"""
import re
import sys

ELLIPSIS = ("...", "\u2026")
# what separates words: blanks and punctuation that never ends a number
SPLIT = re.compile(r"[\s|()\[\],;=<>]+")
NUMBER = re.compile(r"[-+]?\d+\.\d+%?|[-+]?\d+%")


def lines_of(path, skips):
    with open(path, encoding="utf-8") as f:
        out = [l.rstrip("\n") for l in f]
    return [l for l in out if not any(re.search(s, l) for s in skips)]


BORDERS = "|\u2502"


def tokens(line):
    """The words of a line; a plot inside a box (the scatter's: a line
    that starts with a border) is glyphs, not words, and is left out."""
    if line[:1] and line[0] in BORDERS:
        end = min((line.find(b, 1) for b in BORDERS if line.find(b, 1) > 0), default=-1)
        line = line[end + 1:] if end > 0 else ""
    return [t for t in SPLIT.split(line) if t]


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    narrow_path, width, wide_path = argv[1], int(argv[2]), argv[3]
    skips, skip_numbers = [], []
    rest = argv[4:]
    while rest:
        if rest[0] not in ("--skip", "--skip-numbers") or len(rest) < 2:
            print("screen_check: bad argument %r" % rest[0], file=sys.stderr)
            return 2
        (skips if rest[0] == "--skip" else skip_numbers).append(rest[1])
        rest = rest[2:]
    narrow = lines_of(narrow_path, skips)
    wide = lines_of(wide_path, skips)
    wide_tokens = set()
    wide_words = set()
    wide_numbers = set()
    for l in wide:
        for t in tokens(l):
            wide_tokens.add(t)
            wide_words.update(w for w in re.split(r"[^A-Za-z0-9_.-]+", t) if w)
        wide_numbers.update(NUMBER.findall(l))
    bad = []
    for i, l in enumerate(narrow, 1):
        if len(l) > width:
            bad.append("line %d is %d columns, over %d: %r" % (i, len(l), width, l))
        for t in tokens(l):
            if t in wide_tokens or t.endswith(ELLIPSIS) or t.startswith(ELLIPSIS):
                continue
            core = t.strip(".:'\"")
            if len(set(core)) == 1:   # a run of one glyph: scatter points, bars
                continue
            if len(core) >= 2 and re.search(r"[A-Za-z]", core) and core not in wide_words and \
                    any(w.startswith(core) and w != core for w in wide_words):
                bad.append("line %d: %r cut without an ellipsis: %r" % (i, core, l))
        if len(l) == width and re.search(r"[A-Za-z0-9]$", l):
            last = tokens(l)[-1]
            if last not in wide_tokens:
                bad.append("line %d: %r runs into the last column: %r" % (i, last, l))
        if any(re.search(r, l) for r in skip_numbers):
            continue
        for n in NUMBER.findall(l):
            if n not in wide_numbers:
                bad.append("line %d: number %s is not on the wide screen: %r" % (i, n, l))
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
