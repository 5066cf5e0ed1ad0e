/* xp_join.h - the picker's pending joins: what a prefill call's answer
 * said (the prompt's counts, read from its routed experts), kept until
 * the decode call of the same request comes (router/extproc;
 * docs/gateway.md, "The join").
 *
 * llm-d's coordinator makes two calls through the gateway for one client
 * request, prefill then decode, both with the client's x-request-id
 * (pkg/coordinator/steps/prefill.go, decode_proxy.go), and copies the
 * prefill answer's kv_transfer_params into the decode body
 * (connectors/kv/nixl.go). An entry is found by either key: the
 * request id, or the transfer's own ids that vLLM's NixlConnector writes
 * there (remote_engine_id and remote_request_id), which survive a caller
 * that sends no x-request-id (Envoy then makes a new one per call).
 *
 * Bounded: at most `max` entries; a new one past that evicts the oldest.
 * Expiring: an entry older than `ttl` seconds is dropped (a prefill whose
 * decode never came: a client gone, a coordinator error). Both are
 * counted. Taking an entry removes it under both keys. One thread (the
 * picker's loop); no locks. */
#ifndef ELDR_ROUTER_XP_JOIN_H
#define ELDR_ROUTER_XP_JOIN_H

#include <stddef.h>
#include <stdint.h>

#include "decide.h"

typedef struct xp_join xp_join;

/* What the prefill's answer gave, beside the counts. */
typedef struct xp_joined {
    cache_use u;                 /* decide_stock_counts': the prefill worker, the signal's
                                  * origin, rows and the rows the signature cache gave */
    int by;                      /* how it was found: XP_JOIN_BY_* */
} xp_joined;

enum { XP_JOIN_BY_REQUEST_ID = 1, XP_JOIN_BY_TRANSFER = 2 };

typedef struct xp_join_stats {
    uint64_t stored, by_request_id, by_transfer, evicted, expired, replaced;
    size_t pending;
} xp_join_stats;

/* cells: the counts' length (L*E). NULL when out of memory or max < 1. */
xp_join *xp_join_new(size_t max, double ttl, size_t cells);
void xp_join_free(xp_join *j);

/* Keep counts[cells] under request id rid and the transfer key (engine,
 * request); either key may be NULL or "" (not kept under it; both absent:
 * nothing kept, returns 0). An entry already under one of the keys is
 * replaced (a retried prefill). now: monotonic seconds. 1 kept, 0 not,
 * -1 out of memory. */
int xp_join_put(xp_join *j, const char *rid, const char *engine, size_t elen,
                const char *request, size_t rlen, const uint16_t *counts,
                const xp_joined *info, double now);

/* Take the entry of request id rid, else of the transfer key: 1 with
 * counts[cells] and *info filled (and the entry gone), 0 none. */
int xp_join_take(xp_join *j, const char *rid, const char *engine, size_t elen,
                 const char *request, size_t rlen, uint16_t *counts, xp_joined *info,
                 double now);

/* Drop the expired entries (also done by put and take). */
void xp_join_expire(xp_join *j, double now);

void xp_join_get_stats(const xp_join *j, xp_join_stats *st);

#endif
