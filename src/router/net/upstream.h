/* upstream.h - eldrd's HTTP/1.1 client toward the prefill and decode
 * instances (proxy mode, proxy.h).
 *
 * On an event loop (evloop.h), driven by the loop's one thread: POST
 * requests over keep-alive connections pooled per origin
 * (http://HOST:PORT), non-blocking sockets under epoll. It does exactly
 * what the proxy needs and nothing more, because every system call and
 * allocation here is paid once per proxied request: a request on a kept
 * connection costs one sendmsg and, for a small answer, one recv.
 *
 * An answer's body reaches the transfer's on_body callback as it
 * arrives, de-chunked (Content-Length, chunked, or up to the close); the
 * transfer ends with on_done, exactly once, unless it was cancelled. A
 * request sent on a kept connection that the server had closed in the
 * meantime (EOF or a reset before any byte of the answer) is sent again
 * once on a new connection, as browsers and libcurl do.
 *
 * Callbacks run on the loop's thread, from its turns; they may post new
 * transfers and cancel others (not the one being reported). Nothing here
 * may be called from another thread: post a call onto the loop. */
#ifndef ELDR_ROUTER_UPSTREAM_H
#define ELDR_ROUTER_UPSTREAM_H

#include <stddef.h>

#include "evloop.h"

/* Kept (idle) connections per origin; more are closed. With one in use
 * per transfer, this bounds the client's file descriptors (eldrd checks
 * them against its limit at start). */
#define UPSTREAM_IDLE_PER_ORIGIN 1024

typedef struct upc upc;     /* the client: its loop, origins and connections */
typedef struct upx upx;     /* one transfer */

typedef enum up_result {
    UP_OK = 0,              /* a whole answer (any HTTP status) */
    UP_CONNECT,             /* the connection could not be made */
    UP_IO,                  /* the connection failed or closed mid-answer */
    UP_PROTOCOL,            /* the answer is not HTTP/1.x as we read it */
    UP_TOO_BIG,             /* a header block over 64 KiB, or a chunk size past 2^62 */
    UP_ABORTED,             /* on_body refused the bytes */
    UP_TIMED_OUT            /* not from here: for the user's own silence limit */
} up_result;

typedef struct up_handler {
    /* The status line and headers have come: status is the HTTP code.
     * May be NULL. */
    void (*on_status)(void *cls, int status);
    /* Body bytes as they arrive. Return 0 to go on, -1 to abort the
     * transfer (on_done then says UP_ABORTED). */
    int (*on_body)(void *cls, const char *data, size_t n);
    /* The transfer is over: result, and the HTTP status when one came (0
     * otherwise). why: a one-line description of a failure ("" on
     * UP_OK). The transfer is freed after this returns. */
    void (*on_done)(void *cls, up_result result, int status, const char *why);
} up_handler;

/* A client with no origin yet, on loop l. NULL with err. */
upc *upc_new(evloop *l, char *err, size_t errlen);
/* Close every connection; transfers still running are dropped without
 * on_done. */
void upc_free(upc *c);

/* Register http://HOST:PORT (no path; a trailing '/' is accepted).
 * Returns its index, or -1 with err naming what is wrong. The host is
 * resolved when a connection is made, so a name that resolves later
 * still works. */
int upc_origin(upc *c, const char *url, char *err, size_t errlen);

/* POST body (len bytes, borrowed until on_done or cancel) to path at the
 * origin, with Content-Type: application/json and, when request_id is
 * not NULL, X-Request-Id. Returns the transfer, or NULL when out of
 * memory (nothing is called then). */
upx *upc_post(upc *c, int origin, const char *path, const char *request_id, const char *body,
              size_t len, const up_handler *h, void *cls);

/* The same with an Authorization header when auth is not NULL: its whole
 * value ("Bearer KEY"), printable ASCII without CR or LF (the caller
 * checks). It goes into the request head only: never into a message. */
upx *upc_post_auth(upc *c, int origin, const char *path, const char *request_id,
                   const char *auth, const char *body, size_t len, const up_handler *h,
                   void *cls);

/* GET path at the origin (a health probe): no body. */
upx *upc_get(upc *c, int origin, const char *path, const up_handler *h, void *cls);

/* Flow control: stop reading x's answer (its reader is full), and go on.
 * While paused nothing of x is read, so nothing of it is reported. */
void upc_pause(upc *c, upx *x);
void upc_resume(upc *c, upx *x);

/* Close pooled connections idle for `seconds` (0: never; the default). */
void upc_set_idle(upc *c, double seconds);

/* Drop a transfer: its connection is closed (the answer's remainder can
 * not be told from the next one); on_done is not called. */
void upc_cancel(upc *c, upx *x);

/* 1 once x has a connection that is made (its request going out or
 * gone), 0 while it is still connecting: which time limit is running
 * (proxy.c: --connect-timeout, then the first byte's). */
int upc_connected(const upx *x);

/* Connections now open, for the tests and /metrics. */
int upc_open_connections(const upc *c);

#endif
