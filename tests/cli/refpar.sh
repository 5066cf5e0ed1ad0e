#!/bin/sh
# tests/cli/refpar.sh - reference parity at the doors: files written the
# way the reference implementation (casys-kaist/ELDR) writes them, by an
# independent numpy model of it (tests/fixtures/ref_peer.py, run at test
# time into a temporary directory), open in eldr on the first try; and
# every fit eldr exports is accepted by that model of their loader.
#   - their capture .npz opens in info, rho, fit, sim and dash (in memory);
#   - their fit JSON (k = m = K, no top-k; count, count_idf, gate_prob_all)
#     opens in info and sim -m, imports with --top-k/--trace or unknown;
#   - their fitter's .npy and their proxy's frames import with --top-k;
#   - eldr's exports of count (all layers), count_idf and gate_prob pass
#     their loader's checks; sqrt_count, binary and count on a subset of
#     layers are refused with one line naming the variant, writing nothing.
. "$ROOT/tests/cli/lib.sh"
PY=/usr/bin/python3
PEER="$ROOT/tests/fixtures/ref_peer.py"

if ! $PY -c 'import numpy' 2>/dev/null; then
    echo "# skipped: /usr/bin/python3 has no numpy"
    exit 0
fi
R="$TMP/ref"
mkdir -p "$R"
$PY "$PEER" capture "$R" --n 160 --layers 6 --experts 16 --top-k 2 --seed 3
for v in count count_idf gate_prob_all; do
    $PY "$PEER" fit "$R/capture.npz" "$R/fit_$v.json" --variant $v -k 4 --mask 1,2,4
done

# ---- their capture, wherever a trace is accepted ---------------------------
expect_status "info of their capture.npz" 0 "$ELDR" info "$R/capture.npz"
expect_out "info: their capture is valid" "validation valid"
expect_out "info: their geometry" "6 layers x 16 experts, top-2"
expect_out "info: decode = output_tokens - 1 for all" "decode +1120 total, mean 7.0, min 7, max 7"
expect_status "rho of their capture.npz" 0 "$ELDR" rho "$R/capture.npz"
expect_status "fit on their capture.npz" 0 "$ELDR" fit "$R/capture.npz" -k 4 -o "$R/eldr.h5"
expect_status "info of that fit" 0 "$ELDR" info "$R/eldr.h5"
expect_out "the fit records the capture's format" "calib format eldr-calibration-v1"
expect_status "dash on their capture.npz" 0 "$ELDR" dash "$R/capture.npz" -m "$R/fit_count_idf.json" \
    --frame "$R/frame.txt" --view overview
expect_in "dash drew the capture" "$R/frame.txt" "capture.npz"

# ---- their fit JSON, wherever a model is accepted ----------------------------
for v in count count_idf gate_prob_all; do
    expect_status "info of their fit_$v.json" 0 "$ELDR" info "$R/fit_$v.json"
    expect_out "info: fit_$v.json has K = 4" "clusters +K = 4"
    expect_out "info: fit_$v.json top-k unknown" "top-k unknown"
    expect_status "sim their capture -m their fit_$v.json" 0 "$ELDR" sim "$R/capture.npz" \
        -m "$R/fit_$v.json" --policy eldr,jsq --rate 20 --json
    expect_out "sim with fit_$v.json served by eldr" '"name": "eldr"'
done
expect_status "info --json shows the provenance" 0 "$ELDR" info "$R/fit_count_idf.json" --json
expect_out "provenance: model" '"model_name": "toy-moe"'
expect_out "provenance: calibration format" '"calibration_format": "eldr-calibration-v1"'
expect_out "provenance: fit_peak_rho" '"rho": 0.5'
expect_out "provenance: training_sha256" "\"calib_sha256\": \"$(sha256sum "$R/capture.npz" | cut -c1-64)\""

expect_status "model import of their fit: top-k unknown" 0 \
    "$ELDR" model import "$R/fit_count_idf.json" -o "$R/m0.h5"
expect_out "top-k stays unknown" "top-k unknown"
expect_status "model import --trace takes its top-k" 0 \
    "$ELDR" model import "$R/fit_count_idf.json" --trace "$R/capture.npz" -o "$R/m1.h5"
expect_out "top-k from the trace" "top-2"
expect_status "model import --top-k" 0 \
    "$ELDR" model import "$R/fit_gate_prob_all.json" --top-k 2 -o "$R/m2.h5"
expect_out "gate_prob_all imports as gate_prob" "variant gate_prob, 3 of 6 layers, e = 16, top-2"
expect_status "sim with the imported top-2 model" 0 "$ELDR" sim "$R/capture.npz" -m "$R/m1.h5" \
    --policy eldr --rate 20
expect_fail2 "a known top-k that differs is refused" "top-3 does not match the trace's 6 x 16 top-2" \
    sh -c "'$ELDR' model import '$R/fit_count.json' --top-k 3 -o '$R/m3.h5' >/dev/null &&
           '$ELDR' sim '$R/capture.npz' -m '$R/m3.h5' --policy eldr --rate 20"
expect_fail2 "--top-k and --trace together" "use one" \
    "$ELDR" model import "$R/fit_count.json" --top-k 2 --trace "$R/capture.npz" -o "$R/x.h5"

# ---- their fitter's other inputs ---------------------------------------------------
expect_status "import their counts.npy" 0 "$ELDR" import "$R/counts.npy" --top-k 2 -o "$R/npy.h5"
expect_out "npy rows" "^  requests +160"
expect_fail2 "npy without --top-k" "holds no top-k" "$ELDR" import "$R/counts.npy" -o "$R/x.h5"
expect_fail2 "npy where a trace is expected asks for an import" "eldr import .*--top-k" \
    "$ELDR" info "$R/counts.npy"
expect_status "import their capture frames" 0 "$ELDR" import "$R/capture.frames" \
    --layers 6 --experts 16 --top-k 2 -o "$R/frames.h5"
expect_fail2 "frames with the wrong geometry" "length 192, expected L\\*E\\*2 = 160" \
    "$ELDR" import "$R/capture.frames" --layers 5 --experts 16 --top-k 2 -o "$R/x.h5"
expect_status "fit on the frames (count, all layers)" 0 "$ELDR" fit "$R/frames.h5" -k 4 \
    --variant count --layers all -o "$R/frames_fit.h5"
$PY - "$R/npy.h5" "$R/frames.h5" "$R/capture.npz" >"$TMP/cmp" 2>&1 <<'EOF'
import sys
import h5py, numpy as np
cap = np.load(sys.argv[3])
for path in sys.argv[1:3]:
    with h5py.File(path, "r") as f:
        if not np.array_equal(f["prefill_counts"][:], cap["prefill_counts"]):
            sys.exit("%s: prefill_counts differ" % path)
        if not np.array_equal(f["prompt_tokens"][:], cap["prompt_tokens"]):
            sys.exit("%s: prompt_tokens differ" % path)
print("same")
EOF
if grep -q '^same$' "$TMP/cmp"; then ok "npy and frames hold the capture's counts and prompt lengths"; else
    notok "npy and frames hold the capture's counts and prompt lengths" "$(cat "$TMP/cmp")"; fi

# ---- eldr's exports pass their loader ------------------------------------------
export_accepted() { # NAME FIT-ARGS...
    name=$1; shift
    "$ELDR" fit "$R/capture.npz" -k 4 -o "$R/$name.h5" "$@" >/dev/null 2>"$TMP/err" &&
        "$ELDR" model export "$R/$name.h5" -o "$R/$name.json" >/dev/null 2>>"$TMP/err"
    $PY "$PEER" load "$R/$name.json" >"$TMP/out" 2>&1
    if grep -q '^accepted 4 ' "$TMP/out"; then ok "their loader accepts eldr's $name export"; else
        notok "their loader accepts eldr's $name export" "$(cat "$TMP/err" "$TMP/out")"; fi
}
export_accepted count_all --variant count --layers all
export_accepted count_idf_auto --variant count_idf
export_accepted count_idf_list --variant count_idf --layers 0,3,5
export_accepted gate_prob_auto --variant gate_prob
export_accepted gate_prob_all_name --variant gate_prob_all --layers all
export_accepted count_idf_unbalanced --variant count_idf --unbalanced
$PY - "$R/count_idf_auto.json" "$R/count_idf_auto.h5" >"$TMP/cmp" 2>&1 <<'EOF'
import json, sys
import h5py, numpy as np
d = json.load(open(sys.argv[1]))
with h5py.File(sys.argv[2], "r") as f:
    c = f["centroids"][:]
    mask = f["layer_mask"][:].tolist()
    idf = f["idf"][:].reshape(-1)
assert d["k"] == d["m"] == 4 == len(d["centroids"]), "k, m"
assert d["L"] == 6 and d["e"] == 16 and d["top_k"] == 2, "geometry"
assert d["sig_dtype"] == "<i2" and d["variant"] == "count_idf", "dtype"
assert d["layer_mask"] == mask, "mask"
assert np.array_equal(np.asarray(d["centroids"], np.float32), c), "centroids"
assert np.array_equal(np.asarray(d["sig_idf"], np.float32), idf), "idf"
assert d["algo"] == "kmbal" and d["layer_select"] == "forward_greedy", "provenance"
assert d["calibration_format"] == "eldr-calibration-v1" and len(d["training_sha256"]) == 64
print("same")
EOF
if grep -q '^same$' "$TMP/cmp"; then ok "the export carries the model bit for bit under their keys"; else
    notok "the export carries the model bit for bit under their keys" "$(cat "$TMP/cmp")"; fi
expect_status "the export opens back as a model" 0 "$ELDR" sim "$R/capture.npz" \
    -m "$R/count_idf_auto.json" --policy eldr --rate 20

export_refused() { # NAME PATTERN FIT-ARGS...
    name=$1; pat=$2; shift 2
    "$ELDR" fit "$R/capture.npz" -k 4 -o "$R/$name.h5" "$@" >/dev/null 2>&1
    expect_fail2 "export of $name is refused" "$pat" \
        "$ELDR" model export "$R/$name.h5" -o "$R/$name.json"
    if [ -e "$R/$name.json" ]; then notok "refused $name export writes nothing"; else
        ok "refused $name export writes nothing"; fi
}
export_refused sqrt_count "variant sqrt_count: the reference fit JSON cannot express it" \
    --variant sqrt_count
export_refused binary "variant binary" --variant binary --layers all
export_refused count_subset "variant count over 2 of 6 layers" --variant count --layers 1,4
# eldr's own JSON of any variant (PUT /v1/model takes it): --any-variant
expect_status "export --any-variant writes sqrt_count" 0 \
    "$ELDR" model export "$R/sqrt_count.h5" -o "$R/sqrt_any.json" --any-variant
expect_status "eldr reads it back" 0 "$ELDR" info "$R/sqrt_any.json"
expect_out "as sqrt_count" "recipe +sqrt_count"
$PY "$PEER" load "$R/sqrt_any.json" >"$TMP/out" 2>&1
expect_out "their loader refuses it, naming the variant" "^refused: variant 'sqrt_count'"
