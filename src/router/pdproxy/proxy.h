/* proxy.h - eldrd in the request path (`--proxy`; docs/eldrd.md, "Proxy
 * mode").
 *
 * A client's POST /v1/completions or /v1/chat/completions goes to a
 * prefill instance (consistent hashing on the prompt, pool_ring.h),
 * whose answer carries the first token, the KV handoff and the prompt's
 * expert counts (eldr_sig); eldrd routes on those counts with the same
 * code as POST /v1/route, streams the first token to the client at once,
 * sends the decode instance it chose the rest of the request, and relays
 * the decode answer (JSON, or SSE chunks as they arrive). The request is
 * in flight on its decode worker from the decision until the decode
 * answer ends or the client goes; then it is finished (load down, the
 * decision kept for explain).
 *
 * Threads: one event loop (evloop.h) serves it all: libmicrohttpd (run
 * from the loop by the HTTP glue, http.h) parses and checks the client's
 * request and hands it over (the asynchronous route's begin); the
 * upstream client (upstream.h) drives every upstream transfer; the
 * decision (decide.h) is made there too, on the pool's eligible workers
 * (pool.h). A proxied request never crosses threads. A request (pxreq)
 * keeps its lock and reference count (the connection, the stream reader
 * and the upstream side each hold one): the drain and other threads
 * still reach it. */
#ifndef ELDR_ROUTER_PROXY_H
#define ELDR_ROUTER_PROXY_H

#include <stddef.h>

#include "engine.h"
#include "evloop.h"
#include "http.h"
#include "strbuf.h"

typedef struct proxy proxy_t;

/* Set up over the pool's prefill and decode URLs (engine.h), on loop,
 * whose connections http serves. NULL with err (eldrd exits 2). */
proxy_t *proxy_start(engine_t *d, evloop *loop, http_server *http, char *err, size_t errlen);
/* Add POST /v1/completions and /v1/chat/completions to the server's
 * routes (before it starts). -1 when the table is full. */
int proxy_register(proxy_t *p, http_server *s);
/* The drain's step: new requests get 503, and what is in flight fails
 * with 503 (its route finished, its connection resumed). loop_running:
 * the loop's thread still turns (the failing runs there, and this waits
 * for it); 0: this thread is the loop's. Before libmicrohttpd stops,
 * which must find no connection suspended. */
void proxy_stop(proxy_t *p, int loop_running);
/* After libmicrohttpd has stopped. */
void proxy_free(proxy_t *p);

/* proxy_* series for /metrics (a provider's callback: cls is the proxy). */
void proxy_metrics(void *cls, strbuf *b);
/* Into the snapshot's "failures" (engine_provider.failures): "proxy"
 * {outcome: count, ...} as eldr_proxy_requests_total, "retries" {"prefill",
 * "decode"}, and "upstream_timeouts" {"connect", "prefill", "decode",
 * "idle"}: transfers cut at --connect-timeout, --prefill-timeout,
 * --decode-timeout, --stream-idle-timeout (retried or not). */
void proxy_failures(void *cls, json_t *into);

#endif
