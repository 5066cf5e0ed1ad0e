#!/usr/bin/python3
"""gateway_pd_check.py - fixtures and checks of tests/e2e/gateway_pd.sh
(eldrd's picker behind llm-d's coordinator, stock vLLM prefills). Prints
"ok - NAME" / "not ok - NAME". Test-only.

    gateway_pd_check.py bodies OUT N TAG       N client /v1/completions bodies
    gateway_pd_check.py endpoints PORTS OUT    the endpoints file: fake_pd.py's
                                               decode instances w0..w3 (one
                                               with role: decode, the others
                                               unlabelled) and its prefill
                                               instances p0.. (llm-d.ai/role:
                                               prefill)
    gateway_pd_check.py check MODEL PORTS RECORD PICKS EXPLAIN_URL NAME

The oracle is independent of eldrd's decoder: fake_pd.py records each
prompt's full routing (RECORD.truth: the rows it answered, as vLLM >= 0.22
writes them); the counts are summed here in numpy and the band at tau 0 is
the centroid nearest the normalised counts (a count model over every
layer), as tests/e2e/proxy_stock_check.py computes it.
"""
import json
import sys
import urllib.request

import numpy as np

from routed_oracle import nearest_worker

TOPICS = ["rivers", "proofs", "poems", "code", "law", "chemistry", "music", "maps", "tides",
          "stars"]


def ok(name, cond, *why):
    print(("ok - " if cond else "not ok - ") + name)
    for w in ([] if cond else why):
        print("#   " + str(w)[:600])
    sys.stdout.flush()


def lines(path):
    try:
        with open(path) as f:
            return [json.loads(x) for x in f if x.strip()]
    except FileNotFoundError:
        return []


def bodies(out, n, tag):
    with open(out, "w") as f:
        for i in range(int(n)):
            words = " ".join(TOPICS[(i * 7 + j) % len(TOPICS)] for j in range(3 + i % 5))
            f.write(json.dumps({"model": "m", "prompt": "%s %d about %s" % (tag, i, words),
                                "max_tokens": 8}) + "\n")


def endpoints(ports, out):
    p = json.load(open(ports))
    eps = []
    for k, port in enumerate(p["decode"]):
        e = {"name": "w%d" % k, "namespace": "inference", "address": "127.0.0.1",
             "port": str(port)}
        if k == 1:
            e["labels"] = {"role": "decode"}
        eps.append(e)
    for j, port in enumerate(p["prefill"]):
        eps.append({"name": "p%d" % j, "namespace": "inference", "address": "127.0.0.1",
                    "port": str(port), "labels": {"llm-d.ai/role": "prefill"}})
    json.dump({"endpoints": eps}, open(out, "w"))


def check(model, ports, record, picks, url, name):
    import h5py
    with h5py.File(model, "r") as f:
        cent = f["centroids"][:].astype(np.float64)
        L, E = int(f.attrs["layers"]), int(f.attrs["experts"])
    p = json.load(open(ports))
    dec = ["127.0.0.1:%d" % x for x in p["decode"]]
    pre = ["127.0.0.1:%d" % x for x in p["prefill"]]
    truth = {t["request_id"]: t for t in lines(record + ".truth")}
    got = [g for g in lines(picks) if not g.get("summary")]
    seen = [r for r in lines(record) if "instance" in r and "body" in r]
    wrong, missing, landed, bad_kv, bad_pf, explain = [], [], 0, [], [], []
    for g in got:
        t = truth.get(g["id"])
        if not t or not g.get("ok"):
            missing.append((g["id"], g.get("error")))
            continue
        if g.get("prefill_endpoint") not in pre or not g.get("prefill_answer_echo_ok"):
            bad_pf.append(g)
        want = dec[nearest_worker(cent, L, E, t["rows"])]
        if g.get("decode_endpoint") != want:
            wrong.append((g["id"], g.get("decode_endpoint"), want))
        r = [x for x in seen if x.get("request_id") == g["decode_id"]]
        if len(r) == 1 and dec[r[0]["instance"]] == g.get("decode_endpoint"):
            landed += 1
            kv = r[0]["body"].get("kv_transfer_params") or {}
            if (kv.get("do_remote_prefill") is not True or kv.get("do_remote_decode") is not False
                    or kv.get("remote_engine_id") != g.get("remote_engine_id")
                    or kv.get("remote_request_id") != g.get("remote_request_id")):
                bad_kv.append(kv)
        try:
            with urllib.request.urlopen(url + "/v1/explain/" + g["decode_id"], timeout=10) as a:
                x = json.load(a)
            if x.get("signal", {}).get("source") != "routed_experts" or \
                    x["signal"].get("rows") != len(t["rows"]):
                explain.append(x.get("signal"))
        except Exception as e:  # noqa: BLE001 - reported as a failed check
            explain.append(str(e))
    n = len(got)
    ok("%s: %d coordinated requests, each prefill and decode call completed" % (name, n),
       n > 0 and not missing, missing[:3])
    ok("%s: each prefill call picked a prefill endpoint, its answer streamed back unchanged"
       % name, not bad_pf, bad_pf[:2])
    ok("%s: every decode pick equals the band rule on the prompt's routed experts (%d/%d)"
       % (name, n - len(wrong) - len(missing), n), not wrong and not missing, wrong[:3])
    ok("%s: each decode call reached the picked instance once" % name, landed == n, landed)
    ok("%s: ... with the prefill's kv_transfer_params copied in (do_remote_prefill true)" % name,
       not bad_kv, bad_kv[:2])
    ok("%s: /v1/explain says the signal came from the routed experts, every prompt row" % name,
       not explain, explain[:3])


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "bodies":
        bodies(*sys.argv[2:5])
    elif cmd == "endpoints":
        endpoints(*sys.argv[2:4])
    elif cmd == "check":
        check(*sys.argv[2:8])
    else:
        sys.exit("usage: gateway_pd_check.py bodies|endpoints|check ...")
