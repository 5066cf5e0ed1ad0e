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

int js_walk_at(cj_t *s, js_reader read, void *cls)
{
    if (cj_expect(s, '{') < 0)
        return -1;
    int count = 0, more, rc;
    const char *k;
    size_t klen;
    while ((more = cj_next_key(s, &count, &k, &klen)) == 1) {
        cj_peek(s);
        if ((rc = read(cls, k, klen, s)) != 0)
            return rc;
    }
    return more < 0 ? -1 : 0;
}

typedef struct visit_ctx {
    js_visit visit;
    void *cls;
} visit_ctx;

/* js_foreach's reader: skip (checking) the value, then show its spans. */
static int skip_then_visit(void *cls, const char *key, size_t klen, cj_t *s)
{
    visit_ctx *v = cls;
    const char *val = s->p;
    if (cj_skip(s) < 0)
        return -1;
    jspan member = {key - 1, (size_t)(s->p - (key - 1))};   /* from its opening quote */
    return v->visit(v->cls, key, klen, member, (jspan){val, (size_t)(s->p - val)});
}

int js_foreach(jspan obj, js_visit visit, void *cls, const char **past)
{
    cj_t s;
    cj_init(&s, obj.p, obj.n);
    visit_ctx v = {visit, cls};
    int rc = js_walk_at(&s, skip_then_visit, &v);
    if (rc == 0 && past)
        *past = s.p;
    return rc;
}

typedef struct find_ctx {
    const char *const *names;
    int n;
    jspan *mems, *vals;
    const char **twice;
} find_ctx;

static int find_visit(void *cls, const char *key, size_t klen, jspan member, jspan value)
{
    find_ctx *f = cls;
    for (int i = 0; i < f->n; i++) {
        if (!cj_key_is(key, klen, f->names[i]))
            continue;
        if (f->vals[i].n) {
            if (f->twice)
                *f->twice = f->names[i];
            return -2;
        }
        f->vals[i] = value;
        if (f->mems)
            f->mems[i] = member;
    }
    return 0;
}

int js_members(jspan obj, const char *const *names, int n, jspan *mems, jspan *vals,
               const char **twice, const char **past)
{
    for (int i = 0; i < n; i++)
        vals[i] = (jspan){NULL, 0};
    find_ctx f = {names, n, mems, vals, twice};
    return js_foreach(obj, find_visit, &f, past);
}

int js_member(jspan obj, const char *key, jspan *member, jspan *value)
{
    int rc = js_members(obj, &key, 1, member, value, NULL, NULL);
    return rc < 0 ? -1 : value->n > 0;
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
