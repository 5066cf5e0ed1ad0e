/* framing.h - how a request's body is framed (RFC 9112, section 6): its
 * Content-Length and Transfer-Encoding header lines in, a verdict out.
 *
 * A pure function of the header values (no I/O, no allocation, no
 * libmicrohttpd), so that one piece of logic judges every request - the
 * HTTP glue's first callback (http.c) and the answer to a request that
 * libmicrohttpd refused itself (http_refuse.c) - and a fuzzer can drive
 * it (tests/fuzz/fuzz_framing.c).
 *
 * The rules, in the order they are checked:
 * - two or more Content-Length lines: 400 (never one of them picked);
 * - Content-Length and Transfer-Encoding both: 400 (RFC 9112, 6.3: a
 *   proxy in front might frame by the other one: request smuggling);
 * - a Content-Length that is not 1*DIGIT: 400 (RFC 9110, 8.6: no sign,
 *   no spaces inside or after, no list, not empty);
 * - digits past 2^64 - 1: 413 (a valid length no body can have);
 * - Transfer-Encoding without chunked as its last coding, or with chunked
 *   twice: 400 (RFC 9112, 6.3: the body's end cannot be known);
 * - any other coding (gzip, identity, xchunked, ...): 501 (RFC 9112,
 *   6.1: eldrd reads chunked only).
 * A value is as libmicrohttpd gives it: its leading spaces and tabs
 * skipped (skipped here too), its trailing ones kept. Header names match
 * without regard to case; other headers are ignored. Several lines of one
 * header get the status of their values joined by commas (RFC 9110, 5.3)
 * in one line. */
#ifndef ELDR_ROUTER_FRAMING_H
#define ELDR_ROUTER_FRAMING_H

#define FRAMING_MSG 256

/* What the header lines seen so far say; zero it (or framing_init)
 * before the first line. */
typedef struct framing {
    int lengths;                 /* Content-Length lines */
    int bad_length;              /* the first one is not 1*DIGIT */
    int huge_length;             /* ... is digits past 2^64 - 1 */
    unsigned long long length;   /* ... its value, when neither */
    char length_text[48];        /* ... as sent (cut, control bytes as '?') */
    int codings;                 /* Transfer-Encoding lines */
    int chunked;                 /* chunked codings, over every line */
    int chunked_last;            /* the last coding seen is chunked */
    int unknown;                 /* other codings */
    char first_unknown[48];      /* the first of those (cut) */
} framing;

typedef struct framing_verdict {
    int status;                  /* 0 the framing is clear; else 400, 413 or 501 */
    const char *param;           /* the header at fault ("Content-Length", ...) */
    char msg[FRAMING_MSG];       /* one line, what is wrong and what to send */
} framing_verdict;

void framing_init(framing *f);
/* One header line: its name and value (NUL-terminated; NULL is empty). */
void framing_header(framing *f, const char *name, const char *value);
/* The verdict on the lines seen; returns v->status. With status 0 and
 * f->lengths == 1, f->length is the body's length. */
int framing_judge(const framing *f, framing_verdict *v);

#endif
