/* api.c - eldrd's own API in the HTTP server's route table
 * (endpoints.h). */
#include "endpoints.h"

static const http_route api_routes[] = {
    {"POST", "/v1/route", 0, AUTH_NONE, 0, 1, ep_route, 0, 0, 0},
    {"POST", "/v1/finish", 0, AUTH_NONE, HTTP_SMALL_BODY, 0, ep_finish, 0, 0, 0},
    {"POST", "/v1/kv-events", 0, AUTH_KV, 0, 0, ep_kv_events, 0, 0, 0},
    {"GET", "/v1/snapshot", 0, AUTH_NONE, HTTP_SMALL_BODY, 0, ep_snapshot, 0, 0, 0},
    {"GET", "/v1/explain/", 1, AUTH_NONE, HTTP_SMALL_BODY, 0, ep_explain, 0, 0, 0},
    {"GET", "/v1/window", 0, AUTH_NONE, HTTP_SMALL_BODY, 0, ep_window, 0, 0, 0},
    {"PUT", "/v1/model", 0, AUTH_ADMIN, 0, 0, ep_put_model, 0, 0, 0},
    {"PUT", "/v1/config", 0, AUTH_ADMIN, HTTP_SMALL_BODY, 0, ep_put_config, 0, 0, 0},
    {"POST", "/v1/inflight/clear", 0, AUTH_ADMIN, HTTP_SMALL_BODY, 0, ep_inflight_clear, 0, 0, 0},
    /* light: in proxy mode on a side thread of their own (http.h) */
    {"GET", "/metrics", 0, AUTH_NONE, HTTP_SMALL_BODY, 0, ep_metrics, 0, 0, 1},
    {"GET", "/healthz", 0, AUTH_NONE, HTTP_SMALL_BODY, 0, ep_healthz, 0, 0, 1},
};

static const http_route openai_routes[] = {
    {"POST", "/v1/completions", 0, AUTH_NONE, 0, 0, ep_proxied, 0, 0, 0},
    {"POST", "/v1/chat/completions", 0, AUTH_NONE, 0, 0, ep_proxied, 0, 0, 0},
};

int api_register(http_server *s, engine_t *d, int openai_404)
{
    for (size_t i = 0; i < sizeof api_routes / sizeof api_routes[0]; i++) {
        http_route r = api_routes[i];
        r.ctx = d;
        if (http_add_route(s, &r) < 0)
            return -1;
    }
    for (size_t i = 0; openai_404 && i < sizeof openai_routes / sizeof openai_routes[0]; i++) {
        http_route r = openai_routes[i];
        r.ctx = d;
        if (http_add_route(s, &r) < 0)
            return -1;
    }
    return 0;
}

/* The OpenAI paths without --proxy. */
void ep_proxied(void *d, const http_req *r, http_resp *out)
{
    (void)d;
    http_error(out, 404, r->path, "eldrd serves %s only in proxy mode (start it with --proxy "
               "--prefill URL,... --decode URL,...)", r->path);
}
