#!/bin/sh
# tests/cli/import.sh - `eldr import`: the fixtures of tests/fixtures/import
# (made by numpy, see make_import_fixtures.py) round trip through
# import -> info; every bad one exits 2 with one stderr line that names it
# and leaves no output; usage errors; and, when /usr/bin/python3 has numpy
# and h5py, the real gpt-oss-20b trace exported by numpy to .npz and
# .jsonl, imported, and compared dataset by dataset by h5py.
. "$ROOT/tests/cli/lib.sh"
FIX="$ROOT/tests/fixtures/import"
PY=/usr/bin/python3

expect_status "import --help" 0 "$ELDR" import --help
expect_out "import --help prints usage" "usage: eldr import"

# ---- good fixtures: import, then info reads the result back -------------
have_info=0
"$ELDR" info --help >/dev/null 2>&1 && have_info=1
# the geometry that bare count files (.npy, capture frames) do not carry:
# the fixtures' (make_import_fixtures.py: L = 3, E = 8, top-2)
geometry_of() {
    case "$1" in *.npy|*.frames) echo "--top-k 2 --layers 3 --experts 8" ;; esac
}
for f in "$FIX"/good*; do
    b=$(basename "$f")
    # shellcheck disable=SC2046
    expect_status "import $b" 0 "$ELDR" import "$f" $(geometry_of "$b") -o "$TMP/$b.h5"
    expect_out "import $b summary" "^  requests +[0-9]+"
    if [ "$have_info" = 1 ]; then
        expect_status "info of imported $b" 0 "$ELDR" info "$TMP/$b.h5"
        expect_out "info of imported $b is valid" "valid"
    fi
done

expect_status "import --json" 0 "$ELDR" import "$FIX/good_savez.npz" -o "$TMP/j.h5" --json
expect_out "import --json requests" '"requests": 5'
expect_out "import --json format" '"format": "npz"'
if [ "$have_info" = 1 ]; then
    expect_status "info --json of import" 0 "$ELDR" info "$TMP/j.h5" --json
    expect_out "info --json sees the requests" '"requests": 5'
    expect_out "info --json sees the model" '"model": "toy-moe"'
fi

# --format overrides the extension
cp "$FIX/good_minimal.jsonl" "$TMP/lines.txt"
expect_status "import --format jsonl" 0 "$ELDR" import "$TMP/lines.txt" --format jsonl -o "$TMP/m.h5"
expect_fail2 "import unknown extension" "lines.txt.*--format" "$ELDR" import "$TMP/lines.txt" -o "$TMP/m2.h5"
expect_fail2 "import jsonl as npz" "lines.txt.*not a readable" \
    "$ELDR" import "$TMP/lines.txt" --format npz -o "$TMP/m2.h5"

# ---- bad fixtures: exit 2, one line naming the file, no output ----------
for f in "$FIX"/bad*; do
    b=$(basename "$f")
    # shellcheck disable=SC2046
    expect_fail2 "import $b fails" "^eldr import: .*$b: " "$ELDR" import "$f" $(geometry_of "$b") \
        -o "$TMP/bad.h5"
    if [ -e "$TMP/bad.h5" ] || ls "$TMP"/bad.h5.* >/dev/null 2>&1; then
        notok "import $b leaves no output"
    else
        ok "import $b leaves no output"
    fi
done
# a failed import leaves an existing output untouched
cp "$TMP/j.h5" "$TMP/keep.h5"
"$ELDR" import "$FIX/bad_dup_ids.npz" -o "$TMP/keep.h5" 2>/dev/null
if cmp -s "$TMP/j.h5" "$TMP/keep.h5"; then ok "failed import keeps the old output"; else
    notok "failed import keeps the old output"; fi

# ---- usage -----------------------------------------------------------------
expect_fail2 "import without args" "missing the input" "$ELDR" import
expect_fail2 "import without -o" "missing -o" "$ELDR" import "$FIX/good_savez.npz"
expect_fail2 "import unknown option" "unknown option" "$ELDR" import --bogus "$FIX/good_savez.npz"
expect_fail2 "import bad --format" "format 'csv'" "$ELDR" import "$FIX/good_savez.npz" --format csv -o "$TMP/x.h5"
expect_fail2 "import two inputs" "one input" "$ELDR" import "$FIX/good_savez.npz" "$FIX/good.jsonl" -o "$TMP/x.h5"
expect_fail2 "import missing file" "nope.npz" "$ELDR" import "$TMP/nope.npz" -o "$TMP/x.h5"
expect_fail2 "import into a missing directory" "does not exist" "$ELDR" import "$FIX/good_savez.npz" -o "$TMP/no/dir/x.h5"
expect_fail2 "import jsonl from a pipe" "not a regular file" \
    sh -c "cat '$FIX/good.jsonl' | '$ELDR' import /dev/stdin --format jsonl -o '$TMP/p.h5'"
cp "$FIX/good.jsonl" "$TMP/self.jsonl"
expect_fail2 "import over its input" "overwrite the input" "$ELDR" import "$TMP/self.jsonl" -o "$TMP/self.jsonl"

# ---- the real trace, exported by numpy, imported, compared by h5py ----------
if [ -f "$DATA" ] && $PY -c 'import numpy, h5py' 2>/dev/null; then
    $PY - "$DATA" "$TMP" <<'EOF'
import json, sys
import h5py, numpy as np
src, tmp = sys.argv[1], sys.argv[2]
with h5py.File(src, "r") as f:
    a = f.attrs
    model = a["model"].decode() if isinstance(a["model"], bytes) else str(a["model"])
    k = int(a["top_k"])
    ids = [x.decode() if isinstance(x, bytes) else str(x) for x in f["request_id"][:]]
    names = [x.decode() if isinstance(x, bytes) else str(x) for x in f["label_names"][:]]
    label = f["label"][:]
    pre, dec = f["prefill_counts"][:], f["decode_counts"][:]
    pt, dt, gp = f["prompt_tokens"][:], f["decode_tokens"][:], f["gate_prob"][:]
meta = {"format": "eldr-calibration-v1", "model": model, "top_k": k,
        "output_tokens": (dt.astype(int) + 1).tolist(), "label_names": names}
# the reference's rules: ids are SHA-256 hex, and gate sums equal the
# prompt tokens (this data keeps only the top-4 probabilities: rescale)
import hashlib
sha_ids = np.array([hashlib.sha256(i.encode()).hexdigest() for i in ids])
gp_full = (gp * (pt[:, None, None] / gp.sum(-1, keepdims=True))).astype(np.float32)
np.savez(tmp + "/real_expect.npz", request_id=sha_ids.astype("S"), gate_prob=gp_full)
np.savez_compressed(tmp + "/real.npz", request_ids=sha_ids, prefill_counts=pre,
                    decode_counts=dec.astype(np.int32), gate_probabilities=gp_full,
                    prompt_tokens=pt, decode_tokens=dt,
                    labels=np.array([names[i] for i in label]), metadata=np.array(json.dumps(meta)))
L, E = pre.shape[1], pre.shape[2]
with open(tmp + "/real.jsonl", "w") as f:
    f.write(json.dumps({"format": "eldr-trace-jsonl", "version": 1, "model": model, "layers": L,
                        "experts": E, "top_k": k, "label_names": names}) + "\n")
    for r in range(len(ids)):
        sp = lambda c: [[int(l), int(e), int(c[l, e])] for l, e in zip(*np.nonzero(c))]
        f.write(json.dumps({"request_id": ids[r], "prompt_tokens": int(pt[r]), "prefill": sp(pre[r]),
                            "decode_tokens": int(dt[r]), "decode": dec[r].tolist(),
                            "label": int(label[r]),
                            "gate_prob": [[float(x) for x in row] for row in gp[r]]}) + "\n")
EOF
    for form in npz jsonl; do
        expect_status "import real.$form" 0 "$ELDR" import "$TMP/real.$form" -o "$TMP/real_$form.h5"
        $PY - "$DATA" "$TMP/real_$form.h5" "$form" "$TMP/real_expect.npz" >"$TMP/cmp" 2>&1 <<'EOF'
import sys
import h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
want = dict(np.load(sys.argv[4])) if sys.argv[3] == "npz" else {}
for key in ("prefill_counts", "decode_counts", "prompt_tokens", "decode_tokens", "gate_prob",
            "label", "request_id", "label_names"):
    if not np.array_equal(want[key] if key in want else a[key][:], b[key][:]):
        sys.exit("dataset %s differs" % key)
for key in ("layers", "experts", "top_k"):
    if int(a.attrs[key]) != int(b.attrs[key]):
        sys.exit("attribute %s differs" % key)
print("same")
EOF
        if grep -q '^same$' "$TMP/cmp"; then ok "real.$form round trip equals the source (h5py)"; else
            notok "real.$form round trip equals the source (h5py)" "$(cat "$TMP/cmp")"; fi
    done
else
    echo "# skipped the real-data round trip (no $DATA or no numpy/h5py)"
fi
