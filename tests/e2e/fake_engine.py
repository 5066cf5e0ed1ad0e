#!/usr/bin/python3
"""fake_engine.py - a stand-in for a vLLM or SGLang server that returns
routed experts, for tests/e2e/capture.sh (test-only; never part of eldr).

    fake_engine.py PORTFILE TRUTH.jsonl [options]

Serves 127.0.0.1 on a free port (written to PORTFILE). Routing is drawn
deterministically from the prompt text: the number of prompt tokens is
the number of words, the completion length follows from a hash of the
prompt (1..max_tokens), and each token's top-k experts per layer come
from a generator seeded by the prompt, leaning towards experts of the
prompt's first word (so that prompts with the same first word look
alike, as domains do). Every answered request appends its ground truth
to TRUTH.jsonl: {"text", "prompt_tokens", "completion_tokens", "prefill"
[P][L][k], "decode" [C-1][L][k]} (the rows a client must keep).

Answers like:
  vllm:   GET /v1/models (owned_by vllm); POST /v1/completions and
          /v1/chat/completions with prompt_routed_experts and
          choices[0].routed_experts (C rows: the last one is never fed
          forward and holds junk), or in --encoding npy one base64 .npy
          over prompt + completion tokens in choices[0].routed_experts;
  sglang: GET /v1/models (owned_by sglang), GET /get_model_info (with
          num_hidden_layers and num_experts_per_tok unless --no-geometry),
          POST /generate with meta_info.routed_experts = base64 of raw
          little-endian int32 over prompt + completion - 1 tokens (only when
          the request asks with return_routed_experts).
Options:
  --engine vllm|sglang  --encoding lists|object|npy|raw  --layers L
  --experts E  --topk K  --model NAME
  --fail-first N --fail-match S   the first N attempts of prompts holding S get HTTP 500
  --die-after N                   exit (no answer) when request N+1 arrives
  --delay S                       sleep S seconds before each answer
  --bad MODE [--bad-after N]      after N good answers: noroutes, shape, garbage, minus1
  --max-seconds S                 exit by itself after S seconds (default 120)
"""
import argparse
import base64
import hashlib
import io
import json
import os
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("portfile")
ap.add_argument("truth")
ap.add_argument("--engine", default="vllm")
ap.add_argument("--encoding", default="lists")
ap.add_argument("--layers", type=int, default=6)
ap.add_argument("--experts", type=int, default=16)
ap.add_argument("--topk", type=int, default=2)
ap.add_argument("--model", default="fake/moe-tiny")
ap.add_argument("--fail-first", type=int, default=0)
ap.add_argument("--fail-match", default="")
ap.add_argument("--die-after", type=int, default=-1)
ap.add_argument("--delay", type=float, default=0.0)
ap.add_argument("--bad", default="")
ap.add_argument("--bad-after", type=int, default=0)
ap.add_argument("--no-geometry", action="store_true")
ap.add_argument("--max-seconds", type=float, default=120.0)
A = ap.parse_args()

lock = threading.Lock()
state = {"requests": 0, "answers": 0, "attempts": {}}


def routing(text, max_tokens):
    """(P, C, ids [P + C, L, k]) for a prompt: all rows the engine would hold,
    the last generated one included."""
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    rng = random.Random(seed)
    words = text.split()
    P = max(1, len(words))
    C = 1 + seed % max_tokens
    first = words[0] if words else ""
    pref = random.Random(first).sample(range(A.experts), max(A.topk + 1, A.experts // 3))
    ids = np.zeros((P + C, A.layers, A.topk), dtype=np.int64)
    for t in range(P + C):
        for l in range(A.layers):
            pool = pref if rng.random() < 0.8 else list(range(A.experts))
            pick = rng.sample(pool, A.topk)
            ids[t, l] = pick
    return P, C, ids


def encode(arr, kind):
    if kind == "lists":
        return arr.tolist()
    if kind == "object":
        return {"encoding": "base64", "dtype": "int16", "shape": list(arr.shape),
                "data": base64.b64encode(arr.astype("<i2").tobytes()).decode()}
    if kind == "npy":
        b = io.BytesIO()
        np.save(b, arr.astype(np.int16))
        return base64.b64encode(b.getvalue()).decode()
    if kind == "raw":
        return base64.b64encode(arr.astype("<i4").tobytes()).decode()
    raise ValueError(kind)


def prompt_text(body, path):
    if path == "/generate":
        return body["text"]
    if path == "/v1/chat/completions":
        return " ".join(m["content"] for m in body["messages"])
    return body["prompt"]


def truth(text, P, C, ids):
    rec = {"text": text, "prompt_tokens": P, "completion_tokens": C,
           "prefill": ids[:P].tolist(), "decode": ids[P:P + C - 1].tolist()}
    with lock:
        with open(A.truth, "a") as f:
            f.write(json.dumps(rec) + "\n")


def answer(body, path, bad):
    text = prompt_text(body, path)
    mt = body.get("max_tokens") or body.get("sampling_params", {}).get("max_new_tokens", 16)
    P, C, ids = routing(text, int(mt))
    if bad == "minus1":
        ids[0, 0, 0] = -1
    if A.engine == "sglang":
        meta = {"id": "x", "prompt_tokens": P, "completion_tokens": C, "finish_reason": {"type": "length"}}
        if body.get("return_routed_experts") and bad != "noroutes":
            full = ids[:P + C - 1]
            if bad == "shape":
                full = full[:-2]
            meta["routed_experts"] = encode(full, "raw") if bad != "garbage" else 42
        out = {"text": "x" * C, "meta_info": meta}
    else:
        choice = {"index": 0, "text": "x" * C, "finish_reason": "length"}
        out = {"id": "cmpl-1", "object": "text_completion", "model": A.model,
               "choices": [choice],
               "usage": {"prompt_tokens": P, "completion_tokens": C, "total_tokens": P + C}}
        if bad == "noroutes":
            choice["routed_experts"] = None
        elif A.encoding == "npy":
            choice["routed_experts"] = encode(ids if bad != "shape" else ids[:, :-1], "npy")
        else:
            gen = ids[P:].copy()
            gen[-1] = ids[0]  # never fed forward: whatever the buffer held
            choice["routed_experts"] = encode(gen if bad != "shape" else gen[:, :-1], A.encoding)
            out["prompt_routed_experts"] = encode(ids[:P], A.encoding)
            if bad == "garbage":
                out["prompt_routed_experts"] = "hello, world"
    return out, (text, P, C, ids)


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = 1 << 16   # headers and body in one write: no Nagle / delayed-ACK stall

    def log_message(self, *a):
        pass

    def send(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/v1/models":
            self.send(200, {"object": "list", "data": [{"id": A.model, "object": "model",
                                                        "owned_by": A.engine}]})
        elif self.path == "/get_model_info" and A.engine == "sglang":
            info = {"model_path": A.model, "is_generation": True}
            if not A.no_geometry:
                info.update({"num_hidden_layers": A.layers, "num_experts_per_tok": A.topk})
            self.send(200, info)
        else:
            self.send(404, {"error": "not found"})

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(n))
        ok = {"vllm": ("/v1/completions", "/v1/chat/completions"),
              "sglang": ("/generate", "/v1/chat/completions", "/v1/completions")}[A.engine]
        if self.path not in ok:
            return self.send(404, {"error": "no such endpoint " + self.path})
        with lock:
            state["requests"] += 1
            if A.die_after >= 0 and state["requests"] > A.die_after:
                os._exit(0)
            key = prompt_text(body, self.path)
            tries = state["attempts"][key] = state["attempts"].get(key, 0) + 1
            bad = A.bad if A.bad and state["answers"] >= A.bad_after else ""
        if A.delay:
            time.sleep(A.delay)
        if A.fail_match and A.fail_match in key and tries <= A.fail_first:
            return self.send(500, {"error": "injected failure %d" % tries})
        out, t = answer(body, self.path, bad)
        if not bad:
            truth(*t)
        with lock:
            state["answers"] += 1
        self.send(200, out)


ThreadingHTTPServer.request_queue_size = 256   # the default 5 drops connects under -c 16
srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.daemon_threads = True
threading.Timer(A.max_seconds, lambda: os._exit(0)).start()
tmp = A.portfile + ".tmp"
with open(tmp, "w") as f:
    f.write(str(srv.server_address[1]))
os.replace(tmp, A.portfile)
srv.serve_forever()
