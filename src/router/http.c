/* http.c - libmicrohttpd glue and the endpoint table (http.h). */
#include <arpa/inet.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <netinet/in.h>
#include <stdatomic.h>

#include "endpoints.h"
#include "err.h"
#include "http.h"
#include "opts.h"
#include "http_side.h"
#include "proxy.h"

static const struct endpoint {
    const char *method;
    const char *path;
    int prefix;                  /* path is a prefix (explain/{id}) */
    http_handler fn;
    auth_need auth;              /* the token it needs, when tokens are set */
    long long max_body;          /* its body limit; 0 = --max-body */
} endpoints[] = {
    {"POST", "/v1/route", 0, ep_route, AUTH_NONE, 0},
    {"POST", "/v1/finish", 0, ep_finish, AUTH_NONE, HTTP_SMALL_BODY},
    {"POST", "/v1/kv-events", 0, ep_kv_events, AUTH_KV, 0},
    {"GET", "/v1/snapshot", 0, ep_snapshot, AUTH_NONE, HTTP_SMALL_BODY},
    {"GET", "/v1/explain/", 1, ep_explain, AUTH_NONE, HTTP_SMALL_BODY},
    {"GET", "/v1/window", 0, ep_window, AUTH_NONE, HTTP_SMALL_BODY},
    {"PUT", "/v1/model", 0, ep_put_model, AUTH_ADMIN, 0},
    {"PUT", "/v1/config", 0, ep_put_config, AUTH_ADMIN, HTTP_SMALL_BODY},
    {"POST", "/v1/inflight/clear", 0, ep_inflight_clear, AUTH_ADMIN, HTTP_SMALL_BODY},
    {"GET", "/metrics", 0, ep_metrics, AUTH_NONE, HTTP_SMALL_BODY},
    {"GET", "/healthz", 0, ep_healthz, AUTH_NONE, HTTP_SMALL_BODY},
    /* proxy mode (proxy.h): answered by the proxy, not by fn */
    {"POST", "/v1/completions", 0, ep_proxied, AUTH_NONE, 0},
    {"POST", "/v1/chat/completions", 0, ep_proxied, AUTH_NONE, 0},
};
#define N_ENDPOINTS (sizeof endpoints / sizeof endpoints[0])

#define PRESIZE_MAX (256 * 1024)
#define TRIM_AFTER (1 << 20)     /* bodies this big give memory back after */

/* Per-connection request state, from the first callback to completion. */
typedef struct conn_ctx {
    char *buf;
    size_t len, cap;
    long long limit;             /* this endpoint's body limit */
    int endpoint;                /* index into endpoints, -1 none */
    double t_begin;              /* monotonic seconds at the first callback */
    int late;                    /* its headers came after draining began */
    int too_large;
    int authed;                  /* a required token was given */
    char peer[64];
    pxreq *px;                   /* a proxied request (proxy mode) */
    struct side_job *side;       /* run beside the loop (proxy mode, http_side.h) */
} conn_ctx;

/* A request handed to the side thread: its handler runs there, its
 * answer is sent from the loop once the connection is resumed. */
typedef struct side_job {
    eldrd_t *d;
    struct MHD_Connection *c;
    conn_ctx *x;
    http_handler fn;
    const char *method, *url;    /* libmicrohttpd's, valid for the request */
    http_resp out;
    atomic_int done;
} side_job;

const char *http_query(const http_req *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
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

static int path_matches(const struct endpoint *e, const char *path)
{
    if (e->prefix)
        return !strncmp(path, e->path, strlen(e->path));
    return !strcmp(path, e->path);
}

/* No endpoint for this method and path: 404, or 405 with the methods
 * the path allows. */
static void no_endpoint(const char *method, const char *path, http_resp *out, char *allow,
                        size_t allowlen)
{
    allow[0] = '\0';
    for (size_t i = 0; i < N_ENDPOINTS; i++) {
        if (!path_matches(&endpoints[i], path))
            continue;
        size_t n = strlen(allow);
        snprintf(allow + n, allowlen - n, "%s%s", n ? ", " : "", endpoints[i].method);
    }
    if (allow[0])
        http_error(out, 405, path, "method %s not allowed (allowed: %s)", method, allow);
    else
        http_error(out, 404, path, "no such endpoint");
}

static enum MHD_Result send_answer(struct MHD_Connection *c, eldrd_t *d, http_resp *out,
                                   const char *allow, int close_after, const char *challenge,
                                   int endpoint)
{
    char *text = out->text;
    const char *type = out->content_type ? out->content_type : "text/plain; charset=utf-8";
    if (out->json) {
        text = json_dumps(out->json, JSON_COMPACT | JSON_REAL_PRECISION(9));
        json_decref(out->json);
        out->json = NULL;
        type = "application/json";
        if (!text) {
            out->status = 500;
            text = strdup("{\"error\":\"out of memory\",\"where\":\"response\"}");
        }
    }
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
    if (close_after || atomic_load(&d->draining))
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    if (challenge)
        MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, challenge);
    metrics_response_at(&d->met, endpoint, out->status);
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)out->status, r);
    MHD_destroy_response(r);
    return rc;
}

/* The endpoint a request goes to, found once when its headers arrive:
 * its index, or -1. */
static int endpoint_index(const char *method, const char *url)
{
    for (size_t i = 0; i < N_ENDPOINTS; i++)
        if (path_matches(&endpoints[i], url) && method_is(method, endpoints[i].method))
            return (int)i;
    return -1;
}

/* The body limit of endpoint e (the small ones take HTTP_SMALL_BODY, so
 * that a megabyte of JSON never reaches their parsers); no endpoint (-1)
 * gets the small limit too. */
static long long body_limit(const eldrd_t *d, int e)
{
    long long own = e < 0 ? HTTP_SMALL_BODY : endpoints[e].max_body;
    return own && own < d->o->max_body ? own : d->o->max_body;
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

/* The endpoint's token, when one is set and the request lacks it: 401,
 * answered before the body is read (a stranger's 8 MB model is never
 * taken in). */
static int needs_token(eldrd_t *d, struct MHD_Connection *c, const char *method,
                       const char *url, conn_ctx *x, http_resp *out)
{
    if (x->endpoint < 0)
        return 0;
    auth_need need = endpoints[x->endpoint].auth;
    const char *token = auth_token_for(&d->auth, need);
    if (!token)
        return 0;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                MHD_HTTP_HEADER_AUTHORIZATION);
    if (auth_bearer_ok(h, token)) {
        x->authed = 1;
        return 0;
    }
    atomic_fetch_add(&d->met.auth_failures, 1);
    daemon_log(d, "401 %s %s from %s: %s", method, url, x->peer,
               h ? "wrong token" : "no Authorization header");
    http_error(out, 401, "authorization", "%s %s needs 'Authorization: Bearer <%s token>'",
               method, url, need == AUTH_KV && d->auth.kv[0] ? "kv" : "admin");
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
static enum MHD_Result begin(eldrd_t *d, struct MHD_Connection *c, const char *method,
                             const char *url, void **con_cls)
{
    conn_ctx *x = calloc(1, sizeof *x);
    if (!x)
        return MHD_NO;
    *con_cls = x;
    atomic_fetch_add(&d->active, 1);
    x->late = atomic_load(&d->draining);
    x->t_begin = state_mono_now();
    peer_of(c, x->peer, sizeof x->peer);
    x->endpoint = endpoint_index(method, url);
    x->limit = body_limit(d, x->endpoint);
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
        return send_answer(c, d, &deny, NULL, 1, NULL, x->endpoint);
    }
    if (needs_token(d, c, method, url, x, &deny)) {
        x->too_large = 1;       /* drop whatever body follows */
        x->authed = -1;         /* and answer nothing more */
        return send_answer(c, d, &deny, NULL, 1, "Bearer realm=\"eldrd\"", x->endpoint);
    }
    const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && strtoull(cl, NULL, 10) > (unsigned long long)x->limit) {
        x->too_large = 1;
        http_resp out = {0};
        http_error(&out, 413, "body", "Content-Length %s is over the limit of %lld bytes", cl,
                   x->limit);
        return send_answer(c, d, &out, NULL, 1, NULL, x->endpoint);
    }
    /* room for the declared body at once, so that a route body arrives
     * without reallocs; a body bigger than PRESIZE_MAX grows as it comes,
     * so that a mere header reserves no more than that */
    size_t declared = cl ? (size_t)strtoull(cl, NULL, 10) : 0;
    if (declared > 0 && declared < PRESIZE_MAX && (x->buf = malloc(declared + 1)))
        x->cap = declared + 1;
    return MHD_YES;
}

static int past_deadline(const eldrd_t *d, const conn_ctx *x)
{
    return state_mono_now() - x->t_begin > (double)d->o->deadline;
}

static void append(eldrd_t *d, conn_ctx *x, const char *data, size_t n)
{
    (void)d;
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

/* The OpenAI paths without --proxy. */
void ep_proxied(eldrd_t *d, const http_req *r, http_resp *out)
{
    (void)d;
    http_error(out, 404, r->path, "eldrd serves %s only in proxy mode (start it with --proxy "
               "--prefill URL,... --decode URL,...)", r->path);
}

/* A proxied request: hand it to the proxy once its body is in, then
 * answer when the proxy has an answer (the connection is suspended
 * until then, and resumed by the upstream thread). */
static enum MHD_Result proxied(eldrd_t *d, struct MHD_Connection *c, conn_ctx *x,
                               const char *url)
{
    http_resp out = {.status = 200};
    if (!x->px) {
        rb_err e;
        /* the endpoint found from the headers says which of the two */
        int chat = !strcmp(endpoints[x->endpoint].path, "/v1/chat/completions");
        if (x->late) {
            http_error(&out, 503, url, "eldrd is draining (shutting down): send this request "
                       "through another router");
            return send_answer(c, d, &out, NULL, 1, NULL, x->endpoint);
        }
        if (x->buf)
            x->buf[x->len] = '\0';
        const char *id = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id");
        x->px = proxy_begin(d->proxy, c, x->buf ? x->buf : "", x->len, chat, id, &e);
        if (!x->px) {
            http_rb_error(&out, &e);
            return send_answer(c, d, &out, NULL, 0, NULL, x->endpoint);
        }
    }
    px_answer a;
    proxy_poll(x->px, &a);
    if (!a.ready)
        return MHD_YES;          /* suspended; resumed when the answer comes */
    out.status = a.status;
    out.content_type = a.content_type;
    if (a.stream) {
        out.stream_read = proxy_stream_read;
        out.stream_free = proxy_stream_free;
        out.stream_ctx = x->px;
    } else {
        out.text = a.body;
    }
    return send_answer(c, d, &out, NULL, 0, NULL, x->endpoint);
}

static void side_run(void *cls)
{
    side_job *j = cls;
    conn_ctx *x = j->x;
    http_req req = {j->c, j->method, j->url, x->buf ? x->buf : "", x->len, x->peer, x->authed,
                    x->t_begin};
    if (x->buf)
        x->buf[x->len] = '\0';
    j->fn(j->d, &req, &j->out);
    atomic_store(&j->done, 1);
    MHD_resume_connection(j->c);
    proxy_resumed(j->d->proxy);
}

/* Proxy mode: a request that is not proxied runs on the side thread, so
 * that the loop goes on proxying meanwhile (http_side.h). Called again
 * when the connection is resumed: then the answer goes out. */
static enum MHD_Result beside(eldrd_t *d, struct MHD_Connection *c, conn_ctx *x,
                              http_handler fn, const char *method, const char *url)
{
    side_job *j = x->side;
    if (j) {
        if (!atomic_load(&j->done))
            return MHD_YES;   /* not yet (a spurious call) */
        x->side = NULL;
        enum MHD_Result rc = send_answer(c, d, &j->out, NULL, 0, NULL, x->endpoint);
        free(j);
        return rc;
    }
    if (!(j = calloc(1, sizeof *j))) {
        http_resp out = {.status = 200};
        http_error(&out, 503, url, "out of memory");
        return send_answer(c, d, &out, NULL, 1, NULL, x->endpoint);
    }
    *j = (side_job){.d = d, .c = c, .x = x, .fn = fn, .method = method, .url = url,
                    .out = {.status = 200}};
    x->side = j;
    MHD_suspend_connection(c);
    if (side_submit(d->side, side_run, j) < 0) {
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
    eldrd_t *d = cls;
    if (!*con_cls)
        return begin(d, c, method, url, con_cls);
    conn_ctx *x = *con_cls;
    if (*upload_data_size) {
        append(d, x, upload_data, *upload_data_size);
        *upload_data_size = 0;
        if (past_deadline(d, x)) {
            /* a body trickled byte by byte resets the idle timer forever;
             * the whole request has --request-deadline seconds. An answer
             * cannot be queued in the middle of a body (libmicrohttpd),
             * so the connection is cut. */
            atomic_fetch_add(&d->met.deadline_cuts, 1);
            daemon_log(d, "cut %s %s from %s: its body took more than %d s "
                       "(--request-deadline)", method, url, x->peer, d->o->deadline);
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
        return send_answer(c, d, &out, NULL, 1, NULL, x->endpoint);
    }
    http_handler fn = x->endpoint >= 0 ? endpoints[x->endpoint].fn : NULL;
    if (fn == ep_proxied && d->proxy)
        return proxied(d, c, x, url);
    if (!fn)
        no_endpoint(method, url, &out, allow, sizeof allow);
    if (fn == ep_route && x->late) {     /* one already being uploaded is served */
        http_error(&out, 503, "route", "eldrd is draining (shutting down): route this request "
                   "through another router");
        return send_answer(c, d, &out, NULL, 1, NULL, x->endpoint);
    }
    if (fn && d->side)
        return beside(d, c, x, fn, method, url);
    if (fn) {
        http_req req = {c, method, url, x->buf ? x->buf : "", x->len, x->peer, x->authed,
                        x->t_begin};
        if (x->buf)
            x->buf[x->len] = '\0';
        fn(d, &req, &out);
    }
    return send_answer(c, d, &out, fn ? NULL : allow, 0, NULL, fn ? x->endpoint : -1);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    eldrd_t *d = cls;
    (void)c;
    conn_ctx *x = *con_cls;
    if (x) {
        if (x->px)
            proxy_release(x->px, toe != MHD_REQUEST_TERMINATED_COMPLETED_OK);
        if (x->side && atomic_load(&x->side->done))
            free(x->side);   /* answered elsewhere, never sent: the client went */
        atomic_fetch_sub(&d->active, 1);
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
    eldrd_t *d = cls;
    if (strstr(fmt, "HTTP response code is %u")) {
        unsigned code = va_arg(ap, unsigned);
        atomic_fetch_add(&d->met.protocol_errors, 1);
        metrics_response_at(&d->met, -1, (int)code);
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
    daemon_log(d, "libmicrohttpd: %s", msg);
}

struct MHD_Daemon *http_start(eldrd_t *d, char *err, size_t errlen)
{
    static char names[N_ENDPOINTS][48];
    for (size_t i = 0; i < N_ENDPOINTS && i < METRICS_ENDPOINTS - 1; i++) {
        snprintf(names[i], sizeof names[i], "%s %s%s", endpoints[i].method, endpoints[i].path,
                 endpoints[i].prefix ? "{id}" : "");
        d->met.endpoint_names[i] = names[i];
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    char port[16];
    snprintf(port, sizeof port, "%d", d->o->port);
    int gai = getaddrinfo(d->o->host, port, &hints, &ai);
    if (gai) {
        eldr_errf(err, errlen, "--listen %s:%d: %s", d->o->host, d->o->port, gai_strerror(gai));
        return NULL;
    }
    /* Proxy mode: no thread of libmicrohttpd's own; it runs on epoll from
     * the proxy's event loop, with the upstream transfers (proxy.h). */
    unsigned flags = d->proxy ? MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG
                              : MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_AUTO |
                                    MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    struct MHD_Daemon *mhd = MHD_start_daemon(
        flags, (uint16_t)d->o->port, NULL, NULL, on_request, d, MHD_OPTION_EXTERNAL_LOGGER,
        mhd_log, d, MHD_OPTION_SOCK_ADDR,
        ai->ai_addr, MHD_OPTION_NOTIFY_COMPLETED, on_completed, d,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)d->o->timeout, MHD_OPTION_THREAD_POOL_SIZE,
        d->proxy ? 0u : (unsigned)d->o->threads, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)d->o->max_conns, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
        (unsigned)d->o->max_conns_per_ip, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!mhd) {
        eldr_errf(err, errlen, "--listen %s:%d: cannot serve (address in use?)", d->o->host,
                  d->o->port);
        return NULL;
    }
    if (d->proxy && (!(d->side = side_start()) || proxy_attach(d->proxy, mhd, err, errlen) < 0)) {
        if (!d->side)
            eldr_errf(err, errlen, "proxy mode: cannot start the side thread");
        side_free(d->side);
        d->side = NULL;
        MHD_stop_daemon(mhd);
        return NULL;
    }
    atomic_store(&d->mhd, mhd);
    return mhd;
}

int http_stop(eldrd_t *d, struct MHD_Daemon *mhd, double drain_secs)
{
    atomic_store(&d->draining, 1);
    MHD_socket fd = d->proxy ? proxy_quiesce(d->proxy) : MHD_quiesce_daemon(mhd);
    struct timespec t0, now, nap = {0, 10 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    /* requests in progress, not connections: an idle keep-alive
     * connection holds no work, and waiting on it kept eldrd routing for
     * the whole grace period */
    while (atomic_load(&d->active) > 0) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) * 1e-9 > drain_secs)
            break;
        nanosleep(&nap, NULL);
    }
    int cut = atomic_load(&d->active);
    /* the side thread's jobs finish (their connections resume), then
     * proxied requests still upstream fail (503) and theirs resume:
     * libmicrohttpd must find none suspended when it stops */
    side_free(d->side);
    d->side = NULL;
    proxy_stop(d->proxy);
    MHD_stop_daemon(mhd);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
    return cut;
}
