#!/usr/bin/python3
"""fake_pd.py - stand-ins for the prefill and decode instances of a
prefill/decode-disaggregated deployment, speaking the protocol eldrd's
proxy mode follows (the reference deployment's prefill-first handoff;
docs/eldrd.md, "Proxy mode"). Test-only; never part of eldr.

    fake_pd.py TRACE.h5 PORTFILE RECORD.jsonl [--prefill N] [--decode K]
               [--no-sig] [--stock] [--gate] [--decode-delay S] [--chunks C] [--chunk-gap S]
               [--max-seconds T] [--chunk-bytes B] [--fail-decode I,...]
               [--bind-decode PORT,...] [--health-fail I,...] [--json-stream I,...]
               [--huge-prefill] [--api-key KEY] [--routed npy|lists] [--prefix-cache]
               [--reset-decode I,...] [--stall-decode I,...] [--prefill-delay S]
               [--flap-decode I,...] [--flap-period S]

Serves N prefill and K decode instances on 127.0.0.1 (free ports, written
to PORTFILE as JSON {"prefill": [ports], "decode": [ports]}).

Prefill (POST /v1/completions, /v1/chat/completions): checks the body
carries the handoff request (stream false, return_token_ids true,
kv_transfer_params with do_remote_decode and prefill_first), then answers
with one generated token, the prompt's token ids and kv_transfer_params:
remote block ids, engine, host, port, and eldr_sig = base64 of the
prompt's expert counts as little-endian int16 [L*E]. With --stock the
prefill speaks stock vLLM's handoff instead, as vLLM's own proxy sends it
(tests/v1/kv_connector/nixl_integration/toy_proxy_server.py at
vllm-project/vllm 030ea52effcb05071543c8c42b8f0145e94cee43): it wants
max_tokens 1 and null remote fields, and answers a plain completion with
kv_transfer_params as NixlConnectorScheduler.request_finished writes them
(vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py at
0f120751344c09af442c1800020908d2b7ff71f2: remote_block_ids,
remote_engine_id, remote_request_id, remote_host, remote_port, tp_size;
and eldr_sig, unless --no-sig). Stock vLLM has no release route: with
--stock, POST /v1/kv_transfer/release is recorded and answered 404.
--api-key KEY: every POST answers 401 {"error": "Unauthorized"} unless
it carries Authorization: Bearer KEY, as vLLM started with --api-key does
(the toy proxy sends Bearer $OPENAI_API_KEY to prefill and decode); the
decode record notes whether the header came ("auth": true/false).
--prefill-delay S: every prefill answers after S seconds (a long prompt).
--flap-decode lists decode instances that flap: every other --flap-period
seconds (default 1) they answer every request, /health included, 500.
--reset-decode lists decode instances that break every stream midway:
the first chunk, then a TCP reset (SO_LINGER 0); --stall-decode, ones
that send the first chunk and then nothing (a hung engine).
--routed makes the stock prefill a vLLM started with
--enable-return-routed-experts (no eldr_sig): the prompt's token ids are
its words' hashes (the tokenizer), each token's top-k experts per layer a
function of the prompt's ids up to it (as a real model's are: the same
prefix, the same routing), leaning towards experts of the prompt's first
word. `--routed npy` answers as vLLM >= 0.22
(vllm/entrypoints/openai/completion/protocol.py at vllm-project/vllm
002032ee2b18e1f7bd924ec47b62504ba3866063, CompletionResponseChoice):
choices[0].routed_experts = base64 of a .npy (P + C - 1, L, k), uint8 for
E <= 256, and every row routed (the capturer keeps routing per KV slot,
vllm/model_executor/layers/fused_moe/routed_experts_capturer.py at
00bd1493b3e82d6c13c68ee8a0e1c5a96707e190, so a prefix-cached row reads
what its slot held). `--routed lists` answers as vLLM 0.21
(docs/training/routed_experts_replay.md at
0087e005dec9ed37e5564c4d13b38d350ce61992): the response-level
prompt_routed_experts [P, L, k] and choices[0].routed_experts [C, L, k]
as nested lists; with --prefix-cache, the prompt's leading whole blocks
of 16 tokens that an earlier prompt filled are -1 (never the last token).
With return_token_ids (vLLM's request field), choices[0] carries
prompt_token_ids and token_ids. Each answer's truth goes to RECORD.truth:
{"request_id", "ids", "rows" [P][L][k], "unrouted"}.
With --gate, eldr_sig is the prompt's gate_prob row instead, as
little-endian float32 [L*E] (what the reference sends for a gate model).
The counts are row
(sha256(prompt) mod N) of the trace's prefill_counts, so the prompt
decides them. max_tokens 1 ends the request at the prefill
(prefill_continues false). --no-sig leaves eldr_sig out (a stock engine).

Decode (same paths): records {"instance", "request_id", "body"} to
RECORD.jsonl, then answers as JSON, or with "stream": true as an SSE
stream of C chunks C-gap seconds apart and "data: [DONE]". A body whose
prompt is "slow ..." waits --decode-delay seconds first.
POST /v1/kv_transfer/release: recorded with "release": true.
GET /health answers 200 {} (vLLM's and SGLang's health route), or 503 on
the decode instances listed by --health-fail.

For the failover tests (tests/e2e/failover.sh): --chunk-bytes pads each
stream event to about B bytes (with --chunks large and --chunk-gap 0, an
endless fast stream); --fail-decode lists decode instances that answer
every request with HTTP 500; --bind-decode gives the decode instances
fixed ports (0: a free one), so that a test can start one later on the
port eldrd already knows; --json-stream lists decode instances that answer
a stream with plain JSON (a misconfigured engine); --huge-prefill makes
the prefill's answer 65 MiB (past eldrd's limit for a whole answer).
"""
import base64
import hashlib
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import h5py
import numpy as np

args = sys.argv[1:]
TRACE, PORTFILE, RECORD = args[0], args[1], args[2]
opt = {"--prefill": 1, "--decode": 4, "--decode-delay": 0.0, "--chunks": 3,
       "--chunk-gap": 0.2, "--max-seconds": 120.0, "--chunk-bytes": 0, "--fail-decode": "",
       "--bind-decode": "", "--health-fail": "", "--json-stream": "", "--api-key": "",
       "--routed": "", "--reset-decode": "", "--stall-decode": "", "--prefill-delay": 0.0,
       "--flap-decode": "", "--flap-period": 1.0}
NO_SIG = "--no-sig" in args
HUGE = "--huge-prefill" in args
STOCK = "--stock" in args or "--routed" in args
PREFIX_CACHE = "--prefix-cache" in args
GATE = "--gate" in args
i = 3
while i < len(args):
    if args[i] in ("--no-sig", "--stock", "--gate", "--huge-prefill", "--prefix-cache"):
        i += 1
        continue
    opt[args[i]] = type(opt[args[i]])(args[i + 1])
    i += 2

with h5py.File(TRACE, "r") as f:
    COUNTS = f["gate_prob"][:].astype("<f4") if GATE else f["prefill_counts"][:].astype("<i2")
    TOPK = int(f.attrs["top_k"])
N_ROWS, NL, NE = COUNTS.shape
CACHED_BLOCKS = set()   # --prefix-cache: the engine's prefix cache, by chained block hash
FAIL_DECODE = {int(x) for x in opt["--fail-decode"].split(",") if x}
HEALTH_FAIL = {int(x) for x in opt["--health-fail"].split(",") if x}
JSON_STREAM = {int(x) for x in opt["--json-stream"].split(",") if x}
RESET_DECODE = {int(x) for x in opt["--reset-decode"].split(",") if x}
STALL_DECODE = {int(x) for x in opt["--stall-decode"].split(",") if x}
FLAP_DECODE = {int(x) for x in opt["--flap-decode"].split(",") if x}
T0 = time.time()


def flapping_down(index):
    return index in FLAP_DECODE and int((time.time() - T0) / opt["--flap-period"]) % 2 == 1
LOCK = threading.Lock()


def record(obj):
    with LOCK, open(RECORD, "a") as f:
        f.write(json.dumps(obj) + "\n")


def prompt_text(body):
    if "messages" in body:
        return "".join(m.get("content", "") for m in body["messages"]
                       if isinstance(m.get("content"), str))
    p = body.get("prompt")
    return p if isinstance(p, str) else "".join(str(t) for t in p)


def counts_of(text):
    row = int(hashlib.sha256(text.encode()).hexdigest(), 16) % N_ROWS
    return COUNTS[row]


def token_ids(text):
    return [int(hashlib.sha256(w.encode()).hexdigest()[:8], 16) % 50000 for w in text.split()] \
        or [1]


def routing_rows(ids):
    """[P][L][k] expert ids: token t's depend on ids[0..t] only."""
    lean = int(hashlib.sha256(str(ids[0]).encode()).hexdigest()[:8], 16)
    rows, h = [], hashlib.sha256()
    for t in ids:
        h.update(b"%d," % t)
        rng = np.random.default_rng(int(h.hexdigest()[:16], 16))
        row = []
        for layer in range(NL):
            w = np.ones(NE)
            w[(lean + layer * 7 + np.arange(NE // 4)) % NE] += 6.0
            row.append([int(x) for x in rng.choice(NE, TOPK, replace=False, p=w / w.sum())])
        rows.append(row)
    return rows


def cached_prefix(ids, block=16):
    """Prompt rows the prefix cache serves (whole blocks, never the last
    token), then the prompt's full blocks go into the cache."""
    hashes, parent = [], "root"
    for b in range(len(ids) // block):
        parent = hashlib.sha256((parent + str(ids[b * block:(b + 1) * block])).encode()).hexdigest()
        hashes.append(parent)
    with LOCK:
        hit = 0
        while hit < len(hashes) and hashes[hit] in CACHED_BLOCKS:
            hit += 1
        CACHED_BLOCKS.update(hashes)
    return min(hit * block, (len(ids) - 1) // block * block)


def npy_b64(arr):
    import io
    buf = io.BytesIO()
    np.save(buf, np.asarray(arr, dtype=np.uint8 if NE <= 256 else np.uint16))
    return base64.b64encode(buf.getvalue()).decode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    role = "prefill"
    index = 0

    def log_message(self, *a):
        pass

    def handle(self):
        try:
            super().handle()
        except (ConnectionResetError, BrokenPipeError):
            pass   # eldrd cut the connection (an answer past its limit)

    def body(self):
        n = int(self.headers.get("Content-Length", 0))
        return json.loads(self.rfile.read(n) or b"{}")

    def send_json(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass   # the proxy gave up on us (a timeout test)

    def do_GET(self):
        if self.path != "/health":
            return self.send_json(404, {"error": "no such path"})
        if self.role == "decode" and flapping_down(self.index):
            return self.send_json(500, {"error": "flapping"})
        if self.role == "decode" and self.index in HEALTH_FAIL:
            return self.send_json(503, {"error": "unhealthy"})
        return self.send_json(200, {})

    def do_POST(self):
        body = self.body()
        if opt["--api-key"] and self.headers.get("Authorization") != "Bearer " + opt["--api-key"]:
            if self.role == "decode":
                record({"instance": self.index, "request_id": self.headers.get("X-Request-Id"),
                        "unauthorized": True})
            return self.send_json(401, {"error": "Unauthorized"})
        if self.path == "/v1/kv_transfer/release":
            record({"instance": self.index, "release": True, "body": body})
            if STOCK:
                return self.send_json(404, {"detail": "Not Found"})
            return self.send_json(200, {"released": True})
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            return self.send_json(404, {"error": "no such path"})
        if self.role == "prefill":
            time.sleep(opt["--prefill-delay"])
            return self.prefill(body)
        return self.decode(body)

    def stock_prefill(self, body):
        kv = body.get("kv_transfer_params") or {}
        if (body.get("max_tokens") != 1 or body.get("stream") is not False
                or kv.get("do_remote_decode") is not True or "prefill_first" in kv
                or kv.get("remote_engine_id", 0) is not None or "stream_options" in body):
            return self.send_json(400, {"error": "not a vLLM P/D prefill request", "got": body})
        transfer = {"do_remote_prefill": True, "do_remote_decode": False,
                    "remote_block_ids": [7, 8], "remote_engine_id": "p%d" % self.index,
                    "remote_request_id": "cmpl-%s-0" % self.headers.get("X-Request-Id"),
                    "remote_host": "127.0.0.1", "remote_port": 5600 + self.index,
                    "tp_size": 1}
        if not NO_SIG and not opt["--routed"]:
            transfer["eldr_sig"] = base64.b64encode(
                counts_of(prompt_text(body)).tobytes()).decode()
        answer = {"id": "cmpl-%s" % body.get("request_id"),
                  "object": "text_completion", "created": 1700000000,
                  "choices": [{"index": 0, "text": "T", "finish_reason": "length"}],
                  "kv_transfer_params": transfer}
        if opt["--routed"]:
            self.routed(body, answer)
        self.send_json(200, answer)

    def routed(self, body, answer):
        ids = token_ids(prompt_text(body))
        rows = routing_rows(ids)
        unrouted = cached_prefix(ids) if PREFIX_CACHE else 0
        first = sum(ids) % 50000
        gen = routing_rows(ids + [first])[-1:]   # the generated token's row
        choice = answer["choices"][0]
        if opt["--routed"] == "npy":
            choice["routed_experts"] = npy_b64(rows)   # P + C - 1 rows, C = 1
        else:
            answer["prompt_routed_experts"] = [[[-1] * TOPK] * NL] * unrouted + rows[unrouted:]
            choice["routed_experts"] = gen
        if body.get("return_token_ids"):
            choice["prompt_token_ids"] = ids
            choice["token_ids"] = [first]
        answer["usage"] = {"prompt_tokens": len(ids), "completion_tokens": 1,
                           "total_tokens": len(ids) + 1}
        with LOCK, open(RECORD + ".truth", "a") as f:
            f.write(json.dumps({"request_id": self.headers.get("X-Request-Id"), "ids": ids,
                                "rows": rows, "unrouted": unrouted}) + "\n")

    def prefill(self, body):
        if STOCK:
            return self.stock_prefill(body)
        kv = body.get("kv_transfer_params") or {}
        if (body.get("stream") is not False or body.get("return_token_ids") is not True
                or kv.get("do_remote_decode") is not True or kv.get("prefill_first") is not True
                or "stream_options" in body):
            return self.send_json(400, {"error": "not a prefill-first handoff request",
                                        "got": body})
        text = prompt_text(body)
        ids = body["prompt"] if isinstance(body.get("prompt"), list) else \
            [ord(c) % 1000 for c in text]
        first = sum(ids) % 50000
        transfer = {"do_remote_prefill": True, "do_remote_decode": False,
                    "remote_block_ids": [1, 2, 3], "remote_engine_id": "p%d" % self.index,
                    "remote_host": "127.0.0.1", "remote_port": 5600 + self.index,
                    "tp_size": 1, "remote_num_tokens": len(ids),
                    "prefill_first_token_id": first, "prefill_prompt_tokens": len(ids),
                    "prefill_continues": body.get("max_tokens", 16) > 1,
                    "transfer_id": kv.get("transfer_id")}
        if not NO_SIG:
            transfer["eldr_sig"] = base64.b64encode(counts_of(text).tobytes()).decode()
        if HUGE:
            transfer["padding"] = "x" * (65 << 20)
        self.send_json(200, {
            "id": "cmpl-%s" % body.get("request_id"), "object": "text_completion",
            "created": 1700000000, "model": "stand-in",
            "choices": [{"index": 0, "text": "T%d" % first, "token_ids": [first],
                         "prompt_token_ids": ids, "finish_reason": "length",
                         "stop_reason": None}],
            "usage": {"prompt_tokens": len(ids), "completion_tokens": 1,
                      "total_tokens": len(ids) + 1},
            "kv_transfer_params": transfer})

    def decode(self, body):
        rid = self.headers.get("X-Request-Id")
        record({"instance": self.index, "request_id": rid, "body": body,
                "auth": "Authorization" in self.headers})
        if self.index in FAIL_DECODE or flapping_down(self.index):
            return self.send_json(500, {"error": "decoder %d fails" % self.index})
        if isinstance(body.get("messages"), list) and prompt_text(body).startswith("slow"):
            time.sleep(opt["--decode-delay"])
        if body.get("slow"):
            time.sleep(opt["--decode-delay"])
        if not body.get("stream") or self.index in JSON_STREAM:
            return self.send_json(200, {
                "id": "cmpl-%s" % rid, "object": "text_completion", "model": "stand-in",
                "choices": [{"index": 0, "text": " decoded by %d" % self.index,
                             "finish_reason": "length"}],
                "decoder": self.index, "request_id": rid})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if self.index in RESET_DECODE | STALL_DECODE:
            return self.break_stream(rid)
        try:
            for c in range(opt["--chunks"]):
                ev = {"id": "cmpl-%s" % rid, "decoder": self.index, "chunk": c,
                      "sent": time.time(), "choices": [{"index": 0, "text": " t%d" % c}]}
                if opt["--chunk-bytes"]:
                    ev["pad"] = "x" * opt["--chunk-bytes"]
                self.chunk(("data: " + json.dumps(ev) + "\n\n").encode())
                time.sleep(opt["--chunk-gap"])
            self.chunk(b"data: [DONE]\n\n")
            self.chunk(b"")
        except (BrokenPipeError, ConnectionResetError):
            record({"instance": self.index, "request_id": rid, "cut": True})

    def break_stream(self, rid):
        import socket
        import struct
        ev = {"id": "cmpl-%s" % rid, "decoder": self.index, "chunk": 0,
              "choices": [{"index": 0, "text": " t0"}]}
        try:
            self.chunk(("data: " + json.dumps(ev) + "\n\n").encode())
            if self.index in STALL_DECODE:
                time.sleep(30)
                return
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
        except OSError:
            pass

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


BIND = [int(x) for x in opt["--bind-decode"].split(",") if x]


class Server(ThreadingHTTPServer):
    # the listen backlog an engine has (vLLM serves through uvicorn, whose
    # uvicorn/config.py Config has backlog: int = 2048), not
    # socketserver's 5: with 256 requests at once, connects past the fifth
    # were dropped and retried by TCP after 1, 3, 7, 15 s, and the streams
    # waiting behind them ran into the test's 30 s timeout
    request_queue_size = 2048
    daemon_threads = True


def serve(role, index):
    h = type("H%s%d" % (role, index), (Handler,), {"role": role, "index": index})
    port = BIND[index] if role == "decode" and index < len(BIND) else 0
    s = Server(("127.0.0.1", port), h)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    return s.server_address[1]


ports = {"prefill": [serve("prefill", i) for i in range(opt["--prefill"])],
         "decode": [serve("decode", i) for i in range(opt["--decode"])]}
with open(PORTFILE + ".tmp", "w") as f:
    json.dump(ports, f)
import os  # noqa: E402
os.rename(PORTFILE + ".tmp", PORTFILE)
time.sleep(opt["--max-seconds"])
