/* http_conns.h - the HTTP glue's open connections (router/net): how many
 * each client address holds, and how long each has waited for its request
 * headers.
 *
 * - Per address: libmicrohttpd 0.9.75 counts its per-IP limit by the full
 *   address, so one IPv6 client, which owns a /64 at least, could open
 *   --max-conns-per-ip connections from each of 2^64 addresses. Here an
 *   IPv4 address counts by itself, an IPv6 address by its /64, and an
 *   IPv4-mapped IPv6 address (::ffff:a.b.c.d, a dual-stack socket) as the
 *   IPv4 address it maps.
 * - The header deadline: header bytes reset libmicrohttpd's idle timer,
 *   so a client trickling them holds its connection for ever, and enough
 *   such connections lock everyone else out. Each connection's clock
 *   starts when it opens (and again when a request on it completes: the
 *   next request's headers are due as well); a sweeper thread shuts down
 *   the connections whose headers are late.
 *
 * The glue calls conns_admit from libmicrohttpd's accept policy,
 * conns_started and conns_closed from its connection notifications, and
 * conns_headers / conns_request_done around each request. Every entry is
 * removed under the table's lock on conns_closed, before libmicrohttpd
 * closes the fd, so the sweeper never shuts down a reused fd. */
#ifndef ELDR_ROUTER_HTTP_CONNS_H
#define ELDR_ROUTER_HTTP_CONNS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "metrics.h"

typedef struct conns conns_t;

/* What an address counts as: IPv4 by its 32 bits, IPv6 by its /64. */
typedef struct conn_key {
    uint64_t bits;               /* the IPv4 address, or the /64 prefix */
    int family;                  /* 4 or 6; 0 another family (never limited) */
} conn_key;

/* The key of an address; an IPv4-mapped IPv6 address is its IPv4. */
conn_key conn_key_of(const struct sockaddr *sa);
/* The address as text ("?" when unknown), an IPv4-mapped one as IPv4. */
void conn_addr_text(const struct sockaddr *sa, char *buf, size_t n);

/* A table for at most max_conns connections, per_ip of them per key,
 * each with header_timeout seconds for its request headers; counted in
 * met (borrowed: refusals and cuts), where it takes a listener slot
 * (metrics_listener_add) named `listener` (borrowed: a string that
 * outlives met, "public" or "admin"), which names it in log lines too. */
conns_t *conns_new(int max_conns, int per_ip, int header_timeout, metrics_t *met,
                   const char *listener);
/* Its listener slot in met (-1: the slots were full, not counted). */
int conns_listener(const conns_t *t);
/* Start the sweeper thread. -1 when it cannot start. */
int conns_start(conns_t *t);
/* Stop the sweeper (the table stays usable) and free. */
void conns_free(conns_t *t);

/* The accept policy: 1 when the address may open one more connection
 * (it is counted from now), 0 when it holds per_ip already (logged, at
 * most once a second, and counted: eldr_connections_refused_total,
 * reason max_conns_per_ip). */
int conns_admit(conns_t *t, const struct sockaddr *sa);
/* A connection was set up, on the thread that will serve it: its entry
 * goes into *ctx (libmicrohttpd's socket context); conn is libmicrohttpd's
 * handle of it, kept for conns_awaiting. The one that fills the listener
 * to max_conns is logged (at most once a second): from then on
 * libmicrohttpd takes no connection until one closes, and new ones wait
 * in the kernel's accept queue (eldr_listener_queue). */
void conns_started(conns_t *t, int fd, const struct sockaddr *sa, void *conn, void **ctx);
/* Its request headers are complete; a request on it is over. */
void conns_headers(void *ctx);
void conns_request_done(conns_t *t, void *ctx);
/* It closed (or its set-up failed): its count goes, its entry is freed. */
void conns_closed(conns_t *t, void **ctx);

/* The one connection awaiting its request headers (started on this
 * thread, when this_thread) that pick accepts: 1 with its conn and fd;
 * 0 none; -1 more than one (none given). pick runs under the table's lock,
 * so the connections it sees stay open meanwhile. */
int conns_awaiting(conns_t *t, int this_thread, int (*pick)(void *conn, void *cls), void *cls,
                   void **conn, int *fd);
/* Connections open now. */
int conns_open(conns_t *t);
/* Shut down every connection whose headers are late at monotonic time
 * now; returns how many (the sweeper calls it; the tests may). */
int conns_sweep(conns_t *t, double now);

#endif
