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
to TRUTH.jsonl: {"text", "prompt_tokens", "completion_tokens",
"unrouted", "prefill" [P - unrouted][L][k], "decode" [C-1][L][k]} (the
rows a client must keep).

One mode per engine version, each answering as that source does:
  --engine vllm-0.21  vLLM 0.21, docs/training/routed_experts_replay.md at
      vllm-project/vllm 0087e005dec9ed37e5564c4d13b38d350ce61992:
      /v1/completions and /v1/chat/completions answer the response-level
      prompt_routed_experts [P, L, k] and choices[0].routed_experts
      [C, L, k] as nested int lists (the last generated row is never fed
      forward: whatever the buffer held). With --prefix-cache (vLLM's
      default), prompt positions served from the prefix cache are -1: the
      leading whole blocks of 16 tokens whose chained hash an earlier
      prompt already filled, never the prompt's last token.
  --engine vllm-main  vLLM main, vllm/entrypoints/openai/completion/protocol.py
      at 002032ee2b18e1f7bd924ec47b62504ba3866063 (CompletionResponseChoice):
      choices[0].routed_experts is the base64 of a .npy of shape
      (P + C - 1, L, k), dtype uint8 (E <= 256), uint16 (E <= 65536) or
      int32; no prompt_routed_experts.
  --engine sglang     SGLang, python/sglang/srt/entrypoints/openai/
      serving_completions.py at sgl-project/sglang
      004c82e07d876f6e4a0ad6e15325706b0f478f1a, utils.py
      process_routed_experts_from_ret, and the capturer's wire dtypes
      (layers/moe/routed_experts_capturer.py, SGLANG_ROUTED_EXPERTS_DTYPE):
      only when the request has return_routed_experts, POST /generate
      answers meta_info.routed_experts, and /v1/completions and
      /v1/chat/completions the response-level sglext.routed_experts (plus
      choices[i].meta_info, the whole meta_info, when the request has
      return_meta_info): base64 of the raw bytes of (P + C - 1) x L x k ids
      in --wire-dtype (int32 by default, uint16 or uint8), no dtype named.
      GET /get_model_info answers model_path, is_generation,
      tokenizer_path, preferred_sampling_params and weight_version: no
      layer count, no top-k.
  --engine eldr-object  no engine: eldr's own base64 object
      {"encoding", "dtype": "int16", "shape", "data"} in vLLM 0.21's two
      places, kept for the decoder's own form (docs/capture.md).
Dense layers (vLLM): vllm/model_executor/layers/fused_moe/
routed_experts_capturer.py keeps one zero-filled (tokens, num_hidden_layers,
num_experts_per_tok) buffer that only the MoE layers write, so a dense
layer answers 0 for every id of every token. --dense-layers 0,3 does that
for those layers (in every row, prompt and generated); with top-k >= 2 the
truth leaves them out, as a client must (its "prefill"/"decode" have
L - dense layers, "dense" lists them); with top-1 they stay (their 0s are
picks of expert 0 as far as anyone can tell).

API key: --api-key KEY answers 401 {"error": "Unauthorized"} to a request
without "Authorization: Bearer KEY", on the paths the engine guards:
  vLLM: vllm/entrypoints/serve/utils/server_utils.py at vllm-project/vllm
      0753ceeb9cb7d7e39564ebebfe031d179e0c9924 (AuthenticationMiddleware,
      added by vllm/entrypoints/openai/api_server.py build_app when
      --api-key or VLLM_API_KEY is set): paths starting with /v1, /v2,
      /inference or /cohere (GUARDED_PREFIX; /health, /metrics,
      /get_model_info are open), OPTIONS never; the scheme is compared
      case-insensitively ("bearer"), the token exactly.
  SGLang: python/sglang/srt/utils.py (add_api_key_middleware, sgl-project/
      sglang as stored at 4ebfeba20145f80822040effc47d084dd3c0c56e): every
      path but /health* and /metrics*, the header compared whole with
      "Bearer " + key.
Options:
  --layers L --experts E --topk K --model NAME
  --dense-layers LIST             (vllm-*) these layers answer 0 for every id
  --api-key KEY                   require it, as the engine's --api-key does
  --prefix-cache                  (vllm-0.21) cached prompt rows are -1
  --wire-dtype int32|uint16|uint8 (sglang) SGLANG_ROUTED_EXPERTS_DTYPE
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
ap.add_argument("--engine", default="vllm-0.21",
                choices=("vllm-0.21", "vllm-main", "sglang", "eldr-object"))
ap.add_argument("--prefix-cache", action="store_true")
ap.add_argument("--wire-dtype", default="int32", choices=("int32", "uint16", "uint8"))
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
ap.add_argument("--max-seconds", type=float, default=120.0)
ap.add_argument("--dense-layers", default="")
ap.add_argument("--api-key", default=None)
A = ap.parse_args()
DENSE = sorted(int(x) for x in A.dense_layers.split(",") if x != "")
if DENSE and not A.engine.startswith("vllm"):
    ap.error("--dense-layers: vLLM's capturer only")
# what a client keeps: with top-1 a 0 is a pick of expert 0 (nothing tells a
# dense layer from one that routed everything there), so all layers
KEEP = [l for l in range(A.layers) if l not in DENSE or A.topk < 2]

lock = threading.Lock()
state = {"requests": 0, "answers": 0, "attempts": {}, "blocks": set()}
BLOCK = 16   # vLLM's default block size


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
    ids[:, DENSE, :] = 0   # vLLM's capturer: a dense layer never writes its row
    return P, C, ids


def npy_dtype():
    return np.uint8 if A.experts <= 256 else np.uint16 if A.experts <= 65536 else np.int32


def encode(arr, kind):
    if kind == "lists":
        return arr.tolist()
    if kind == "object":
        return {"encoding": "base64", "dtype": "int16", "shape": list(arr.shape),
                "data": base64.b64encode(arr.astype("<i2").tobytes()).decode()}
    if kind == "npy":
        b = io.BytesIO()
        np.save(b, arr.astype(npy_dtype()))
        return base64.b64encode(b.getvalue()).decode()
    if kind == "raw":
        return base64.b64encode(arr.astype(np.dtype(A.wire_dtype).newbyteorder("<")).tobytes()).decode()
    raise ValueError(kind)


def prompt_text(body, path):
    if path == "/generate":
        return body["text"]
    if path == "/v1/chat/completions":
        return " ".join(m["content"] for m in body["messages"])
    return body["prompt"]


def cached_rows(text, P):
    """vLLM's prefix cache: the leading whole blocks an earlier prompt filled
    (chained hashes, as the KV cache keys them), never the last token."""
    words, parent, hit, m = text.split(), b"", True, 0
    with lock:
        for b in range(P // BLOCK):
            parent = hashlib.sha256(parent + " ".join(words[b * BLOCK:(b + 1) * BLOCK]).encode()).digest()
            if hit and parent in state["blocks"] and (b + 1) * BLOCK <= P - 1:
                m = (b + 1) * BLOCK
            else:
                hit = False
            state["blocks"].add(parent)
    return m


def truth(text, P, C, ids, unrouted):
    kept = ids[:, KEEP, :]
    rec = {"text": text, "prompt_tokens": P, "completion_tokens": C, "unrouted": unrouted,
           "prefill": kept[unrouted:P].tolist(), "decode": kept[P:P + C - 1].tolist(),
           "dense": DENSE if A.topk >= 2 else []}
    with lock:
        with open(A.truth, "a") as f:
            f.write(json.dumps(rec) + "\n")


def sglang(body, path, text, P, C, ids, bad):
    meta = {"id": "x", "finish_reason": {"type": "length", "length": C}, "prompt_tokens": P,
            "weight_version": "default", "completion_tokens": C, "cached_tokens": 0}
    if body.get("return_routed_experts") and bad != "noroutes":
        full = ids[:P + C - 1]
        if bad == "shape":
            full = full[:-2]
        meta["routed_experts"] = encode(full, "raw") if bad != "garbage" else 42
    if path == "/generate":
        return {"text": "x" * C, "output_ids": [7] * C, "meta_info": meta}
    usage = {"prompt_tokens": P, "completion_tokens": C, "total_tokens": P + C}
    if path == "/v1/chat/completions":
        choice = {"index": 0, "message": {"role": "assistant", "content": "x" * C},
                  "logprobs": None, "finish_reason": "length", "matched_stop": None}
        out = {"id": "x", "object": "chat.completion", "created": 1, "model": A.model}
    else:
        choice = {"index": 0, "text": "x" * C, "logprobs": None, "finish_reason": "length",
                  "matched_stop": None}
        out = {"id": "x", "object": "text_completion", "created": 1, "model": A.model}
    if body.get("return_meta_info"):
        choice["meta_info"] = meta
    out.update({"choices": [choice], "usage": usage, "metadata": {"weight_version": "default"}})
    if "routed_experts" in meta:
        out["sglext"] = {"routed_experts": meta["routed_experts"]}
    return out


def answer(body, path, bad):
    text = prompt_text(body, path)
    mt = body.get("max_tokens") or body.get("sampling_params", {}).get("max_new_tokens", 16)
    P, C, ids = routing(text, int(mt))
    if bad == "minus1":
        ids[P - 1, 0, 0] = -1   # the last prompt token is never cached: a broken answer
    unrouted = cached_rows(text, P) if A.prefix_cache and A.engine == "vllm-0.21" else 0
    if A.engine == "sglang":
        return sglang(body, path, text, P, C, ids, bad), (text, P, C, ids, 0)
    choice = {"index": 0, "text": "x" * C, "finish_reason": "length"}
    out = {"id": "cmpl-1", "object": "text_completion", "model": A.model,
           "choices": [choice],
           "usage": {"prompt_tokens": P, "completion_tokens": C, "total_tokens": P + C}}
    if bad == "noroutes":
        choice["routed_experts"] = None
    elif A.engine == "vllm-main":
        full = ids[:P + C - 1]
        choice["routed_experts"] = encode(full if bad != "shape" else full[:, :-1], "npy")
    else:
        kind = "lists" if A.engine == "vllm-0.21" else "object"
        gen = ids[P:].copy()
        gen[-1] = ids[0]  # never fed forward: whatever the buffer held
        prompt = ids[:P].copy()
        prompt[:unrouted] = -1
        choice["routed_experts"] = encode(gen if bad != "shape" else gen[:, :-1], kind)
        out["prompt_routed_experts"] = encode(prompt, kind)
        if bad == "garbage":
            out["prompt_routed_experts"] = "hello, world"
    return out, (text, P, C, ids, unrouted)


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

    def refused(self):
        """The engine's API-key check: True when it answered 401."""
        if A.api_key is None:
            return False
        got = self.headers.get("Authorization") or ""
        if A.engine == "sglang":
            guarded = not self.path.startswith(("/health", "/metrics"))
            ok = got == "Bearer " + A.api_key
        else:
            guarded = self.path.startswith(("/v1", "/v2", "/inference", "/cohere"))
            scheme, _, param = got.partition(" ")
            ok = scheme.lower() == "bearer" and param == A.api_key
        if guarded and not ok:
            with lock:
                state["refused"] = state.get("refused", 0) + 1
            self.send(401, {"error": "Unauthorized"})
            return True
        return False

    def do_GET(self):
        if self.refused():
            return
        if self.path == "/v1/models":
            self.send(200, {"object": "list", "data": [{"id": A.model, "object": "model",
                                                        "owned_by": "sglang" if A.engine == "sglang" else "vllm"}]})
        elif self.path == "/get_model_info" and A.engine == "sglang":
            self.send(200, {"model_path": A.model, "tokenizer_path": A.model,
                            "is_generation": True, "preferred_sampling_params": None,
                            "weight_version": "default"})
        else:
            self.send(404, {"error": "not found"})

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(n))
        if self.refused():
            return
        ok = ("/generate", "/v1/chat/completions", "/v1/completions") if A.engine == "sglang" \
            else ("/v1/completions", "/v1/chat/completions")
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
