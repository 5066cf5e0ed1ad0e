/* strbuf.h - a growing text buffer: the /metrics exposition, the route
 * answers written without jansson (answer.c) and the bodies the proxy
 * splices (proxy_msg.c).
 *
 * Start from {0}; the text stays NUL-terminated; once memory runs out,
 * oom is set and every later write is dropped, so a writer checks once
 * at the end. The caller owns s (free it). */
#ifndef ELDR_ROUTER_STRBUF_H
#define ELDR_ROUTER_STRBUF_H

#include <stddef.h>

typedef struct strbuf {
    char *s;
    size_t len, cap;
    int oom;
} strbuf;

/* n bytes of s. */
void sb_put(strbuf *b, const char *s, size_t n);
/* A NUL-terminated string. */
void sb_str(strbuf *b, const char *s);
void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A label value with \, " and newline escaped. */
void sb_label(strbuf *b, const char *v);

#endif
