/* json_in.h - JSON from outside, read with bounds (router/engine): the
 * jansson helpers that eldrd's API bodies (api/body_*.c) and the gateway
 * picker's decode handoff (extproc) share. Loading with bounds on nodes,
 * containers and depth; block hashes; bounded strings; unknown keys
 * refused; expert counts (dense base64 or sparse); the signature cache's
 * block claim. Each error is an rb_err: the HTTP status it deserves, a
 * message, and where (a JSON path). */
#ifndef ELDR_ROUTER_JSON_IN_H
#define ELDR_ROUTER_JSON_IN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

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
 * rb_json_bounds with the RB_MAX_* bounds; NULL + 400 or 413. Integers
 * in 2^63 .. 2^64 - 1, which jansson refuses, arrive as their decimal
 * strings (rb_quote_big_ints): block hashes are unsigned 64-bit, and
 * rb_hash takes them; any other field refuses a string. */
json_t *rb_load(const char *text, size_t len, rb_err *e);

/* text with every integer in 2^63 .. 2^64 - 1 outside strings put in
 * quotes, in *out (malloc'd, *outlen bytes); *out NULL when there is
 * none (no copy). -1 out of memory. */
int rb_quote_big_ints(const char *text, size_t len, char **out, size_t *outlen);

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

/* A block hash: a JSON integer (negative ones are vLLM's signed 64-bit
 * hashes, taken as their two's complement) or a decimal string of an
 * unsigned or signed 64-bit value. Exposed for tests. */
int rb_parse_hash_text(const char *s, uint64_t *out);

/* Element j of array a, an integer in lo..hi named `what` (400 not an
 * integer, 422 out of range; where[j] in the message). */
int rb_array_int(const json_t *a, size_t j, long long lo, long long hi, long long *out,
                 const char *where, const char *what, rb_err *e);

/* Expert counts [L*E] into out: a base64 string of L*E little-endian
 * int16 (each 0..RB_COUNT_MAX) or a sparse array [[layer, expert,
 * count], ...] (repeated cells add up). */
int rb_counts(const json_t *v, int L, int E, uint16_t *out, const char *where, rb_err *e);

/* The signature cache's claim in object o, under the names keys[0..2]
 * (the block hash chain, how many leading blocks the prefix cache served,
 * the counts of the newly computed blocks that follow; absent or null:
 * none). counts [L*E] are the computed tokens' counts: the new blocks
 * must be part of them. */
typedef struct rb_blocks {
    uint64_t *hashes;            /* [n_hashes] (malloc'd) */
    int n_hashes, cached_blocks;
    uint16_t *block_counts;      /* [n_block_counts][L*E] (malloc'd) */
    int n_block_counts;
} rb_blocks;
int rb_blocks_parse(const json_t *o, const char *const keys[3], int L, int E,
                    const uint16_t *counts, rb_blocks *b, rb_err *e);
void rb_blocks_free(rb_blocks *b);

#endif
