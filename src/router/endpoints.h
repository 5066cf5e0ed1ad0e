/* endpoints.h - the handlers behind the endpoint table of http.c; one
 * file per group: ep_route.c (route, finish, kv-events), ep_ops.c
 * (snapshot, explain, window, model, config, healthz), ep_metrics.c. */
#ifndef ELDR_ROUTER_ENDPOINTS_H
#define ELDR_ROUTER_ENDPOINTS_H

#include "http.h"

typedef void (*http_handler)(eldrd_t *d, const http_req *r, http_resp *out);

void ep_route(eldrd_t *d, const http_req *r, http_resp *out);
void ep_finish(eldrd_t *d, const http_req *r, http_resp *out);
void ep_kv_events(eldrd_t *d, const http_req *r, http_resp *out);
void ep_snapshot(eldrd_t *d, const http_req *r, http_resp *out);
void ep_explain(eldrd_t *d, const http_req *r, http_resp *out);
void ep_window(eldrd_t *d, const http_req *r, http_resp *out);
void ep_put_model(eldrd_t *d, const http_req *r, http_resp *out);
void ep_put_config(eldrd_t *d, const http_req *r, http_resp *out);
void ep_inflight_clear(eldrd_t *d, const http_req *r, http_resp *out);
void ep_healthz(eldrd_t *d, const http_req *r, http_resp *out);
void ep_metrics(eldrd_t *d, const http_req *r, http_resp *out);

#endif
