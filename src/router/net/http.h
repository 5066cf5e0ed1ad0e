/* http.h - the libmicrohttpd glue (router/net): a route table filled at
 * start, request bodies collected up to each route's limit, JSON and text
 * answers, one JSON error shape {"error", "where"}, tokens (auth.h), and
 * the drain. It knows no endpoint: the rooms register theirs
 * (api_register, the proxy's proxy_register), main starts it.
 *
 * Two ways to run it:
 * - a thread pool of libmicrohttpd's own (no loop given): every handler
 *   runs on one of its threads;
 * - on an event loop (evloop.h): libmicrohttpd on epoll, with no thread
 *   of its own, run by the loop whenever its epoll fd is readable or its
 *   timeouts are due. Asynchronous routes then run on the loop thread,
 *   and synchronous ones on a side thread (http_side.h), so that a model
 *   swap never stops the loop; the light ones (http_route.light) on a
 *   second side thread. A JSON answer is dumped to text on the side
 *   thread too: the loop only sends it.
 *
 * Two kinds of handler:
 * - synchronous: fn(ctx, request, answer) fills the answer;
 * - asynchronous (http_async): begin takes the request once its body is
 *   in; poll gives the answer when it is ready, else suspends the
 *   connection (http_suspend) for the handler to resume it later
 *   (http_resume, from any thread); a streamed answer is read through
 *   stream_read; release says the connection is done with the request.
 *
 * 404 for an unknown path, 405 (with Allow) for a known path and the
 * wrong method, 413 for a body over the limit (refused from its
 * Content-Length before it is read when possible), 401 before the body
 * is read when a route needs a token that the request does not carry,
 * 400, 413 or 501 (and the connection closed) for a request whose body's
 * framing eldrd cannot read (framing.h; also when libmicrohttpd refused
 * it first, http_framing.h), 503 for a body that would take the
 * bodies held in memory past the budget (--body-budget; its bytes are
 * dropped, not kept). Slow or idle clients are cut off by libmicrohttpd's
 * connection timeout (--timeout), the header deadline (--header-timeout,
 * http_conns.h) and the request deadline (--request-deadline); one
 * address holds at most max_conns_per_ip connections (an IPv6 /64 counts
 * as one address). */
#ifndef ELDR_ROUTER_HTTP_H
#define ELDR_ROUTER_HTTP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "auth.h"
#include "evloop.h"
#include "metrics.h"
#include "strbuf.h"
#include "wire.h"

/* The body limit of the small endpoints (finish, config, the inflight
 * clear, and every GET): their bodies are a few dozen bytes. */
#define HTTP_SMALL_BODY (64 * 1024)

/* What a stream reader returns at its end (libmicrohttpd's values). */
#define HTTP_STREAM_END ((ssize_t)-1)
#define HTTP_STREAM_ERROR ((ssize_t)-2)

struct MHD_Connection;
typedef struct http_server http_server;

typedef struct http_req {
    struct MHD_Connection *conn;
    const char *method;
    const char *path;            /* URL path, unescaped */
    const char *body;            /* NUL-terminated, len bytes */
    size_t len;
    const char *peer;            /* the client's address, for the audit log */
    int authed;                  /* 1 a token was required and given */
    double t_begin;              /* CLOCK_MONOTONIC when its headers were read */
} http_req;

typedef struct http_resp {
    int status;
    int retry_after;             /* seconds: a Retry-After header (503), 0 none */
    json_t *json;                /* owned; or */
    char *text;                  /* owned, malloc'd */
    const char *content_type;    /* for text and stream */
    /* or a stream: read(ctx, pos, buf, max) as libmicrohttpd's content
     * reader (HTTP_STREAM_END at the end), free(ctx) when the answer is
     * done */
    ssize_t (*stream_read)(void *ctx, uint64_t pos, char *buf, size_t max);
    void (*stream_free)(void *ctx);
    void *stream_ctx;
} http_resp;

typedef void (*http_handler)(void *ctx, const http_req *r, http_resp *out);

typedef struct http_async {
    /* The body is in: start. Returns the request's handle, or NULL with
     * e (answered at once with e->status). */
    void *(*begin)(void *ctx, const http_req *r, rb_err *e);
    /* The answer when ready (ready 1: status, and either body/len or a
     * stream); otherwise suspend the connection. */
    void (*poll)(void *h, http_resp *out, int *ready);
    /* The connection is done with h (answer sent, or the client went). */
    void (*release)(void *h, int client_gone);
} http_async;

typedef struct http_route {
    const char *method;
    const char *path;
    int prefix;                  /* path is a prefix (explain/{id}) */
    auth_need auth;              /* the token it needs, when tokens are set */
    long long max_body;          /* its body limit; 0 = the server's */
    /* answered from its headers: fn runs with an empty body, any body is
     * dropped and the connection closed (a route that only says where to
     * go instead, so that a stranger's upload is never taken in) */
    int on_headers;
    /* a request whose headers came after the drain began gets 503 (a
     * decision: the caller retries on another router) */
    int refuse_when_draining;
    http_handler fn;             /* a synchronous route, or */
    const http_async *async;     /* an asynchronous one */
    void *ctx;
    /* loop mode: a synchronous route that is cheap and takes only short
     * locks (/healthz, /metrics) runs on a side thread of its own, so that
     * it never queues behind a heavy one (a 4096-decision snapshot, a
     * model swap) */
    int light;
} http_route;

typedef struct http_config {
    const char *name;            /* "public", "admin": in log lines */
    const char *opt;             /* "--listen", "--admin-listen": in errors */
    const char *host;
    int port;
    int threads;                 /* the pool's threads (without a loop) */
    int timeout;                 /* idle connection seconds */
    int header_timeout;          /* seconds for a request's headers (http_conns.h) */
    int deadline;                /* seconds from headers to the body's end */
    int max_conns, max_conns_per_ip;
    long long max_body;          /* a route's body limit when it sets none */
    long long body_budget;       /* bodies held at once, bytes; shared through met */
    const auth_t *auth;          /* borrowed */
    metrics_t *met;              /* borrowed: answers are counted there, and the
                                  * bytes held against body_budget (met->body_bytes,
                                  * so servers sharing met share the budget) */
    evloop *loop;                /* NULL: a thread pool */
} http_config;

/* A query argument (?key=value), a request header; NULL when absent. */
const char *http_query(const http_req *r, const char *key);
const char *http_header(const http_req *r, const char *name);

/* OpenAI's error object, {"error": {"message", "type", "param", "code"}}:
 * param is where (NULL: null), code the HTTP status. New reference. */
json_t *http_error_json(int status, const char *where, const char *msg);

/* Set an error answer {"error": msg, "where": where}. */
void http_error(http_resp *out, int status, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void http_rb_error(http_resp *out, const rb_err *e);

/* A server not yet listening (cfg copied, its pointers borrowed). */
http_server *http_new(const http_config *cfg, char *err, size_t errlen);
/* Before http_start: add a route (copied). -1 when the table is full. */
int http_add_route(http_server *s, const http_route *r);
/* Listen, and in loop mode watch libmicrohttpd's epoll fd and start the
 * side thread. -1 with err (port taken, ...). */
int http_start(http_server *s, char *err, size_t errlen);

/* An asynchronous handler's connection: wait (on the loop's thread), and
 * go on (from any thread: the loop then runs libmicrohttpd at once). */
void http_suspend(struct MHD_Connection *c);
void http_resume(http_server *s, struct MHD_Connection *c);

/* The drain, in main's order: http_quiesce stops accepting and answers
 * Connection: close from now on (at once, for every listener); http_drain
 * quiesces and waits up to secs for the requests in progress; it returns
 * how many were still in progress (to be cut).
 * http_stop_side ends the side thread (its jobs' connections resume);
 * then the front ends fail what they still hold; then, with the loop
 * stopped, http_stop sends what is queued and stops. */
void http_quiesce(http_server *s);
int http_drain(http_server *s, double secs);
void http_stop_side(http_server *s);
void http_stop(http_server *s);
void http_free(http_server *s);

/* Requests between their headers and their completion. */
int http_in_progress(http_server *s);
/* Connections open now. */
int http_open_connections(http_server *s);
/* eldr_open_connections and eldr_requests_in_progress, summed over the
 * servers (NULL entries skipped), for /metrics. */
void http_metrics(http_server *const *servers, int n, strbuf *b);

#endif
