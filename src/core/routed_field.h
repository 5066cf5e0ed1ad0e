/* routed_field.h - one routed-experts field of an engine answer
 * (routed.h lists the encodings), decoded into rows of L x k ids.
 * Internal to the capture decoder: routed.c finds the fields in
 * an answer and puts their rows together; this decodes one field. */
#ifndef ELDR_ROUTED_FIELD_H
#define ELDR_ROUTED_FIELD_H

#include <stddef.h>
#include <stdint.h>

#include "routed.h"

/* One decoded field: rows of L x k ids. */
typedef struct idbuf {
    uint16_t *ids;
    int64_t rows, cap;          /* rows held, rows allocated */
    int minus1;                 /* some id was -1, stored as ROUTED_NO_ROUTE (hint's unrouted_ok) */
    int L, k;                   /* 0 until known */
    const char *encoding;
} idbuf;

typedef struct span {
    const char *p;
    size_t n;                   /* 0: absent (or null) */
} span;

/* Decode the field whose JSON value is f. want[0..nwant): the token
 * counts a flat buffer (which carries no shape) may cover; dtype: the
 * item type the answer names for a flat buffer (n 0: none). name: the
 * field, for messages. 0, or -1 with err and b empty. An empty list
 * leaves L and k 0 unless the hint has both. */
int routed_decode_field(span f, const routed_hint *h, const int64_t *want, int nwant,
                         span dtype, const char *name, idbuf *b, char *err, size_t errlen);
void routed_idbuf_free(idbuf *b);

/* The first bytes of a value, printable and cut at 48, for "found ..."
 * messages; returns buf. */
const char *routed_quote(const char *p, size_t n, char *buf, size_t cap);

#endif
