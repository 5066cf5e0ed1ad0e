/* split.c - calibration/evaluation splits (split.h). */
#include "split.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "rng.h"

static const char *const MODE_NAMES[] = {"random", "head", "stratified"};

void split_spec_default(split_spec *s)
{
    s->mode = SPLIT_RANDOM;
    s->size = SPLIT_DEFAULT_SIZE;
    s->seed = SPLIT_DEFAULT_SEED;
    s->pinned = 0;
    s->size_given = 0;
}

int split_mode_parse(const char *name)
{
    for (int m = 0; m < 3; m++)
        if (name && strcmp(name, MODE_NAMES[m]) == 0)
            return m;
    return -1;
}

const char *split_mode_name(split_mode m)
{
    return (unsigned)m < 3 ? MODE_NAMES[m] : "?";
}

int64_t split_calib_count(int64_t n, double size, char *err, size_t errlen)
{
    if (!isfinite(size) || size < 0)
        return eldr_errf(err, errlen, "calibration split %g must be a count >= 1, a "
                         "fraction in (0, 1), or 0 for none", size);
    if (size == 0)
        return 0;
    if (size < 1)
        return (int64_t)floor(size * (double)n);
    int64_t c = (int64_t)floor(size);
    return c < n / 2 ? c : n / 2;
}

/* Mark c of the rows in pool[0..m) as calibration: a seeded partial
 * Fisher-Yates over the pool (which it permutes). */
static void pick_random(int64_t *pool, int64_t m, int64_t c, rng_t *rng, uint8_t *calib)
{
    for (int64_t i = 0; i < c; i++) {
        int64_t j = i + (int64_t)rng_below(rng, (uint64_t)(m - i));
        int64_t tmp = pool[i];
        pool[i] = pool[j];
        pool[j] = tmp;
        calib[pool[i]] = 1;
    }
}

/* Per label, its share of c by largest remainder (the quotas add up to c
 * exactly; ties go to the lower label), then random within the label. */
static int pick_stratified(const trace_t *t, int64_t c, rng_t *rng, uint8_t *calib,
                           int64_t *pool)
{
    int M = t->n_labels;
    int64_t *cnt = calloc((size_t)M, sizeof *cnt), *quota = calloc((size_t)M, sizeof *quota);
    double *rem = calloc((size_t)M, sizeof *rem);
    if (!cnt || !quota || !rem) {
        free(cnt), free(quota), free(rem);
        return -1;
    }
    for (int64_t r = 0; r < t->n; r++)
        cnt[t->label[r]]++;
    int64_t given = 0;
    for (int l = 0; l < M; l++) {
        double exact = (double)c * (double)cnt[l] / (double)t->n;
        quota[l] = (int64_t)floor(exact);
        rem[l] = exact - (double)quota[l];
        given += quota[l];
    }
    while (given < c) {
        int best = -1;
        for (int l = 0; l < M; l++)
            if (quota[l] < cnt[l] && (best < 0 || rem[l] > rem[best]))
                best = l;
        if (best < 0)
            break;
        quota[best]++;
        rem[best] = -1;
        given++;
    }
    for (int l = 0; l < M; l++) {
        int64_t m = 0;
        for (int64_t r = 0; r < t->n; r++)
            if (t->label[r] == l)
                pool[m++] = r;
        pick_random(pool, m, quota[l], rng, calib);
    }
    free(cnt), free(quota), free(rem);
    return 0;
}

int split_make(const trace_t *t, const split_spec *s, split_rows *out, char *err,
               size_t errlen)
{
    memset(out, 0, sizeof *out);
    int64_t c = split_calib_count(t->n, s->size, err, errlen);
    if (c < 0)
        return -1;
    /* a count the user gave is meant: calibrating on fewer rows than asked
     * without a word would change the model under them */
    if (s->size_given && s->size >= 1) {
        c = (int64_t)floor(s->size);
        if (c >= t->n)
            return eldr_errf(err, errlen, "%lld calibration rows of %lld leave none to "
                             "evaluate (give a count below %lld, or a fraction)",
                             (long long)c, (long long)t->n, (long long)t->n);
    }
    return split_make_count(t, s->mode, s->seed, c, out, err, errlen);
}

int split_make_count(const trace_t *t, split_mode mode, uint64_t seed, int64_t c,
                     split_rows *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    int64_t n = t->n;
    if (c < 0 || c > n)
        return eldr_errf(err, errlen, "split: %lld calibration rows of %lld", (long long)c,
                         (long long)n);
    out->mode = mode;
    out->seed = seed;
    if (mode == SPLIT_STRATIFIED && (!t->label || t->n_labels < 1))
        out->mode = SPLIT_RANDOM;
    uint8_t *calib = calloc((size_t)n + 1, 1);
    int64_t *pool = malloc(((size_t)n + 1) * sizeof *pool);
    out->calib = malloc(((size_t)c + 1) * sizeof *out->calib);
    out->eval = malloc(((size_t)(n - c) + 1) * sizeof *out->eval);
    int rc = (calib && pool && out->calib && out->eval) ? 0 : -1;
    rng_t rng;
    rng_seed(&rng, seed);
    if (rc == 0 && out->mode == SPLIT_HEAD) {
        memset(calib, 1, (size_t)c);
    } else if (rc == 0 && out->mode == SPLIT_RANDOM) {
        for (int64_t i = 0; i < n; i++)
            pool[i] = i;
        pick_random(pool, n, c, &rng, calib);
    } else if (rc == 0) {
        rc = pick_stratified(t, c, &rng, calib, pool);
    }
    for (int64_t r = 0; rc == 0 && r < n; r++) {
        if (calib[r])
            out->calib[out->n_calib++] = r;
        else
            out->eval[out->n_eval++] = r;
    }
    free(calib);
    free(pool);
    if (rc < 0) {
        split_rows_free(out);
        return eldr_errf(err, errlen, "split: out of memory");
    }
    return 0;
}

void split_rows_free(split_rows *r)
{
    free(r->calib);
    free(r->eval);
    r->calib = r->eval = NULL;
    r->n_calib = r->n_eval = 0;
}

int split_apply(const trace_t *t, const split_rows *r, trace_t **calib, trace_t **eval,
                char *err, size_t errlen)
{
    *calib = *eval = NULL;
    if (r->n_calib > 0 && !(*calib = trace_select(t, r->calib, r->n_calib, err, errlen)))
        return -1;
    if (!(*eval = trace_select(t, r->eval, r->n_eval, err, errlen))) {
        trace_free(*calib);
        *calib = NULL;
        return -1;
    }
    return 0;
}

void split_provenance(const split_rows *r, char *buf, size_t n)
{
    if (r->n_eval == 0)
        snprintf(buf, n, "all");
    else if (r->mode == SPLIT_HEAD)
        snprintf(buf, n, "head %lld", (long long)r->n_calib);
    else
        snprintf(buf, n, "%s %lld seed %llu", split_mode_name(r->mode), (long long)r->n_calib,
                 (unsigned long long)r->seed);
}

int split_provenance_parse(const char *text, split_mode *mode, int64_t *n_calib,
                           uint64_t *seed)
{
    char name[16];
    long long count;
    unsigned long long sd = 0;
    int used = 0;
    if (!text)
        return -1;
    if (!strcmp(text, "all"))
        return 1;
    if (sscanf(text, "%15s %lld%n", name, &count, &used) != 2 || count < 0)
        return -1;
    int m = split_mode_parse(name);
    if (m < 0)
        return -1;
    text += used;
    if (m != SPLIT_HEAD) {
        used = 0;
        if (sscanf(text, " seed %llu%n", &sd, &used) != 1)
            return -1;
        text += used;
    }
    if (*text)
        return -1;
    *mode = (split_mode)m;
    *n_calib = count;
    *seed = sd;
    return 0;
}

void split_describe(const split_rows *r, char *buf, size_t n)
{
    if (r->n_calib == 0) {
        snprintf(buf, n, "no split: %lld rows evaluated in-sample", (long long)r->n_eval);
        return;
    }
    char how[48];
    if (r->mode == SPLIT_HEAD)
        snprintf(how, sizeof how, "head split");
    else
        snprintf(how, sizeof how, "%s split (seed %llu)", split_mode_name(r->mode),
                 (unsigned long long)r->seed);
    snprintf(buf, n, "%s: %lld calibration, %lld evaluation rows", how,
             (long long)r->n_calib, (long long)r->n_eval);
}
