/* gen.c - the synthetic trace generator: parameters, and the run that
 * plans every request, builds the shared model and prefix groups, then
 * routes the requests on worker threads (see gen.h, docs/generator.md). */
#include "gen.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blockhash.h"
#include "err.h"
#include "gen_internal.h"

#define GEN_VOCAB 100000   /* synthetic token ids are in [0, GEN_VOCAB) */
#define GEN_CHUNK 8        /* requests a worker claims at a time */
#define MAX_LEN 65535

void gen_defaults(gen_params_t *p)
{
    memset(p, 0, sizeof *p);
    p->requests = 1000;
    p->layers = 24;
    p->experts = 64;
    p->top_k = 4;
    p->domains = 4;
    p->seed = 1;
    snprintf(p->model, sizeof p->model, "synthetic");
    p->base_scale = 0.8;
    p->generalists = 2;
    p->generalist_bump = 1.0;
    p->domain_strength = 1.0;
    p->layer_floor = 0.3;
    p->mix_prob = 0.3;
    p->mix_weight = 0.5;
    p->request_noise = 0.9;
    p->decode_drift = 0.5;
    p->prompt_tokens = 256;
    p->decode_tokens = 128;
    p->length_spread = 0.5;
    p->burst_factor = 1.0;
    p->burst_period = 60.0;
    p->prefix_blocks = 4;
    p->block_size = BLOCK_SIZE_DEFAULT;
    p->threads = 2;
}

const char *gen_domain_name(int d, char *buf, size_t len)
{
    static const char *names[] = {"code", "math", "chat", "science",
                                  "law", "medicine", "finance", "creative"};
    if (d >= 0 && d < 8)
        return names[d];
    snprintf(buf, len, "domain%d", d);
    return buf;
}

#define RANGE(v, lo, hi, flag)                                                        \
    if (!((v) >= (lo) && (v) <= (hi)))                                                \
        return eldr_errf(err, errlen, flag " is %g, must be in [%g, %g]", (double)(v), \
                         (double)(lo), (double)(hi));

int gen_check(const gen_params_t *p, char *err, size_t errlen)
{
    RANGE(p->requests, 1, 1e9, "--requests")
    RANGE(p->layers, 1, 4096, "--layers")
    RANGE(p->experts, 1, 65535, "--experts")
    RANGE(p->top_k, 1, p->experts, "--top-k")
    RANGE(p->domains, 1, GEN_MAX_DOMAINS, "--domains")
    RANGE(p->base_scale, 0, 20, "--base-scale")
    RANGE(p->generalists, 0, p->experts, "--generalists")
    RANGE(p->generalist_bump, -20, 20, "--generalist-bump")
    RANGE(p->domain_strength, 0, 20, "--domain-strength")
    RANGE(p->layer_floor, 0, 1, "--layer-floor")
    RANGE(p->mix_prob, 0, 1, "--mix-prob")
    RANGE(p->mix_weight, 0, 1, "--mix-weight")
    RANGE(p->request_noise, 0, 20, "--request-noise")
    RANGE(p->decode_drift, 0, 20, "--decode-drift")
    RANGE(p->prompt_tokens, 1, MAX_LEN, "--prompt-tokens")
    RANGE(p->decode_tokens, 0, MAX_LEN, "--decode-tokens")
    RANGE(p->length_spread, 0, 3, "--length-spread")
    RANGE(p->arrival_rate, 0, 1e9, "--arrival-rate")
    RANGE(p->burst_factor, 1e-6, 1e6, "--burst-factor")
    RANGE(p->drift, 0, 1, "--drift")
    RANGE(p->burst_period, 1e-6, 1e12, "--burst-period")
    RANGE(p->prefix_groups, 0, 1000000, "--prefix-groups")
    RANGE(p->block_size, 1, MAX_LEN, "--block-size")
    RANGE(p->threads, 1, GEN_MAX_THREADS, "--threads")
    if (p->burst_factor != 1.0 && p->arrival_rate <= 0)
        return eldr_errf(err, errlen, "--burst-factor needs --arrival-rate > 0 (bursts are periods of time)");
    if (p->prefix_groups > 0) {
        RANGE(p->prefix_blocks, 1, MAX_LEN, "--prefix-blocks")
        if ((int64_t)p->prefix_blocks * p->block_size > MAX_LEN - 1)
            return eldr_errf(err, errlen,
                             "--prefix-blocks %d x --block-size %d = %lld shared tokens, more than %d "
                             "(prompt_tokens is uint16)",
                             p->prefix_blocks, p->block_size,
                             (long long)p->prefix_blocks * p->block_size, MAX_LEN - 1);
    }
    if (p->domain_shares) {
        double sum = 0;
        for (int d = 0; d < p->domains; d++) {
            if (!(p->domain_shares[d] >= 0 && isfinite(p->domain_shares[d])))
                return eldr_errf(err, errlen, "--domain-shares: share %d is %g, must be >= 0", d,
                                 p->domain_shares[d]);
            sum += p->domain_shares[d];
        }
        if (!(sum > 0))
            return eldr_errf(err, errlen, "--domain-shares: all shares are 0");
    }
    return 0;
}
#undef RANGE

/* ---- prefix groups: the shared prompt prefix of each group is routed
 * once, so every member carries identical expert choices for it ---- */

typedef struct gen_groups {
    int G, len, blocks;        /* groups, shared tokens, shared blocks */
    uint16_t *experts;         /* [G][len][L][k] */
    uint16_t *counts;          /* [G][L][E] */
    float *gate_prob, *gate_logit; /* [G][L][E] or NULL */
    uint64_t *hash;            /* [G][blocks] */
} gen_groups_t;

/* Per-thread buffers. */
typedef struct worker {
    gen_scratch_t s;
    gen_alias_t ap[2], ad[2];  /* prefill and decode tables per component */
    float *z[2], *zd[2], *pp[2], *pd[2];
    float *noise, *drift;
    uint8_t *cp, *cd;          /* component of each own prompt / decode token */
    int32_t *ids;              /* one block of synthetic token ids */
    uint16_t *pick;            /* [k] */
} worker_t;

static void worker_free(worker_t *w)
{
    gen_scratch_free(&w->s);
    for (int c = 0; c < 2; c++) {
        gen_alias_free(&w->ap[c]);
        gen_alias_free(&w->ad[c]);
        free(w->z[c]);
        free(w->zd[c]);
        free(w->pp[c]);
        free(w->pd[c]);
    }
    free(w->noise);
    free(w->drift);
    free(w->cp);
    free(w->cd);
    free(w->ids);
    free(w->pick);
    memset(w, 0, sizeof *w);
}

static int worker_init(worker_t *w, const gen_params_t *p)
{
    int E = p->experts;
    memset(w, 0, sizeof *w);
    int bad = gen_scratch_init(&w->s, E);
    for (int c = 0; c < 2; c++) {
        bad |= gen_alias_init(&w->ap[c], E) | gen_alias_init(&w->ad[c], E);
        w->z[c] = eldr_calloc((size_t)E, sizeof(float));
        w->zd[c] = eldr_calloc((size_t)E, sizeof(float));
        w->pp[c] = eldr_calloc((size_t)E, sizeof(float));
        w->pd[c] = eldr_calloc((size_t)E, sizeof(float));
        bad |= !w->z[c] || !w->zd[c] || !w->pp[c] || !w->pd[c];
    }
    w->noise = eldr_calloc((size_t)E, sizeof(float));
    w->drift = eldr_calloc((size_t)E, sizeof(float));
    w->cp = eldr_calloc(MAX_LEN + 1, 1);
    w->cd = eldr_calloc(MAX_LEN + 1, 1);
    w->ids = eldr_calloc((size_t)p->block_size, sizeof(int32_t));
    w->pick = eldr_calloc((size_t)p->top_k, sizeof(uint16_t));
    bad |= !w->noise || !w->drift || !w->cp || !w->cd || !w->ids || !w->pick;
    if (bad) {
        worker_free(w);
        return -1;
    }
    return 0;
}

/* Everything the workers share (read-only except disjoint output rows). */
typedef struct run {
    const gen_params_t *p;
    const gen_model_t *m;
    const gen_groups_t *g;
    const gen_req_t *req;
    trace_t *t;
    atomic_llong next, done;
} run_t;

/* Route `n` tokens of one layer. comp[i] picks the table of token i; each
 * token's k picks go to counts, and to rows (stride L*k, may be NULL) and
 * probs (same layout, may be NULL). */
static void route_tokens(rng_t *r, worker_t *w, const gen_alias_t *tab, const uint8_t *comp,
                         int n, int k, uint16_t *counts, uint16_t *rows, float *probs,
                         size_t stride)
{
    for (int i = 0; i < n; i++) {
        const gen_alias_t *a = &tab[comp[i]];
        uint16_t *out = rows ? rows + (size_t)i * stride : w->pick;
        gen_pick_distinct(r, a, k, out, &w->s);
        for (int j = 0; j < k; j++) {
            counts[out[j]]++;
            if (probs)
                probs[(size_t)i * stride + j] = a->p[out[j]];
        }
    }
}

/* Gate sums of one layer: sum over the prompt's tokens of the token's
 * probabilities (or raw logits); tokens of one component share them. */
static void gate_sums(int E, int nc, const int *ntok, float *const *v, float *out,
                      const float *prefix)
{
    for (int e = 0; e < E; e++) {
        double s = prefix ? prefix[e] : 0;
        for (int c = 0; c < nc; c++)
            s += (double)ntok[c] * v[c][e];
        out[e] = (float)s;
    }
}

/* Hash chain of a prompt: the group's shared blocks, then the request's
 * own full blocks of fresh synthetic ids. */
static void block_chain(rng_t *r, worker_t *w, const gen_params_t *p, const gen_groups_t *g,
                        int group, int own, uint64_t *out)
{
    uint64_t parent = BLOCK_HASH_ROOT;
    int nb = 0;
    if (group >= 0) {
        memcpy(out, g->hash + (size_t)group * g->blocks, (size_t)g->blocks * sizeof *out);
        nb = g->blocks;
        parent = out[nb - 1];
    }
    int B = p->block_size;
    for (int b = 0; b < own / B; b++) {
        for (int i = 0; i < B; i++)
            w->ids[i] = (int32_t)rng_below(r, GEN_VOCAB);
        out[nb++] = parent = block_hash(parent, w->ids, B);
    }
}

static void route_request(run_t *run, worker_t *w, int64_t ri)
{
    const gen_params_t *p = run->p;
    const gen_req_t *q = &run->req[ri];
    trace_t *t = run->t;
    rng_t r = q->rng;
    int L = p->layers, E = p->experts, k = p->top_k, nc = q->d2 >= 0 ? 2 : 1;
    int dom[2] = {q->d1, q->d2}, np[2] = {0, 0};
    size_t stride = (size_t)L * k, cells = (size_t)L * E;
    int prefix = q->group >= 0 ? run->g->len : 0;

    for (int i = 0; i < q->own; i++) {
        w->cp[i] = (uint8_t)(nc == 2 && rng_uniform(&r) < q->w);
        np[w->cp[i]]++;
    }
    for (int i = 0; i < q->decode; i++)
        w->cd[i] = (uint8_t)(nc == 2 && rng_uniform(&r) < q->w_dec);

    uint16_t *pre_rows = t->prefill_experts
                             ? t->prefill_experts + ((size_t)t->prefill_offsets[ri] + prefix) * stride
                             : NULL;
    uint16_t *dec_rows = t->decode_experts ? t->decode_experts + (size_t)t->decode_offsets[ri] * stride : NULL;
    float *dec_probs = t->decode_probs ? t->decode_probs + (size_t)t->decode_offsets[ri] * stride : NULL;

    for (int l = 0; l < L; l++) {
        gen_normals(&r, w->noise, E, (float)p->request_noise);
        if (q->decode)
            gen_normals(&r, w->drift, E, (float)p->decode_drift);
        for (int c = 0; c < nc; c++) {
            gen_model_logits(run->m, dom[c], l, w->noise, w->z[c]);
            gen_softmax(w->z[c], E, w->pp[c]);
            gen_alias_build(&w->ap[c], w->pp[c], &w->s);
            if (q->decode) {
                for (int e = 0; e < E; e++)
                    w->zd[c][e] = w->z[c][e] + w->drift[e];
                gen_softmax(w->zd[c], E, w->pd[c]);
                gen_alias_build(&w->ad[c], w->pd[c], &w->s);
            }
        }
        size_t row = (size_t)ri * cells + (size_t)l * E;
        uint16_t *cnt = t->prefill_counts + row;
        route_tokens(&r, w, w->ap, w->cp, q->own, k, cnt, pre_rows ? pre_rows + (size_t)l * k : NULL,
                     NULL, stride);
        size_t grow = prefix ? (size_t)q->group * cells + (size_t)l * E : 0;
        if (prefix)
            for (int e = 0; e < E; e++)
                cnt[e] += run->g->counts[grow + e];
        if (t->gate_prob)
            gate_sums(E, nc, np, w->pp, t->gate_prob + row, prefix ? run->g->gate_prob + grow : NULL);
        if (t->gate_logit)
            gate_sums(E, nc, np, w->z, t->gate_logit + row, prefix ? run->g->gate_logit + grow : NULL);
        if (q->decode)
            route_tokens(&r, w, w->ad, w->cd, q->decode, k, t->decode_counts + row,
                         dec_rows ? dec_rows + (size_t)l * k : NULL,
                         dec_probs ? dec_probs + (size_t)l * k : NULL, stride);
    }
    if (t->prefill_experts && prefix)
        memcpy(t->prefill_experts + (size_t)t->prefill_offsets[ri] * stride,
               run->g->experts + (size_t)q->group * run->g->len * stride,
               (size_t)prefix * stride * sizeof(uint16_t));
    if (t->block_hashes)
        block_chain(&r, w, p, run->g, q->group, q->own, t->block_hashes + t->block_offsets[ri]);
}

typedef struct thread_arg {
    run_t *run;
    worker_t w;
    int report;                /* the calling thread reports progress */
} thread_arg_t;

static void *work(void *arg)
{
    thread_arg_t *a = arg;
    run_t *run = a->run;
    int64_t n = run->p->requests;
    for (;;) {
        if (run->p->cancel && *run->p->cancel)
            break;
        int64_t r0 = atomic_fetch_add(&run->next, GEN_CHUNK);
        if (r0 >= n)
            break;
        int64_t r1 = r0 + GEN_CHUNK < n ? r0 + GEN_CHUNK : n;
        for (int64_t r = r0; r < r1; r++)
            route_request(run, &a->w, r);
        long long done = atomic_fetch_add(&run->done, r1 - r0) + (r1 - r0);
        if (a->report && run->p->progress)
            run->p->progress((double)done / (double)n, run->p->progress_ctx);
    }
    return NULL;
}

/* ---- prefix groups ---- */

static void groups_free(gen_groups_t *g)
{
    free(g->experts);
    free(g->counts);
    free(g->gate_prob);
    free(g->gate_logit);
    free(g->hash);
    memset(g, 0, sizeof *g);
}

/* Route every group's shared prefix once: domain from the shares, its own
 * noise, token ids and hash chain, all from the group's stream. */
static int groups_build(gen_groups_t *g, const gen_params_t *p, const gen_model_t *m,
                        worker_t *w, char *err, size_t errlen)
{
    int L = p->layers, E = p->experts, k = p->top_k;
    size_t cells = (size_t)L * E, stride = (size_t)L * k;
    g->G = p->prefix_groups;
    g->blocks = p->prefix_blocks;
    g->len = p->prefix_blocks * p->block_size;
    g->experts = eldr_calloc((size_t)g->G * g->len * stride, sizeof(uint16_t));
    g->counts = eldr_calloc((size_t)g->G * cells, sizeof(uint16_t));
    g->hash = eldr_calloc((size_t)g->G * g->blocks, sizeof(uint64_t));
    if (p->gate_prob)
        g->gate_prob = eldr_calloc((size_t)g->G * cells, sizeof(float));
    if (p->gate_logit)
        g->gate_logit = eldr_calloc((size_t)g->G * cells, sizeof(float));
    int32_t *ids = eldr_calloc((size_t)g->len, sizeof(int32_t));
    if (!g->experts || !g->counts || !g->hash || !ids || (p->gate_prob && !g->gate_prob) ||
        (p->gate_logit && !g->gate_logit)) {
        free(ids);
        groups_free(g);
        return eldr_errf(err, errlen, "out of memory for %d prefix groups of %d tokens", p->prefix_groups,
                         p->prefix_blocks * p->block_size);
    }
    memset(w->cp, 0, (size_t)g->len);
    for (int gi = 0; gi < g->G; gi++) {
        rng_t r;
        rng_seed_stream(&r, p->seed, GEN_STREAM_GROUP(gi));
        double total = 0, u;
        for (int d = 0; d < p->domains; d++)
            total += p->domain_shares ? p->domain_shares[d] : 1.0;
        u = rng_uniform(&r) * total;
        int dom = 0;
        for (double acc = 0; dom < p->domains - 1; dom++) {
            acc += p->domain_shares ? p->domain_shares[dom] : 1.0;
            if (u < acc)
                break;
        }
        uint16_t *rows = g->experts + (size_t)gi * g->len * stride;
        for (int l = 0; l < L; l++) {
            gen_normals(&r, w->noise, E, (float)p->request_noise);
            gen_model_logits(m, dom, l, w->noise, w->z[0]);
            gen_softmax(w->z[0], E, w->pp[0]);
            gen_alias_build(&w->ap[0], w->pp[0], &w->s);
            size_t row = (size_t)gi * cells + (size_t)l * E;
            route_tokens(&r, w, w->ap, w->cp, g->len, k, g->counts + row, rows + (size_t)l * k, NULL,
                         stride);
            int n1 = g->len;
            if (g->gate_prob)
                gate_sums(E, 1, &n1, w->pp, g->gate_prob + row, NULL);
            if (g->gate_logit)
                gate_sums(E, 1, &n1, w->z, g->gate_logit + row, NULL);
        }
        for (int i = 0; i < g->len; i++)
            ids[i] = (int32_t)rng_below(&r, GEN_VOCAB);
        block_hash_chain(BLOCK_HASH_ROOT, ids, g->len, p->block_size, g->hash + (size_t)gi * g->blocks);
    }
    free(ids);
    return 0;
}

/* ---- the trace's arrays ---- */

static int alloc_outputs(trace_t *t, const gen_params_t *p, const gen_req_t *req,
                         char *err, size_t errlen)
{
    int64_t n = p->requests;
    unsigned flags = TRACE_HAS_LABEL | TRACE_HAS_REQUEST_ID |
                     (p->decode_tokens > 0 ? TRACE_HAS_DECODE : 0) |
                     (p->gate_prob ? TRACE_HAS_GATE_PROB : 0) |
                     (p->gate_logit ? TRACE_HAS_GATE_LOGIT : 0) |
                     (p->arrival_rate > 0 ? TRACE_HAS_ARRIVAL : 0);
    if (trace_alloc_optional(t, flags, err, errlen))
        return -1;
    if (!p->tokens && !p->prefix_groups)
        return 0;
    t->prefill_offsets = eldr_calloc((size_t)n + 1, sizeof(int64_t));
    t->block_offsets = eldr_calloc((size_t)n + 1, sizeof(int64_t));
    if (t->decode_counts)
        t->decode_offsets = eldr_calloc((size_t)n + 1, sizeof(int64_t));
    if (!t->prefill_offsets || !t->block_offsets || (t->decode_counts && !t->decode_offsets))
        return eldr_errf(err, errlen, "out of memory for token offsets");
    for (int64_t r = 0; r < n; r++) {
        t->prefill_offsets[r + 1] = t->prefill_offsets[r] + req[r].prompt;
        t->block_offsets[r + 1] = t->block_offsets[r] + req[r].prompt / p->block_size;
        if (t->decode_offsets)
            t->decode_offsets[r + 1] = t->decode_offsets[r] + req[r].decode;
    }
    double width = (double)p->layers * p->top_k;
    double tp = (double)t->prefill_offsets[n], td = t->decode_offsets ? (double)t->decode_offsets[n] : 0;
    double need = (tp + td) * width * 2 + td * width * 4 + (double)t->block_offsets[n] * 8;
    size_t mem = eldr_phys_mem();
    if (mem && need > 0.8 * (double)mem)
        return eldr_errf(err, errlen,
                         "--tokens: %.0f prompt + %.0f decode tokens x %d layers x top-%d need %.1f GiB, "
                         "more than this machine's memory allows (%.1f GiB)",
                         tp, td, p->layers, p->top_k, need / 1073741824.0, (double)mem / 1073741824.0);
    t->prefill_experts = eldr_calloc((size_t)tp * (size_t)width, sizeof(uint16_t));
    t->block_hashes = eldr_calloc((size_t)t->block_offsets[n] + 1, sizeof(uint64_t));
    if (t->decode_offsets) {
        t->decode_experts = eldr_calloc((size_t)td * (size_t)width + 1, sizeof(uint16_t));
        t->decode_probs = eldr_calloc((size_t)td * (size_t)width + 1, sizeof(float));
    }
    if (!t->prefill_experts || !t->block_hashes ||
        (t->decode_offsets && (!t->decode_experts || !t->decode_probs)))
        return eldr_errf(err, errlen, "out of memory for token datasets (%.1f GiB)", need / 1073741824.0);
    return 0;
}

static int fill_labels(trace_t *t, const gen_params_t *p, const gen_req_t *req,
                       char *err, size_t errlen)
{
    const char **names = eldr_calloc((size_t)p->domains, sizeof(char *));
    char (*buf)[32] = eldr_calloc((size_t)p->domains, 32);
    if (!names || !buf) {
        free(names);
        free(buf);
        return eldr_errf(err, errlen, "out of memory for label names");
    }
    for (int d = 0; d < p->domains; d++)
        names[d] = gen_domain_name(d, buf[d], sizeof buf[d]);
    int rc = trace_set_label_names(t, p->domains, names, err, errlen);
    free(names);
    free(buf);
    if (rc)
        return -1;
    for (int64_t r = 0; r < p->requests; r++) {
        char id[32];
        snprintf(id, sizeof id, "req-%06lld", (long long)r);
        t->request_id[r] = strdup(id);
        if (!t->request_id[r])
            return eldr_errf(err, errlen, "out of memory for request ids");
        t->label[r] = req[r].d1;
        t->prompt_tokens[r] = req[r].prompt;
        if (t->decode_tokens)
            t->decode_tokens[r] = req[r].decode;
    }
    return 0;
}

/* Route every request on p->threads threads (the caller is one of them). */
static int route_all(run_t *run, char *err, size_t errlen)
{
    int nt = run->p->threads;
    thread_arg_t *args = eldr_calloc((size_t)nt, sizeof *args);
    pthread_t *tid = eldr_calloc((size_t)nt, sizeof *tid);
    int rc = 0, started = 1;
    if (!args || !tid) {
        rc = eldr_errf(err, errlen, "out of memory for %d threads", nt);
        goto out;
    }
    for (int i = 0; i < nt; i++) {
        args[i].run = run;
        args[i].report = i == 0;
        if (worker_init(&args[i].w, run->p)) {
            for (int j = 0; j < i; j++)
                worker_free(&args[j].w);
            rc = eldr_errf(err, errlen, "out of memory for worker buffers");
            goto out;
        }
    }
    for (; started < nt; started++)
        if (pthread_create(&tid[started], NULL, work, &args[started]))
            break; /* fewer threads: the others share the work */
    work(&args[0]);
    for (int i = 1; i < started; i++)
        pthread_join(tid[i], NULL);
    for (int i = 0; i < nt; i++)
        worker_free(&args[i].w);
out:
    free(args);
    free(tid);
    return rc;
}

int gen_run(const gen_params_t *p, trace_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (gen_check(p, err, errlen))
        return -1;
    gen_model_t m = {0};
    gen_groups_t g = {0};
    worker_t w0 = {0};
    int rc = -1;
    gen_req_t *req = NULL;
    trace_t *t = trace_new(p->requests, p->layers, p->experts, p->top_k, err, errlen);
    if (!t)
        return -1;
    snprintf(t->model, sizeof t->model, "%s", p->model);
    req = eldr_calloc((size_t)p->requests, sizeof *req);
    if (!req) {
        eldr_errf(err, errlen, "out of memory planning %lld requests", (long long)p->requests);
        goto done;
    }
    if ((p->arrival_rate > 0 && trace_alloc_optional(t, TRACE_HAS_ARRIVAL, err, errlen)) ||
        gen_plan(p, req, t->arrival_s, err, errlen) || alloc_outputs(t, p, req, err, errlen) ||
        fill_labels(t, p, req, err, errlen) || gen_model_build(&m, p, err, errlen))
        goto done;
    if (p->prefix_groups > 0) {
        if (worker_init(&w0, p)) {
            eldr_errf(err, errlen, "out of memory for worker buffers");
            goto done;
        }
        if (groups_build(&g, p, &m, &w0, err, errlen))
            goto done;
    }
    run_t run = {.p = p, .m = &m, .g = &g, .req = req, .t = t};
    atomic_init(&run.next, 0);
    atomic_init(&run.done, 0);
    if (route_all(&run, err, errlen))
        goto done;
    if (p->cancel && *p->cancel) {
        eldr_errf(err, errlen, "cancelled");
        rc = -2;
        goto done;
    }
    rc = 0;
done:
    worker_free(&w0);
    groups_free(&g);
    gen_model_free(&m);
    free(req);
    if (rc)
        trace_free(t);
    else
        *out = t;
    return rc;
}
