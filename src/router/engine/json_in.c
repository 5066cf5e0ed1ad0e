/* json_in.c - JSON from outside, read with bounds (json_in.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b64.h"
#include "json_in.h"
#include "sigcache.h"

int rb_json_bounds(const char *text, size_t len, long max_nodes, long max_containers,
                   int max_depth, rb_err *e)
{
    long nodes = 0, containers = 0;
    int depth = 0, in_str = 0, in_scalar = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
            continue;
        }
        int scalar_char = (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' ||
                          (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (scalar_char && !in_scalar)
            nodes++;
        in_scalar = scalar_char;
        if (c == '"') {
            in_str = 1;
            nodes++;
        } else if (c == '{' || c == '[') {
            nodes++;
            containers++;
            if (++depth > max_depth)
                return rb_fail(e, 413, "body", "JSON nested deeper than %d levels", max_depth);
        } else if (c == '}' || c == ']') {
            depth--;
        }
        if (nodes > max_nodes || containers > max_containers)
            return rb_fail(e, 413, "body", "more than %ld JSON %s; this endpoint takes at most "
                           "that many", nodes > max_nodes ? max_nodes : max_containers,
                           nodes > max_nodes ? "values" : "objects and arrays");
    }
    return 0;
}

/* 1 when text[0..n) is a JSON integer in 2^63 .. 2^64 - 1: too big for
 * jansson's json_int_t, yet a block hash. */
static int big_u64(const char *t, size_t n)
{
    if (n < 19 || n > 20 || t[0] == '0')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (t[i] < '0' || t[i] > '9')
            return 0;
    if (n == 19)
        return memcmp(t, "9223372036854775807", 19) > 0;
    return memcmp(t, "18446744073709551615", 20) <= 0;
}

int rb_quote_big_ints(const char *text, size_t len, char **out, size_t *outlen)
{
    *out = NULL;
    *outlen = 0;
    char *q = NULL;
    size_t nq = 0, w = 0;
    for (int pass = 0; pass < 2; pass++) {
        int in_str = 0;
        size_t start = SIZE_MAX; /* the current scalar's first byte */
        for (size_t i = 0; i <= len; i++) {
            char c = i < len ? text[i] : ' ';
            if (in_str) {
                if (c == '\\' && i + 1 < len) {
                    if (q)
                        q[w++] = c;
                    c = text[++i];
                } else if (c == '"') {
                    in_str = 0;
                }
                if (q && i < len)    /* not the end's sentinel: a string left open */
                    q[w++] = c;
                continue;
            }
            int scalar = (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' ||
                         (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
            if (scalar && start == SIZE_MAX)
                start = i;
            if (!scalar && start != SIZE_MAX) {
                size_t r = i - start;
                if (big_u64(text + start, r)) {
                    if (q) { /* its digits are copied: quote them */
                        memmove(q + w - r + 1, q + w - r, r);
                        q[w - r] = '"';
                        w++;
                        q[w++] = '"';
                    }
                    nq++;
                }
                start = SIZE_MAX;
            }
            in_str = c == '"';
            if (q && i < len)
                q[w++] = c;
        }
        if (pass == 0) {
            if (!nq)
                return 0;
            if (!(q = malloc(len + 2 * nq)))
                return -1;
        }
    }
    *out = q;
    *outlen = w;
    return 0;
}

json_t *rb_load(const char *text, size_t len, rb_err *e)
{
    if (rb_json_bounds(text, len, RB_MAX_NODES, RB_MAX_CONTAINERS, RB_MAX_DEPTH, e) < 0)
        return NULL;
    char *quoted;
    size_t qlen;
    if (rb_quote_big_ints(text, len, &quoted, &qlen) < 0) {
        rb_fail(e, 500, "body", "out of memory");
        return NULL;
    }
    json_error_t je;
    json_t *v = json_loadb(quoted ? quoted : text, quoted ? qlen : len, JSON_REJECT_DUPLICATES,
                           &je);
    free(quoted);
    if (!v) {
        char where[64];
        snprintf(where, sizeof where, "line %d column %d", je.line, je.column);
        rb_fail(e, 400, where, "malformed JSON: %s", je.text);
    }
    return v;
}

int rb_parse_hash_text(const char *s, uint64_t *out)
{
    int neg = *s == '-';
    const char *digits = s + neg;
    if (*digits < '0' || *digits > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(digits, &end, 10);
    if (errno || *end)
        return -1;
    if (neg) {
        if (v > 9223372036854775808ULL)  /* below INT64_MIN */
            return -1;
        *out = (uint64_t)0 - (uint64_t)v;
    } else {
        *out = (uint64_t)v;
    }
    return 0;
}

int rb_hash(const json_t *v, uint64_t *out, const char *where, rb_err *e)
{
    if (json_is_integer(v)) {
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    if (json_is_string(v)) {
        if (rb_parse_hash_text(json_string_value(v), out) < 0)
            return rb_fail(e, 422, where, "block hash '%.40s' is not a 64-bit decimal number",
                           json_string_value(v));
        return 0;
    }
    return rb_fail(e, 400, where, "block hash must be an integer or a decimal string");
}

int rb_hash_array(const json_t *a, uint64_t **out, int *n, const char *where, rb_err *e)
{
    *out = NULL;
    *n = 0;
    if (!json_is_array(a))
        return rb_fail(e, 400, where, "must be an array of block hashes");
    size_t len = json_array_size(a);
    if (len > RB_HASHES_MAX)
        return rb_fail(e, 422, where, "%zu block hashes, more than %d", len, RB_HASHES_MAX);
    if (len == 0)
        return 0;
    uint64_t *h = malloc(len * sizeof *h);
    if (!h)
        return rb_fail(e, 500, where, "out of memory for %zu hashes", len);
    for (size_t i = 0; i < len; i++) {
        char w[96];
        snprintf(w, sizeof w, "%s[%zu]", where, i);
        if (rb_hash(json_array_get(a, i), &h[i], w, e) < 0) {
            free(h);
            return -1;
        }
    }
    *out = h;
    *n = (int)len;
    return 0;
}

int rb_string(const json_t *v, char *out, size_t max, const char *where, rb_err *e)
{
    if (!json_is_string(v))
        return rb_fail(e, 400, where, "must be a string");
    size_t len = json_string_length(v);
    if (len == 0)
        return rb_fail(e, 422, where, "must not be empty");
    if (len >= max)
        return rb_fail(e, 422, where, "%zu bytes, longer than %zu", len, max - 1);
    if (memchr(json_string_value(v), '\0', len))
        return rb_fail(e, 422, where, "must not contain NUL");
    memcpy(out, json_string_value(v), len + 1);
    return 0;
}

int rb_known_keys(const json_t *o, const char *const *known, rb_err *e)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)o, key, v) {
        int ok = 0;
        for (const char *const *k = known; *k && !ok; k++)
            ok = !strcmp(key, *k);
        if (!ok) {
            char list[256] = "";
            for (const char *const *k = known; *k; k++)
                snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                         k == known ? "" : ", ", *k);
            char where[80];
            snprintf(where, sizeof where, "%.64s", key);
            for (char *p = where; *p; p++)   /* where is quoted in JSON: keep it plain */
                if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
                    *p = '?';
            return rb_fail(e, 422, where, "unknown key (known: %s)", list);
        }
    }
    return 0;
}

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

int rb_array_int(const json_t *a, size_t j, long long lo, long long hi, long long *out,
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
        if (rb_array_int(t, 0, 0, L - 1, &l, w, "layer", e) < 0 ||
            rb_array_int(t, 1, 0, E - 1, &x, w, "expert", e) < 0 ||
            rb_array_int(t, 2, 0, RB_COUNT_MAX, &c, w, "count", e) < 0)
            return -1;
        uint16_t *cell = &out[l * E + x];
        if (*cell + c > RB_COUNT_MAX)
            return rb_fail(e, 422, w, "layer %lld expert %lld adds up to %lld, above %d", l, x,
                           *cell + c, RB_COUNT_MAX);
        *cell = (uint16_t)(*cell + c);
    }
    return 0;
}

int rb_counts(const json_t *v, int L, int E, uint16_t *out, const char *where, rb_err *e)
{
    if (json_is_string(v))
        return parse_dense(v, L, E, out, where, e);
    if (json_is_array(v))
        return parse_sparse(v, L, E, out, where, e);
    return rb_fail(e, 400, where, "must be a base64 string or a sparse array");
}

static int blocks_read(const json_t *o, const char *const keys[3], int L, int E,
                       const uint16_t *counts, rb_blocks *b, rb_err *e)
{
    const json_t *h = json_object_get(o, keys[0]);
    if (h && !json_is_null(h) && rb_hash_array(h, &b->hashes, &b->n_hashes, keys[0], e) < 0)
        return -1;
    const json_t *c = json_object_get(o, keys[1]);
    if (c && !json_is_null(c)) {
        if (!json_is_integer(c))
            return rb_fail(e, 400, keys[1], "must be an integer");
        json_int_t v = json_integer_value(c);
        if (v < 0 || v > b->n_hashes)
            return rb_fail(e, 422, keys[1], "%lld outside 0..%d (the %s given)",
                           (long long)v, b->n_hashes, keys[0]);
        b->cached_blocks = (int)v;
    }
    const json_t *bc = json_object_get(o, keys[2]);
    if (!bc || json_is_null(bc))
        return 0;
    if (!json_is_array(bc))
        return rb_fail(e, 400, keys[2], "must be an array of counts (base64 or sparse)");
    size_t n = json_array_size(bc), cells = (size_t)L * (size_t)E;
    if (n > (size_t)(b->n_hashes - b->cached_blocks))
        return rb_fail(e, 422, keys[2],
                       "%zu blocks, but only %d hashes follow the %d cached ones", n,
                       b->n_hashes - b->cached_blocks, b->cached_blocks);
    if (n == 0)
        return 0;
    b->block_counts = malloc(n * cells * sizeof *b->block_counts);
    if (!b->block_counts)
        return rb_fail(e, 500, keys[2], "out of memory for %zu blocks", n);
    for (size_t j = 0; j < n; j++) {
        char w[64];
        snprintf(w, sizeof w, "%s[%zu]", keys[2], j);
        if (rb_counts(json_array_get(bc, j), L, E, b->block_counts + j * cells, w, e) < 0)
            return -1;
    }
    b->n_block_counts = (int)n;
    /* the cache keeps a byte a cell: refuse here, before any block is
     * stored, so that a refused route leaves the cache as it was */
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < cells; i++)
            if (b->block_counts[j * cells + i] > SIGCACHE_MAX_BLOCK)
                return rb_fail(e, 422, keys[2], "%s[%zu]: count %u at layer %zu "
                               "expert %zu exceeds %d (a block holds at most %d tokens)", keys[2], j,
                               b->block_counts[j * cells + i], i / (size_t)E, i % (size_t)E,
                               SIGCACHE_MAX_BLOCK, SIGCACHE_MAX_BLOCK);
    /* the computed blocks are part of the computed tokens */
    for (size_t i = 0; i < cells; i++) {
        unsigned sum = 0;
        for (size_t j = 0; j < n; j++)
            sum += b->block_counts[j * cells + i];
        if (sum > counts[i])
            return rb_fail(e, 422, keys[2],
                           "layer %zu expert %zu: blocks sum to %u, more than counts %u",
                           i / (size_t)E, i % (size_t)E, sum, counts[i]);
    }
    return 0;
}

int rb_blocks_parse(const json_t *o, const char *const keys[3], int L, int E,
                    const uint16_t *counts, rb_blocks *b, rb_err *e)
{
    memset(b, 0, sizeof *b);
    int rc = blocks_read(o, keys, L, E, counts, b, e);
    if (rc < 0)
        rb_blocks_free(b);
    return rc;
}

void rb_blocks_free(rb_blocks *b)
{
    free(b->hashes);
    free(b->block_counts);
    memset(b, 0, sizeof *b);
}
