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

#include "json_scan.h"

typedef struct jspan {
    const char *p;               /* first byte */
    size_t n;                    /* bytes */
} jspan;

/* Past whitespace. */
const char *js_ws(const char *p, const char *end);

/* Past one JSON value starting at p (no leading whitespace), or NULL when
 * it is malformed or runs past end. Depth is bounded (64). */
const char *js_value(const char *p, const char *end);

/* Each member of the object at obj (its '{' at obj.p), in order, every
 * value checked: visit gets the key's raw text (between its quotes), the
 * whole "key": value span and the value's. A nonzero return from visit
 * stops the walk and is returned; else 0, or -1 when malformed. *past
 * (when not NULL): just past the object's '}', on success. */
typedef int (*js_visit)(void *cls, const char *key, size_t klen, jspan member, jspan value);
int js_foreach(jspan obj, js_visit visit, void *cls, const char **past);

/* The walk under js_foreach, for a reader that takes values itself: s at
 * an object's '{'; read gets each key's raw text with s at its value,
 * and must consume the value (checking it) and return 0, or return
 * nonzero to stop the walk (returned). 0 with s past the '}', or -1 when
 * malformed. One pass, where js_foreach would skip a value and the
 * caller then read it again. */
typedef int (*js_reader)(void *cls, const char *key, size_t klen, cj_t *s);
int js_walk_at(cj_t *s, js_reader read, void *cls);

/* In the object at obj (its '{' at obj.p), the members whose keys are
 * exactly names[0..n) (no escapes), in one walk that checks every value:
 * each one's whole "key": value span in mems[i] (mems may be NULL) and
 * its value in vals[i] (n = 0: absent). 0, -1 malformed, -2 a name given
 * twice (*twice, when not NULL, names it): whoever checks one occurrence
 * and forwards the text must not meet another. *past (when not NULL):
 * just past the object's '}', on success. */
int js_members(jspan obj, const char *const *names, int n, jspan *mems, jspan *vals,
               const char **twice, const char **past);

/* One member, as js_members: 1 found, 0 absent, -1 malformed or given
 * twice. */
int js_member(jspan obj, const char *key, jspan *member, jspan *value);

/* The number of elements of the array at arr ('[' at arr.p), or -1 when
 * malformed. */
long js_array_len(jspan arr);

#endif
