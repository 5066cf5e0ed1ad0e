/* trace_validate.c - the invariants of a trace (trace.h, docs/trace-format.md).
 *
 * Every load runs these, so they are single passes over the arrays with
 * no allocation beyond two small scratch buffers. The first violation
 * wins; its message names the dataset, the row (counted as in the file)
 * and, where it applies, the layer and expert. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "trace.h"

typedef struct check {
    const trace_t *t;
    int64_t row0;            /* file row of t's row 0 */
    const char *where;
    char *err;
    size_t errlen;
} check_t;

/* Sum and largest of n counts, in blocks of 16 with a constant inner
 * trip count: gcc -O2 vectorises those (it leaves a loop of unknown
 * length scalar), and the checks run on every cell of every load. */
static void sum_max(const uint16_t *c, size_t n, int64_t *sum, uint16_t *top)
{
    enum { B = 16 };
    uint32_t s[B] = {0};
    uint16_t m[B] = {0};
    size_t e = 0;
    for (; e + B <= n; e += B)
        for (size_t q = 0; q < B; q++) {
            s[q] += c[e + q];
            m[q] = c[e + q] > m[q] ? c[e + q] : m[q];
        }
    int64_t total = 0;
    uint16_t best = 0;
    for (size_t q = 0; q < B; q++) {
        total += s[q];
        best = m[q] > best ? m[q] : best;
    }
    for (; e < n; e++) {
        total += c[e];
        best = c[e] > best ? c[e] : best;
    }
    *sum = total;
    *top = best;
}

/* In every layer the counts sum to tokens * k (each token picks k
 * experts) and no expert exceeds tokens (the k picks are distinct). */
static int check_counts(const check_t *c, const char *name, const uint16_t *counts,
                        const int32_t *tokens, const char *tok_name)
{
    const trace_t *t = c->t;
    for (int64_t r = 0; r < t->n; r++) {
        int64_t tok = tokens[r], want = tok * t->k;
        if (tok < 0)
            return eldr_errf(c->err, c->errlen, "%s: %s row %lld: %lld tokens, must be >= 0",
                             c->where, tok_name, (long long)(c->row0 + r), (long long)tok);
        const uint16_t *row = counts + (size_t)r * TRACE_CELLS(t);
        for (int l = 0; l < t->L; l++) {
            const uint16_t *cell = row + (size_t)l * (size_t)t->E;
            int64_t sum;
            uint16_t top;
            sum_max(cell, (size_t)t->E, &sum, &top);
            if (sum != want)
                return eldr_errf(c->err, c->errlen,
                                 "%s: %s row %lld layer %d: counts sum to %lld, expected "
                                 "%s*top_k = %lld",
                                 c->where, name, (long long)(c->row0 + r), l, (long long)sum,
                                 tok_name, (long long)want);
            if (top > tok) {
                int e = 0;
                while (cell[e] != top)
                    e++;
                return eldr_errf(c->err, c->errlen,
                                 "%s: %s row %lld layer %d expert %d: %d counts, more than the "
                                 "%lld %s (a token picks top_k distinct experts)",
                                 c->where, name, (long long)(c->row0 + r), l, e, top,
                                 (long long)tok, tok_name);
            }
        }
    }
    return 0;
}

/* Finite (and, for probabilities, non-negative) gate values. */
static int check_gate(const check_t *c, const char *name, const float *g, int nonneg)
{
    const trace_t *t = c->t;
    size_t cells = TRACE_CELLS(t), total = (size_t)t->n * cells, i = 0;
    /* blocks first, branch-free (a NaN fails both comparisons); a bad
     * block is then walked value by value to name the first */
    enum { B = 64 };
    float lo = nonneg ? 0.0f : -FLT_MAX;
    for (; i + B <= total; i += B) {
        int bad = 0;
        for (size_t q = 0; q < B; q++)
            bad |= !(g[i + q] >= lo && g[i + q] <= FLT_MAX);
        if (bad)
            break;
    }
    for (; i < total; i++) {
        if (isfinite(g[i]) && (!nonneg || g[i] >= 0.0f))
            continue;
        size_t r = i / cells, l = (i % cells) / (size_t)t->E, e = i % (size_t)t->E;
        return eldr_errf(c->err, c->errlen, "%s: %s row %lld layer %zu expert %zu: %s",
                         c->where, name, (long long)(c->row0 + (int64_t)r), l, e,
                         isnan(g[i]) ? "NaN" : isinf(g[i]) ? "infinite" : "negative");
    }
    return 0;
}

static int check_rows(const check_t *c)
{
    const trace_t *t = c->t;
    for (int64_t r = 0; r < t->n; r++) {
        long long fr = (long long)(c->row0 + r);
        if (t->label && (t->label[r] < 0 || t->label[r] >= t->n_labels))
            return eldr_errf(c->err, c->errlen, "%s: label row %lld: %d outside label_names [0, %d)",
                             c->where, fr, t->label[r], t->n_labels);
        if (t->arrival_s && !isfinite(t->arrival_s[r]))
            return eldr_errf(c->err, c->errlen, "%s: arrival_s row %lld: not finite", c->where,
                             fr);
        if (t->prefill_unrouted && t->prefill_unrouted[r] < 0)
            return eldr_errf(c->err, c->errlen, "%s: prefill_unrouted_tokens row %lld: %d, must "
                             "be >= 0", c->where, fr, t->prefill_unrouted[r]);
    }
    if (t->label && !t->label_names && t->n_labels > 0)
        return eldr_errf(c->err, c->errlen, "%s: label_names missing", c->where);
    return 0;
}

/* Offsets start at 0, never decrease, and (when tokens is given) give
 * each request exactly its token count. */
static int check_offsets(const check_t *c, const char *name, const int64_t *off,
                         const int32_t *tokens, const char *tok_name)
{
    const trace_t *t = c->t;
    if (off[0] != 0)
        return eldr_errf(c->err, c->errlen, "%s: %s row %lld: first offset %lld, expected 0",
                         c->where, name, (long long)c->row0, (long long)off[0]);
    for (int64_t r = 0; r < t->n; r++) {
        int64_t len = off[r + 1] - off[r];
        if (len < 0)
            return eldr_errf(c->err, c->errlen, "%s: %s row %lld: offsets decrease (%lld to %lld)",
                             c->where, name, (long long)(c->row0 + r), (long long)off[r],
                             (long long)off[r + 1]);
        if (tokens && len != tokens[r])
            return eldr_errf(c->err, c->errlen, "%s: %s row %lld: %lld token rows, expected %s = %d",
                             c->where, name, (long long)(c->row0 + r), (long long)len, tok_name,
                             tokens[r]);
    }
    return 0;
}

/* Per-token expert ids: each < E, k distinct per token and layer, and
 * together they reproduce the request's count matrix exactly. */
static int check_token_ids(const check_t *c, const char *name, const int64_t *off,
                           const uint16_t *ids, const uint16_t *counts, const char *cname)
{
    const trace_t *t = c->t;
    size_t cells = TRACE_CELLS(t), width = (size_t)t->L * (size_t)t->k;
    /* locals: acc's stores could alias t's fields, which the compiler
     * would then read again for every id */
    const int L = t->L, E = t->E, K = t->k;
    int64_t *stamp = malloc((size_t)t->E * sizeof *stamp);
    uint32_t *acc = malloc(cells * sizeof *acc);
    int rc = 0;
    if (!stamp || !acc) {
        rc = eldr_errf(c->err, c->errlen, "%s: out of memory checking %s", c->where, name);
        goto done;
    }
    for (int e = 0; e < t->E; e++)
        stamp[e] = -1;
    for (int64_t r = 0; r < t->n && !rc; r++) {
        memset(acc, 0, cells * sizeof *acc);
        for (int64_t tok = off[r]; tok < off[r + 1] && !rc; tok++) {
            const uint16_t *row = ids + (size_t)tok * width;
            /* the common case first: k ids in range and distinct, by
             * comparing them among themselves (k is small), no branch
             * per id; only a bad token row takes the path that names
             * its first fault */
            unsigned bad = K > 16;   /* quadratic in k: the stamps above it */
            uint16_t top = 0;
            for (size_t q = 0; q < width; q++)
                top = row[q] > top ? row[q] : top;
            bad |= top >= E;
            for (int l = 0; l < L && !bad; l++) {
                const uint16_t *x = row + (size_t)l * (size_t)K;
                for (int j = 1; j < K; j++)
                    for (int i = 0; i < j; i++)
                        bad |= x[i] == x[j];
            }
            if (!bad) {
                for (int l = 0; l < L; l++) {
                    uint32_t *al = acc + (size_t)l * (size_t)E;
                    const uint16_t *x = row + (size_t)l * (size_t)K;
                    for (int j = 0; j < K; j++)
                        al[x[j]]++;
                }
                continue;
            }
            for (int l = 0; l < t->L && !rc; l++) {
                int64_t mark = tok * t->L + l; /* unique per (token, layer) */
                for (int j = 0; j < t->k; j++) {
                    uint16_t e = row[(size_t)l * (size_t)t->k + (size_t)j];
                    if (e >= t->E) {
                        rc = eldr_errf(c->err, c->errlen,
                                       "%s: %s token row %lld (request row %lld) layer %d: "
                                       "expert %d outside [0, %d)",
                                       c->where, name, (long long)tok, (long long)(c->row0 + r),
                                       l, e, t->E);
                        break;
                    }
                    if (stamp[e] == mark) {
                        rc = eldr_errf(c->err, c->errlen,
                                       "%s: %s token row %lld (request row %lld) layer %d: "
                                       "expert %d picked twice",
                                       c->where, name, (long long)tok, (long long)(c->row0 + r),
                                       l, e);
                        break;
                    }
                    stamp[e] = mark;
                    acc[(size_t)l * (size_t)t->E + e]++;
                }
            }
        }
        const uint16_t *want = counts + (size_t)r * cells;
        for (size_t i = 0; i < cells && !rc; i++)
            if (acc[i] != want[i])
                rc = eldr_errf(c->err, c->errlen,
                               "%s: %s row %lld layer %zu expert %zu: tokens give %u, %s says %d",
                               c->where, name, (long long)(c->row0 + r), i / (size_t)t->E,
                               i % (size_t)t->E, acc[i], cname, want[i]);
    }
done:
    free(stamp);
    free(acc);
    return rc;
}

static int check_probs(const check_t *c)
{
    const trace_t *t = c->t;
    size_t total = (size_t)t->decode_offsets[t->n] * (size_t)t->L * (size_t)t->k;
    for (size_t i = 0; i < total; i++)
        if (!(t->decode_probs[i] >= 0.0f && t->decode_probs[i] <= 1.0f))
            return eldr_errf(c->err, c->errlen,
                             "%s: tokens/decode_probs token row %zu layer %zu: %g is not a "
                             "probability in [0, 1]",
                             c->where, i / ((size_t)t->L * (size_t)t->k),
                             (i / (size_t)t->k) % (size_t)t->L, (double)t->decode_probs[i]);
    return 0;
}

/* Which datasets need which others. */
static int check_presence(const check_t *c)
{
    const trace_t *t = c->t;
    const char *w = c->where;
    if (t->n < 0 || t->L < 1 || t->E < 1 || t->k < 1 || t->k > t->E)
        return eldr_errf(c->err, c->errlen,
                         "%s: bad geometry: requests=%lld layers=%d experts=%d top_k=%d", w,
                         (long long)t->n, t->L, t->E, t->k);
    if (!t->prefill_counts || !t->prompt_tokens)
        return eldr_errf(c->err, c->errlen, "%s: prefill_counts or prompt_tokens missing", w);
    if (!t->decode_counts != !t->decode_tokens)
        return eldr_errf(c->err, c->errlen, "%s: decode_counts and decode_tokens come together", w);
    if (!t->prefill_experts != !t->prefill_offsets || !t->decode_experts != !t->decode_offsets ||
        !t->block_hashes != !t->block_offsets)
        return eldr_errf(c->err, c->errlen, "%s: a token-level dataset lacks its offsets", w);
    if (t->decode_probs && !t->decode_experts)
        return eldr_errf(c->err, c->errlen, "%s: tokens/decode_probs without tokens/decode_experts",
                         w);
    if (t->decode_experts && !t->decode_counts)
        return eldr_errf(c->err, c->errlen, "%s: tokens/decode_experts without decode_counts", w);
    return 0;
}

int trace_validate_at(const trace_t *t, int64_t row0, const char *where, char *err,
                      size_t errlen)
{
    check_t c = {.t = t, .row0 = row0, .where = where, .err = err, .errlen = errlen};
    if (check_presence(&c) ||
        check_counts(&c, "prefill_counts", t->prefill_counts, t->prompt_tokens, "prompt_tokens"))
        return -1;
    if (t->decode_counts &&
        check_counts(&c, "decode_counts", t->decode_counts, t->decode_tokens, "decode_tokens"))
        return -1;
    if ((t->gate_prob && check_gate(&c, "gate_prob", t->gate_prob, 1)) ||
        (t->gate_logit && check_gate(&c, "gate_logit", t->gate_logit, 0)) || check_rows(&c))
        return -1;
    if (t->prefill_experts &&
        (check_offsets(&c, "tokens/prefill_offsets", t->prefill_offsets, t->prompt_tokens,
                       "prompt_tokens") ||
         check_token_ids(&c, "tokens/prefill_experts", t->prefill_offsets, t->prefill_experts,
                         t->prefill_counts, "prefill_counts")))
        return -1;
    if (t->decode_experts &&
        (check_offsets(&c, "tokens/decode_offsets", t->decode_offsets, t->decode_tokens,
                       "decode_tokens") ||
         check_token_ids(&c, "tokens/decode_experts", t->decode_offsets, t->decode_experts,
                         t->decode_counts, "decode_counts")))
        return -1;
    if (t->decode_probs && check_probs(&c))
        return -1;
    if (t->block_hashes &&
        check_offsets(&c, "tokens/block_offsets", t->block_offsets, NULL, NULL))
        return -1;
    return 0;
}

int trace_validate(const trace_t *t, const char *where, char *err, size_t errlen)
{
    return trace_validate_at(t, 0, where, err, errlen);
}

int trace_validate_index(const trace_t *t, const char *where, char *err, size_t errlen)
{
    check_t c = {.t = t, .row0 = 0, .where = where, .err = err, .errlen = errlen};
    for (int64_t r = 0; r < t->n; r++)
        if (t->prompt_tokens[r] < 0 || (t->decode_tokens && t->decode_tokens[r] < 0))
            return eldr_errf(err, errlen, "%s: %s row %lld: a negative token count", where,
                             t->prompt_tokens[r] < 0 ? "prompt_tokens" : "decode_tokens",
                             (long long)r);
    return check_rows(&c);
}
