/* json_scan.c - the in-place JSON scanner (json_scan.h). */
#include <string.h>

#include "json_scan.h"

int cj_expect(cj_t *s, char c)
{
    if (cj_peek(s) != (unsigned char)c)
        return -1;
    s->p++;
    return 0;
}

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Whether n bytes hold a control character (which JSON wants escaped).
 * A plain reduction, so that the compiler can vectorise it: base64
 * strings of tens of kilobytes pass through here. */
static int has_control(const unsigned char *p, size_t n)
{
    unsigned bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= p[i] < 0x20;
    return bad != 0;
}

int cj_string(cj_t *s, const char **str, size_t *len)
{
    if (cj_expect(s, '"') < 0)
        return -1;
    const char *q = s->p;
    for (;;) {
        /* the next quote; an escape before it is checked and stepped over */
        const char *quote = memchr(q, '"', (size_t)(s->end - q));
        const char *bs = quote ? memchr(q, '\\', (size_t)(quote - q)) : NULL;
        if (!quote)
            return s->p = s->end, -1;
        const char *stop = bs ? bs : quote;
        if (has_control((const unsigned char *)q, (size_t)(stop - q)))
            return s->p = q, -1;   /* control characters must be escaped */
        if (!bs) {
            q = quote;
            break;
        }
        q = bs;
        if (q + 1 >= s->end)
            return s->p = q, -1;
        char e = q[1];
        if (e == 'u') {
            if (s->end - q < 6 || !is_hex(q[2]) || !is_hex(q[3]) || !is_hex(q[4]) ||
                !is_hex(q[5]))
                return s->p = q, -1;
            q += 6;
        } else if (e && strchr("\"\\/bfnrt", e)) {
            q += 2;
        } else {
            return s->p = q, -1;
        }
    }
    *str = s->p;
    *len = (size_t)(q - s->p);
    s->p = q + 1;
    return 0;
}

int cj_int(cj_t *s, int64_t *v)
{
    cj_peek(s);
    const char *q = s->p;
    int neg = q < s->end && *q == '-';
    q += neg;
    if (q >= s->end || *q < '0' || *q > '9' || (*q == '0' && q + 1 < s->end &&
                                                q[1] >= '0' && q[1] <= '9'))
        return -1;
    uint64_t x = 0;
    while (q < s->end && *q >= '0' && *q <= '9') {
        unsigned d = (unsigned)(*q - '0');
        if (x > (UINT64_C(9223372036854775808) - d) / 10)
            return -1;
        x = x * 10 + d;
        q++;
    }
    if (q < s->end && (*q == '.' || *q == 'e' || *q == 'E'))
        return -1;  /* a fraction is not an id */
    if (!neg && x > (uint64_t)INT64_MAX)
        return -1;
    *v = neg ? (int64_t)(0 - x) : (int64_t)x;
    s->p = q;
    return 0;
}

static int skip_number(cj_t *s)
{
    const char *q = s->p;
    if (q < s->end && *q == '-')
        q++;
    const char *d0 = q;
    while (q < s->end && *q >= '0' && *q <= '9')
        q++;
    if (q == d0 || (*d0 == '0' && q - d0 > 1))
        return -1;   /* no digits, or a leading zero */
    if (q < s->end && *q == '.') {
        const char *f = ++q;
        while (q < s->end && *q >= '0' && *q <= '9')
            q++;
        if (q == f)
            return -1;
    }
    if (q < s->end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < s->end && (*q == '+' || *q == '-'))
            q++;
        const char *x = q;
        while (q < s->end && *q >= '0' && *q <= '9')
            q++;
        if (q == x)
            return -1;
    }
    s->p = q;
    return 0;
}

static int skip_word(cj_t *s, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, w, n))
        return -1;
    s->p += n;
    return 0;
}

/* Before a member: the closing bracket (consumed: 0), or a comma when one
 * is due (1: a member follows); -1 on anything else. */
static int member(cj_t *s, int *count, char close)
{
    int c = cj_peek(s);
    if (c == close) {
        s->p++;
        return 0;
    }
    if ((*count)++ > 0) {
        if (c != ',')
            return -1;
        s->p++;
        if (cj_peek(s) == close)
            return -1;   /* a trailing comma */
    }
    return c < 0 ? -1 : 1;
}

int cj_next_item(cj_t *s, int *count)
{
    return member(s, count, ']');
}

int cj_next_key(cj_t *s, int *count, const char **key, size_t *klen)
{
    int r = member(s, count, '}');
    if (r == 1 && (cj_string(s, key, klen) < 0 || cj_expect(s, ':') < 0))
        return -1;
    return r;
}

static int skip_at(cj_t *s, int depth)
{
    if (depth > CJ_MAX_DEPTH)
        return -1;
    int c = cj_peek(s), n = 0, r;
    const char *k;
    size_t kl;
    switch (c) {
    case '{':
        s->p++;
        while ((r = cj_next_key(s, &n, &k, &kl)) == 1)
            if (skip_at(s, depth + 1) < 0)
                return -1;
        return r;
    case '[':
        s->p++;
        while ((r = cj_next_item(s, &n)) == 1)
            if (skip_at(s, depth + 1) < 0)
                return -1;
        return r;
    case '"':
        return cj_string(s, &k, &kl);
    case 't':
        return skip_word(s, "true");
    case 'f':
        return skip_word(s, "false");
    case 'n':
        return skip_word(s, "null");
    default:
        return skip_number(s);
    }
}

int cj_skip(cj_t *s)
{
    return skip_at(s, 0);
}

int cj_skip_span(cj_t *s)
{
    int c = cj_peek(s), depth = 0;
    const char *k;
    size_t kl;
    if (c != '[' && c != '{')
        return cj_skip(s);
    while (s->p < s->end) {
        c = (unsigned char)*s->p;
        if (c == '"') {
            if (cj_string(s, &k, &kl) < 0)
                return -1;
            continue;
        }
        s->p++;
        if (c == '[' || c == '{') {
            if (++depth > CJ_MAX_DEPTH)
                return -1;
        } else if ((c == ']' || c == '}') && --depth == 0) {
            return 0;
        }
    }
    return -1;
}
