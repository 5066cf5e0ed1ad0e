/* fuzz_route_body.c - libFuzzer harness: the eldrd request bodies
 * route_body_parse (POST /v1/route, dense and sparse counts or gates), and, on the
 * same text, finish_body_parse and config_body_parse.
 *
 * Input: byte 0 picks L (1..4), byte 1 picks E (1..8), the rest is the
 * body. Promises checked: never a crash, overread or leak; a refusal has
 * a 4xx/5xx status and a message, and leaves the struct empty; accepted
 * counts are in range, the block fields are consistent, and the counts
 * survive both wire forms: re-encoded as dense base64 and as a sparse
 * list, they parse back to the same cells. The parsers try a jansson-free
 * fast path first (body_fast.h; the re-encoded dense bodies take it):
 * route_body_parse and finish_body_parse must give exactly what their
 * jansson-only twins give, struct or error. */
#include <math.h>

#include "b64.h"
#include "body.h"
#include "fuzz.h"
#include "state.h"

static void route_check_fail(const rb_err *e)
{
    fuzz_check(e->status >= 400 && e->status <= 599);
    fuzz_check(e->error[0] != '\0' && memchr(e->error, '\0', sizeof e->error));
    fuzz_check(memchr(e->where, '\0', sizeof e->where) != NULL);
}

/* Parse `text` (L x E) and require exactly `want` as its counts. */
static void route_expect_counts(const char *text, int L, int E, const uint16_t *want)
{
    route_body b;
    rb_err e;
    fuzz_check(route_body_parse(text, strlen(text), L, E, &b, &e) == 0);
    fuzz_check(memcmp(b.counts, want, (size_t)L * (size_t)E * sizeof *want) == 0);
    route_body_free(&b);
}

/* The counts as {"counts": base64} and as {"sparse": [...]}. */
static void route_round_trip(const route_body *b, int L, int E)
{
    size_t cells = (size_t)L * (size_t)E;
    uint8_t raw[2 * 4 * 8];
    for (size_t i = 0; i < cells; i++) {
        raw[2 * i] = (uint8_t)(b->counts[i] & 0xff);
        raw[2 * i + 1] = (uint8_t)(b->counts[i] >> 8);
    }
    char text[64 + 32 * 4 * 8];
    int n = snprintf(text, sizeof text, "{\"counts\": \"");
    b64_encode(raw, 2 * cells, text + n);
    strcat(text, "\"}");
    route_expect_counts(text, L, E, b->counts);

    n = snprintf(text, sizeof text, "{\"sparse\": [");
    const char *sep = "";
    for (size_t i = 0; i < cells; i++) {
        if (!b->counts[i])
            continue;
        n += snprintf(text + n, sizeof text - (size_t)n, "%s[%zu, %zu, %u]", sep,
                      i / (size_t)E, i % (size_t)E, b->counts[i]);
        sep = ", ";
    }
    snprintf(text + n, sizeof text - (size_t)n, "]}");
    route_expect_counts(text, L, E, b->counts);
}

/* A gate body: finite values, no counts, no block fields. */
static void route_check_gates(const route_body *b, size_t cells)
{
    fuzz_check(!b->counts && !b->n_hashes && !b->cached_blocks && !b->n_block_counts);
    for (size_t i = 0; i < cells; i++)
        fuzz_check(isfinite(b->gates[i]));
}

static void route_check_ok(const route_body *b, int L, int E)
{
    size_t cells = (size_t)L * (size_t)E;
    if (b->gates) {
        route_check_gates(b, cells);
        return;
    }
    fuzz_check(b->counts != NULL);
    fuzz_check(memchr(b->request_id, '\0', RB_ID_MAX) && memchr(b->prefill_worker, '\0', RB_NAME_MAX));
    fuzz_check(b->n_hashes >= 0 && b->n_hashes <= RB_HASHES_MAX);
    fuzz_check(b->n_hashes == 0 || b->hashes != NULL);
    fuzz_check(b->cached_blocks >= 0 && b->cached_blocks <= b->n_hashes);
    fuzz_check(b->n_block_counts >= 0 && b->n_block_counts <= b->n_hashes - b->cached_blocks);
    for (size_t i = 0; i < cells; i++) {
        unsigned sum = 0;
        fuzz_check(b->counts[i] <= RB_COUNT_MAX);
        for (int j = 0; j < b->n_block_counts; j++)
            sum += b->block_counts[(size_t)j * cells + i];
        fuzz_check(sum <= b->counts[i]);
    }
    route_round_trip(b, L, E);
}

/* The fast path changes nothing: the jansson path gives the same. */
static void route_same_as_json(const char *text, size_t len, int L, int E, int rc,
                               const route_body *b, const rb_err *e)
{
    route_body j;
    rb_err je;
    memset(&je, 0, sizeof je);
    fuzz_check(route_body_parse_json(text, len, L, E, &j, &je) == rc);
    if (rc < 0) {
        fuzz_check(je.status == e->status && !strcmp(je.error, e->error) &&
                   !strcmp(je.where, e->where));
        return;
    }
    size_t cells = (size_t)L * (size_t)E;
    fuzz_check(!strcmp(j.request_id, b->request_id) &&
               !strcmp(j.prefill_worker, b->prefill_worker));
    fuzz_check(!j.counts == !b->counts && !j.gates == !b->gates);
    fuzz_check(!j.counts || !memcmp(j.counts, b->counts, cells * sizeof *b->counts));
    fuzz_check(!j.gates || !memcmp(j.gates, b->gates, cells * sizeof *b->gates));
    fuzz_check(j.n_hashes == b->n_hashes && j.cached_blocks == b->cached_blocks &&
               j.n_block_counts == b->n_block_counts);
    fuzz_check(!j.n_hashes || !memcmp(j.hashes, b->hashes, (size_t)j.n_hashes * sizeof *j.hashes));
    fuzz_check(!j.n_block_counts || !memcmp(j.block_counts, b->block_counts,
                                            (size_t)j.n_block_counts * cells * sizeof *j.block_counts));
    route_body_free(&j);
}

static int fuzz_route_body_one(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int L = 1 + data[0] % 4, E = 1 + data[1] % 8;
    const char *text = (const char *)data + 2;
    size_t len = size - 2;
    route_body b;
    rb_err e;
    memset(&e, 0, sizeof e);
    int rc = route_body_parse(text, len, L, E, &b, &e);
    route_same_as_json(text, len, L, E, rc, &b, &e);
    if (rc == 0) {
        route_check_ok(&b, L, E);
        route_body_free(&b);
    } else {
        route_check_fail(&e);
        fuzz_check(!b.counts && !b.gates && !b.hashes && !b.block_counts);
    }

    char id[RB_ID_MAX];
    memset(&e, 0, sizeof e);
    char jid[RB_ID_MAX];
    rb_err je;
    memset(&je, 0, sizeof je);
    rc = finish_body_parse(text, len, id, &e);
    fuzz_check(finish_body_parse_json(text, len, jid, &je) == rc);
    if (rc == 0) {
        fuzz_check(id[0] != '\0' && memchr(id, '\0', sizeof id) && !strcmp(id, jid));
    } else {
        route_check_fail(&e);
        fuzz_check(je.status == e.status && !strcmp(je.error, e.error) && !strcmp(je.where, e.where));
    }

    double tau = -1;
    int policy = -2;
    memset(&e, 0, sizeof e);
    if (config_body_parse(text, len, &tau, &policy, &e) == 0)
        fuzz_check((isnan(tau) || tau >= 0) && (policy == -1 || policy == STATE_POLICY_BAND ||
                                                 policy == STATE_POLICY_COST) &&
                   (!isnan(tau) || policy >= 0));
    else
        route_check_fail(&e);
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_route_body_one(data, size);
}
#endif
