/* jspan.c - JSON spans (jspan.h). */
#include "jspan.h"

#include <string.h>

#define JS_DEPTH 64

const char *js_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return p;
}

/* Past a string: one pass, an escape skips the character after it;
 * control characters must be escaped. */
static const char *string_end(const char *p, const char *end)
{
    for (p++; p < end; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '"')
            return p + 1;
        if (ch == '\\') {
            p++;
            continue;
        }
        if (ch < 0x20)
            return NULL;
    }
    return NULL;
}

static const char *literal_end(const char *p, const char *end)
{
    static const char *const words[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(words[i]);
        if ((size_t)(end - p) >= n && !memcmp(p, words[i], n))
            return p + n;
    }
    return NULL;
}

static const char *number_end(const char *p, const char *end)
{
    const char *s = p;
    while (p < end && ((*p >= '0' && *p <= '9') || *p == '-' || *p == '+' || *p == '.' ||
                       *p == 'e' || *p == 'E'))
        p++;
    return p > s ? p : NULL;
}

static const char *value_at(const char *p, const char *end, int depth);

/* An object or array: members or elements separated by commas. */
static const char *container_end(const char *p, const char *end, int depth)
{
    char close = *p == '{' ? '}' : ']';
    int object = *p == '{';
    p = js_ws(p + 1, end);
    if (p < end && *p == close)
        return p + 1;
    for (;;) {
        if (object) {
            if (p >= end || *p != '"' || !(p = string_end(p, end)))
                return NULL;
            p = js_ws(p, end);
            if (p >= end || *p != ':')
                return NULL;
            p = js_ws(p + 1, end);
        }
        if (!(p = value_at(p, end, depth + 1)))
            return NULL;
        p = js_ws(p, end);
        if (p < end && *p == close)
            return p + 1;
        if (p >= end || *p != ',')
            return NULL;
        p = js_ws(p + 1, end);
    }
}

static const char *value_at(const char *p, const char *end, int depth)
{
    if (p >= end || depth > JS_DEPTH)
        return NULL;
    switch (*p) {
    case '"':
        return string_end(p, end);
    case '{':
    case '[':
        return container_end(p, end, depth);
    case 't':
    case 'f':
    case 'n':
        return literal_end(p, end);
    default:
        return number_end(p, end);
    }
}

const char *js_value(const char *p, const char *end)
{
    return value_at(p, end, 0);
}

int js_member(jspan obj, const char *key, jspan *member, jspan *value)
{
    const char *end = obj.p + obj.n, *p = obj.p;
    size_t klen = strlen(key);
    if (p >= end || *p != '{')
        return -1;
    p = js_ws(p + 1, end);
    if (p < end && *p == '}')
        return 0;
    for (;;) {
        const char *k = p;
        if (p >= end || *p != '"' || !(p = string_end(p, end)))
            return -1;
        int match = (size_t)(p - k) == klen + 2 && !memcmp(k + 1, key, klen);
        p = js_ws(p, end);
        if (p >= end || *p != ':')
            return -1;
        const char *v = js_ws(p + 1, end);
        if (!(p = value_at(v, end, 1)))
            return -1;
        if (match) {
            member->p = k;
            member->n = (size_t)(p - k);
            value->p = v;
            value->n = (size_t)(p - v);
            return 1;
        }
        p = js_ws(p, end);
        if (p < end && *p == '}')
            return 0;
        if (p >= end || *p != ',')
            return -1;
        p = js_ws(p + 1, end);
    }
}

long js_array_len(jspan arr)
{
    const char *end = arr.p + arr.n, *p = arr.p;
    if (p >= end || *p != '[')
        return -1;
    p = js_ws(p + 1, end);
    if (p < end && *p == ']')
        return 0;
    long n = 0;
    for (;;) {
        if (!(p = value_at(p, end, 1)))
            return -1;
        n++;
        p = js_ws(p, end);
        if (p < end && *p == ']')
            return n;
        if (p >= end || *p != ',')
            return -1;
        p = js_ws(p + 1, end);
    }
}
