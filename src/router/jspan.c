/* jspan.c - JSON spans (jspan.h), on the shared in-place scanner
 * (src/core/json_scan.h). */
#include "jspan.h"

#include <string.h>

#include "json_scan.h"

const char *js_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return p;
}

const char *js_value(const char *p, const char *end)
{
    cj_t s;
    cj_init(&s, p, (size_t)(end - p));
    return cj_skip(&s) < 0 ? NULL : s.p;
}

int js_member(jspan obj, const char *key, jspan *member, jspan *value)
{
    cj_t s;
    cj_init(&s, obj.p, obj.n);
    if (cj_expect(&s, '{') < 0)
        return -1;
    int count = 0, more;
    const char *k;
    size_t klen;
    while ((more = cj_next_key(&s, &count, &k, &klen)) == 1) {
        cj_peek(&s);
        const char *v = s.p;
        if (cj_skip(&s) < 0)
            return -1;
        if (cj_key_is(k, klen, key)) {
            member->p = k - 1;                 /* its opening quote */
            member->n = (size_t)(s.p - member->p);
            value->p = v;
            value->n = (size_t)(s.p - v);
            return 1;
        }
    }
    return more < 0 ? -1 : 0;
}

long js_array_len(jspan arr)
{
    cj_t s;
    cj_init(&s, arr.p, arr.n);
    if (cj_expect(&s, '[') < 0)
        return -1;
    int count = 0, more;
    while ((more = cj_next_item(&s, &count)) == 1)
        if (cj_skip(&s) < 0)
            return -1;
    return more < 0 ? -1 : count;
}
