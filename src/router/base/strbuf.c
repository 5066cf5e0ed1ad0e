/* strbuf.c - a growing text buffer (strbuf.h). */
#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for n more bytes and the NUL. */
static int room(strbuf *b, size_t n)
{
    if (b->oom)
        return -1;
    if (b->s && b->len + n < b->cap)
        return 0;
    size_t cap = b->cap ? b->cap * 2 : 4096;
    while (cap < b->len + n + 1)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = 1;
        return -1;
    }
    b->s = s;
    b->cap = cap;
    return 0;
}

void sb_put(strbuf *b, const char *s, size_t n)
{
    if (room(b, n) < 0)
        return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

void sb_str(strbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

void sb_printf(strbuf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t left = b->s ? b->cap - b->len : 0;
        int n = b->oom ? -1 : vsnprintf(b->s ? b->s + b->len : NULL, left, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = 1;
            return;
        }
        if ((size_t)n < left) {
            b->len += (size_t)n;
            return;
        }
        if (room(b, (size_t)n) < 0)
            return;
    }
}

void sb_label(strbuf *b, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            sb_printf(b, "\\%c", *v);
        else if (*v == '\n')
            sb_printf(b, "\\n");
        else
            sb_printf(b, "%c", *v);
    }
}

