#!/usr/bin/python3
"""make_samples.py - the small example files the README's tour opens.

    /usr/bin/python3 samples/make_samples.py [BIN]     (BIN: default bin)

Writes, from the repository root, with the built `eldr`:

- samples/capture.npz: a calibration capture in the reference
  implementation's format (eldr-calibration-v1), written the authors' way:
  np.savez_compressed with exactly their seven entries (request_ids <U64
  SHA-256 hex, int32 prefill/decode counts, float32 gate_probabilities
  summing to prompt_tokens per layer, int64 token counts, a 0-d metadata
  JSON string whose one output_tokens is decode_tokens + 1). The routing
  comes from `eldr gen` (200 requests, 8 layers x 32 experts, top-4).
- samples/fit.json: the reference's fit JSON for that capture (K = 4,
  count_idf), written as their fit script does: json.dump(indent=2) plus a
  newline, their keys only. The centroids are eldr's fit (`eldr fit`, then
  `eldr model export`), re-dumped here, on a random half of the capture
  (--calib-split 0.5, split seed 1): the rows `eldr sim` calibrates on by
  default, so the tour's `eldr sim samples/capture.npz -m samples/fit.json`
  simulates the other, held-out half.
- samples/drift.h5: a trace whose domain mix drifts (`eldr gen --drift 1`),
  on which eldr-online refits as simulated time passes.
- samples/profile.csv: a measured-style decode step profile for `eldr
  costfit` (tests/fixtures/costfit/make_profile.py's, copied).

Each is well under 1 MB. Deterministic: the same files on every run.
"""
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

import h5py
import numpy as np

BIN = sys.argv[1] if len(sys.argv) > 1 else "bin"
ELDR = os.path.join(BIN, "eldr")


def eldr(*args):
    subprocess.run([ELDR, *args], check=True, stdout=subprocess.DEVNULL)


class FixedClock:
    """Zip entries carry a timestamp; a fixed one makes the capture
    byte-identical on every run."""

    def __enter__(self):
        self.saved = time.localtime
        time.localtime = lambda *a: time.struct_time((2024, 1, 1, 0, 0, 0, 0, 1, 0))
        self.zsaved = zipfile.ZipInfo.__init__

        def init(zi, filename="NoName", date_time=(2024, 1, 1, 0, 0, 0)):
            self.zsaved(zi, filename, (2024, 1, 1, 0, 0, 0))
        zipfile.ZipInfo.__init__ = init
        return self

    def __exit__(self, *exc):
        time.localtime = self.saved
        zipfile.ZipInfo.__init__ = self.zsaved


def capture(tmp):
    t = os.path.join(tmp, "cap.h5")
    eldr("gen", "-o", t, "--requests", "200", "--layers", "8", "--experts", "32",
         "--top-k", "4", "--domains", "4", "--prompt-tokens", "48", "--decode-tokens", "31",
         "--length-spread", "0", "--gate-prob", "--seed", "5")
    f = h5py.File(t, "r")
    n = f["prompt_tokens"].shape[0]
    dec = f["decode_tokens"][:].astype(np.int64)
    assert (dec == dec[0]).all(), "one output length for the whole capture"
    ids = np.array([hashlib.sha256(("sample prompt %d" % i).encode()).hexdigest()
                    for i in range(n)], dtype="<U64")
    meta = {"model": "synthetic-8x32-top4", "training_sha256": hashlib.sha256(b"eldr samples").hexdigest(),
            "output_tokens": int(dec[0]) + 1, "temperature": 0.0, "seed": 5, "top_k": 4,
            "format": "eldr-calibration-v1"}
    arrays = {
        "request_ids": ids,
        "prefill_counts": f["prefill_counts"][:].astype(np.int32),
        "gate_probabilities": f["gate_prob"][:].astype(np.float32),
        "decode_counts": f["decode_counts"][:].astype(np.int32),
        "prompt_tokens": f["prompt_tokens"][:].astype(np.int64),
        "decode_tokens": dec,
        "metadata": np.array(json.dumps(meta)),
    }
    with FixedClock():
        with open("samples/capture.npz", "xb" if not os.path.exists("samples/capture.npz") else "wb") as out:
            np.savez_compressed(out, **arrays)


AUTHORS_KEYS = ["model", "algo", "k", "m", "L", "e", "n_fit", "variant", "layer_select",
                "layer_mask", "fit_peak_rho", "seed", "sig_dtype", "centroids",
                "training_sha256", "calibration_format", "sig_idf"]


def fit_json(tmp):
    cap = os.path.join(tmp, "cap_import.h5")
    m = os.path.join(tmp, "m.h5")
    j = os.path.join(tmp, "m.json")
    eldr("import", "samples/capture.npz", "-o", cap)
    eldr("fit", cap, "-k", "4", "-o", m, "--seed", "1", "--calib-split", "0.5")
    eldr("model", "export", m, "-o", j)
    full = json.load(open(j))
    fit = {k: full[k] for k in AUTHORS_KEYS if k in full}
    with open("samples/fit.json", "w") as out:
        json.dump(fit, out, indent=2)
        out.write("\n")


def drift():
    if os.path.exists("samples/drift.h5"):
        os.remove("samples/drift.h5")
    eldr("gen", "-o", "samples/drift.h5", "--requests", "2000", "--layers", "8", "--experts",
         "32", "--top-k", "2", "--domains", "6", "--drift", "1", "--prompt-tokens", "32",
         "--decode-tokens", "256", "--seed", "3")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        capture(tmp)
        fit_json(tmp)
    drift()
    shutil.copyfile("tests/fixtures/costfit/profile.csv", "samples/profile.csv")
    for name in ("capture.npz", "fit.json", "drift.h5", "profile.csv"):
        size = os.path.getsize("samples/" + name)
        assert size < 1 << 20, (name, size)
        print("samples/%s %d bytes" % (name, size))


if __name__ == "__main__":
    main()
