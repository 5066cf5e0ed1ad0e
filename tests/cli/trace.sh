#!/bin/sh
# tests/cli/trace.sh - `eldr info` on the real trace, on a trace written by an
# independent writer (h5py), and on corrupt files: exit 2 with exactly one
# stderr line naming the file and the dataset.
. "$ROOT/tests/cli/lib.sh"
PY=/usr/bin/python3

expect_status "info --help exits 0" 0 "$ELDR" info --help
expect_out "info --help prints usage" "^usage: eldr info FILE"
expect_fail2 "info without FILE" "expected one FILE" "$ELDR" info
expect_fail2 "info with an unknown option" "unknown option" "$ELDR" info --frobnicate "$DATA"
expect_fail2 "info on a missing file" "nope.h5: No such file" "$ELDR" info "$TMP/nope.h5"

if [ -f "$DATA" ]; then
    expect_status "info on the real trace" 0 "$ELDR" info "$DATA"
    expect_out "real trace geometry" "24 layers x 32 experts, top-4"
    expect_out "real trace requests" "^requests +449$"
    expect_out "real trace labels" "mmlu_pro +52 +11.6%"
    expect_out "real trace verdict" "^validation valid$"
    expect_status "info --json on the real trace" 0 "$ELDR" info --json "$DATA"
    if $PY -c 'import json,sys; d=json.load(sys.stdin); assert d["requests"] == 449 and d["valid"] and len(d["labels"]) == 6 and d["decode_tokens"]["total"] == 133833, d' <"$TMP/out" 2>"$TMP/err"; then
        ok "info --json parses and agrees"
    else
        notok "info --json parses and agrees" "$(head -c 400 "$TMP/err")"
    fi
else
    ok "# SKIP real trace absent ($DATA)"
fi

# A small valid trace written by h5py, then corrupt copies of it.
if ! $PY -c 'import h5py, numpy' 2>/dev/null; then
    ok "# SKIP /usr/bin/python3 lacks h5py"
    exit 0
fi
$PY - "$TMP" <<'EOF' || echo "not ok - fixture writer failed"
import sys, h5py, numpy as np
d = sys.argv[1]
rng = np.random.default_rng(5)
N, L, E, k = 30, 4, 16, 2
def counts(tokens):
    c = np.zeros((N, L, E), np.uint16)
    for r in range(N):
        for t in range(tokens[r]):
            for l in range(L):
                c[r, l, rng.choice(E, k, replace=False)] += 1
    return c
prompt = rng.integers(1, 20, N).astype(np.int32)
decode = rng.integers(0, 10, N).astype(np.int32)
def write(name, edit=None):
    with h5py.File(f"{d}/{name}.h5", "w") as f:
        f.attrs.update(format="eldr-trace", version=1, model="h5py-fixture",
                       layers=L, experts=E, top_k=k)
        f["prefill_counts"] = pc
        f["prompt_tokens"] = prompt
        f["decode_counts"] = dc
        f["decode_tokens"] = decode
        f["gate_prob"] = rng.random((N, L, E), dtype=np.float32)
        f["label"] = rng.integers(0, 3, N).astype(np.int32)
        f["label_names"] = np.array(["a", "b", "c"], dtype=h5py.string_dtype())
        f["subject"] = np.zeros(N, np.int8)          # unknown: ignored
        if edit:
            edit(f)
pc, dc = counts(prompt), counts(decode)
write("good")
def conservation(f):
    x = f["prefill_counts"][...]; x[12, 3, 0] += 1; f["prefill_counts"][...] = x
write("conservation", conservation)
def label(f):
    x = f["label"][...]; x[7] = 9; f["label"][...] = x
write("label", label)
def nan(f):
    x = f["gate_prob"][...]; x[4, 1, 2] = np.nan; f["gate_prob"][...] = x
write("nan", nan)
write("format", lambda f: f.attrs.__setitem__("format", "eldr-model-x"))
write("version", lambda f: f.attrs.__setitem__("version", 7))
write("missing", lambda f: f.__delitem__("prompt_tokens"))
write("geometry", lambda f: f.attrs.__setitem__("experts", 17))
def short(f):
    del f["decode_tokens"]; f["decode_tokens"] = decode[:-1]
write("short", short)
EOF
G="$TMP/good.h5"
expect_status "info on an h5py-written trace" 0 "$ELDR" info "$G"
expect_out "h5py trace geometry" "4 layers x 16 experts, top-2"
expect_out "h5py trace optional datasets" "optional +decode_counts decode_tokens gate_prob label label_names$"

size=$(wc -c <"$G")
head -c $((size / 2)) "$G" >"$TMP/truncated.h5"
printf 'not hdf5 at all\n' >"$TMP/text.h5"

expect_fail2 "truncated file" "truncated.h5: .*truncated" "$ELDR" info "$TMP/truncated.h5"
expect_fail2 "not an HDF5 file" "text.h5: not an HDF5 file" "$ELDR" info "$TMP/text.h5"
expect_fail2 "wrong format" "format.h5: format is 'eldr-model-x', expected 'eldr-trace'" \
    "$ELDR" info "$TMP/format.h5"
expect_fail2 "wrong version" "version.h5: eldr-trace version 7 not supported" \
    "$ELDR" info "$TMP/version.h5"
expect_fail2 "required dataset missing" "missing.h5: dataset prompt_tokens missing" \
    "$ELDR" info "$TMP/missing.h5"
expect_fail2 "geometry attribute vs shape" "geometry.h5: dataset prefill_counts has shape \[30, 4, 16\], expected \[30, 4, 17\]" \
    "$ELDR" info "$TMP/geometry.h5"
expect_fail2 "per-request length" "short.h5: dataset decode_tokens has shape \[29\], expected \[30\]" \
    "$ELDR" info "$TMP/short.h5"
expect_fail2 "conservation broken" "conservation.h5: prefill_counts row 12 layer 3: counts sum to [0-9]+, expected prompt_tokens\*top_k = [0-9]+" \
    "$ELDR" info "$TMP/conservation.h5"
expect_out "invalid trace still shows its geometry" "^validation INVALID"
expect_fail2 "label out of range" "label.h5: label row 7: 9 outside label_names \[0, 3\)" \
    "$ELDR" info "$TMP/label.h5"
expect_fail2 "NaN gate" "nan.h5: gate_prob row 4 layer 1 expert 2: NaN" "$ELDR" info "$TMP/nan.h5"
expect_fail2 "invalid trace --json" "conservation.h5: prefill_counts row 12" \
    "$ELDR" info --json "$TMP/conservation.h5"
if $PY -c 'import json,sys; d=json.load(sys.stdin); assert d["valid"] is False and "row 12" in d["error"]' <"$TMP/out" 2>"$TMP/err"; then
    ok "invalid trace --json says valid: false"
else
    notok "invalid trace --json says valid: false" "$(head -c 400 "$TMP/err")"
fi
