/* load_vllm.h - `--load-from vllm`: the load of each decode worker as the
 * worker itself reports it, so that several eldrd replicas behind one
 * proxy agree on load (docs/eldrd.md, "Load signal").
 *
 * A poller thread fetches every worker's Prometheus /metrics each
 * --poll-ms (libcurl multi; each worker on its own clock, so one that
 * hangs delays nobody) and reads running + waiting requests (summed over
 * their label sets): vllm:num_requests_running + vllm:num_requests_waiting
 * from vLLM, sglang:num_running_reqs + sglang:num_queue_reqs (+ the PD
 * decode queues) from SGLang, the engine told by which names the page
 * has. It also reads the KV cache usage (vllm:kv_cache_usage_perc, or
 * vllm:gpu_cache_usage_perc before vLLM 0.9; sglang:token_usage), shown
 * per worker and not part of the load. A worker's
 * routing load is then that report plus the requests this eldrd sent it
 * since the poll went out (they may not be in the report yet). When a
 * poll fails (missing, unreachable, NaN, malformed), the worker keeps its
 * last good report plus every route since - "stale", never "idle"; a
 * worker never heard from counts eldrd's own in-flight requests. The
 * snapshot, /healthz ("degraded") and /metrics say which and why. */
#ifndef ELDR_ROUTER_LOAD_VLLM_H
#define ELDR_ROUTER_LOAD_VLLM_H

#include <jansson.h>
#include <stddef.h>

#include "engine.h"
#include "metrics.h"
#include "state.h"

#define VLLM_RUNNING "vllm:num_requests_running"
#define VLLM_WAITING "vllm:num_requests_waiting"
#define VLLM_KV "vllm:kv_cache_usage_perc"
#define VLLM_KV_OLD "vllm:gpu_cache_usage_perc"
#define SGLANG_RUNNING "sglang:num_running_reqs"
#define SGLANG_QUEUE "sglang:num_queue_reqs"
#define SGLANG_PREALLOC "sglang:num_decode_prealloc_queue_reqs"
#define SGLANG_TRANSFER "sglang:num_decode_transfer_queue_reqs"
#define SGLANG_KV "sglang:token_usage"

enum { ENGINE_VLLM, ENGINE_SGLANG };
const char *vllm_engine_name(int engine);   /* "vllm", "sglang" */

/* What one /metrics page says. */
typedef struct vllm_report {
    int engine;                  /* ENGINE_*: by the names in the page */
    double running, waiting;     /* sums over label sets */
    int n_running, n_waiting;    /* samples seen of the running and queue series */
    double kv;                   /* KV cache usage, 0..1, mean over label sets; NaN unknown */
    const char *kv_series;       /* the gauge it came from (static), NULL when absent */
} vllm_report;

/* Parse Prometheus text exposition (0.0.4): comments, HELP/TYPE lines,
 * labels (quoted values with escapes, '}' inside quotes), NaN/+Inf
 * values, timestamps. Other metrics are ignored, including those whose
 * names only start like ours. Returns 0 when one engine's running and
 * queue series are present with finite values >= 0 (a NaN or negative
 * KV gauge only leaves kv unknown); -1 with why (a short reason)
 * otherwise, also when the page has both engines' series. */
int vllm_parse_metrics(const char *text, size_t len, vllm_report *r, char *why, size_t whylen);

/* The /metrics URL of each of K workers from --worker-urls: either K
 * URLs in worker order, or NAME=URL pairs naming every worker once. A
 * URL is http://HOST:PORT[/path]; "/metrics" is appended unless the path
 * already ends with it. *urls: K malloc'd strings (free with
 * vllm_free_urls). */
int vllm_resolve_urls(const char *spec, char *const *workers, int K, char ***urls, char *err,
                      size_t errlen);
void vllm_free_urls(char **urls, int K);

typedef struct vllm_poller vllm_poller;

/* Poll once (synchronously, so the first routes see reported loads),
 * then start the thread. urls are taken over (freed by vllm_stop). */
vllm_poller *vllm_start(rstate *st, char **urls, int poll_ms, char *err, size_t errlen);
void vllm_stop(vllm_poller *p);

/* The snapshot's "load" object: {"from": "vllm", "poll_ms", "polls",
 * "workers": [{name, url, engine, known, running, waiting, reported,
 * kv_cache_usage, kv_series, age_s, error}]}. */
json_t *vllm_json(vllm_poller *p, char *const *workers);

/* The names of the workers whose load is not fresh (the last poll failed,
 * or the last good one is older than max(3 polls, 1 s) plus the timeout),
 * as a JSON array: /healthz is "degraded" when it is not empty. */
json_t *vllm_degraded(vllm_poller *p, char *const *workers);

/* /metrics series: eldr_load_reported{worker} (1 when the last poll gave
 * a load), eldr_vllm_load{worker}, eldr_worker_kv_cache_usage{worker},
 * eldr_vllm_poll_errors_total{worker},
 * eldr_load_stale{worker}, eldr_vllm_poll_age_seconds{worker},
 * eldr_vllm_poll_duration_seconds{worker}. */
void vllm_metrics(vllm_poller *p, char *const *workers, strbuf *b);

/* The poller as a provider of the daemon's views (engine.h): "load" in
 * the snapshot, the series above, "stale_load" on /healthz. */
void vllm_provider(vllm_poller *p, engine_provider *out);

#endif
