#!/usr/bin/python3
"""fake_vllm.py - a stand-in for the /metrics of several vLLM or SGLang
decode workers, for tests/e2e/vllm_load.sh (test-only; never part of eldr).

    fake_vllm.py LOADS.json PORTFILE [MAX_SECONDS]

Serves GET /NAME/metrics on 127.0.0.1 (a free port, written to PORTFILE)
for each NAME in LOADS.json, which is re-read on every request so the
test can change the loads while eldrd polls. Each entry is one of
  {"running": R, "waiting": W[, "kv": U][, "engine": "sglang"|"vllm-old"]}
                                 a realistic Prometheus page with those
                                 values (split over two label sets, with
                                 comments and look-alike series around);
                                 U the KV cache usage (0..1), default 0.5
  - vLLM (the default), as vllm/v1/metrics/loggers.py in vllm-project/vllm
    at 005a810bc40faa25b8870fbc8559c3462581eee3 declares its gauges:
    vllm:num_requests_running, vllm:num_requests_waiting and
    vllm:kv_cache_usage_perc ("KV-cache usage. 1 means 100 percent
    usage."), labels model_name and engine (one label set per engine core),
    and the deprecated vllm:gpu_cache_usage_perc beside it (0.9 exports
    both); "vllm-old": only the deprecated name, as vLLM before 0.9.
  - SGLang, as python/sglang/srt/metrics/collector.py in sgl-project/sglang
    at 00ae9c1590d2d0bb6c0bfff39e312c34ae3dd538 declares its gauges
    (sglang:num_running_reqs, sglang:num_queue_reqs, the PD decode queues
    sglang:num_decode_prealloc_queue_reqs and
    sglang:num_decode_transfer_queue_reqs, sglang:token_usage, with
    look-alikes such as sglang:num_running_reqs_offline_batch) with the
    labels python/sglang/srt/managers/scheduler_metrics_mixin.py (at
    01bb3c807f7e62c19a31de7548837505488c2b64) gives (model_name,
    engine_type, tp_rank, pp_rank, dp_rank with DP), written as
    prometheus_client's MultiProcessCollector writes them (SGLang serves
    /metrics in multiprocess mode): help "Multiprocess metric", labels
    sorted by name, floats as "3.0". Waiting W is split over the queue and
    the two PD queues.
  "missing"                      a page without the two series
  "nan"                          num_requests_running is NaN
  "error"                        HTTP 500
  "hang"                         no answer for 30 s (a stuck worker)
Exits by itself after MAX_SECONDS (default 120): a test that dies never
leaves it behind."""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOADS, PORTFILE = sys.argv[1], sys.argv[2]
MAX_SECONDS = float(sys.argv[3]) if len(sys.argv) > 3 else 120.0

HEAD = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
"""


def sglang_page(entry):
    r, w = float(entry["running"]), float(entry["waiting"])
    kv = float(entry.get("kv", 0.5))
    r1, w1 = r // 2, w // 2

    def lab(dp, tp):
        return ('{dp_rank="%d",engine_type="decode",model_name="m",pp_rank="0",tp_rank="%d"}'
                % (dp, tp))

    out = []
    for name, vals in (("sglang:num_running_reqs", (r1, r - r1)),
                       ("sglang:num_running_reqs_offline_batch", (50.0, 0.0)),
                       ("sglang:num_queue_reqs", (w1, 0.0)),
                       ("sglang:num_grammar_queue_reqs", (60.0, 0.0)),
                       ("sglang:num_decode_prealloc_queue_reqs", (w - w1, 0.0)),
                       ("sglang:num_decode_transfer_queue_reqs", (0.0, 0.0)),
                       ("sglang:num_prefill_prealloc_queue_reqs", (70.0, 0.0)),
                       ("sglang:token_usage", (kv, kv)),
                       ("sglang:swa_token_usage", (0.0, 0.0))):
        out.append("# HELP %s Multiprocess metric\n# TYPE %s gauge\n" % (name, name))
        for dp, v in enumerate(vals):
            out.append("%s%s %s\n" % (name, lab(dp, 4 * dp), repr(float(v))))
    return "".join(out)


def page(entry):
    other = ('# HELP vllm:num_requests_running_total_fake look-alike name\n'
             '# TYPE vllm:num_requests_running_total_fake counter\n'
             'vllm:num_requests_running_total_fake{model_name="m"} 999\n'
             'vllm:num_requests_waiting_by_reason{reason="capacity"} 77\n'
             'process_cpu_seconds_total 12.5\n')
    if entry == "missing":
        return other
    if entry == "nan":
        return (HEAD + 'vllm:num_requests_running{model_name="m",engine="0"} NaN\n'
                'vllm:num_requests_waiting{model_name="m",engine="0"} 1\n' + other)
    if entry.get("engine") == "sglang":
        return sglang_page(entry)
    r, w = float(entry["running"]), float(entry["waiting"])
    kv = float(entry.get("kv", 0.5))
    old = entry.get("engine") == "vllm-old"
    kvs = ('# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.'
           'DEPRECATED: Use vllm:kv_cache_usage_perc instead.\n'
           '# TYPE vllm:gpu_cache_usage_perc gauge\n'
           'vllm:gpu_cache_usage_perc{model_name="m",engine="0"} %r\n'
           'vllm:gpu_cache_usage_perc{model_name="m",engine="1"} %r\n' % (kv, kv))
    if not old:
        kvs += ('# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.\n'
                '# TYPE vllm:kv_cache_usage_perc gauge\n'
                'vllm:kv_cache_usage_perc{model_name="m",engine="0"} %r\n'
                'vllm:kv_cache_usage_perc{model_name="m",engine="1"} %r\n' % (kv, kv))
    # split over two engines (label sets); one label value holds '}' and
    # an escaped quote, one sample carries a timestamp
    r1 = r // 2
    return (HEAD +
            'vllm:num_requests_running{model_name="m",engine="0"} %g\n' % r1 +
            'vllm:num_requests_running{model_name="a}b\\"c",engine="1"} %g 1718000000000\n'
            % (r - r1) +
            other +
            '# HELP vllm:num_requests_waiting Number of requests waiting.\n'
            '# TYPE vllm:num_requests_waiting gauge\n'
            'vllm:num_requests_waiting{model_name="m",engine="0"} %g\n' % w +
            'vllm:num_requests_waiting{model_name="m",engine="1"} 0\n' + kvs)


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        parts = self.path.strip("/").split("/")
        try:
            with open(LOADS) as f:
                loads = json.load(f)
        except (OSError, ValueError):
            loads = {}
        if len(parts) != 2 or parts[1] != "metrics" or parts[0] not in loads:
            self.send_error(404)
            return
        entry = loads[parts[0]]
        if entry == "hang":
            time.sleep(30)
            return
        if entry == "error":
            self.send_error(500)
            return
        body = page(entry).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORTFILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os  # noqa: E402
os.rename(PORTFILE + ".tmp", PORTFILE)
threading.Timer(MAX_SECONDS, server.shutdown).start()
server.serve_forever()
