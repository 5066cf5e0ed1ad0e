#!/usr/bin/python3
"""fake_vllm.py - a stand-in for the /metrics of several vLLM decode
workers, for tests/e2e/vllm_load.sh (test-only; never part of eldr).

    fake_vllm.py LOADS.json PORTFILE [MAX_SECONDS]

Serves GET /NAME/metrics on 127.0.0.1 (a free port, written to PORTFILE)
for each NAME in LOADS.json, which is re-read on every request so the
test can change the loads while eldrd polls. Each entry is one of
  {"running": R, "waiting": W}   a realistic Prometheus page with those
                                 values (split over two label sets, with
                                 comments and look-alike series around)
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
    r, w = float(entry["running"]), float(entry["waiting"])
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
            'vllm:num_requests_waiting{model_name="m",engine="1"} 0\n')


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
