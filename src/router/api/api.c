/* api.c - eldrd's own API in the HTTP server's route table
 * (endpoints.h). */
#include "endpoints.h"

/* A route's body limit, by what its bodies hold. */
enum api_body {
    BODY_SMALL,                  /* a few dozen bytes: HTTP_SMALL_BODY */
    BODY_MAIN,                   /* counts, block counts: --max-body */
    BODY_KV,                     /* a batch of KV events: --max-kv-body */
    BODY_MODEL,                  /* a model's centroids: --max-model-body */
};

/* Where a route is served (api_part). */
enum api_where {
    ON_DATA,                     /* the public listener */
    ON_ADMIN,                    /* the admin listener when there is one */
    ON_BOTH,
};

static const struct api_route {
    const char *method, *path;
    int prefix;
    auth_need auth;
    enum api_body body;
    enum api_where where;
    int refuse_when_draining;
    http_handler fn;
    int light;                   /* in proxy mode on a side thread of its own (http.h) */
} api_routes[] = {
    {"POST", "/v1/route", 0, AUTH_ROUTE, BODY_MAIN, ON_DATA, 1, ep_route, 0},
    {"POST", "/v1/finish", 0, AUTH_ROUTE, BODY_SMALL, ON_DATA, 0, ep_finish, 0},
    {"POST", "/v1/kv-events", 0, AUTH_KV, BODY_KV, ON_ADMIN, 0, ep_kv_events, 0},
    {"GET", "/v1/snapshot", 0, AUTH_NONE, BODY_SMALL, ON_ADMIN, 0, ep_snapshot, 0},
    {"GET", "/v1/explain/", 1, AUTH_NONE, BODY_SMALL, ON_ADMIN, 0, ep_explain, 0},
    {"GET", "/v1/window", 0, AUTH_NONE, BODY_SMALL, ON_ADMIN, 0, ep_window, 0},
    {"PUT", "/v1/model", 0, AUTH_ADMIN, BODY_MODEL, ON_ADMIN, 0, ep_put_model, 0},
    {"PUT", "/v1/config", 0, AUTH_ADMIN, BODY_SMALL, ON_ADMIN, 0, ep_put_config, 0},
    {"GET", "/v1/config", 0, AUTH_NONE, BODY_SMALL, ON_ADMIN, 0, ep_get_config, 0},
    {"POST", "/v1/inflight/clear", 0, AUTH_ADMIN, BODY_SMALL, ON_ADMIN, 0, ep_inflight_clear, 0},
    {"GET", "/metrics", 0, AUTH_NONE, BODY_SMALL, ON_BOTH, 0, ep_metrics, 1},
    {"GET", "/healthz", 0, AUTH_NONE, BODY_SMALL, ON_BOTH, 0, ep_healthz, 1},
    {"GET", "/livez", 0, AUTH_NONE, BODY_SMALL, ON_BOTH, 0, ep_livez, 1},
};

static const char *openai_paths[] = {"/v1/completions", "/v1/chat/completions"};

static long long body_limit_of(enum api_body b, const eldrd_opts *o)
{
    switch (b) {
    case BODY_SMALL:
        return HTTP_SMALL_BODY;
    case BODY_KV:
        return o->max_kv_body;
    case BODY_MODEL:
        return o->max_model_body;
    case BODY_MAIN:
        break;
    }
    return 0;   /* the server's: --max-body */
}

/* The route as served on part: itself, a 404 naming --admin-listen (an
 * admin route on the public listener), or absent (0). */
static int route_on(const struct api_route *a, api_part part, engine_t *d, http_route *r)
{
    *r = (http_route){.method = a->method, .path = a->path, .prefix = a->prefix,
                      .auth = a->auth, .max_body = body_limit_of(a->body, d->o),
                      .refuse_when_draining = a->refuse_when_draining, .fn = a->fn, .ctx = d,
                      .light = a->light};
    if (part == API_ALL || a->where == ON_BOTH)
        return 1;
    if (part == API_ADMIN)
        return a->where == ON_ADMIN;
    if (a->where == ON_ADMIN)
        *r = (http_route){.method = a->method, .path = a->path, .prefix = a->prefix,
                          .max_body = HTTP_SMALL_BODY, .on_headers = 1,
                          .fn = ep_admin_elsewhere, .ctx = d};
    return 1;
}

int api_register(http_server *s, engine_t *d, api_part part, int openai_404)
{
    http_route r;
    for (size_t i = 0; i < sizeof api_routes / sizeof api_routes[0]; i++)
        if (route_on(&api_routes[i], part, d, &r) && http_add_route(s, &r) < 0)
            return -1;
    for (size_t i = 0; openai_404 && part != API_ADMIN && i < 2; i++) {
        r = (http_route){.method = "POST", .path = openai_paths[i], .fn = ep_proxied, .ctx = d};
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

/* An admin route asked on the public listener. */
void ep_admin_elsewhere(void *d, const http_req *r, http_resp *out)
{
    (void)d;
    http_error(out, 404, r->path, "%s %s is served on the admin listener (--admin-listen), "
               "not on this one", r->method, r->path);
}
