/* body_route.c - bodies of POST /v1/route, POST /v1/finish and
 * PUT /v1/config (body.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b64.h"
#include "body_fast.h"
#include "body_json.h"
#include "sigcache.h"

/* Dense counts: base64 of L*E little-endian int16, each in 0..RB_COUNT_MAX. */
static int parse_dense(const json_t *v, int L, int E, uint16_t *out, const char *where,
                       rb_err *e)
{
    size_t n = json_string_length(v), cells = (size_t)L * (size_t)E, got, bad;
    uint8_t *raw = malloc(b64_decoded_max(n));
    if (!raw)
        return rb_fail(e, 500, where, "out of memory for %zu base64 characters", n);
    if (b64_decode(json_string_value(v), n, raw, &got, &bad) < 0) {
        free(raw);
        return rb_fail(e, 400, where, "invalid base64 at character %zu", bad);
    }
    if (got != cells * 2) {
        free(raw);
        return rb_fail(e, 422, where,
                       "decodes to %zu bytes, expected L*E*2 = %zu (L=%d, E=%d, int16)", got,
                       cells * 2, L, E);
    }
    for (size_t i = 0; i < cells; i++) {
        int16_t c = (int16_t)(uint16_t)(raw[2 * i] | raw[2 * i + 1] << 8);
        if (c < 0) {
            free(raw);
            return rb_fail(e, 422, where, "negative count %d at layer %zu expert %zu", c,
                           i / (size_t)E, i % (size_t)E);
        }
        out[i] = (uint16_t)c;
    }
    free(raw);
    return 0;
}

static int sparse_int(const json_t *a, size_t j, long long lo, long long hi, long long *out,
                      const char *where, const char *what, rb_err *e)
{
    const json_t *v = json_array_get(a, j);
    char w[112];
    snprintf(w, sizeof w, "%s[%zu]", where, j);
    if (!json_is_integer(v))
        return rb_fail(e, 400, w, "%s must be an integer", what);
    *out = json_integer_value(v);
    if (*out < lo || *out > hi)
        return rb_fail(e, 422, w, "%s %lld outside %lld..%lld", what, *out, lo, hi);
    return 0;
}

/* Sparse counts: [[layer, expert, count], ...]; repeated cells add up. */
static int parse_sparse(const json_t *a, int L, int E, uint16_t *out, const char *where,
                        rb_err *e)
{
    memset(out, 0, (size_t)L * (size_t)E * sizeof *out);
    size_t n = json_array_size(a);
    for (size_t i = 0; i < n; i++) {
        const json_t *t = json_array_get(a, i);
        char w[96];
        snprintf(w, sizeof w, "%s[%zu]", where, i);
        if (!json_is_array(t) || json_array_size(t) != 3)
            return rb_fail(e, 400, w, "must be [layer, expert, count]");
        long long l, x, c;
        if (sparse_int(t, 0, 0, L - 1, &l, w, "layer", e) < 0 ||
            sparse_int(t, 1, 0, E - 1, &x, w, "expert", e) < 0 ||
            sparse_int(t, 2, 0, RB_COUNT_MAX, &c, w, "count", e) < 0)
            return -1;
        uint16_t *cell = &out[l * E + x];
        if (*cell + c > RB_COUNT_MAX)
            return rb_fail(e, 422, w, "layer %lld expert %lld adds up to %lld, above %d", l, x,
                           *cell + c, RB_COUNT_MAX);
        *cell = (uint16_t)(*cell + c);
    }
    return 0;
}

/* A counts value: a base64 string (dense) or a sparse array. */
static int parse_counts(const json_t *v, int L, int E, uint16_t *out, const char *where,
                        rb_err *e)
{
    if (json_is_string(v))
        return parse_dense(v, L, E, out, where, e);
    if (json_is_array(v))
        return parse_sparse(v, L, E, out, where, e);
    return rb_fail(e, 400, where, "must be a base64 string or a sparse array");
}

/* Gate values are finite; whether they may be negative (logits) is the
 * model's business (ep_route.c). */
static int gate_value(double v, size_t cell, int E, const char *where, rb_err *e)
{
    if (!isfinite(v))
        return rb_fail(e, 422, where, "gate value at layer %zu expert %zu is not finite",
                       cell / (size_t)E, cell % (size_t)E);
    return 0;
}

/* Dense gates: base64 of L*E little-endian float32. */
static int parse_gates_dense(const json_t *v, int L, int E, float *out, rb_err *e)
{
    size_t n = json_string_length(v), cells = (size_t)L * (size_t)E, got, bad;
    uint8_t *raw = malloc(b64_decoded_max(n));
    if (!raw)
        return rb_fail(e, 500, "gates", "out of memory for %zu base64 characters", n);
    int rc = 0;
    if (b64_decode(json_string_value(v), n, raw, &got, &bad) < 0)
        rc = rb_fail(e, 400, "gates", "invalid base64 at character %zu", bad);
    else if (got != cells * 4)
        rc = rb_fail(e, 422, "gates",
                     "decodes to %zu bytes, expected L*E*4 = %zu (L=%d, E=%d, float32)", got,
                     cells * 4, L, E);
    for (size_t i = 0; rc == 0 && i < cells; i++) {
        uint32_t bits = (uint32_t)raw[4 * i] | (uint32_t)raw[4 * i + 1] << 8 |
                        (uint32_t)raw[4 * i + 2] << 16 | (uint32_t)raw[4 * i + 3] << 24;
        memcpy(&out[i], &bits, sizeof bits);
        rc = gate_value(out[i], i, E, "gates", e);
    }
    free(raw);
    return rc;
}

/* Sparse gates: [[layer, expert, value], ...]; repeated cells add up. */
static int parse_gates_sparse(const json_t *a, int L, int E, float *out, rb_err *e)
{
    memset(out, 0, (size_t)L * (size_t)E * sizeof *out);
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *t = json_array_get(a, i);
        char w[96];
        snprintf(w, sizeof w, "gates[%zu]", i);
        if (!json_is_array(t) || json_array_size(t) != 3)
            return rb_fail(e, 400, w, "must be [layer, expert, value]");
        long long l, x;
        if (sparse_int(t, 0, 0, L - 1, &l, w, "layer", e) < 0 ||
            sparse_int(t, 1, 0, E - 1, &x, w, "expert", e) < 0)
            return -1;
        const json_t *v = json_array_get(t, 2);
        if (!json_is_number(v))
            return rb_fail(e, 400, w, "value must be a number");
        size_t cell = (size_t)l * (size_t)E + (size_t)x;
        out[cell] = (float)(out[cell] + json_number_value(v));
        if (gate_value(out[cell], cell, E, w, e) < 0)
            return -1;
    }
    return 0;
}

static int parse_the_gates(const json_t *g, int L, int E, route_body *b, rb_err *e)
{
    b->gates = malloc((size_t)L * (size_t)E * sizeof *b->gates);
    if (!b->gates)
        return rb_fail(e, 500, "gates", "out of memory");
    if (json_is_string(g))
        return parse_gates_dense(g, L, E, b->gates, e);
    if (json_is_array(g))
        return parse_gates_sparse(g, L, E, b->gates, e);
    return rb_fail(e, 400, "gates", "must be a base64 string (float32 LE, L*E) or an array of "
                   "[layer, expert, value]");
}

static int parse_optional_string(const json_t *o, const char *key, char *out, size_t max,
                                 rb_err *e)
{
    const json_t *v = json_object_get(o, key);
    out[0] = '\0';
    if (!v || json_is_null(v))
        return 0;
    return rb_string(v, out, max, key, e);
}

static int parse_the_counts(const json_t *o, int L, int E, route_body *b, rb_err *e)
{
    const json_t *dense = json_object_get(o, "counts"), *sparse = json_object_get(o, "sparse"),
                 *gates = json_object_get(o, "gates");
    if (dense && sparse)
        return rb_fail(e, 400, "counts", "give either counts or sparse, not both");
    if (gates && (dense || sparse))
        return rb_fail(e, 400, "gates", "give either gates or counts (sparse), not both");
    if (gates)
        return parse_the_gates(gates, L, E, b, e);
    if (!dense && !sparse)
        return rb_fail(e, 400, "counts", "missing: give counts (base64), sparse, or gates");
    b->counts = malloc((size_t)L * (size_t)E * sizeof *b->counts);
    if (!b->counts)
        return rb_fail(e, 500, "counts", "out of memory");
    if (dense) {
        if (!json_is_string(dense))
            return rb_fail(e, 400, "counts", "must be a base64 string (int16 LE, L*E)");
        return parse_dense(dense, L, E, b->counts, "counts", e);
    }
    if (!json_is_array(sparse))
        return rb_fail(e, 400, "sparse", "must be an array of [layer, expert, count]");
    return parse_sparse(sparse, L, E, b->counts, "sparse", e);
}

static int parse_blocks(const json_t *o, int L, int E, route_body *b, rb_err *e)
{
    static const char *const block_keys[] = {"block_hashes", "cached_blocks", "block_counts"};
    for (int i = 0; b->gates && i < 3; i++) {
        const json_t *v = json_object_get(o, block_keys[i]);
        if (v && !json_is_null(v))
            return rb_fail(e, 422, block_keys[i], "the signature cache keeps counts; a request "
                           "with gates sends its whole prompt's gates and no block fields");
    }
    if (b->gates)
        return 0;
    const json_t *h = json_object_get(o, "block_hashes");
    if (h && !json_is_null(h) && rb_hash_array(h, &b->hashes, &b->n_hashes, "block_hashes", e) < 0)
        return -1;
    const json_t *c = json_object_get(o, "cached_blocks");
    if (c && !json_is_null(c)) {
        if (!json_is_integer(c))
            return rb_fail(e, 400, "cached_blocks", "must be an integer");
        json_int_t v = json_integer_value(c);
        if (v < 0 || v > b->n_hashes)
            return rb_fail(e, 422, "cached_blocks", "%lld outside 0..%d (the block_hashes given)",
                           (long long)v, b->n_hashes);
        b->cached_blocks = (int)v;
    }
    const json_t *bc = json_object_get(o, "block_counts");
    if (!bc || json_is_null(bc))
        return 0;
    if (!json_is_array(bc))
        return rb_fail(e, 400, "block_counts", "must be an array of counts (base64 or sparse)");
    size_t n = json_array_size(bc), cells = (size_t)L * (size_t)E;
    if (n > (size_t)(b->n_hashes - b->cached_blocks))
        return rb_fail(e, 422, "block_counts",
                       "%zu blocks, but only %d hashes follow the %d cached ones", n,
                       b->n_hashes - b->cached_blocks, b->cached_blocks);
    if (n == 0)
        return 0;
    b->block_counts = malloc(n * cells * sizeof *b->block_counts);
    if (!b->block_counts)
        return rb_fail(e, 500, "block_counts", "out of memory for %zu blocks", n);
    for (size_t j = 0; j < n; j++) {
        char w[64];
        snprintf(w, sizeof w, "block_counts[%zu]", j);
        if (parse_counts(json_array_get(bc, j), L, E, b->block_counts + j * cells, w, e) < 0)
            return -1;
    }
    b->n_block_counts = (int)n;
    /* the cache keeps a byte a cell: refuse here, before any block is
     * stored, so that a refused route leaves the cache as it was */
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < cells; i++)
            if (b->block_counts[j * cells + i] > SIGCACHE_MAX_BLOCK)
                return rb_fail(e, 422, "block_counts", "block_counts[%zu]: count %u at layer %zu "
                               "expert %zu exceeds %d (a block holds at most %d tokens)", j,
                               b->block_counts[j * cells + i], i / (size_t)E, i % (size_t)E,
                               SIGCACHE_MAX_BLOCK, SIGCACHE_MAX_BLOCK);
    /* the computed blocks are part of the computed tokens */
    for (size_t i = 0; i < cells; i++) {
        unsigned sum = 0;
        for (size_t j = 0; j < n; j++)
            sum += b->block_counts[j * cells + i];
        if (sum > b->counts[i])
            return rb_fail(e, 422, "block_counts",
                           "layer %zu expert %zu: blocks sum to %u, more than counts %u",
                           i / (size_t)E, i % (size_t)E, sum, b->counts[i]);
    }
    return 0;
}

int route_body_parse(const char *text, size_t len, int L, int E, route_body *b, rb_err *e)
{
    if (route_body_fast(text, len, L, E, b))
        return 0;
    return route_body_parse_json(text, len, L, E, b, e);
}

int route_body_parse_json(const char *text, size_t len, int L, int E, route_body *b, rb_err *e)
{
    memset(b, 0, sizeof *b);
    json_t *o = rb_load(text, len, e);
    if (!o)
        return -1;
    static const char *const known[] = {"request_id", "counts", "sparse", "gates",
                                        "prefill_worker", "block_hashes", "cached_blocks",
                                        "block_counts", NULL};
    int rc = -1;
    if (!json_is_object(o))
        rb_fail(e, 400, "body", "must be a JSON object");
    else if (rb_known_keys(o, known, e) == 0 &&
             parse_optional_string(o, "request_id", b->request_id, RB_ID_MAX, e) == 0 &&
             parse_optional_string(o, "prefill_worker", b->prefill_worker, RB_NAME_MAX, e) == 0 &&
             parse_the_counts(o, L, E, b, e) == 0 && parse_blocks(o, L, E, b, e) == 0)
        rc = 0;
    json_decref(o);
    if (rc < 0)
        route_body_free(b);
    return rc;
}

void route_body_free(route_body *b)
{
    free(b->counts);
    free(b->gates);
    free(b->hashes);
    free(b->block_counts);
    memset(b, 0, sizeof *b);
}

int finish_body_parse(const char *text, size_t len, char id[RB_ID_MAX], rb_err *e)
{
    if (finish_body_fast(text, len, id))
        return 0;
    return finish_body_parse_json(text, len, id, e);
}

int finish_body_parse_json(const char *text, size_t len, char id[RB_ID_MAX], rb_err *e)
{
    json_t *o = rb_load(text, len, e);
    if (!o)
        return -1;
    static const char *const known[] = {"request_id", NULL};
    int rc;
    if (!json_is_object(o))
        rc = rb_fail(e, 400, "body", "must be a JSON object");
    else if (rb_known_keys(o, known, e) < 0)
        rc = -1;
    else if (!json_object_get(o, "request_id"))
        rc = rb_fail(e, 400, "request_id", "missing");
    else
        rc = rb_string(json_object_get(o, "request_id"), id, RB_ID_MAX, "request_id", e);
    json_decref(o);
    return rc;
}

int config_body_parse(const char *text, size_t len, double *tau, rb_err *e)
{
    json_t *o = rb_load(text, len, e);
    if (!o)
        return -1;
    static const char *const known[] = {"tau", NULL};
    int rc = 0;
    const json_t *t = json_is_object(o) ? json_object_get(o, "tau") : NULL;
    if (!json_is_object(o))
        rc = rb_fail(e, 400, "body", "must be a JSON object");
    else if (rb_known_keys(o, known, e) < 0)
        rc = -1;
    else if (!t)
        rc = rb_fail(e, 400, "tau", "missing");
    else if (!json_is_number(t))
        rc = rb_fail(e, 400, "tau", "must be a number");
    else if (!isfinite(json_number_value(t)) || json_number_value(t) < 0)
        rc = rb_fail(e, 422, "tau", "%g must be finite and >= 0", json_number_value(t));
    else
        *tau = json_number_value(t);
    json_decref(o);
    return rc;
}
