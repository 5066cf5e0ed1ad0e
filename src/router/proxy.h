/* proxy.h - eldrd in the request path (`--proxy`; docs/eldrd.md, "Proxy
 * mode").
 *
 * A client's POST /v1/completions or /v1/chat/completions goes to a
 * prefill instance (consistent hashing on the prompt, proxy_ring.h),
 * whose answer carries the first token, the KV handoff and the prompt's
 * expert counts (eldr_sig); eldrd routes on those counts with the same
 * code as POST /v1/route, streams the first token to the client at once,
 * sends the decode instance it chose the rest of the request, and relays
 * the decode answer (JSON, or SSE chunks as they arrive). The request is
 * in flight on its decode worker from the decision until the decode
 * answer ends or the client goes; then it is finished (load down, the
 * decision kept for explain).
 *
 * Threads: one event loop serves it all: libmicrohttpd (run from the
 * loop, on epoll, with no thread of its own) parses and checks the
 * client's request and picks the prefill instance (proxy_begin); the
 * upstream client (upstream.h: its own HTTP/1.1 client) drives every
 * upstream transfer; the routing decision is made there too. Requests
 * that are not proxied run on a side thread (http_side.h). A request
 * (pxreq) keeps its lock and reference count (the connection, the stream
 * reader and the upstream side each hold one): the drain and other
 * threads still reach it. */
#ifndef ELDR_ROUTER_PROXY_H
#define ELDR_ROUTER_PROXY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "body.h"
#include "daemon.h"
#include "metrics.h"

struct MHD_Connection;
struct MHD_Daemon;
typedef struct proxy proxy_t;
typedef struct pxreq pxreq;

/* Set up over --prefill and --decode (K decode URLs, in worker order).
 * NULL with err (eldrd exits 2). */
proxy_t *proxy_start(eldrd_t *d, char *err, size_t errlen);
/* Start the event loop that runs mhd (started without a thread of its
 * own, on epoll: http_start) and every upstream transfer. -1 with err. */
int proxy_attach(proxy_t *p, struct MHD_Daemon *mhd, char *err, size_t errlen);
/* A connection was resumed from another thread (http_side.h): the loop
 * runs libmicrohttpd at once. Thread-safe. */
void proxy_resumed(proxy_t *p);
/* Stop accepting connections (MHD_quiesce_daemon, done by the loop that
 * owns the daemon); returns the listening socket to close after the
 * daemon stops. */
int proxy_quiesce(proxy_t *p);
/* Stop the upstream thread: what is in flight fails with 503 (its route
 * finished, its connection resumed) and new requests get 503. Call
 * before stopping libmicrohttpd, which must find no connection
 * suspended. */
void proxy_stop(proxy_t *p);
/* After libmicrohttpd has stopped. */
void proxy_free(proxy_t *p);


/* A client's request, its body complete. Returns the request (the
 * caller holds one reference, for the connection), or NULL with e when
 * the body is refused (400) or eldrd cannot take it (503). request_id:
 * the client's X-Request-Id or NULL (one is generated). */
pxreq *proxy_begin(proxy_t *p, struct MHD_Connection *c, const char *body, size_t len,
                   int chat, const char *request_id, rb_err *e);

/* What the connection should do now, called under no lock from the
 * access handler: */
typedef struct px_answer {
    int ready;                   /* 0: nothing yet (the connection was suspended) */
    int status;
    int stream;                  /* 1: an SSE stream; read with proxy_stream_read */
    char *body;                  /* malloc'd, when not a stream */
    size_t len;
    const char *content_type;
} px_answer;

/* Take the answer when it is ready; otherwise suspend the connection
 * (it is resumed when the answer or the stream's first bytes come). */
void proxy_poll(pxreq *r, px_answer *a);

/* The stream's content reader and its free callback (libmicrohttpd
 * signatures); proxy_poll took the reader's reference. */
ssize_t proxy_stream_read(void *cls, uint64_t pos, char *buf, size_t max);
void proxy_stream_free(void *cls);

/* The connection is done with r (answer sent, or the client went):
 * drops its reference; a request still upstream is cancelled. */
void proxy_release(pxreq *r, int client_gone);

/* proxy_* series for /metrics. */
void proxy_metrics(proxy_t *p, strbuf *b);

#endif
