/* body_json.h - jansson helpers shared by the body parsers (body_*.c);
 * internal to them. */
#ifndef ELDR_ROUTER_BODY_JSON_H
#define ELDR_ROUTER_BODY_JSON_H

#include <jansson.h>

#include "body.h"

/* Bounds on what a body may make jansson build: every value (scalar,
 * string, key, object, array) is a node, objects and arrays are also
 * containers (they cost most: an empty {} is a hash table). */
#define RB_MAX_NODES 2000000
#define RB_MAX_CONTAINERS 200000
#define RB_MAX_DEPTH 16

/* Count nodes, containers and nesting depth of text without building
 * anything; 0 when within the bounds, else 413 naming the bound. */
int rb_json_bounds(const char *text, size_t len, long max_nodes, long max_containers,
                   int max_depth, rb_err *e);

/* Parse text as one JSON value (duplicate keys refused), after
 * rb_json_bounds with the RB_MAX_* bounds; NULL + 400 or 413. */
json_t *rb_load(const char *text, size_t len, rb_err *e);

/* A block hash value (see rb_parse_hash_text); where names it. */
int rb_hash(const json_t *v, uint64_t *out, const char *where, rb_err *e);

/* An array of block hashes, at most RB_HASHES_MAX; *out malloc'd (NULL
 * for an empty array). */
int rb_hash_array(const json_t *a, uint64_t **out, int *n, const char *where, rb_err *e);

/* A string of at most max-1 bytes, non-empty, copied to out. */
int rb_string(const json_t *v, char *out, size_t max, const char *where, rb_err *e);

/* 0 when every key of object o is in known (NULL-terminated); else 422
 * naming the first other key: a typo ("cached_block") must not be
 * silently ignored. */
int rb_known_keys(const json_t *o, const char *const *known, rb_err *e);

#endif
