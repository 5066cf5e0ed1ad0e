/* http.c - the libmicrohttpd glue: route table, bodies, answers, loop
 * mode and the drain (http.h). */
#include <arpa/inet.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>
#include <stdatomic.h>

#include "err.h"
#include "http.h"
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
    int n_routes;
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
    out->json = json_pack("{s:s, s:s}", "error", msg, "where", w);
}

void http_rb_error(http_resp *out, const rb_err *e)
{
    http_error(out, e->status, e->where, "%s", e->error);
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
        out->text = strdup("{\"error\":\"out of memory\",\"where\":\"response\"}");
    }
}

static enum MHD_Result send_answer(struct MHD_Connection *c, http_server *s, http_resp *out,
                                   const char *allow, int close_after, const char *challenge,
                                   int endpoint)
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
    metrics_response_at(s->cfg.met, endpoint, out->status);
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

/* The body limit of route i (the small ones take HTTP_SMALL_BODY, so that
 * a megabyte of JSON never reaches their parsers); no route (-1) gets the
 * small limit too. */
static long long body_limit(const http_server *s, int i)
{
    long long own = i < 0 ? HTTP_SMALL_BODY : s->routes[i].max_body;
    return own && own < s->cfg.max_body ? own : s->cfg.max_body;
}

/* The client's address as text ("?" when unknown). */
static void peer_of(struct MHD_Connection *c, char *buf, size_t n)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(buf, n, "?");
    if (!i || !i->client_addr)
        return;
    const struct sockaddr *sa = i->client_addr;
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)n);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, (socklen_t)n);
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
               method, url, need == AUTH_KV && s->cfg.auth->kv[0] ? "kv" : "admin");
    return 1;
}

static enum MHD_Result count_length(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    (void)kind;
    (void)value;
    if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH))
        ++*(int *)cls;
    return MHD_YES;
}

/* First callback of a request: a context, an early 401 when a token is
 * missing, and an early 413 when the declared length is already over the
 * limit. */
static enum MHD_Result begin(http_server *s, struct MHD_Connection *c, const char *method,
                             const char *url, void **con_cls)
{
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
    http_resp deny = {0};
    int lengths = 0;
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_length, &lengths);
    if (lengths > 1) {
        /* two lengths: a proxy and eldrd could frame the body differently
         * (request smuggling); refuse rather than pick one */
        x->too_large = 1;
        x->authed = -1;
        http_error(&deny, 400, "Content-Length", "%d Content-Length headers; send one",
                   lengths);
        return send_answer(c, s, &deny, NULL, 1, NULL, x->route);
    }
    if (needs_token(s, c, method, url, x, &deny)) {
        x->too_large = 1;       /* drop whatever body follows */
        x->authed = -1;         /* and answer nothing more */
        return send_answer(c, s, &deny, NULL, 1, "Bearer realm=\"eldrd\"", x->route);
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > (unsigned long long)x->limit) {
        x->too_large = 1;
        http_resp out = {0};
        http_error(&out, 413, "body", "Content-Length %s is over the limit of %lld bytes", cl,
                   x->limit);
        return send_answer(c, s, &out, NULL, 1, NULL, x->route);
    }
    /* room for the declared body at once, so that a route body arrives
     * without reallocs; a body bigger than PRESIZE_MAX grows as it comes,
     * so that a mere header reserves no more than that */
    size_t declared = cl ? (size_t)strtoull(cl, NULL, 10) : 0;
    if (declared > 0 && declared < PRESIZE_MAX && (x->buf = malloc(declared + 1)))
        x->cap = declared + 1;
    return MHD_YES;
}

static int past_deadline(const http_server *s, const conn_ctx *x)
{
    return mono_now() - x->t_begin > (double)s->cfg.deadline;
}

static void append(conn_ctx *x, const char *data, size_t n)
{
    if (x->too_large)
        return;
    if (x->len + n > (size_t)x->limit) {
        x->too_large = 1;
        free(x->buf);
        x->buf = NULL;
        x->len = x->cap = 0;
        return;
    }
    if (x->len + n + 1 > x->cap) {
        size_t cap = x->cap ? x->cap : 1024;
        while (cap < x->len + n + 1)
            cap *= 2;
        char *b = realloc(x->buf, cap);
        if (!b) {
            x->too_large = 1;   /* answered as 413: we cannot hold it */
            return;
        }
        x->buf = b;
        x->cap = cap;
    }
    memcpy(x->buf + x->len, data, n);
    x->len += n;
}

static http_req request_of(struct MHD_Connection *c, const char *method, const char *url,
                           conn_ctx *x)
{
    if (x->buf)
        x->buf[x->len] = '\0';
    return (http_req){c, method, url, x->buf ? x->buf : "", x->len, x->peer, x->authed,
                      x->t_begin};
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
        append(x, upload_data, *upload_data_size);
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
    if (x->too_large) {
        if (x->authed < 0)
            return MHD_YES;     /* answered 401 already */
        http_error(&out, 413, "body", "request body is over the limit of %lld bytes",
                   x->limit);
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
    (void)c;
    conn_ctx *x = *con_cls;
    if (x) {
        if (x->async)
            s->routes[x->route].async->release(x->async,
                                               toe != MHD_REQUEST_TERMINATED_COMPLETED_OK);
        if (x->side && atomic_load(&x->side->done))
            free(x->side);   /* answered elsewhere, never sent: the client went */
        atomic_fetch_sub(&s->active, 1);
        int big = x->cap >= TRIM_AFTER;
        free(x->buf);
        free(x);
        /* a big body and the JSON built from it leave freed pages in this
         * thread's arena; hand them back, so RSS returns to its level */
        if (big)
            malloc_trim(0);
    }
    *con_cls = NULL;
}

/* libmicrohttpd answers some requests itself, before on_request runs: a
 * malformed Content-Length or chunk (400), headers over the connection's
 * memory (431). Version 0.9.75 has no hook to replace those HTML pages, but
 * it reports each one here, with its status first: count them, so that
 * /metrics accounts for every answer. Other messages (socket errors and
 * the like) go to the log, at most one a second, so that a hostile client
 * cannot flood it. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    http_server *s = cls;
    if (strstr(fmt, "HTTP response code is %u")) {
        unsigned code = va_arg(ap, unsigned);
        atomic_fetch_add(&s->cfg.met->protocol_errors, 1);
        metrics_response_at(s->cfg.met, -1, (int)code);
        return;
    }
    static _Atomic long last_logged;
    long now = (long)time(NULL);
    long prev = atomic_load(&last_logged);
    if (now == prev || !atomic_compare_exchange_strong(&last_logged, &prev, now))
        return;
    char msg[256];
    vsnprintf(msg, sizeof msg, fmt, ap);
    msg[strcspn(msg, "\n")] = 0;
    log_msg("libmicrohttpd: %s", msg);
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
    int i = s->n_routes++;
    s->routes[i] = *r;
    snprintf(s->names[i], sizeof s->names[i], "%s %s%s", r->method, r->path,
             r->prefix ? "{id}" : "");
    s->cfg.met->endpoint_names[i] = s->names[i];
    return 0;
}

int http_start(http_server *s, char *err, size_t errlen)
{
    const http_config *o = &s->cfg;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    int gai = getaddrinfo(o->host, port, &hints, &ai);
    if (gai)
        return eldr_errf(err, errlen, "--listen %s:%d: %s", o->host, o->port, gai_strerror(gai));
    /* loop mode: no thread of libmicrohttpd's own; it runs on epoll from
     * the loop, with everything else the loop carries */
    unsigned flags = o->loop ? MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG
                             : MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_AUTO |
                                   MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    s->mhd = MHD_start_daemon(
        flags, (uint16_t)o->port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
        mhd_log, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, s, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)o->timeout,
        MHD_OPTION_THREAD_POOL_SIZE, o->loop ? 0u : (unsigned)o->threads,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_conns,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)o->max_conns_per_ip, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->mhd)
        return eldr_errf(err, errlen, "--listen %s:%d: cannot serve (address in use?)", o->host,
                         o->port);
    if (!o->loop)
        return 0;
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    if (!(s->side = side_start()) || !(s->side_light = side_start()) || !info ||
        evloop_io_add(o->loop, &s->mhd_io, info->epoll_fd, EPOLLIN, mhd_ready, s) < 0) {
        http_stop_side(s);
        MHD_stop_daemon(s->mhd);
        s->mhd = NULL;
        return eldr_errf(err, errlen, "cannot run the HTTP service on the event loop (side "
                         "thread or epoll)");
    }
    s->mhd_ran = mono_now();
    evloop_hook_add(o->loop, &s->turn, mhd_turn, s);
    evloop_after_add(o->loop, &s->after, mhd_after, s);
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

int http_drain(http_server *s, double secs)
{
    atomic_store(&s->draining, 1);
    if (s->cfg.loop && evloop_post(s->cfg.loop, quiesce_here, s) == 0) {
        pthread_mutex_lock(&s->lock);
        while (!s->quiesced)
            pthread_cond_wait(&s->quiet, &s->lock);
        pthread_mutex_unlock(&s->lock);
    } else {
        quiesce_here(s);
    }
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
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->quiet);
    free(s);
}

int http_in_progress(http_server *s)
{
    return atomic_load(&s->active);
}

void http_metrics(void *cls, strbuf *b)
{
    http_server *s = cls;
    const union MHD_DaemonInfo *i =
        s->mhd ? MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_CURRENT_CONNECTIONS) : NULL;
    if (i)
        sb_printf(b, "# HELP eldr_open_connections HTTP connections open now.\n"
                     "# TYPE eldr_open_connections gauge\neldr_open_connections %u\n",
                  i->num_connections);
    sb_printf(b, "# HELP eldr_requests_in_progress Requests between their headers and their "
                 "answer (this one included): what a SIGTERM drain waits for.\n"
                 "# TYPE eldr_requests_in_progress gauge\neldr_requests_in_progress %d\n",
              atomic_load(&s->active));
}
