/* jspan.h - where things are in JSON text, without building a tree.
 *
 * The proxy forwards large parts of an upstream answer (the prompt's
 * token ids, the KV handoff) and takes one large string out of it
 * (eldr_sig, thousands of base64 characters). Finding their byte spans
 * and splicing text is several times cheaper than parsing them into
 * jansson values and printing them again. The scanner checks the
 * structure it walks (strings, escapes, nesting, literals); the values it
 * does not inspect still get a full parse later where the proxy needs
 * them. */
#ifndef ELDR_ROUTER_JSPAN_H
#define ELDR_ROUTER_JSPAN_H

#include <stddef.h>

typedef struct jspan {
    const char *p;               /* first byte */
    size_t n;                    /* bytes */
} jspan;

/* Past whitespace. */
const char *js_ws(const char *p, const char *end);

/* Past one JSON value starting at p (no leading whitespace), or NULL when
 * it is malformed or runs past end. Depth is bounded (64). */
const char *js_value(const char *p, const char *end);

/* In the object at obj (its '{' at obj.p), the member whose key is
 * exactly key (no escapes): its whole "key": value span in *member and the
 * value in *value. 1 found, 0 absent, -1 malformed. */
int js_member(jspan obj, const char *key, jspan *member, jspan *value);

/* The number of elements of the array at arr ('[' at arr.p), or -1 when
 * malformed. */
long js_array_len(jspan arr);

#endif
