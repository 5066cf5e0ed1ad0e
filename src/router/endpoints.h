/* endpoints.h - the handlers behind the endpoint table of http.c; one
 * file per group: ep_route.c (route, finish, kv-events), ep_ops.c
 * (snapshot, explain, window, model, config, healthz), ep_metrics.c. */
#ifndef ELDR_ROUTER_ENDPOINTS_H
#define ELDR_ROUTER_ENDPOINTS_H

#include "answer.h"
#include "http.h"

typedef void (*http_handler)(eldrd_t *d, const http_req *r, http_resp *out);

void ep_route(eldrd_t *d, const http_req *r, http_resp *out);
void ep_finish(eldrd_t *d, const http_req *r, http_resp *out);

/* The one decision path, whoever brings the prompt's signal (POST
 * /v1/route, the proxy): signature, similarities, the locality band and
 * state_route. counts = the prompt's counts [L*E] for a count model, or
 * gates = its gate values [L*E] for a gate model (the other NULL); u =
 * the signature cache's use (NULL: none); *no_signature (if non-NULL) = 1
 * when the signal was all zero on the mask (the no-signature rule
 * decided). -1 with e (409, 503, ...). */
int route_request(eldrd_t *d, mref_t *m, const char *request_id, const uint16_t *counts,
                  const float *gates, int prefill, const cache_use *u, route_out *o,
                  int *no_signature, rb_err *e);
void ep_kv_events(eldrd_t *d, const http_req *r, http_resp *out);
void ep_snapshot(eldrd_t *d, const http_req *r, http_resp *out);
void ep_explain(eldrd_t *d, const http_req *r, http_resp *out);
void ep_window(eldrd_t *d, const http_req *r, http_resp *out);
void ep_put_model(eldrd_t *d, const http_req *r, http_resp *out);
void ep_put_config(eldrd_t *d, const http_req *r, http_resp *out);
void ep_inflight_clear(eldrd_t *d, const http_req *r, http_resp *out);
void ep_healthz(eldrd_t *d, const http_req *r, http_resp *out);
void ep_metrics(eldrd_t *d, const http_req *r, http_resp *out);
/* POST /v1/completions and /v1/chat/completions: answered by the proxy
 * (proxy.h) in proxy mode; 404 naming --proxy otherwise. */
void ep_proxied(eldrd_t *d, const http_req *r, http_resp *out);

#endif
