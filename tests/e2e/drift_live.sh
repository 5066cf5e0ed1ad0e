#!/bin/sh
# tests/e2e/drift_live.sh - drift that alarms only on drift, against a real
# eldrd (issue 30, item 2). A K = 4 model fitted on a trace of 3 domains
# (the issue's case: its balanced cluster sizes, 0.25 each, are not what
# the nearest centroid gives those rows) routes its own calibration rows:
# the window's TVD against the model's stored nearest-centroid shares is
# under the noise threshold (0.000: the same signatures), while the old
# sizes baseline would have read about 0.16 and alarmed. A push restarts
# the window: no signatures, null (never NaN) numbers, and the dashboard
# says "no signatures yet" at 80x24. Rows of one domain only then pass
# the threshold (share_tvd_exceeded, "DRIFT" on the frame, three
# decimals). A model file without the nearest_share dataset (an older
# eldr) falls back to the sizes and says so. An online refit carries its
# own baseline. Time bound: every curl and replay is bounded; ~5 s.
. "$ROOT/tests/cli/lib.sh"
. "$ROOT/tests/e2e/daemon.inc"
prereqs "drift live"
[ -x "$ELDR" ] || { notok "drift live prerequisites" "need $ELDR"; exit 0; }

"$ELDR" gen -o "$TMP/g.h5" --requests 600 --layers 8 --experts 16 --domains 3 --seed 3 \
    --arrival-rate 2000 >/dev/null 2>&1
"$ELDR" fit "$TMP/g.h5" -k 4 -o "$TMP/m.h5" --seed 1 --layers all >/dev/null 2>&1
"$ELDR" model export "$TMP/m.h5" -o "$TMP/m.json" --any-variant >/dev/null 2>&1
# one domain only (label 0), and the model as an older eldr wrote it
$PY - "$TMP/g.h5" "$TMP/one.h5" "$TMP/m.h5" "$TMP/old.h5" <<'PYEOF'
import shutil, sys, h5py, numpy as np
src, dst, model, old = sys.argv[1:5]
with h5py.File(src, "r") as f, h5py.File(dst, "w") as g:
    rows = np.flatnonzero(f["label"][:] == 0)
    n = f["label"].shape[0]
    for k, v in f.attrs.items():
        g.attrs[k] = v
    for name, d in f.items():
        g.create_dataset(name, data=d[:][rows] if d.shape and d.shape[0] == n and name != "label_names" else d[:])
shutil.copy(model, old)
with h5py.File(old, "r+") as m:
    del m["nearest_share"]
PYEOF
check "fixtures: 3-domain trace, K = 4 model (HDF5, JSON), one-domain rows, an old model" \
    test -s "$TMP/m.h5" -a -s "$TMP/m.json" -a -s "$TMP/one.h5" -a -s "$TMP/old.h5"
check "the model stores its calibration rows' nearest-centroid shares" $PY -c '
import h5py, sys
m = h5py.File(sys.argv[1], "r"); s = m["nearest_share"][:]
assert len(s) == 4 and abs(s.sum() - 1) < 1e-9 and abs(s - 0.25).max() > 0.02, s
' "$TMP/m.h5"

start driftlive -m "$TMP/m.h5" --workers a,b,c,d --quiet || exit 0
drift() { # NAME: the snapshot's drift object to $TMP/NAME.json
    curl -s --max-time 10 -o "$TMP/$1.snap" "$URL/v1/snapshot?decisions=0"
    $PY -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))["drift"], open(sys.argv[2], "w"))' \
        "$TMP/$1.snap" "$TMP/$1.json"
}

# 1. the model's own calibration rows: no alarm
expect_status "replay the calibration rows" 0 "$ELDR" replay "$TMP/g.h5" --to "$URL" --speed 4 \
    --tpot-ms 1 --max-seconds 30
drift calib
check "calibration rows: TVD under the threshold, 0.000 against the stored shares" jq_py "$TMP/calib.json" \
    'j["window"] == 600 and j["baseline_source"] == "nearest" and j["share_tvd"] < 0.0005 and j["share_tvd"] < j["share_tvd_threshold"] and j["share_tvd_exceeded"] is False'
check "calibration rows: the old sizes baseline would have alarmed (the issue's false alarm)" $PY -c '
import h5py, json, sys
j = json.load(open(sys.argv[1])); sz = h5py.File(sys.argv[2], "r")["sizes"][:]
tvd = 0.5 * sum(abs(a - b / sz.sum()) for a, b in zip(j["share"], sz))
assert tvd > j["share_tvd_threshold"] and tvd > 0.05, (tvd, j)
' "$TMP/calib.json" "$TMP/m.h5"
check "threshold: the 99% noise level of 600 signatures, between 0.01 and 0.2" jq_py "$TMP/calib.json" \
    '0.01 < j["share_tvd_threshold"] < 0.2'
expect_status "frame: drift view at 80x24" 0 "$ELDR" dash --attach "$URL" --frame - --view drift \
    --width 80 --height 24
cp "$TMP/out" "$TMP/f_calib.txt"
check "frame: TVD with three decimals beside the threshold, within noise, no nan" sh -c "
grep -Eq 'drift: TVD 0\.00[0-9] <= threshold 0\.[0-9]{3} \(99% noise, n 600\): within noise' '$TMP/f_calib.txt' &&
grep -q 'baseline: calibration nearest-centroid shares' '$TMP/f_calib.txt' && ! grep -qi nan '$TMP/f_calib.txt'"

# 2. a push restarts the window: nothing measured, nothing NaN
s=$(curl -s --max-time 10 -o "$TMP/put.out" -w '%{http_code}' -X PUT --data-binary "@$TMP/m.json" "$URL/v1/model")
check "push the model (PUT /v1/model, JSON with nearest_share)" test "$s" = 200
drift pushed
check "after the push: empty window, null numbers, the pushed model's baseline" jq_py "$TMP/pushed.json" \
    'j["window"] == 0 and j["share_tvd"] is None and j["share_tvd_threshold"] is None and j["share_tvd_exceeded"] is None and j["baseline_source"] == "nearest" and j["model_generation"] == 2'
check "after the push: no NaN anywhere in the drift JSON or the snapshot" sh -c "
! grep -qi nan '$TMP/pushed.json' && ! grep -qi nan '$TMP/pushed.snap'"
curl -s --max-time 10 -o "$TMP/saved.json" "$URL/v1/snapshot?centroids=1&decisions=0"
s=$(curl -s --max-time 10 -o "$TMP/put2.out" -w '%{http_code}' -X PUT --data-binary "@$TMP/saved.json" "$URL/v1/model")
drift pushed2
check "push a saved snapshot back (PUT /v1/model, ?centroids=1)" test "$s" = 200
check "a saved snapshot pushed back: generation 3, baseline nearest, same shares" $PY -c '
import json, sys
j = json.load(open(sys.argv[1])); a = json.load(open(sys.argv[2]))
assert j["model_generation"] == 3 and j["baseline_source"] == "nearest", j
assert max(abs(x - y) for x, y in zip(j["calibration_share"], a["calibration_share"])) < 1e-8
' "$TMP/pushed2.json" "$TMP/pushed.json"
expect_status "frame after the push" 0 "$ELDR" dash --attach "$URL" --frame - --view drift \
    --width 80 --height 24
check "frame after the push: 'no signatures yet', no nan" sh -c "
grep -q 'drift: no signatures yet' '$TMP/out' && ! grep -qi nan '$TMP/out'"

# 3. one domain only: drift
expect_status "replay rows of one domain only" 0 "$ELDR" replay "$TMP/one.h5" --to "$URL" --speed 4 \
    --tpot-ms 1 --max-seconds 30
drift one
check "one domain: TVD passes the threshold" jq_py "$TMP/one.json" \
    'j["window"] > 150 and j["share_tvd"] > j["share_tvd_threshold"] and j["share_tvd_exceeded"] is True'
expect_status "frame: one domain at 80x24" 0 "$ELDR" dash --attach "$URL" --frame - --view drift \
    --width 80 --height 24
cp "$TMP/out" "$TMP/f_one.txt"
check "frame: the JSON's TVD and threshold with three decimals, DRIFT" $PY -c '
import json, sys
j = json.load(open(sys.argv[1])); f = open(sys.argv[2]).read()
want = "drift: TVD %.3f > threshold %.3f (99%% noise, n %d): DRIFT" % (j["share_tvd"], j["share_tvd_threshold"], j["window"])
assert want in f, (want, f)
assert "nan" not in f.lower()
' "$TMP/one.json" "$TMP/f_one.txt"
stop

# 4. a model from an older eldr: the sizes, said so
start driftold -m "$TMP/old.h5" --workers a,b,c,d --quiet || exit 0
expect_status "old model: replay the calibration rows" 0 "$ELDR" replay "$TMP/g.h5" --to "$URL" \
    --speed 4 --tpot-ms 1 --max-seconds 30
drift old
check "old model: baseline balanced sizes, named" jq_py "$TMP/old.json" \
    'j["baseline_source"] == "sizes" and j["baseline"] == "balanced sizes (model predates calibration shares)" and j["calibration_share"] == [0.25, 0.25, 0.25, 0.25]'
expect_status "old model: frame" 0 "$ELDR" dash --attach "$URL" --frame - --view drift --width 80 --height 24
check "old model: the frame names the fallback baseline" grep -q 'baseline: balanced sizes (model predates calibration shares)' "$TMP/out"
stop

# 5. an online refit measures its own baseline over its window
# (the first refit waits for one full --refit-window: 1 s of traffic)
start driftrefit -m "$TMP/m.h5" --workers a,b,c,d --quiet --refit-every 0.5 --refit-window 1 || exit 0
expect_status "refit: route one domain for 1.3 s" 0 "$ELDR" replay "$TMP/one.h5" --to "$URL" \
    --rate 150 --tpot-ms 1 --max-seconds 30
i=0
while [ $i -lt 50 ]; do
    curl -s --max-time 5 -o "$TMP/snap.json" "$URL/v1/snapshot"
    jq_py "$TMP/snap.json" 'j["drift"]["model_generation"] >= 2' && break
    sleep 0.1; i=$((i + 1))
done
check "refit: a new generation with its own nearest shares, not the calibration's" $PY -c '
import json, sys, h5py
j = json.load(open(sys.argv[1]))["drift"]; cal = h5py.File(sys.argv[2], "r")["nearest_share"][:]
assert j["model_generation"] >= 2 and j["baseline_source"] == "nearest", j
assert abs(sum(j["calibration_share"]) - 1) < 1e-6, j["calibration_share"]  # 9 digits each
assert max(abs(a - b) for a, b in zip(j["calibration_share"], cal)) > 0.05, (j["calibration_share"], list(cal))
' "$TMP/snap.json" "$TMP/m.h5"
stop
