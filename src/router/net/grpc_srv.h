/* grpc_srv.h - a gRPC server over cleartext HTTP/2 (h2c, prior knowledge)
 * on an evloop (router/net). It knows the transport only: HTTP/2 framing
 * (nghttp2), gRPC's length-prefixed messages, and its status trailers. A
 * service (the ext_proc picker, gRPC health) registers methods by path and
 * gets each stream's messages; it answers with grpc_send and ends the
 * stream with grpc_finish. No protobuf in here: messages are bytes.
 *
 * Everything runs on the loop's thread: the listener, each connection's
 * reads and writes, the services' callbacks. A callback may send, finish
 * or do nothing (answer later, from a timer or another stream's message).
 *
 * Limits: a message larger than max_message is refused (RESOURCE_EXHAUSTED
 * on that stream, the connection goes on); a compressed message is refused
 * (UNIMPLEMENTED: eldrd never offers an encoding); a connection holds at
 * most max_streams streams at once (SETTINGS_MAX_CONCURRENT_STREAMS); at
 * most max_conns connections are open (more are closed at accept); the
 * bytes waiting to go to a slow reader are bounded per stream: past
 * max_pending a stream is reset (RESOURCE_EXHAUSTED) rather than grow. */
#ifndef ELDR_ROUTER_GRPC_SRV_H
#define ELDR_ROUTER_GRPC_SRV_H

#include <stddef.h>
#include <stdint.h>

#include "evloop.h"
#include "metrics.h"

typedef struct grpc_srv grpc_srv;
typedef struct grpc_stream grpc_stream;

/* gRPC status codes (grpc/doc/statuscodes.md). */
enum {
    GRPC_OK = 0, GRPC_CANCELLED = 1, GRPC_UNKNOWN = 2, GRPC_INVALID_ARGUMENT = 3,
    GRPC_NOT_FOUND = 5, GRPC_RESOURCE_EXHAUSTED = 8, GRPC_FAILED_PRECONDITION = 9,
    GRPC_UNIMPLEMENTED = 12, GRPC_INTERNAL = 13, GRPC_UNAVAILABLE = 14
};

/* One method's callbacks; cls is the registration's. Each stream gets
 * open once, then any number of message calls, then exactly one of
 * half_close (the client sent all its messages: the service must still
 * finish the stream) or gone (the stream ended without the service
 * finishing it: the client cancelled, the connection closed, a limit
 * reset it; the service forgets the stream and must not use it again).
 * After the service's grpc_finish, no call comes for that stream. */
typedef struct grpc_method {
    const char *path;            /* "/package.Service/Method" */
    /* A new stream; returns the service's per-stream state (NULL: the
     * stream is refused with UNAVAILABLE, e.g. out of memory). */
    void *(*open)(void *cls, grpc_stream *s);
    void (*message)(void *cls, void *st, grpc_stream *s, const uint8_t *msg, size_t len);
    void (*half_close)(void *cls, void *st, grpc_stream *s);
    void (*gone)(void *cls, void *st);
    void *cls;
} grpc_method;

typedef struct grpc_config {
    const char *host;            /* numeric address */
    int port;                    /* 0: any free port (grpc_port tells) */
    size_t max_message;          /* bytes; 0: 4 MiB */
    uint32_t max_streams;        /* per connection; 0: 1024 */
    int max_conns;               /* 0: 1024 */
    size_t max_pending;          /* bytes queued per stream; 0: 16 MiB */
    double preface_timeout;      /* seconds a new connection has to send its first
                                  * frame, else it is closed; 0: no limit */
    metrics_t *met;              /* NULL, or where its connections are counted (a
                                  * listener slot, metrics_listener_add) */
    const char *listener;        /* its name there and in log lines ("ext_proc");
                                  * borrowed, outlives met */
} grpc_config;

/* Listen (bound and listening when this returns, watched on l). NULL
 * with err naming the address. */
grpc_srv *grpc_new(evloop *l, const grpc_config *cfg, char *err, size_t errlen);
/* Add a method (before serving). -1 when the table (16) is full. */
int grpc_add_method(grpc_srv *g, const grpc_method *m);
/* The port it listens on. */
int grpc_port(const grpc_srv *g);

/* On the loop's thread. Queue one message on stream s (copied; framed
 * here). -1 when the stream is finished or the queue is over its bound
 * (the stream is then reset with RESOURCE_EXHAUSTED and gone is not
 * called: the caller learns it here). */
int grpc_send(grpc_stream *s, const uint8_t *msg, size_t len);
/* The same for one message given in parts (its bytes are the parts'
 * one after the other): a large body goes in without first being copied
 * into a packed message. */
typedef struct grpc_part {
    const uint8_t *p;
    size_t n;
} grpc_part;
int grpc_sendv(grpc_stream *s, const grpc_part *parts, int n);
/* End stream s after its queued messages with this status (message:
 * grpc-message, may be NULL). The service's state is no longer used. */
void grpc_finish(grpc_stream *s, int status, const char *message);
/* The connection's peer, "ip:port" (for logs). */
const char *grpc_peer(const grpc_stream *s);

/* Streams open now, connections open now, and totals since start (read
 * from any thread). */
typedef struct grpc_stats {
    long streams, conns;
    unsigned long long streams_total, conns_total, refused_conns, bad_frames, resets,
        preface_timeouts;
} grpc_stats;
void grpc_get_stats(const grpc_srv *g, grpc_stats *st);

/* The drain, on the loop's thread: tell each open connection to open no
 * new stream (GOAWAY); the streams in progress go on, and a connection
 * closes when its last stream has ended. The port keeps accepting, so
 * that a health check on a new connection is answered (the services say
 * what a draining server answers) until grpc_free. */
void grpc_quiesce(grpc_srv *g);
/* Close every connection (the services' open streams get gone) and the
 * listener; free. On the loop's thread, or after the loop stopped. */
void grpc_free(grpc_srv *g);

#endif
