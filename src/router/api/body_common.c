/* body_common.c - what the body parsers share: errors, loading, block
 * hashes and bounded strings (body.h, body_json.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "body_json.h"

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

json_t *rb_load(const char *text, size_t len, rb_err *e)
{
    if (rb_json_bounds(text, len, RB_MAX_NODES, RB_MAX_CONTAINERS, RB_MAX_DEPTH, e) < 0)
        return NULL;
    json_error_t je;
    json_t *v = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
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
