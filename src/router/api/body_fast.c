/* body_fast.c - the jansson-free fast path of the route and finish bodies
 * (body_fast.h). A cursor walks the text once; every check that fails
 * means "not the plain shape" and returns 0, never an error. */
#include <stdlib.h>
#include <string.h>

#include "b64.h"
#include "body_fast.h"

typedef struct cursor {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

/* Skip whitespace, then take the byte ch. */
static int take(cursor *c, char ch)
{
    skip_ws(c);
    if (c->p == c->end || *c->p != ch)
        return 0;
    c->p++;
    return 1;
}

/* A string of printable ASCII without escapes: jansson reads it as the
 * same bytes (no decoding, no UTF-8 to validate, no NUL). */
static int plain_string(cursor *c, const char **s, size_t *n)
{
    if (!take(c, '"'))
        return 0;
    const char *start = c->p;
    while (c->p < c->end && *c->p != '"') {
        unsigned char ch = (unsigned char)*c->p;
        if (ch < 0x20 || ch > 0x7e || ch == '\\')
            return 0;
        c->p++;
    }
    if (c->p == c->end)
        return 0;
    *s = start;
    *n = (size_t)(c->p - start);
    c->p++;
    return 1;
}

/* A string whose bytes are left for the caller to check: the counts,
 * which base64 decoding checks anyway (a backslash, a control byte or
 * any non-ASCII byte is outside its alphabet). One memchr, not a
 * byte-by-byte walk, over the longest token of the body. */
static int raw_string(cursor *c, const char **s, size_t *n)
{
    if (!take(c, '"'))
        return 0;
    const char *close = memchr(c->p, '"', (size_t)(c->end - c->p));
    if (!close)
        return 0;
    *s = c->p;
    *n = (size_t)(close - c->p);
    c->p = close + 1;
    return 1;
}

/* request_id / prefill_worker: null (kept as "") or a non-empty string
 * shorter than max, as rb_string would take it. */
static int optional_name(cursor *c, char *out, size_t max)
{
    skip_ws(c);
    if (c->end - c->p >= 4 && !memcmp(c->p, "null", 4)) {
        c->p += 4;
        out[0] = '\0';
        return 1;
    }
    const char *s;
    size_t n;
    if (!plain_string(c, &s, &n) || n == 0 || n >= max)
        return 0;
    memcpy(out, s, n);
    out[n] = '\0';
    return 1;
}

/* Dense counts straight into the cells: the base64 decodes to exactly
 * L*E little-endian int16, none negative. */
static int dense_counts(const char *s, size_t n, size_t cells, uint16_t *out)
{
    size_t got, bad;
    if (b64_decoded_len(s, n) != cells * 2 ||
        b64_decode(s, n, (uint8_t *)out, &got, &bad) < 0)
        return 0;
    unsigned neg = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (size_t i = 0; i < cells; i++)   /* the bytes are the cells already */
        neg |= out[i];
#else
    const uint8_t *raw = (const uint8_t *)out;
    for (size_t i = 0; i < cells; i++) {
        unsigned v = raw[2 * i] | (unsigned)raw[2 * i + 1] << 8;
        neg |= v;
        out[i] = (uint16_t)v;
    }
#endif
    return !(neg & 0x8000);
}

enum { K_REQUEST_ID = 1, K_PREFILL = 2, K_COUNTS = 4 };

static int key_of(const char *s, size_t n)
{
    if (n == 10 && !memcmp(s, "request_id", 10))
        return K_REQUEST_ID;
    if (n == 14 && !memcmp(s, "prefill_worker", 14))
        return K_PREFILL;
    if (n == 6 && !memcmp(s, "counts", 6))
        return K_COUNTS;
    return 0;
}

/* The last token: the object's '}' and only whitespace after it. */
static int at_close(cursor *c)
{
    if (!take(c, '}'))
        return 0;
    skip_ws(c);
    return c->p == c->end;
}

static int route_members(cursor *c, size_t cells, route_body *b)
{
    int seen = 0;
    if (!take(c, '{'))
        return 0;
    for (;;) {
        const char *k, *v;
        size_t kn, vn;
        if (!plain_string(c, &k, &kn) || !take(c, ':'))
            return 0;
        int key = key_of(k, kn);
        if (!key || (seen & key))
            return 0;   /* other keys and duplicates: the jansson path judges */
        seen |= key;
        if (key == K_REQUEST_ID && !optional_name(c, b->request_id, RB_ID_MAX))
            return 0;
        if (key == K_PREFILL && !optional_name(c, b->prefill_worker, RB_NAME_MAX))
            return 0;
        if (key == K_COUNTS && (!raw_string(c, &v, &vn) || !dense_counts(v, vn, cells, b->counts)))
            return 0;
        if (take(c, ','))
            continue;
        return (seen & K_COUNTS) && at_close(c);
    }
}

int route_body_fast(const char *text, size_t len, int L, int E, route_body *b)
{
    memset(b, 0, sizeof *b);
    size_t cells = (size_t)L * (size_t)E;
    if (L <= 0 || E <= 0 || !(b->counts = malloc(cells * sizeof *b->counts)))
        return 0;
    cursor c = {text, text + len};
    if (route_members(&c, cells, b))
        return 1;
    free(b->counts);
    memset(b, 0, sizeof *b);
    return 0;
}

int finish_body_fast(const char *text, size_t len, char id[RB_ID_MAX])
{
    cursor c = {text, text + len};
    const char *k, *s;
    size_t kn, n;
    if (!take(&c, '{') || !plain_string(&c, &k, &kn) || key_of(k, kn) != K_REQUEST_ID ||
        !take(&c, ':') || !plain_string(&c, &s, &n) || n == 0 || n >= RB_ID_MAX || !at_close(&c))
        return 0;
    memcpy(id, s, n);
    id[n] = '\0';
    return 1;
}
