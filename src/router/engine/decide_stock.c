/* decide_stock.c - a stock engine's prefill answer as the prompt's counts
 * (decide.h, decide_stock_counts; docs/eldrd.md, "Stock engines").
 *
 * The answer's routed experts are read by the one decoder (routed.h).
 * What this adds is what only the router knows: which layers its model
 * has, and the signature cache of the prefill worker that served the
 * prompt. vLLM 0.21 answers -1 for the prompt rows its prefix cache
 * served; those rows are the prompt's head, whole KV blocks, and the
 * signature cache holds their counts under eldrd's own chained hash of
 * the prompt's token ids, stored when an earlier answer routed them. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockhash.h"
#include "decide.h"
#include "err.h"
#include "json_scan.h"
#include "routed.h"

static int no_signal(cache_use *u, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int no_signal(cache_use *u, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(u->note, sizeof u->note, fmt, ap);
    va_end(ap);
    u->origin = SIG_ORIGIN_NONE;
    u->rows = u->cached_rows = 0;
    return 0;
}

/* A list of token ids into *ids (malloc'd), *n of them. -1: not one. */
static int read_ids(cj_t *s, int32_t **ids, int *n)
{
    int m = 0, r, cap = 0;
    int32_t *a = NULL;
    if (cj_expect(s, '[') < 0)
        return -1;
    while ((r = cj_next_item(s, &m)) == 1) {
        int64_t v;
        if (cj_int(s, &v) < 0 || v < 0 || v > INT32_MAX)
            break;
        if (m > cap) {
            cap = cap ? 2 * cap : 1024;
            int32_t *b = realloc(a, (size_t)cap * sizeof *a);
            if (!b)
                break;
            a = b;
        }
        a[m - 1] = (int32_t)v;
    }
    if (r != 0) {
        free(a);
        return -1;
    }
    free(*ids);
    *ids = a;
    *n = m;
    return 0;
}

/* choices[0]'s prompt_token_ids (a completion's), else the answer's own
 * (a chat's): vLLM writes them with return_token_ids. */
static int walk_choice(cj_t *s, int32_t **ids, int *n)
{
    const char *key;
    size_t kl;
    int m = 0, r;
    if (cj_peek(s) != '{')
        return cj_skip(s);
    cj_expect(s, '{');
    while ((r = cj_next_key(s, &m, &key, &kl)) == 1)
        if ((cj_key_is(key, kl, "prompt_token_ids") && cj_peek(s) == '[' ? read_ids(s, ids, n)
                                                                           : cj_skip(s)) < 0)
            return -1;
    return r;
}

static int prompt_ids(const char *text, size_t len, int32_t **ids, int *n)
{
    cj_t s;
    const char *key;
    size_t kl;
    int m = 0, r;
    *ids = NULL;
    *n = -1;
    cj_init(&s, text, len);
    if (cj_expect(&s, '{') < 0)
        return -1;
    while ((r = cj_next_key(&s, &m, &key, &kl)) == 1) {
        int rc;
        if (cj_key_is(key, kl, "prompt_token_ids") && cj_peek(&s) == '[' && *n < 0) {
            rc = read_ids(&s, ids, n);
        } else if (cj_key_is(key, kl, "choices") && cj_peek(&s) == '[') {
            int c = 0, ri;
            cj_expect(&s, '[');
            while ((ri = cj_next_item(&s, &c)) == 1)
                if ((c == 1 ? walk_choice(&s, ids, n) : cj_skip(&s)) < 0)
                    break;
            rc = ri == 0 ? 0 : -1;
        } else {
            rc = cj_skip(&s);
        }
        if (rc < 0)
            break;
    }
    if (r != 0) {
        free(*ids);
        *ids = NULL;
        *n = -1;
        return -1;
    }
    return 0;
}

/* keep[l] for the model's layers out of the engine's (NULL: the same
 * layers); 0, or -1 with the note set. */
static int map_layers(const engine_t *d, const routed_t *r, uint8_t **keep, cache_use *u)
{
    *keep = NULL;
    if (r->L == d->L)
        return 0;
    uint8_t *dense = calloc((size_t)r->L, 1);
    if (!dense)
        return no_signal(u, "out of memory"), -1;
    int nd = routed_dense_layers(r, dense);
    if (r->L > d->L && r->L - nd == d->L) {
        for (int l = 0; l < r->L; l++)
            dense[l] = !dense[l];
        *keep = dense;
        return 0;
    }
    free(dense);
    no_signal(u, "the prefill's routed experts cover %d layers (%d of them dense), the model "
              "has %d", r->L, nd, d->L);
    return -1;
}

/* Blocks [from, to) of the prompt (all routed: rows from token lead on)
 * into the cache, under pc's lock. */
static void store_blocks(engine_t *d, pcache *pc, const routed_t *r, const uint8_t *keep,
                         const uint64_t *h, int from, int to, int lead, int B, cache_use *u)
{
    char err[ELDR_ERRLEN];
    size_t cells = (size_t)d->L * (size_t)d->E;
    uint16_t *c = malloc(cells * sizeof *c);
    for (int i = from; c && i < to; i++)
        if (routed_counts(r, (int64_t)i * B - lead, B, keep, d->E, c, err, sizeof err) == 0 &&
            sigcache_put(pc->c, h[i], i ? h[i - 1] : BLOCK_HASH_ROOT, c, err, sizeof err) == 0)
            u->stored++;
    free(c);
}

/* counts = the routed rows' counts plus the cached head's, the new
 * blocks stored; 1, or 0 with the note. */
static int with_cache(engine_t *d, int prefill, const routed_t *r, const uint8_t *keep,
                      const int32_t *ids, int n, uint16_t *fresh, uint16_t *counts,
                      cache_use *u)
{
    int B = d->o->block_size, lead = (int)r->unrouted_lead;
    if (lead % B)
        return no_signal(u, "the prefill's %d prefix-cached prompt rows are not whole blocks of "
                         "%d tokens (--block-size must be the engine's block size)", lead, B);
    int nb = n / B, need = lead / B, rc = 1;
    uint64_t *h = malloc(((size_t)nb + 1) * sizeof *h);
    if (!h)
        return no_signal(u, "out of memory");
    block_hash_chain(BLOCK_HASH_ROOT, ids, n, B, h);
    pcache *pc = &d->caches[prefill];
    char err[ELDR_ERRLEN];
    pthread_mutex_lock(&pc->lock);
    int64_t m = sigcache_match(pc->c, h, need, BLOCK_HASH_ROOT);
    u->hit = (int)m;
    u->missing = need - (int)m;
    if (m < need)
        rc = no_signal(u, "the signature cache holds %lld of the %d prefix-cached blocks of this "
                       "prompt", (long long)m, need);
    else if (sigcache_recover(pc->c, h, m, fresh, counts, err, sizeof err) < 0)
        rc = no_signal(u, "signature cache: %s", err);
    else
        store_blocks(d, pc, r, keep, h, need, nb, lead, B, u);
    pc->hit_blocks += (uint64_t)u->hit;
    pc->missing_blocks += (uint64_t)u->missing;
    pc->stored_blocks += (uint64_t)u->stored;
    pthread_mutex_unlock(&pc->lock);
    free(h);
    if (rc)
        u->cached_rows = lead;
    return rc;
}

int decide_stock_counts(engine_t *d, int prefill, const char *answer, size_t len,
                        uint16_t *counts, cache_use *u)
{
    routed_hint hint = {.E = d->E, .from = "the model"};
    routed_t r;
    char err[ELDR_ERRLEN];
    u->origin = SIG_ORIGIN_NONE;
    u->note[0] = 0;
    if (routed_decode(answer, len, &hint, &r, err, sizeof err) < 0)
        return no_signal(u, "%s", err);
    uint8_t *keep = NULL;
    int32_t *ids = NULL;
    int n = -1, rc = 0;
    size_t cells = (size_t)d->L * (size_t)d->E;
    uint16_t *fresh = malloc(cells * sizeof *fresh);
    int64_t P = r.prompt_tokens + r.unrouted;
    if (!fresh)
        no_signal(u, "out of memory");
    else if (map_layers(d, &r, &keep, u) < 0)
        ;   /* noted */
    else if (r.unrouted != r.unrouted_lead)
        no_signal(u, "the prefill's answer has prompt rows without routing after routed ones");
    else if (routed_counts(&r, 0, r.prompt_tokens, keep, d->E, fresh, err, sizeof err) < 0)
        no_signal(u, "%s", err);
    else if (prompt_ids(answer, len, &ids, &n) < 0 || (n >= 0 && n != P))
        no_signal(u, "the prefill's prompt_token_ids do not match its %lld prompt rows",
                  (long long)P);
    else if (n < 0 && r.unrouted)
        no_signal(u, "%lld prompt rows came from the prefix cache, and the answer has no "
                  "prompt_token_ids to find them by", (long long)r.unrouted);
    else if (n < 0) {
        memcpy(counts, fresh, cells * sizeof *counts);
        rc = 1;
    } else {
        rc = with_cache(d, prefill, &r, keep, ids, n, fresh, counts, u);
    }
    if (rc) {
        u->origin = SIG_ORIGIN_ROUTED;
        u->rows = (int)P;
    }
    free(ids);
    free(keep);
    free(fresh);
    routed_free(&r);
    return rc;
}
