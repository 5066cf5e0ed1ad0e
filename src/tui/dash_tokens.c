/* dash_tokens.c - the dashboard's token row readers (dash_tokens.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dash_tokens.h"
#include "err.h"
#include "trace_budget.h"

int dash_load_trace(const char *path, trace_t **t, int *reads, char *err, size_t errlen)
{
    trace_header_t h;
    *t = NULL;
    *reads = 0;
    if (trace_read_header(path, &h, err, errlen))
        return -1;
    if (!h.has_tokens_decode)
        return trace_load(path, t, err, errlen);
    /* the other tokens/ datasets (prefill rows, block hashes, decode
     * probabilities) the dashboard never reads */
    trace_load_opts lo = {.drop = TRACE_DROP_TOKENS};
    if (trace_load_some(path, &lo, t, err, errlen))
        return -1;
    *reads = 1;
    return 0;
}

double dash_row_bytes(const trace_header_t *h)
{
    return trace_row_bytes(h, h->has_tokens_decode ? TRACE_DROP_TOKENS : 0);
}

double dash_tokens_bytes(const trace_header_t *h)
{
    if (!h->has_tokens_decode)
        return 0;
    double rows = (double)h->t_decode * h->L * h->k * (h->E <= 256 ? 1 : 2);
    double cap = (double)DASH_TOKENS_CACHE;
    return DASH_TOKENS_MAX * (rows < cap ? rows : cap);
}

int dash_tokens_add(dash_t *d, const trace_t *t, const int64_t *file_rows, char *err,
                    size_t errlen)
{
    dash_tokens *k = &d->tok;
    if (!d->opts.read_tokens || dash_tokens_of(d, t))
        return 0;
    if (k->n >= DASH_TOKENS_MAX)
        return eldr_errf(err, errlen, "dash: more than %d token row readers", DASH_TOKENS_MAX);
    if (trace_tokens_open_cache(d->opts.trace_path, t, file_rows, DASH_TOKENS_CACHE,
                                &k->r[k->n], err, errlen))
        return -1;
    k->t[k->n++] = t;
    return 0;
}

trace_tokens *dash_tokens_of(const dash_t *d, const trace_t *t)
{
    for (int i = 0; t && i < d->tok.n; i++)
        if (d->tok.t[i] == t)
            return d->tok.r[i];
    return NULL;
}

int64_t dash_tokens_eval_file_row(const dash_t *d, int64_t i)
{
    if (d->eval_rows)            /* eval is an index of all, the whole file */
        return d->eval_rows[i];
    return d->tok.eval_file ? d->tok.eval_file[i] : i;
}

void dash_tokens_name_err(const dash_t *d, char *err, size_t errlen)
{
    static const char ds[] = "tokens/decode_experts";
    if (!d->opts.read_tokens || !d->opts.trace_path || strncmp(err, ds, sizeof ds - 1))
        return;
    char was[ELDR_ERRLEN];
    snprintf(was, sizeof was, "%s", err);
    snprintf(err, errlen, "%s: %s", d->opts.trace_path, was);
}

void dash_tokens_free(dash_tokens *k)
{
    for (int i = 0; i < k->n; i++)
        trace_tokens_close(k->r[i]);
    free(k->eval_file);
    memset(k, 0, sizeof *k);
}
