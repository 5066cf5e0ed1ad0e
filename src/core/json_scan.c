/* json_scan.c - the in-place JSON scanner (json_scan.h). */
#include <stdint.h>
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

/* Whether n bytes are valid UTF-8 (RFC 3629: no overlong forms, no
 * surrogates, nothing past U+10FFFF). */
static int utf8_ok(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k = (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : 0;
        if (!k || c == 0xc0 || c == 0xc1 || c > 0xf4 || n - i <= k)
            return 0;
        unsigned cp = c & (0x3f >> k);
        for (size_t j = 1; j <= k; j++) {
            if ((p[i + j] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (p[i + j] & 0x3f);
        }
        if ((k == 2 && cp < 0x800) || (k == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += k + 1;
    }
    return 1;
}

/* Whether n bytes of a string are not allowed there as they are: a
 * control character (which JSON wants escaped) or bytes that are not
 * UTF-8. A plain reduction first, sixteen bytes at a time with SSE2
 * (every x86-64 has it) or eight in a word elsewhere: base64 strings of
 * tens of kilobytes and kilobytes of prompt pass through here; the UTF-8
 * check runs only when a byte from 0x80 is there. */
#ifdef __SSE2__
#include <emmintrin.h>
#endif
static int has_control(const unsigned char *p, size_t n)
{
    /* eight bytes at a time: "a byte below 0x20" is (w - 0x20..) & ~w &
     * 0x80.. (exact for the word as a whole), "a byte from 0x80" w & 0x80.. */
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t low = 0, high = 0;
    size_t i = 0;
#ifdef __SSE2__
    {
        /* signed: a byte below 0x20 is one under 0x20 whose top bit is clear */
        const __m128i sp = _mm_set1_epi8(0x20);
        __m128i lo = _mm_setzero_si128(), hi = _mm_setzero_si128();
        for (; i + 16 <= n; i += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
            lo = _mm_or_si128(lo, _mm_andnot_si128(v, _mm_cmplt_epi8(v, sp)));
            hi = _mm_or_si128(hi, v);
        }
        low = (uint64_t)_mm_movemask_epi8(lo);
        high = (uint64_t)_mm_movemask_epi8(hi);
    }
#endif
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        low |= (w - ones * 0x20) & ~w & highs;
        high |= w & highs;
    }
    for (; i < n; i++) {
        low |= p[i] < 0x20;
        high |= p[i] & 0x80;
    }
    return low != 0 || (high && !utf8_ok(p, n));
}

static unsigned hex4(const char *q)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = q[i];
        v = v << 4 | (unsigned)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return v;
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
            /* a surrogate only as a pair: high, then low */
            unsigned u = hex4(q + 2);
            if (u >= 0xdc00 && u <= 0xdfff)
                return s->p = q, -1;
            if (u >= 0xd800 && u <= 0xdbff) {
                if (s->end - q < 12 || q[6] != '\\' || q[7] != 'u' || !is_hex(q[8]) ||
                    !is_hex(q[9]) || !is_hex(q[10]) || !is_hex(q[11]))
                    return s->p = q, -1;
                u = hex4(q + 8);
                if (u < 0xdc00 || u > 0xdfff)
                    return s->p = q, -1;
                q += 6;
            }
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
