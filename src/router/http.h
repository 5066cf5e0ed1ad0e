/* http.h - the libmicrohttpd glue: a thread pool serving the endpoint
 * table (endpoints.h), request bodies collected up to --max-body, JSON
 * and text answers, and one JSON error shape {"error", "where"}.
 *
 * 404 for an unknown path, 405 (with Allow) for a known path and the
 * wrong method, 413 for a body over the limit (refused from its
 * Content-Length before it is read when possible). Slow or idle clients
 * are cut off by MHD's connection timeout (--timeout). An endpoint that
 * changes state answers 401 before its body is read when it needs a
 * token (auth.h) and the request does not carry it. */
#ifndef ELDR_ROUTER_HTTP_H
#define ELDR_ROUTER_HTTP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "body.h"
#include "daemon.h"

/* The body limit of the small endpoints (finish, config, the inflight
 * clear, and every GET): their bodies are a few dozen bytes. */
#define HTTP_SMALL_BODY (64 * 1024)

struct MHD_Connection;
struct MHD_Daemon;

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
    json_t *json;                /* owned; or */
    char *text;                  /* owned, malloc'd */
    const char *content_type;    /* for text and stream */
    /* or a stream: read(ctx, pos, buf, max) as libmicrohttpd's content
     * reader (-1 at the end), free(ctx) when the answer is done */
    ssize_t (*stream_read)(void *ctx, uint64_t pos, char *buf, size_t max);
    void (*stream_free)(void *ctx);
    void *stream_ctx;
} http_resp;

/* A query argument (?key=value), NULL when absent. */
const char *http_query(const http_req *r, const char *key);

/* Set an error answer {"error": msg, "where": where}. */
void http_error(http_resp *out, int status, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void http_rb_error(http_resp *out, const rb_err *e);

/* Start serving; NULL with err on failure (port taken, ...). */
struct MHD_Daemon *http_start(eldrd_t *d, char *err, size_t errlen);

/* Drain and stop: stop accepting; from now on every answer says
 * Connection: close and new routes get 503 (the caller retries on another
 * router), while finishes and the rest are still served; wait up to
 * drain_secs for the requests in progress to complete, then stop. Returns
 * how many requests were still in progress when it stopped (cut). */
int http_stop(eldrd_t *d, struct MHD_Daemon *mhd, double drain_secs);

#endif
