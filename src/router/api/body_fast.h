/* body_fast.h - the fast path of the two hot bodies, POST /v1/route and
 * POST /v1/finish, without jansson; internal to body_route.c.
 *
 * It takes only the plain shape that routers send: one flat object whose
 * keys are among request_id, prefill_worker and counts (dense base64),
 * each once, with printable-ASCII strings free of escapes, and JSON
 * whitespace anywhere between tokens. Anything else, and every body that
 * would be refused, returns 0 so that the caller falls back to the jansson
 * path, which then accepts it or gives the error. So the fast path never
 * decides anything the jansson path would not: for every body it accepts,
 * the jansson path gives the same struct (tests/unit/test_router_fast.c
 * checks this on a corpus, tests/fuzz/fuzz_route_body.c on fuzzed bodies). */
#ifndef ELDR_ROUTER_BODY_FAST_H
#define ELDR_ROUTER_BODY_FAST_H

#include "body.h"

/* 1: b filled (b->counts malloc'd); 0: not the plain shape, b untouched
 * beyond being zeroed, nothing allocated. */
int route_body_fast(const char *text, size_t len, int L, int E, route_body *b);

/* 1: id filled; 0: fall back. */
int finish_body_fast(const char *text, size_t len, char id[RB_ID_MAX]);

#endif
