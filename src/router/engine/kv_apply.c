/* kv_apply.c - KV cache events into a prefill worker's signature cache
 * (kv_apply.h). */
#include <stdlib.h>

#include "blockhash.h"
#include "kv_apply.h"
#include "metrics.h"

#define KV_MAP_MIN 4096
#define KV_MAP_MAX (1LL << 22)

kv_side *kv_side_new(long long cache_blocks, int block_size)
{
    kv_side *k = calloc(1, sizeof *k);
    if (!k)
        return NULL;
    long long cap = cache_blocks < KV_MAP_MAX / 2 ? 2 * cache_blocks : KV_MAP_MAX;
    if (cap < KV_MAP_MIN)
        cap = KV_MAP_MIN;
    if (!(k->map = kvmap_new((size_t)cap))) {
        free(k);
        return NULL;
    }
    k->block_size = block_size;
    return k;
}

void kv_side_free(kv_side *k)
{
    if (!k)
        return;
    kvmap_free(k->map);
    free(k);
}

/* BlockStored: map each engine hash to eldrd's hash of the same tokens. */
static int64_t map_stored(kv_side *k, const kv_event *ev)
{
    int B = k->block_size;
    int why = -1;
    uint64_t prev = BLOCK_HASH_ROOT;
    if (ev->block_size != B)
        why = KV_UNMAPPED_BLOCK_SIZE;
    else if (!ev->tokens || (int64_t)ev->n_tokens != (int64_t)ev->n * B)
        why = KV_UNMAPPED_TOKENS;   /* vLLM leaves out null (sliding-window) blocks' hashes */
    else if (ev->has_parent && !kvmap_get(k->map, ev->parent, &prev))
        why = KV_UNMAPPED_PARENT;
    if (why >= 0) {
        k->unmapped[why] += (uint64_t)ev->n;
        return 0;
    }
    for (int i = 0; i < ev->n; i++) {
        prev = block_hash(prev, ev->tokens + (size_t)i * (size_t)B, B);
        kvmap_put(k->map, ev->hashes[i], prev);
    }
    return ev->n;
}

/* Empty the cache (its lock held): walk the LRU order in slices. */
static int64_t clear_cache(pcache *pc)
{
    uint64_t h[256];
    int64_t n, removed = 0;
    while ((n = sigcache_lru_order(pc->c, h, 256)) > 0)
        for (int64_t i = 0; i < n; i++)
            removed += sigcache_remove(pc->c, h[i]);
    kvmap_clear(pc->kv->map);
    return removed;
}

static void apply_one(pcache *pc, const kv_event *ev, kv_applied *a)
{
    kv_side *k = pc->kv;
    switch (ev->kind) {
    case KV_STORED:
        a->mapped_blocks += map_stored(k, ev);
        break;
    case KV_REMOVED:
        for (int i = 0; i < ev->n; i++) {
            uint64_t h = ev->hashes[i];
            (void)kvmap_take(k->map, h, &h);  /* unknown: the sender's hash is eldrd's */
            a->removed_blocks += sigcache_remove(pc->c, h);
        }
        break;
    case KV_CLEARED:
        a->removed_blocks += clear_cache(pc);
        break;
    }
    k->events[ev->kind]++;
    a->events[ev->kind]++;
}

void kv_apply(engine_t *d, int p, const kv_event *ev, int n, kv_applied *out)
{
    kv_applied a = {{0, 0, 0}, 0, 0, 0};
    pcache *pc = &d->caches[p];
    sigcache_stats st;
    pthread_mutex_lock(&pc->lock);
    for (int i = 0; i < n; i++)
        apply_one(pc, &ev[i], &a);
    sigcache_get_stats(pc->c, &st);
    pthread_mutex_unlock(&pc->lock);
    a.entries = st.entries;
    if (out)
        *out = a;
}

void kv_distrust(engine_t *d, int p, kv_note_kind why)
{
    pcache *pc = &d->caches[p];
    pthread_mutex_lock(&pc->lock);
    (void)clear_cache(pc);
    pc->kv->notes[why]++;
    pthread_mutex_unlock(&pc->lock);
}

void kv_note(engine_t *d, int p, kv_note_kind what, uint64_t n)
{
    pcache *pc = &d->caches[p];
    pthread_mutex_lock(&pc->lock);
    pc->kv->notes[what] += n;
    pthread_mutex_unlock(&pc->lock);
}

/* One labelled series per prefill worker: v(kv side, label index). */
typedef struct kv_series {
    const char *name, *type, *help, *label; /* label: the second label's name, or NULL */
    const char *const *values;              /* its values */
    int n_values;
    int kind;                               /* which numbers */
} kv_series;

enum { S_EVENTS, S_UNMAPPED, S_BAD, S_GAPS, S_MISSED, S_REPLAYED, S_RESETS, S_MAP };

static uint64_t value(const kv_side *k, int kind, int j)
{
    switch (kind) {
    case S_EVENTS:
        return k->events[j];
    case S_UNMAPPED:
        return k->unmapped[j];
    case S_BAD:
        return k->notes[KV_NOTE_BAD_EVENT + j];
    case S_GAPS:
        return k->notes[KV_NOTE_GAP];
    case S_MISSED:
        return k->notes[KV_NOTE_MISSED];
    case S_REPLAYED:
        return k->notes[KV_NOTE_REPLAYED];
    case S_RESETS:
        return k->notes[KV_NOTE_RESET_GAP + j];
    default:
        return kvmap_size(k->map);
    }
}

void kv_metrics(engine_t *d, strbuf *b)
{
    static const char *const kinds[] = {"stored", "removed", "cleared"};
    static const char *const whys[] = {"block_size", "tokens", "parent"};
    static const char *const bad[] = {"event", "message"};
    static const char *const resets[] = {"gap", "restart"};
    static const kv_series series[] = {
        {"eldr_kv_events_total", "counter",
         "KV cache events applied (POST /v1/kv-events and --kv-events), by kind.", "kind",
         kinds, 3, S_EVENTS},
        {"eldr_kv_unmapped_blocks_total", "counter",
         "BlockStored blocks eldrd could not hash its own way (another block size, "
         "token_ids missing, a parent it does not know).", "reason", whys, 3, S_UNMAPPED},
        {"eldr_kv_events_bad_total", "counter",
         "--kv-events: events dropped as malformed (the rest of their batch applied), and "
         "messages that were no KV event batch.", "what", bad, 2, S_BAD},
        {"eldr_kv_events_gaps_total", "counter",
         "--kv-events: jumps in the publisher's sequence numbers.", NULL, NULL, 1, S_GAPS},
        {"eldr_kv_events_missed_total", "counter",
         "--kv-events: sequence numbers the jumps skipped.", NULL, NULL, 1, S_MISSED},
        {"eldr_kv_events_replayed_total", "counter",
         "--kv-events: missed batches recovered from the replay socket.", NULL, NULL, 1,
         S_REPLAYED},
        {"eldr_kv_cache_resets_total", "counter",
         "--kv-events: signature caches emptied because events were lost (a gap not "
         "replayed, a publisher restart).", "reason", resets, 2, S_RESETS},
        {"eldr_kv_hash_map_entries", "gauge",
         "Engine block hashes mapped to eldrd's own.", NULL, NULL, 1, S_MAP},
    };
    for (size_t s = 0; s < sizeof series / sizeof *series; s++) {
        const kv_series *S = &series[s];
        metrics_head(b, S->name, S->type, S->help);
        for (int i = 0; i < d->n_caches; i++) {
            pcache *pc = &d->caches[i];
            uint64_t v[3];
            pthread_mutex_lock(&pc->lock);
            for (int j = 0; j < S->n_values; j++)
                v[j] = value(pc->kv, S->kind, j);
            pthread_mutex_unlock(&pc->lock);
            for (int j = 0; j < S->n_values; j++) {
                sb_printf(b, "%s{prefill=\"", S->name);
                sb_label(b, pc->name);
                if (S->label)
                    sb_printf(b, "\",%s=\"%s", S->label, S->values[j]);
                sb_printf(b, "\"} %llu\n", (unsigned long long)v[j]);
            }
        }
    }
}
