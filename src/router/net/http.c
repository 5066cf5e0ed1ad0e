/* http.c - the libmicrohttpd glue: route table, bodies, answers, loop
 * mode and the drain (http.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>
#include <stdatomic.h>

#include "err.h"
#include "http.h"
#include "http_conns.h"
#include "http_framing.h"
#include "http_side.h"
#include "log.h"
#include "opts.h"

#define HTTP_ROUTES_MAX (METRICS_ENDPOINTS - 1)
#define PRESIZE_MAX (256 * 1024)
#define TRIM_AFTER (1 << 20)     /* bodies this big give memory back after */
#define MHD_IDLE_S 0.05          /* loop mode: libmicrohttpd runs at least this often */

struct http_server {
    http_config cfg;
    char host[64];
    http_route routes[HTTP_ROUTES_MAX];
    char names[HTTP_ROUTES_MAX][48];
    int slot[HTTP_ROUTES_MAX];   /* each route's endpoint in met (servers sharing met
                                  * share the slot of a name) */
    int n_routes;
    conns_t *conns;              /* per-address counts, header deadlines */
    struct MHD_Daemon *mhd;
    side_t *side;                /* loop mode: where synchronous handlers run */
    side_t *side_light;          /* ... and the light ones (http_route.light) */
    ev_io mhd_io;                /* loop mode: libmicrohttpd's epoll fd */
    ev_hook turn;                /* loop mode: its timeouts, connections resumed */
    ev_hook after;               /* loop mode: answers resumed this turn go out */
    atomic_int resumed;          /* a connection was resumed: run libmicrohttpd */
    double mhd_ran;              /* when it last ran (monotonic s) */
    atomic_int draining;         /* no new decisions, every answer closes */
    atomic_int active;           /* requests between headers and completion */
    MHD_socket listen_fd;        /* given back by the quiesce, closed at the stop */
    pthread_mutex_t lock;        /* the quiesce handshake with the loop */
    pthread_cond_t quiet;
    int quiesced;
};

/* Per-connection request state, from the first callback to completion. */
typedef struct conn_ctx {
    char *buf;
    size_t len, cap;
    long long limit;             /* this route's body limit */
    int route;                   /* index into routes, -1 none */
    double t_begin;              /* monotonic seconds at the first callback */
    int late;                    /* its headers came after draining began */
    int too_large;
    int over_budget;             /* its body would pass --body-budget: 503, bytes dropped */
    int answered;                /* answered from its headers: nothing more to say */
    int big;                     /* held a big body: memory goes back at the end */
    int authed;                  /* a required token was given */
    char peer[64];
    void *async;                 /* an asynchronous route's request */
    struct side_job *side;       /* run beside the loop (http_side.h) */
} conn_ctx;

/* A request handed to the side thread: its handler runs there, its
 * answer is sent from the loop once the connection is resumed. */
typedef struct side_job {
    http_server *s;
    struct MHD_Connection *c;
    conn_ctx *x;
    const http_route *route;
    const char *method, *url;    /* libmicrohttpd's, valid for the request */
    http_resp out;
    atomic_int done;
} side_job;

const char *http_query(const http_req *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *http_header(const http_req *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

/* Invalid UTF-8 (an id cut inside a character, %FF in a path) becomes
 * '?': jansson refuses such strings, and the answer must stay JSON. */
static void utf8_clean(char *s)
{
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        int n = opts_utf8_len(p);
        if (n == 0)
            *p++ = '?';
        else
            p += n;
    }
}

void http_error(http_resp *out, int status, const char *where, const char *fmt, ...)
{
    char msg[512], w[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(w, sizeof w, "%s", where ? where : "");
    utf8_clean(msg);
    utf8_clean(w);
    json_decref(out->json);
    out->status = status;
    out->json = http_error_json(status, w[0] ? w : NULL, msg);
}

json_t *http_error_json(int status, const char *where, const char *msg)
{
    return json_pack("{s:{s:s, s:s, s:s?, s:i}}", "error", "message", msg, "type",
                     rb_error_type(status), "param", where, "code", status);
}

void http_rb_error(http_resp *out, const rb_err *e)
{
    http_error(out, e->status, e->where, "%s", e->error);
    out->retry_after = e->retry_after;
}

/* HEAD is answered as GET (libmicrohttpd sends the headers only). */
static int method_is(const char *method, const char *want)
{
    return !strcmp(method, want) || (!strcmp(method, "HEAD") && !strcmp(want, "GET"));
}

static int path_matches(const http_route *e, const char *path)
{
    if (e->prefix)
        return !strncmp(path, e->path, strlen(e->path));
    return !strcmp(path, e->path);
}

/* No route for this method and path: 404, or 405 with the methods the
 * path allows. */
static void no_route(const http_server *s, const char *method, const char *path,
                     http_resp *out, char *allow, size_t allowlen)
{
    allow[0] = '\0';
    for (int i = 0; i < s->n_routes; i++) {
        if (!path_matches(&s->routes[i], path))
            continue;
        size_t n = strlen(allow);
        snprintf(allow + n, allowlen - n, "%s%s", n ? ", " : "", s->routes[i].method);
    }
    if (allow[0])
        http_error(out, 405, path, "method %s not allowed (allowed: %s)", method, allow);
    else
        http_error(out, 404, path, "no such endpoint");
}

/* A JSON answer becomes its text, on the thread that built it: a side
 * job's (a 2 MB snapshot) is dumped there, not on the loop. */
static void json_to_text(http_resp *out)
{
    if (!out->json)
        return;
    out->text = json_dumps(out->json, JSON_COMPACT | JSON_REAL_PRECISION(9));
    json_decref(out->json);
    out->json = NULL;
    out->content_type = "application/json";
    if (!out->text) {
        out->status = 500;
        out->text = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":"
                           "\"server_error\",\"param\":\"response\",\"code\":500}}");
    }
}

static enum MHD_Result send_answer(struct MHD_Connection *c, http_server *s, http_resp *out,
                                   const char *allow, int close_after, const char *challenge,
                                   int route)
{
    json_to_text(out);
    char *text = out->text;
    const char *type = out->content_type ? out->content_type : "text/plain; charset=utf-8";
    size_t len = text ? strlen(text) : 0;
    struct MHD_Response *r;
    if (out->stream_read) {     /* written as the socket drains (chunked) */
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, out->stream_read,
                                              out->stream_ctx, out->stream_free);
        if (!r)
            out->stream_free(out->stream_ctx);
    } else {
        r = MHD_create_response_from_buffer(len, text ? text : (char *)"",
                                            text ? MHD_RESPMEM_MUST_FREE
                                                 : MHD_RESPMEM_PERSISTENT);
    }
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (allow && allow[0])
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    if (close_after || atomic_load(&s->draining))
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    if (challenge)
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, challenge);
    if (out->retry_after > 0) {
        char ra[24];
        snprintf(ra, sizeof ra, "%d", out->retry_after);
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, ra);
    }
    metrics_response_at(s->cfg.met, route >= 0 ? s->slot[route] : -1, out->status);
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)out->status, r);
    MHD_destroy_response(r);
    return rc;
}

/* The route a request goes to, found once when its headers arrive: its
 * index, or -1. */
static int route_index(const http_server *s, const char *method, const char *url)
{
    for (int i = 0; i < s->n_routes; i++)
        if (path_matches(&s->routes[i], url) && method_is(method, s->routes[i].method))
            return i;
    return -1;
}

/* The body limit of route i: its own (the small ones take
 * HTTP_SMALL_BODY, so that a megabyte of JSON never reaches their
 * parsers), else the server's; no route (-1) gets the small limit. */
static long long body_limit(const http_server *s, int i)
{
    long long own = i < 0 ? HTTP_SMALL_BODY : s->routes[i].max_body;
    return own ? own : s->cfg.max_body;
}

/* ---- the body budget: bytes of bodies held, all connections together ---- */

/* Take n bytes of the budget: 0, or -1 (nothing taken) when they would
 * pass it. */
static int budget_take(http_server *s, size_t n)
{
    return metrics_body_take(s->cfg.met, n, s->cfg.body_budget);
}

/* The body's buffer goes, and its bytes go back to the budget. */
static void body_drop(http_server *s, conn_ctx *x)
{
    if (x->cap)
        atomic_fetch_sub(&s->cfg.met->body_bytes, (uint64_t)x->cap);
    x->big |= x->cap >= TRIM_AFTER;
    free(x->buf);
    x->buf = NULL;
    x->len = x->cap = 0;
}

/* A body the budget cannot hold: answered 503 when its upload ends, its
 * bytes dropped meanwhile. */
static void over_budget(http_server *s, conn_ctx *x)
{
    static atomic_long last_logged;
    int big = x->cap >= TRIM_AFTER;
    body_drop(s, x);
    x->over_budget = 1;
    /* the budget is full of bodies in progress: the pages of this one go
     * back now, not when its upload ends */
    if (big)
        malloc_trim(0);
    atomic_fetch_add(&s->cfg.met->body_refusals, 1);
    if (log_once_a_second(&last_logged))
        log_msg("503 %s from %s: the request bodies held reached --body-budget (%lld bytes); "
                "its body is dropped", x->route >= 0 ? s->names[x->route] : "a request",
                x->peer, s->cfg.body_budget);
}

/* The client's address as text ("?" when unknown). */
static void peer_of(struct MHD_Connection *c, char *buf, size_t n)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    conn_addr_text(i ? i->client_addr : NULL, buf, n);
}

/* The route's token, when one is set and the request lacks it: 401,
 * answered before the body is read (a stranger's 8 MB model is never
 * taken in). */
static int needs_token(http_server *s, struct MHD_Connection *c, const char *method,
                       const char *url, conn_ctx *x, http_resp *out)
{
    if (x->route < 0 || !s->cfg.auth)
        return 0;
    auth_need need = s->routes[x->route].auth;
    const char *token = auth_token_for(s->cfg.auth, need);
    if (!token)
        return 0;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                MHD_HTTP_HEADER_AUTHORIZATION);
    if (auth_bearer_ok(h, token)) {
        x->authed = 1;
        return 0;
    }
    atomic_fetch_add(&s->cfg.met->auth_failures, 1);
    log_msg("401 %s %s from %s: %s", method, url, x->peer,
            h ? "wrong token" : "no Authorization header");
    http_error(out, 401, "authorization", "%s %s needs 'Authorization: Bearer <%s token>'",
               method, url, auth_token_name(s->cfg.auth, need));
    return 1;
}

static http_req request_of(struct MHD_Connection *c, const char *method, const char *url,
                           conn_ctx *x)
{
    if (x->buf)
        x->buf[x->len] = '\0';
    return (http_req){c, method, url, x->buf ? x->buf : "", x->len, x->peer, x->authed,
                      x->t_begin};
}

/* Answer now, from the headers, and close: whatever body follows is
 * dropped, and nothing more is answered on this request. */
static enum MHD_Result answer_at_headers(http_server *s, struct MHD_Connection *c, conn_ctx *x,
                                         http_resp *out, const char *challenge)
{
    x->too_large = 1;
    x->answered = 1;
    return send_answer(c, s, out, NULL, 1, challenge, x->route);
}

/* Room for the declared body at once, so that a route body arrives
 * without reallocs; a body bigger than PRESIZE_MAX grows as it comes, so
 * that a mere header reserves no more than that. Nothing when the budget
 * is short: the body then meets it as it grows. */
static void presize(http_server *s, conn_ctx *x, unsigned long long declared)
{
    if (declared == 0 || declared >= PRESIZE_MAX || budget_take(s, declared + 1) < 0)
        return;
    if ((x->buf = malloc(declared + 1)))
        x->cap = declared + 1;
    else
        atomic_fetch_sub(&s->cfg.met->body_bytes, (uint64_t)(declared + 1));
}

/* First callback of a request (its headers are complete): a context, an
 * early 400, 413 or 501 for a framing eldrd cannot read (framing.h), 401
 * when a token is missing, the answer of a route answered from its
 * headers, and an early 413 when the declared length is already over the
 * limit. */
static enum MHD_Result begin(http_server *s, struct MHD_Connection *c, const char *method,
                             const char *url, void **con_cls)
{
    const union MHD_ConnectionInfo *sc =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (sc)
        conns_headers(sc->socket_context);
    conn_ctx *x = calloc(1, sizeof *x);
    if (!x)
        return MHD_NO;
    *con_cls = x;
    atomic_fetch_add(&s->active, 1);
    x->late = atomic_load(&s->draining);
    x->t_begin = mono_now();
    peer_of(c, x->peer, sizeof x->peer);
    x->route = route_index(s, method, url);
    x->limit = body_limit(s, x->route);
    http_resp out = {0};
    framing f;
    framing_verdict v;
    if (http_framing_judge(c, &f, &v)) {
        http_error(&out, v.status, v.param, "%s", v.msg);
        return answer_at_headers(s, c, x, &out, NULL);
    }
    if (needs_token(s, c, method, url, x, &out))
        return answer_at_headers(s, c, x, &out, "Bearer realm=\"eldrd\"");
    const http_route *rt = x->route >= 0 ? &s->routes[x->route] : NULL;
    if (rt && rt->on_headers) {
        out.status = 200;
        http_req req = request_of(c, method, url, x);
        rt->fn(rt->ctx, &req, &out);
        return answer_at_headers(s, c, x, &out, NULL);
    }
    if (f.lengths && f.length > (unsigned long long)x->limit) {
        x->too_large = 1;
        http_error(&out, 413, "body", "Content-Length %llu is over the limit of %lld bytes",
                   f.length, x->limit);
        return send_answer(c, s, &out, NULL, 1, NULL, x->route);
    }
    presize(s, x, f.lengths ? f.length : 0);
    return MHD_YES;
}

static int past_deadline(const http_server *s, const conn_ctx *x)
{
    return mono_now() - x->t_begin > (double)s->cfg.deadline;
}

/* A piece of the body: kept, unless it passes the route's limit (413)
 * or the budget (503); then the body is dropped. */
static void append(http_server *s, conn_ctx *x, const char *data, size_t n)
{
    if (x->too_large || x->over_budget)
        return;
    if (x->len + n > (size_t)x->limit) {
        x->too_large = 1;
        body_drop(s, x);
        return;
    }
    if (x->len + n + 1 > x->cap) {
        size_t cap = x->cap ? x->cap : 1024;
        while (cap < x->len + n + 1)
            cap *= 2;
        if (cap >= (size_t)x->limit)   /* the limit's bytes and the NUL, no more */
            cap = (size_t)x->limit + 1;
        if (budget_take(s, cap - x->cap) < 0) {
            over_budget(s, x);
            return;
        }
        char *b = realloc(x->buf, cap);
        if (!b) {
            atomic_fetch_sub(&s->cfg.met->body_bytes, (uint64_t)(cap - x->cap));
            body_drop(s, x);
            x->too_large = 1;   /* answered as 413: we cannot hold it */
            return;
        }
        x->buf = b;
        x->cap = cap;
    }
    memcpy(x->buf + x->len, data, n);
    x->len += n;
}

/* An asynchronous route: begin once the body is in, then answer when the
 * handler has an answer (the connection is suspended until then, and
 * resumed by the handler). */
static enum MHD_Result run_async(http_server *s, struct MHD_Connection *c, conn_ctx *x,
                                 const char *method, const char *url)
{
    const http_route *rt = &s->routes[x->route];
    http_resp out = {.status = 200};
    if (!x->async) {
        rb_err e;
        if (x->late) {
            http_error(&out, 503, url, "eldrd is draining (shutting down): send this request "
                       "through another router");
            return send_answer(c, s, &out, NULL, 1, NULL, x->route);
        }
        http_req req = request_of(c, method, url, x);
        x->async = rt->async->begin(rt->ctx, &req, &e);
        body_drop(s, x);   /* the handler keeps what it needs of it */
        if (!x->async) {
            http_rb_error(&out, &e);
            return send_answer(c, s, &out, NULL, 0, NULL, x->route);
        }
    }
    int ready = 0;
    rt->async->poll(x->async, &out, &ready);
    if (!ready)
        return MHD_YES;          /* suspended; resumed when the answer comes */
    return send_answer(c, s, &out, NULL, 0, NULL, x->route);
}

static void side_run(void *cls)
{
    side_job *j = cls;
    http_req req = request_of(j->c, j->method, j->url, j->x);
    j->route->fn(j->route->ctx, &req, &j->out);
    json_to_text(&j->out);
    atomic_store(&j->done, 1);
    http_resume(j->s, j->c);
}

/* Loop mode: a synchronous route runs on the side thread, so that the
 * loop goes on meanwhile (http_side.h). Called again when the connection
 * is resumed: then the answer goes out. */
static enum MHD_Result beside(http_server *s, struct MHD_Connection *c, conn_ctx *x,
                              const char *method, const char *url)
{
    side_job *j = x->side;
    if (j) {
        if (!atomic_load(&j->done))
            return MHD_YES;   /* not yet (a spurious call) */
        x->side = NULL;
        enum MHD_Result rc = send_answer(c, s, &j->out, NULL, 0, NULL, x->route);
        free(j);
        return rc;
    }
    if (!(j = calloc(1, sizeof *j))) {
        http_resp out = {.status = 200};
        http_error(&out, 503, url, "out of memory");
        return send_answer(c, s, &out, NULL, 1, NULL, x->route);
    }
    *j = (side_job){.s = s, .c = c, .x = x, .route = &s->routes[x->route], .method = method,
                    .url = url, .out = {.status = 200}};
    x->side = j;
    MHD_suspend_connection(c);
    if (side_submit(j->route->light ? s->side_light : s->side, side_run, j) < 0) {
        MHD_resume_connection(c);   /* the side thread has stopped: here, then */
        side_run(j);
    }
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version;
    http_server *s = cls;
    if (!*con_cls)
        return begin(s, c, method, url, con_cls);
    conn_ctx *x = *con_cls;
    if (*upload_data_size) {
        append(s, x, upload_data, *upload_data_size);
        *upload_data_size = 0;
        if (past_deadline(s, x)) {
            /* a body trickled byte by byte resets the idle timer forever;
             * the whole request has --request-deadline seconds. An answer
             * cannot be queued in the middle of a body (libmicrohttpd),
             * so the connection is cut. */
            atomic_fetch_add(&s->cfg.met->deadline_cuts, 1);
            log_msg("cut %s %s from %s: its body took more than %d s "
                    "(--request-deadline)", method, url, x->peer, s->cfg.deadline);
            return MHD_NO;
        }
        return MHD_YES;
    }
    http_resp out = {.status = 200};
    char allow[64];
    if (x->answered)
        return MHD_YES;
    if (x->too_large) {
        http_error(&out, 413, "body", "request body is over the limit of %lld bytes",
                   x->limit);
        return send_answer(c, s, &out, NULL, 1, NULL, x->route);
    }
    if (x->over_budget) {
        http_error(&out, 503, "body", "eldrd holds as many request bodies as --body-budget "
                   "(%lld bytes) allows; send it again later", s->cfg.body_budget);
        return send_answer(c, s, &out, NULL, 1, NULL, x->route);
    }
    const http_route *rt = x->route >= 0 ? &s->routes[x->route] : NULL;
    if (rt && rt->async)
        return run_async(s, c, x, method, url);
    if (!rt)
        no_route(s, method, url, &out, allow, sizeof allow);
    if (rt && rt->refuse_when_draining && x->late) {   /* one already being uploaded is served */
        http_error(&out, 503, "route", "eldrd is draining (shutting down): route this request "
                   "through another router");
        return send_answer(c, s, &out, NULL, 1, NULL, x->route);
    }
    if (rt && s->side)
        return beside(s, c, x, method, url);
    if (rt) {
        http_req req = request_of(c, method, url, x);
        rt->fn(rt->ctx, &req, &out);
    }
    return send_answer(c, s, &out, rt ? NULL : allow, 0, NULL, rt ? x->route : -1);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    http_server *s = cls;
    conn_ctx *x = *con_cls;
    if (x) {
        /* the next request's headers are due from now */
        const union MHD_ConnectionInfo *sc =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        if (sc)
            conns_request_done(s->conns, sc->socket_context);
        if (x->async)
            s->routes[x->route].async->release(x->async,
                                               toe != MHD_REQUEST_TERMINATED_COMPLETED_OK);
        if (x->side && atomic_load(&x->side->done))
            free(x->side);   /* answered elsewhere, never sent: the client went */
        atomic_fetch_sub(&s->active, 1);
        body_drop(s, x);
        int big = x->big;
        free(x);
        /* a big body and the JSON built from it leave freed pages in this
         * thread's arena; hand them back, so RSS returns to its level */
        if (big)
            malloc_trim(0);
    }
    *con_cls = NULL;
}

/* libmicrohttpd answers some requests itself, before on_request runs: a
 * malformed Content-Length (400, 413), a malformed chunk (400), headers
 * over the connection's memory (431). Version 0.9.75 has no hook to
 * replace those HTML pages, but it reports each one here, with its status
 * first. A refusal at the headers (Content-Length), whose HTML answer that
 * version frames wrong, gets eldrd's answer instead (http_framing.h); every
 * one is counted, so that /metrics accounts for every answer. Other messages (socket errors and
 * the like) go to the log, at most one a second, so that a hostile client
 * cannot flood it. */
/* The request libmicrohttpd is refusing at its headers now, if any: the
 * verdict's answer (framing.h) goes on its socket instead of
 * libmicrohttpd's (http_framing.h). The status sent, or 0. */
static int refuse_at_headers(http_server *s, unsigned code)
{
    struct MHD_Connection *c;
    int fd;
    if (!http_framing_refusing(s->conns, !s->cfg.loop, &c, &fd))
        return 0;
    framing f;
    framing_verdict v;
    http_resp out = {0};
    if (http_framing_judge(c, &f, &v))
        http_error(&out, v.status, v.param, "%s", v.msg);
    else   /* refused for a reason the verdict does not know: its code, said plainly */
        http_error(&out, (int)code, "headers", "the request's headers were refused "
                   "(libmicrohttpd's check, HTTP %u)", code);
    json_to_text(&out);   /* out of memory: still the status line, and the close */
    http_framing_answer(fd, out.status, out.text ? out.text : "{}");
    free(out.text);
    return out.status;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    http_server *s = cls;
    if (strstr(fmt, "HTTP response code is %u")) {
        unsigned code = va_arg(ap, unsigned);
        int sent = refuse_at_headers(s, code);
        atomic_fetch_add(&s->cfg.met->protocol_errors, 1);
        metrics_response_at(s->cfg.met, -1, sent ? sent : (int)code);
        return;
    }
    /* at its limit libmicrohttpd 0.9.75 stops polling the listening
     * socket, and new connections wait in the kernel's queue; it closes
     * one itself only on a path its accept loop normally avoids (one that
     * passed the loop's check and not the set-up's): counted all the same */
    if (strstr(fmt, "reached connection limit"))
        metrics_refused(s->cfg.met, conns_listener(s->conns), REFUSED_MAX_CONNS);
    static atomic_long last_logged;
    if (!log_once_a_second(&last_logged))
        return;
    char msg[256];
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = 0;
    log_msg("libmicrohttpd: %s", msg);
}

/* The accept policy: the address's connections (http_conns.h), in place
 * of libmicrohttpd's per-IP limit, which counts each IPv6 address alone.
 * A refused connection is closed at once: the client sees it reset (or
 * closed), not queued. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t len)
{
    (void)len;
    http_server *s = cls;
    return conns_admit(s->conns, addr) ? MHD_YES : MHD_NO;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode toe)
{
    http_server *s = cls;
    if (toe != MHD_CONNECTION_NOTIFY_STARTED) {
        conns_closed(s->conns, socket_ctx);
        return;
    }
    const union MHD_ConnectionInfo *fd =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *a =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    conns_started(s->conns, fd ? fd->connect_fd : -1, a ? a->client_addr : NULL, c, socket_ctx);
}

/* ---- loop mode ---------------------------------------------------------- */

/* libmicrohttpd's turn: accept, read, call on_request, send what is
 * ready. */
static void run_mhd(http_server *s)
{
    atomic_store(&s->resumed, 0);
    MHD_run(s->mhd);
    s->mhd_ran = mono_now();
}

static void mhd_ready(evloop *l, ev_io *w, uint32_t events)
{
    (void)l;
    (void)events;
    run_mhd(w->cls);
}

/* Before the loop sleeps: libmicrohttpd's own clock (0 when it has work
 * its epoll fd will not signal again: edge-triggered connections still
 * ready), and at least every MHD_IDLE_S. */
static int mhd_turn(evloop *l, void *cls)
{
    (void)l;
    http_server *s = cls;
    MHD_UNSIGNED_LONG_LONG due = MHD_IDLE_S * 1000;
    if (MHD_get_timeout(s->mhd, &due) != MHD_YES)
        due = MHD_IDLE_S * 1000;
    if (due == 0 || atomic_load(&s->resumed) || mono_now() - s->mhd_ran >= MHD_IDLE_S) {
        run_mhd(s);
        if (MHD_get_timeout(s->mhd, &due) != MHD_YES)
            due = MHD_IDLE_S * 1000;
    }
    return due < MHD_IDLE_S * 1000 ? (int)due : (int)(MHD_IDLE_S * 1000);
}

/* After the turn's events: connections its callbacks resumed send their
 * answers now, in the same turn. */
static int mhd_after(evloop *l, void *cls)
{
    (void)l;
    http_server *s = cls;
    if (atomic_load(&s->resumed))
        run_mhd(s);
    return -1;
}

void http_suspend(struct MHD_Connection *c)
{
    MHD_suspend_connection(c);
}

void http_resume(http_server *s, struct MHD_Connection *c)
{
    MHD_resume_connection(c);
    if (!s->cfg.loop)
        return;
    atomic_store(&s->resumed, 1);
    if (!evloop_on_loop(s->cfg.loop))
        evloop_wake(s->cfg.loop);
}

/* ---- life ----------------------------------------------------------------- */

http_server *http_new(const http_config *cfg, char *err, size_t errlen)
{
    http_server *s = calloc(1, sizeof *s);
    if (!s) {
        eldr_errf(err, errlen, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    snprintf(s->host, sizeof s->host, "%s", cfg->host);
    s->cfg.host = s->host;
    s->listen_fd = MHD_INVALID_SOCKET;
    s->mhd_io.fd = -1;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->quiet, NULL);
    return s;
}

int http_add_route(http_server *s, const http_route *r)
{
    if (s->n_routes >= HTTP_ROUTES_MAX)
        return -1;
    int i = s->n_routes;
    snprintf(s->names[i], sizeof s->names[i], "%s %s%s", r->method, r->path,
             r->prefix ? "{id}" : "");
    /* its endpoint in met: the slot of that name when another server
     * sharing met has it, else the first free one */
    const char **names = s->cfg.met->endpoint_names;
    int slot = 0;
    while (slot < METRICS_ENDPOINTS - 1 && names[slot] && strcmp(names[slot], s->names[i]))
        slot++;
    if (slot == METRICS_ENDPOINTS - 1)
        return -1;
    if (!names[slot])
        names[slot] = s->names[i];
    s->slot[i] = slot;
    s->routes[i] = *r;
    s->n_routes++;
    return 0;
}

/* The address as it is written on the command line: [v6]:port. */
static void where_text(const http_config *o, char *buf, size_t n)
{
    snprintf(buf, n, strchr(o->host, ':') ? "%s [%s]:%d" : "%s %s:%d", o->opt, o->host,
             o->port);
}

/* An IPv4-mapped IPv6 address (::ffff:a.b.c.d) as the IPv4 address it
 * maps; any other address as it is. */
static socklen_t unmap(const struct sockaddr *sa, socklen_t len, struct sockaddr_storage *out)
{
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
    if (sa->sa_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
        memcpy(out, sa, len);
        return len;
    }
    struct sockaddr_in s4 = {.sin_family = AF_INET, .sin_port = s6->sin6_port};
    memcpy(&s4.sin_addr, s6->sin6_addr.s6_addr + 12, 4);
    memcpy(out, &s4, sizeof s4);
    return sizeof s4;
}

/* The listening socket, made here rather than by libmicrohttpd, so that a
 * failure says what failed (one line). libmicrohttpd binds an IPv6
 * address on an IPv6-only socket, where an IPv4-mapped address cannot be
 * bound (EINVAL, which it reported as a failed bind): such an address is
 * bound as the IPv4 address it maps, which the same clients reach. The fd,
 * or -1 with err. */
static int listen_socket(const http_config *o, char *err, size_t errlen)
{
    char where[160];
    where_text(o, where, sizeof where);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    int gai = getaddrinfo(o->host, port, &hints, &ai);
    if (gai)
        return eldr_errf(err, errlen, "%s: %s", where, gai_strerror(gai));
    struct sockaddr_storage ss;
    socklen_t len = unmap(ai->ai_addr, ai->ai_addrlen, &ss);
    freeaddrinfo(ai);
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return eldr_errf(err, errlen, "%s: cannot make a socket: %s", where, strerror(errno));
    int one = 1;
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        (ss.ss_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0) ||
        bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, SOMAXCONN) < 0) {
        int e = errno;
        close(fd);
        return eldr_errf(err, errlen, "%s: cannot listen there: %s", where, strerror(e));
    }
    return fd;
}

/* Run libmicrohttpd on the listening socket fd. */
static struct MHD_Daemon *start_mhd(http_server *s, int fd, int v6)
{
    const http_config *o = &s->cfg;
    /* loop mode: no thread of libmicrohttpd's own; it runs on epoll from
     * the loop, with everything else the loop carries */
    unsigned flags = o->loop ? MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG
                             : MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_AUTO |
                                   MHD_USE_ERROR_LOG;
    if (v6)
        flags |= MHD_USE_IPv6;
    /* a thread pool only with libmicrohttpd's own threads: a size of 0 in
     * loop mode made it print a warning at every start */
    struct MHD_OptionItem pool[] = {
        {o->loop ? MHD_OPTION_END : MHD_OPTION_THREAD_POOL_SIZE, o->loop ? 0 : o->threads, NULL},
        {MHD_OPTION_END, 0, NULL}};
    return MHD_start_daemon(
        flags, 0, on_accept, s, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
        MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->timeout,
        MHD_OPTION_ARRAY, pool, MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_conns, MHD_OPTION_END);
}

/* Loop mode: libmicrohttpd's epoll fd on the loop, the side thread. */
static int on_loop(http_server *s, char *err, size_t errlen)
{
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    if (!(s->side = side_start()) || !(s->side_light = side_start()) || !info ||
        evloop_io_add(s->cfg.loop, &s->mhd_io, info->epoll_fd, EPOLLIN, mhd_ready, s) < 0) {
        http_stop_side(s);
        return eldr_errf(err, errlen, "cannot run the HTTP service on the event loop (side "
                         "thread or epoll)");
    }
    s->mhd_ran = mono_now();
    evloop_hook_add(s->cfg.loop, &s->turn, mhd_turn, s);
    evloop_after_add(s->cfg.loop, &s->after, mhd_after, s);
    return 0;
}

int http_start(http_server *s, char *err, size_t errlen)
{
    const http_config *o = &s->cfg;
    if (!(s->conns = conns_new(o->max_conns, o->max_conns_per_ip, o->header_timeout, o->met,
                               o->name)) ||
        conns_start(s->conns) < 0)
        return eldr_errf(err, errlen, "%s listener: cannot start its connection table "
                         "(out of memory or threads)", o->name);
    int fd = listen_socket(o, err, errlen);
    if (fd < 0)
        return -1;
    metrics_listener_fd(o->met, conns_listener(s->conns), fd);
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    int v6 = getsockname(fd, (struct sockaddr *)&ss, &len) == 0 && ss.ss_family == AF_INET6;
    /* on a failure libmicrohttpd may have closed fd already: not closed
     * again here (eldrd exits) */
    if (!(s->mhd = start_mhd(s, fd, v6))) {
        metrics_listener_fd(o->met, conns_listener(s->conns), -1);
        char where[160];
        where_text(o, where, sizeof where);
        return eldr_errf(err, errlen, "%s: libmicrohttpd cannot serve it", where);
    }
    if (o->loop && on_loop(s, err, errlen) < 0) {
        metrics_listener_fd(o->met, conns_listener(s->conns), -1);
        MHD_stop_daemon(s->mhd);
        s->mhd = NULL;
        return -1;
    }
    return 0;
}

/* Stop accepting, on the loop's thread, which owns the daemon. */
static void quiesce_here(void *cls)
{
    http_server *s = cls;
    MHD_socket fd = MHD_quiesce_daemon(s->mhd);
    pthread_mutex_lock(&s->lock);
    s->listen_fd = fd;
    s->quiesced = 1;
    pthread_cond_broadcast(&s->quiet);
    pthread_mutex_unlock(&s->lock);
}

void http_quiesce(http_server *s)
{
    if (atomic_exchange(&s->draining, 1) || !s->mhd)
        return;
    if (s->cfg.loop && evloop_post(s->cfg.loop, quiesce_here, s) == 0) {
        pthread_mutex_lock(&s->lock);
        while (!s->quiesced)
            pthread_cond_wait(&s->quiet, &s->lock);
        pthread_mutex_unlock(&s->lock);
    } else {
        quiesce_here(s);
    }
}

int http_drain(http_server *s, double secs)
{
    http_quiesce(s);
    struct timespec nap = {0, 10 * 1000 * 1000};
    double t0 = mono_now();
    /* requests in progress, not connections: an idle keep-alive
     * connection holds no work, and waiting on it kept eldrd routing for
     * the whole grace period */
    while (atomic_load(&s->active) > 0 && mono_now() - t0 <= secs)
        nanosleep(&nap, NULL);
    return atomic_load(&s->active);
}

void http_stop_side(http_server *s)
{
    side_free(s->side);
    side_free(s->side_light);
    s->side = s->side_light = NULL;
}

void http_stop(http_server *s)
{
    if (!s->mhd)
        return;
    if (s->cfg.loop) {
        /* the loop is gone: what the front ends failed goes out from here */
        evloop_hook_del(s->cfg.loop, &s->turn);
        evloop_hook_del(s->cfg.loop, &s->after);
        evloop_io_del(s->cfg.loop, &s->mhd_io);
        for (int i = 0; i < 3; i++)
            MHD_run(s->mhd);
    }
    /* /metrics reads the socket's queue: not once it is closed */
    metrics_listener_fd(s->cfg.met, conns_listener(s->conns), -1);
    MHD_stop_daemon(s->mhd);
    s->mhd = NULL;
    if (s->listen_fd != MHD_INVALID_SOCKET)
        close(s->listen_fd);
    s->listen_fd = MHD_INVALID_SOCKET;
}

void http_free(http_server *s)
{
    if (!s)
        return;
    http_stop_side(s);
    http_stop(s);
    conns_free(s->conns);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->quiet);
    free(s);
}

int http_in_progress(http_server *s)
{
    return atomic_load(&s->active);
}

int http_open_connections(http_server *s)
{
    return s->conns ? conns_open(s->conns) : 0;
}

void http_metrics(http_server *const *servers, int n, strbuf *b)
{
    int open = 0, active = 0;
    for (int i = 0; i < n; i++) {
        if (!servers[i])
            continue;
        open += http_open_connections(servers[i]);
        active += atomic_load(&servers[i]->active);
    }
    sb_printf(b, "# HELP eldr_open_connections HTTP connections open now (every listener).\n"
                 "# TYPE eldr_open_connections gauge\neldr_open_connections %d\n", open);
    sb_printf(b, "# HELP eldr_requests_in_progress Requests between their headers and their "
                 "answer (this one included): what a SIGTERM drain waits for.\n"
                 "# TYPE eldr_requests_in_progress gauge\neldr_requests_in_progress %d\n",
              active);
}
