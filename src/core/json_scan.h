/* json_scan.h - a small pull scanner over a JSON text: the engine answers
 * that `eldr capture` reads (routed.c), and the upstream answers
 * eldrd's proxy splices (src/router/jspan.c).
 *
 * Why not jansson: an answer carries the expert ids of every token, layer
 * and top-k slot (64 x 48 x 8 = 24,576 numbers for a short prompt), and a
 * jansson tree of them costs an allocation per number. The scanner walks
 * the text in place: it hands out the spans of values, skips what is not
 * wanted, and reads integers straight from the digits.
 *
 * Every call returns 0 (or 1, see below), or -1 when the text is not
 * valid JSON where it looked; cj_where() then says at which byte. The
 * scanner never reads past `end` and never allocates. Nesting deeper than
 * CJ_MAX_DEPTH is refused (no recursion without a bound). */
#ifndef ELDR_JSON_SCAN_H
#define ELDR_JSON_SCAN_H

#include <stddef.h>
#include <stdint.h>

#define CJ_MAX_DEPTH 64

typedef struct cj {
    const char *start, *p, *end;
} cj_t;

static inline void cj_init(cj_t *s, const char *text, size_t len)
{
    s->start = s->p = text;
    s->end = text ? text + len : text;   /* an absent value: NULL, 0 (no arithmetic on NULL) */
}

/* Byte offset of the scanner in the text. */
static inline size_t cj_where(const cj_t *s)
{
    return (size_t)(s->p - s->start);
}

/* The next character that is not white space (the scanner stops before
 * it), or -1 at the end of the text. Inline: it runs between every two
 * numbers of a routing array. */
static inline int cj_peek(cj_t *s)
{
    while (s->p < s->end &&
           (*s->p == ' ' || *s->p == '\n' || *s->p == '\r' || *s->p == '\t'))
        s->p++;
    return s->p < s->end ? (unsigned char)*s->p : -1;
}

/* Consume character c (after white space); -1 when something else is next. */
int cj_expect(cj_t *s, char c);

/* Skip one value of any kind. */
int cj_skip(cj_t *s);

/* Skip one value by matching its brackets and strings only, without
 * checking what lies between: for a value that is parsed in full later
 * (a routing array: one strict pass instead of two). -1 when the
 * brackets do not close before the end, or nest beyond CJ_MAX_DEPTH. */
int cj_skip_span(cj_t *s);

/* A string: *str and *len get the raw bytes between the quotes (escape
 * sequences are checked but left as they are). Refused as RFC 8259
 * refuses them: a control character, bytes that are not UTF-8, a \u
 * surrogate that is not a high-low pair. */
int cj_string(cj_t *s, const char **str, size_t *len);

/* An integer (no fraction or exponent) that fits int64. */
int cj_int(cj_t *s, int64_t *v);

/* Objects and arrays: call cj_expect(s, '{') (or '['), then loop on
 * cj_next_key / cj_next_item with a counter that starts at 0. They return
 * 1 when a member follows (cj_next_key has read its key and the colon; the
 * value is next), 0 at the closing bracket (consumed), -1 on bad JSON. */
int cj_next_key(cj_t *s, int *count, const char **key, size_t *klen);
int cj_next_item(cj_t *s, int *count);

/* The key equals the NUL-terminated name. */
static inline int cj_key_is(const char *key, size_t klen, const char *name)
{
    size_t n = 0;
    while (name[n])
        n++;
    return klen == n && __builtin_memcmp(key, name, n) == 0;
}

#endif
