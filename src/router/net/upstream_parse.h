/* upstream_parse.h - reading one HTTP/1.x answer from an upstream
 * (upstream.h), fed in whatever pieces the socket gives.
 *
 * The text comes from a prefill or decode instance: untrusted. The
 * reader takes the status line and headers (at most 64 KiB of them),
 * skips interim 1xx answers, and frames the body by chunked transfer
 * coding, Content-Length, or the connection's close, as RFC 9112 section
 * 6.3 orders them; what the headers leave unclear (two different
 * lengths, a coding other than chunked, a length with chunked) is an
 * error, never a guess, since the bytes after one answer are the next
 * one's on a kept connection. No allocation except the head's buffer,
 * which is kept from one answer to the next. */
#ifndef ELDR_ROUTER_UPSTREAM_PARSE_H
#define ELDR_ROUTER_UPSTREAM_PARSE_H

#include <stddef.h>

#include "strbuf.h"

#define UPA_HEAD_MAX (64 * 1024)

typedef struct upa_sink {
    void (*on_status)(void *cls, int status);                 /* once, before the body */
    int (*on_body)(void *cls, const char *data, size_t n);   /* -1 stops the reading */
    void *cls;
} upa_sink;

typedef struct upa {
    int state;
    int status;                 /* the final answer's code, once its head is read */
    int keep_alive;             /* the connection may carry another answer after this one */
    int until_close;            /* the body ends when the connection closes */
    unsigned long long left;    /* body or chunk bytes still to come */
    strbuf head;                /* a head or chunk-size line split across pieces */
    size_t seen;                /* bytes fed for this answer */
} upa;

typedef enum upa_rc {
    UPA_MORE = 0,               /* all consumed; the answer goes on */
    UPA_DONE = 1,               /* the answer is complete (see *used) */
    UPA_ERROR = -1,             /* not HTTP as we read it: why says where */
    UPA_TOO_BIG = -2,           /* a head over UPA_HEAD_MAX or a size line past 1 KiB */
    UPA_STOPPED = -3            /* on_body returned -1 */
} upa_rc;

/* Ready for an answer (again). Keeps the head buffer. */
void upa_reset(upa *a);
void upa_free(upa *a);

/* Feed n bytes. *used: how many were part of this answer (less than n
 * only with UPA_DONE: what follows is not this answer's). */
upa_rc upa_feed(upa *a, const char *data, size_t n, size_t *used, const upa_sink *s,
                char *why, size_t whylen);

/* The connection closed: UPA_DONE when that ends the answer (a body
 * read until the close), else UPA_ERROR with why. */
upa_rc upa_close(upa *a, char *why, size_t whylen);

#endif
