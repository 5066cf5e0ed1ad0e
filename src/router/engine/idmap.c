/* idmap.c - request id -> worker table (idmap.h). */
#include <stdlib.h>
#include <string.h>

#include "idmap.h"

#define IDMAP_MIN 64

/* FNV-1a, then a finaliser so that linear probing sees well-mixed bits. */
static uint64_t hash_key(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

int idmap_init(idmap *m)
{
    m->cap = IDMAP_MIN;
    m->n = 0;
    m->slots = calloc(m->cap, sizeof *m->slots);
    return m->slots ? 0 : -1;
}

void idmap_free(idmap *m)
{
    for (size_t i = 0; m->slots && i < m->cap; i++) {
        free(m->slots[i].key);
        free(m->slots[i].data);
    }
    free(m->slots);
    m->slots = NULL;
    m->cap = m->n = 0;
}

static size_t find(const idmap *m, const char *key, uint64_t h)
{
    size_t mask = m->cap - 1, i = h & mask;
    while (m->slots[i].key && (m->slots[i].hash != h || strcmp(m->slots[i].key, key)))
        i = (i + 1) & mask;
    return i;
}

static int grow(idmap *m)
{
    size_t cap = m->cap * 2;
    idmap_slot *old = m->slots, *s = calloc(cap, sizeof *s);
    if (!s)
        return -1;
    size_t oldcap = m->cap;
    m->slots = s;
    m->cap = cap;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].key) {
            size_t j = old[i].hash & (cap - 1);
            while (s[j].key)
                j = (j + 1) & (cap - 1);
            s[j] = old[i];
        }
    free(old);
    return 0;
}

int idmap_put(idmap *m, const char *key, int value, uint64_t aux, double born, void *data)
{
    if ((m->n + 1) * 2 > m->cap && grow(m) < 0)
        return -1;
    uint64_t h = hash_key(key);
    size_t i = find(m, key, h);
    if (m->slots[i].key)
        return 1;
    char *k = strdup(key);
    if (!k)
        return -1;
    m->slots[i] = (idmap_slot){k, h, value, aux, born, data};
    m->n++;
    return 0;
}

int idmap_get(const idmap *m, const char *key)
{
    size_t i = find(m, key, hash_key(key));
    return m->slots[i].key ? m->slots[i].value : -1;
}

int idmap_take(idmap *m, const char *key, uint64_t *aux, void **data)
{
    size_t mask = m->cap - 1, i = find(m, key, hash_key(key));
    if (!m->slots[i].key)
        return -1;
    int value = m->slots[i].value;
    if (aux)
        *aux = m->slots[i].aux;
    if (data)
        *data = m->slots[i].data;
    else
        free(m->slots[i].data);
    free(m->slots[i].key);
    m->slots[i].key = NULL;
    m->slots[i].data = NULL;
    m->n--;
    /* backward shift: pull later members of the run into the hole when
     * their home slot does not lie cyclically in (hole, j] */
    for (size_t j = (i + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
        size_t home = m->slots[j].hash & mask;
        int stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            m->slots[i] = m->slots[j];
            m->slots[j].key = NULL;
            m->slots[j].data = NULL;
            i = j;
        }
    }
    return value;
}

/* Collect the doomed keys first: deleting during the scan would let a
 * backward shift move an unseen entry into a slot already passed. */
long idmap_remove_if(idmap *m, int (*keep)(void *ctx, int value, double born),
                     void (*gone)(void *ctx, int value, uint64_t aux, void *data), void *ctx)
{
    size_t n = 0, cap = 0;
    char **doomed = NULL;
    for (size_t i = 0; i < m->cap; i++) {
        const idmap_slot *s = &m->slots[i];
        if (!s->key || keep(ctx, s->value, s->born))
            continue;
        if (n == cap) {
            size_t c = cap ? cap * 2 : 64;
            char **d = realloc(doomed, c * sizeof *d);
            if (!d) {
                for (size_t j = 0; j < n; j++)
                    free(doomed[j]);
                free(doomed);
                return -1;
            }
            doomed = d;
            cap = c;
        }
        if (!(doomed[n] = strdup(s->key))) {
            for (size_t j = 0; j < n; j++)
                free(doomed[j]);
            free(doomed);
            return -1;
        }
        n++;
    }
    for (size_t j = 0; j < n; j++) {
        uint64_t aux = 0;
        void *data = NULL;
        int v = idmap_take(m, doomed[j], &aux, &data);
        if (v >= 0 && gone)
            gone(ctx, v, aux, data);
        else
            free(data);
        free(doomed[j]);
    }
    free(doomed);
    return (long)n;
}
