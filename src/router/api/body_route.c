/* body_route.c - bodies of POST /v1/route, POST /v1/finish and
 * PUT /v1/config (body.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b64.h"
#include "body_fast.h"
#include "body.h"
#include "json_in.h"
#include "sigcache.h"
#include "state.h"

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
        if (rb_array_int(t, 0, 0, L - 1, &l, w, "layer", e) < 0 ||
            rb_array_int(t, 1, 0, E - 1, &x, w, "expert", e) < 0)
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
        return rb_counts(dense, L, E, b->counts, "counts", e);
    }
    if (!json_is_array(sparse))
        return rb_fail(e, 400, "sparse", "must be an array of [layer, expert, count]");
    return rb_counts(sparse, L, E, b->counts, "sparse", e);
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
    rb_blocks bl;
    int rc = rb_blocks_parse(o, block_keys, L, E, b->counts, &bl, e);
    b->hashes = bl.hashes;
    b->n_hashes = bl.n_hashes;
    b->cached_blocks = bl.cached_blocks;
    b->block_counts = bl.block_counts;
    b->n_block_counts = bl.n_block_counts;
    return rc;
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

int config_body_parse(const char *text, size_t len, double *tau, int *policy, rb_err *e)
{
    json_t *o = rb_load(text, len, e);
    if (!o)
        return -1;
    static const char *const known[] = {"tau", "policy", NULL};
    int rc = 0;
    const json_t *t = json_is_object(o) ? json_object_get(o, "tau") : NULL;
    const json_t *p = json_is_object(o) ? json_object_get(o, "policy") : NULL;
    *tau = NAN;
    *policy = -1;
    if (!json_is_object(o))
        rc = rb_fail(e, 400, "body", "must be a JSON object");
    else if (rb_known_keys(o, known, e) < 0)
        rc = -1;
    else if (!t && !p)
        rc = rb_fail(e, 400, "tau", "missing: give \"tau\", \"policy\" or both");
    else if (t && !json_is_number(t))
        rc = rb_fail(e, 400, "tau", "must be a number");
    else if (t && (!isfinite(json_number_value(t)) || json_number_value(t) < 0))
        rc = rb_fail(e, 422, "tau", "%g must be finite and >= 0", json_number_value(t));
    else if (p && !json_is_string(p))
        rc = rb_fail(e, 400, "policy", "must be a string, \"band\" or \"cost\"");
    else if (p && (*policy = state_policy_parse(json_string_value(p))) < 0)
        rc = rb_fail(e, 422, "policy", "'%.64s' is neither \"band\" nor \"cost\"",
                     json_string_value(p));
    else if (t)
        *tau = json_number_value(t);
    json_decref(o);
    return rc;
}
