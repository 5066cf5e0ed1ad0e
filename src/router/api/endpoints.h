/* endpoints.h - the handlers of eldrd's own API (docs/http-api.md); one
 * file per group: ep_route.c (route, finish, kv-events), ep_ops.c
 * (snapshot, explain, window, model, config, healthz), ep_metrics.c.
 * api_register puts them in the HTTP server's route table; each takes
 * the engine as its context. */
#ifndef ELDR_ROUTER_ENDPOINTS_H
#define ELDR_ROUTER_ENDPOINTS_H

#include "answer.h"
#include "engine.h"
#include "http.h"

/* Which of the API's routes a listener serves. With --admin-listen, the
 * admin and introspection routes (model, config, in-flight clear,
 * kv-events, snapshot, explain, window) answer on the admin listener
 * only; on the public one they answer 404 naming --admin-listen, from the
 * headers (an upload is never taken in). /healthz and /metrics are on
 * both. */
typedef enum api_part {
    API_ALL,                     /* one listener: every route */
    API_PUBLIC,                  /* --listen beside --admin-listen */
    API_ADMIN,                   /* --admin-listen */
} api_part;

/* Add the API's routes to s, over engine d (before s starts); their body
 * limits come from d's options. openai_404: 1 to answer POST
 * /v1/completions and /v1/chat/completions with 404 (no proxy serves
 * them). -1 when the table is full. */
int api_register(http_server *s, engine_t *d, api_part part, int openai_404);

void ep_route(void *d, const http_req *r, http_resp *out);
void ep_finish(void *d, const http_req *r, http_resp *out);
void ep_kv_events(void *d, const http_req *r, http_resp *out);
void ep_snapshot(void *d, const http_req *r, http_resp *out);
void ep_explain(void *d, const http_req *r, http_resp *out);
void ep_window(void *d, const http_req *r, http_resp *out);
void ep_put_model(void *d, const http_req *r, http_resp *out);
void ep_put_config(void *d, const http_req *r, http_resp *out);
void ep_get_config(void *d, const http_req *r, http_resp *out);
void ep_inflight_clear(void *d, const http_req *r, http_resp *out);
void ep_healthz(void *d, const http_req *r, http_resp *out);
void ep_livez(void *d, const http_req *r, http_resp *out);
void ep_metrics(void *d, const http_req *r, http_resp *out);
void ep_proxied(void *d, const http_req *r, http_resp *out);
void ep_admin_elsewhere(void *d, const http_req *r, http_resp *out);

#endif
