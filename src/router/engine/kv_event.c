/* kv_event.c - KV cache events: the hash of vLLM's bytes hashes, and
 * freeing (kv_event.h). */
#include <stdlib.h>
#include <string.h>

#include "kv_event.h"

uint64_t kv_hash_of_bytes(const uint8_t *p, size_t n)
{
    uint64_t h = 0;
    for (size_t i = 0; i < n; i++)
        h = (h << 8) | p[i];     /* the high bytes shift out: the low 64 bits */
    return h;
}

void kv_event_free(kv_event *ev)
{
    free(ev->hashes);
    free(ev->tokens);
    ev->hashes = NULL;
    ev->tokens = NULL;
    ev->n = ev->n_tokens = 0;
}

void kv_batch_free(kv_batch *b)
{
    for (int i = 0; i < b->n; i++)
        kv_event_free(&b->events[i]);
    free(b->events);
    memset(b, 0, sizeof *b);
}
