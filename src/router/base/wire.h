/* wire.h - what every floor of eldrd agrees on about a request: the
 * limits of ids and names on the wire, the one error shape (an HTTP
 * status, a message and where it applies) and the id copy of the hot
 * paths. The body parsers (api/body.h), the decision room and the front
 * ends all speak it, so it lives at the bottom. */
#ifndef ELDR_ROUTER_WIRE_H
#define ELDR_ROUTER_WIRE_H

#include <stddef.h>

#define RB_ID_MAX 256            /* bytes of a request id, NUL included */
#define RB_NAME_MAX 128          /* bytes of a worker name, NUL included */
#define RB_COUNT_MAX 32767       /* per cell: int16 on the wire */
#define RB_HASHES_MAX 65536      /* blocks of one prompt (1M tokens at B=16) */
#define RB_EVENTS_MAX 65536      /* events in one kv-events batch */

/* Copy a NUL-terminated id into dst[size], cut to size - 1 bytes: what
 * snprintf(dst, size, "%s", src) does, without the formatter, on the
 * route path where it ran several times a request. */
static inline void rb_copy_id(char *dst, size_t size, const char *src)
{
    size_t n = 0;
    while (n + 1 < size && src[n])
        n++;
    __builtin_memcpy(dst, src, n);
    dst[n] = '\0';
}

typedef struct rb_err {
    int status;                  /* HTTP status: 400, 422, ... */
    char error[256];
    char where[96];
    int retry_after;             /* seconds for a Retry-After header (503), 0 none */
} rb_err;

/* OpenAI's error "type" for an HTTP status (every error answer and SSE
 * error event carries it, docs/http-api.md "Errors"). */
const char *rb_error_type(int status);

/* Fill e and return -1. A control character in where or the message
 * (a client's text quoted in it) becomes '?', so the error is one line. */
int rb_fail(rb_err *e, int status, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
