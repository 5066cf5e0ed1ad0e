/* answer.h - the answers of POST /v1/route and POST /v1/finish, the two
 * hot endpoints, written straight to text.
 *
 * Each has two writers that give the same bytes: the jansson one (an
 * object tree, then json_dumps with JSON_COMPACT | JSON_REAL_PRECISION(9),
 * as every other answer of eldrd) and a direct one that skips the tree's
 * allocations. The direct one takes only strings of printable ASCII
 * without '"' or '\\' (jansson writes them verbatim) and finite numbers;
 * on anything else it returns NULL and the caller uses the jansson one.
 * tests/unit/test_router_fast.c holds the two to the same bytes. */
#ifndef ELDR_ROUTER_ANSWER_H
#define ELDR_ROUTER_ANSWER_H

#include <jansson.h>
#include <stdint.h>

#include "decide.h"
#include "state.h"


/* Everything a route answer shows. */
typedef struct route_answer_in {
    char *const *workers;        /* [K] */
    int K;
    const route_out *o;
    const char *prefill_name;
    int n_hashes;                /* block hashes the body gave */
    cache_use u;
    uint64_t model_gen;
} route_answer_in;

json_t *route_answer_json(const route_answer_in *a);
char *route_answer_text(const route_answer_in *a);   /* malloc'd; NULL: use the json */

json_t *finish_answer_json(const char *id, const char *worker, int index);
char *finish_answer_text(const char *id, const char *worker, int index);

#endif
