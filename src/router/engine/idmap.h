/* idmap.h - the in-flight table: request id -> decode worker.
 *
 * Open addressing with linear probing and backward-shift deletion (no
 * tombstones, so a long-running daemon does not degrade); grows at half
 * full. Keys are copied. Each entry may carry one malloc'd block (data:
 * the router state keeps a request's cost-rule cells there) that the map
 * owns until idmap_take or idmap_remove_if hands it back. Not thread-safe: the router state's lock guards it. */
#ifndef ELDR_ROUTER_IDMAP_H
#define ELDR_ROUTER_IDMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct idmap_slot {
    char *key;                   /* NULL = empty */
    uint64_t hash;
    int value;
    uint64_t aux;                /* the decision's sequence number */
    double born;                 /* when it was put (caller's clock) */
    void *data;                  /* owned block, NULL none */
} idmap_slot;

typedef struct idmap {
    idmap_slot *slots;
    size_t cap;                  /* power of two */
    size_t n;
} idmap;

int idmap_init(idmap *m);
void idmap_free(idmap *m);
/* 0 inserted, 1 key already present (nothing changed), -1 out of memory.
 * born: the caller's time stamp, for idmap_remove_if. data: a malloc'd
 * block the map owns from a 0 on (idmap_free frees it); on 1 or -1 it
 * stays the caller's. */
int idmap_put(idmap *m, const char *key, int value, uint64_t aux, double born, void *data);
/* The value, or -1 when absent. */
int idmap_get(const idmap *m, const char *key);
/* Remove; returns the value (and *aux, *data if non-NULL: the block is
 * then the caller's; with data NULL it is freed), or -1 when absent. */
int idmap_take(idmap *m, const char *key, uint64_t *aux, void **data);

/* Remove every entry for which keep(ctx, value, born) is 0, calling
 * gone(ctx, value, aux, data) for each (the block is then gone's to
 * free); returns how many, or -1 when out of memory (then nothing was
 * removed). O(capacity). */
long idmap_remove_if(idmap *m, int (*keep)(void *ctx, int value, double born),
                     void (*gone)(void *ctx, int value, uint64_t aux, void *data), void *ctx);

#endif
