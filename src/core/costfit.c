/* costfit.c - least-squares fit of the step-latency model to a measured
 * profile (costfit.h): CSV reading, the design matrix, LAPACKE_dgels,
 * rank checks and the small exact non-negative refit. */
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costfit.h"
#include "err.h"

#define MAX_LAYERS 4096
#define RANK_TOL 1e-9    /* |R_ii| below this (unit-norm columns) = dependent */

static const char *const coef_names[COSTFIT_NCOEF] = {"t0", "a", "b", "c", "d"};

const char *costfit_coef_name(int i)
{
    return i >= 0 && i < COSTFIT_NCOEF ? coef_names[i] : "?";
}

double costfit_coef(const cost_model *m, int i)
{
    switch (i) {
    case COSTFIT_T0: return m->t0;
    case COSTFIT_A: return m->a;
    case COSTFIT_B: return m->b;
    case COSTFIT_C: return m->c;
    default: return m->d;
    }
}

/* ---- CSV ---- */

/* Column roles of the header. */
enum { COL_BATCH, COL_STEP_MS, COL_STEP_S, COL_KV, COL_USUM, COL_LAYERS, COL_U };

typedef struct header {
    int ncols;
    int *role;            /* [ncols] */
    int *ulayer;          /* [ncols] layer of a U<l> column, else -1 */
    int n_u;              /* U<l> columns */
    int seen[COL_U];      /* column index + 1 of each named role */
    char **names;         /* [ncols] owned copies, for messages */
} header;

static void trim(char **s)
{
    char *p = *s;
    while (*p == ' ' || *p == '\t')
        p++;
    char *e = p + strlen(p);
    while (e > p && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n'))
        *--e = '\0';
    *s = p;
}

/* Fields of a line: the comma count plus one. */
static int count_fields(const char *line)
{
    int n = 1;
    for (; *line; line++)
        n += *line == ',';
    return n;
}

/* Split line in place at commas into at most max trimmed fields; returns
 * the field count (which may exceed max: the caller reports it). */
static int split(char *line, char **fields, int max)
{
    int n = count_fields(line);
    char *p = line;
    for (int i = 0; i < n && i < max; i++) {
        char *c = strchr(p, ',');
        if (c)
            *c = '\0';
        fields[i] = p;
        trim(&fields[i]);
        p = c ? c + 1 : p + strlen(p);
    }
    return n;
}

static int parse_u_name(const char *s)
{
    if (s[0] != 'U' || s[1] < '0' || s[1] > '9')
        return -1;
    char *end;
    long l = strtol(s + 1, &end, 10);
    return *end || l >= MAX_LAYERS ? -1 : (int)l;
}

static int name_role(const char *s, int *layer)
{
    static const char *const names[] = {"batch", "step_ms", "step_s", "kv_tokens", "U_sum",
                                        "layers"};
    *layer = -1;
    for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
        if (!strcmp(s, names[i]))
            return i;
    *layer = parse_u_name(s);
    return *layer >= 0 ? COL_U : -1;
}

static int read_header(const char *path, char **f, int nf, header *h, char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    h->ncols = nf;
    h->role = calloc((size_t)nf, sizeof *h->role);
    h->ulayer = calloc((size_t)nf, sizeof *h->ulayer);
    h->names = calloc((size_t)nf, sizeof *h->names);
    unsigned char *useen = calloc(MAX_LAYERS, 1);
    int rc = (!h->role || !h->ulayer || !h->names || !useen) ? eldr_errf(err, errlen, "%s: out of memory", path) : 0;
    for (int i = 0; rc == 0 && i < nf; i++) {
        int l, role = name_role(f[i], &l);
        if (!(h->names[i] = strdup(f[i]))) {
            rc = eldr_errf(err, errlen, "%s: out of memory", path);
            break;
        }
        h->role[i] = role;
        h->ulayer[i] = l;
        if (role < 0)
            rc = eldr_errf(err, errlen, "%s: line 1: unknown column \"%s\" (known: batch, "
                           "step_ms, step_s, kv_tokens, U0..U{L-1}, U_sum, layers)", path, f[i]);
        else if (role == COL_U && useen[l]++)
            rc = eldr_errf(err, errlen, "%s: line 1: column \"%s\" appears twice", path, f[i]);
        else if (role == COL_U)
            h->n_u++;
        else if (h->seen[role])
            rc = eldr_errf(err, errlen, "%s: line 1: column \"%s\" appears twice", path, f[i]);
        else
            h->seen[role] = i + 1;
    }
    for (int l = 0; rc == 0 && l < h->n_u; l++)
        if (!useen[l])
            rc = eldr_errf(err, errlen, "%s: line 1: %d U<l> columns but U%d is missing "
                           "(need U0..U%d)", path, h->n_u, l, h->n_u - 1);
    free(useen);
    if (rc == 0 && !h->seen[COL_BATCH])
        rc = eldr_errf(err, errlen, "%s: line 1: missing column \"batch\"", path);
    if (rc == 0 && !h->seen[COL_STEP_MS] == !h->seen[COL_STEP_S])
        rc = eldr_errf(err, errlen, "%s: line 1: need exactly one of \"step_ms\", \"step_s\"", path);
    if (rc == 0 && h->n_u && (h->seen[COL_USUM] || h->seen[COL_LAYERS]))
        rc = eldr_errf(err, errlen, "%s: line 1: give either U0..U{L-1} or U_sum with "
                       "layers, not both", path);
    if (rc == 0 && !h->n_u && !(h->seen[COL_USUM] && h->seen[COL_LAYERS]))
        rc = eldr_errf(err, errlen, "%s: line 1: missing expert columns: U0..U{L-1}, or "
                       "U_sum with layers", path);
    return rc;
}

static void header_free(header *h)
{
    for (int i = 0; h->names && i < h->ncols; i++)
        free(h->names[i]);
    free(h->names);
    free(h->role);
    free(h->ulayer);
}

static int parse_value(const char *path, int64_t line, const char *col, const char *s,
                       double *out, char *err, size_t errlen)
{
    char *end;
    double v = strtod(s, &end);
    if (!*s || *end)
        return eldr_errf(err, errlen, "%s: line %lld: column \"%s\": \"%s\" is not a number",
                         path, (long long)line, col, s);
    if (!isfinite(v) || v < 0)
        return eldr_errf(err, errlen, "%s: line %lld: column \"%s\": %s must be finite "
                         "and >= 0", path, (long long)line, col, s);
    *out = v;
    return 0;
}

static int grow(costfit_profile *p, int64_t *cap)
{
    if (p->n < *cap)
        return 0;
    int64_t nc = *cap ? *cap * 2 : 256;
    double **arrs[] = {&p->batch, &p->kv, &p->u_sum, &p->layers, &p->step_s};
    for (size_t i = 0; i < sizeof arrs / sizeof arrs[0]; i++) {
        double *q = realloc(*arrs[i], (size_t)nc * sizeof **arrs[i]);
        if (!q)
            return -1;
        *arrs[i] = q;
    }
    int64_t *q = realloc(p->line, (size_t)nc * sizeof *q);
    if (!q)
        return -1;
    p->line = q;
    *cap = nc;
    return 0;
}

/* One data row into p->...[p->n]. */
static int read_row(const char *path, int64_t line, char **f, const header *h,
                    costfit_profile *p, char *err, size_t errlen)
{
    int64_t r = p->n;
    double usum = 0, v = 0;
    p->kv[r] = 0;
    p->layers[r] = h->n_u;
    for (int i = 0; i < h->ncols; i++) {
        if (parse_value(path, line, h->names[i], f[i], &v, err, errlen) < 0)
            return -1;
        switch (h->role[i]) {
        case COL_BATCH: p->batch[r] = v; break;
        case COL_STEP_MS: p->step_s[r] = v * 1e-3; break;
        case COL_STEP_S: p->step_s[r] = v; break;
        case COL_KV: p->kv[r] = v; break;
        case COL_USUM: usum = v; break;
        case COL_LAYERS: p->layers[r] = v; break;
        default: usum += v; break;
        }
    }
    p->u_sum[r] = usum;
    p->line[r] = line;
    double L = p->layers[r];
    if (L < 1 || L > MAX_LAYERS || L != floor(L))
        return eldr_errf(err, errlen, "%s: line %lld: column \"layers\": %g is not a layer "
                         "count in 1..%d", path, (long long)line, L, MAX_LAYERS);
    if (p->step_s[r] <= 0)
        return eldr_errf(err, errlen, "%s: line %lld: the step time must be > 0", path,
                         (long long)line);
    p->n++;
    return 0;
}

static int read_rows(FILE *fp, const char *path, costfit_profile *p, char *err, size_t errlen)
{
    char *buf = NULL, **f = NULL;
    size_t cap = 0;
    int64_t line = 0, rows_cap = 0;
    header h = {0};
    int have_header = 0, rc = 0;
    while (rc == 0 && getline(&buf, &cap, fp) >= 0) {
        line++;
        char *s = buf;
        trim(&s);
        if (!*s || *s == '#')
            continue;   /* blank lines and # comments (provenance notes) */
        if (!have_header) {
            int nf = count_fields(s);
            f = calloc((size_t)nf, sizeof *f);
            if (!f) {
                rc = eldr_errf(err, errlen, "%s: out of memory", path);
                break;
            }
            split(s, f, nf);
            rc = read_header(path, f, nf, &h, err, errlen);
            have_header = 1;
            continue;
        }
        int nf = split(s, f, h.ncols);
        if (nf != h.ncols)
            rc = eldr_errf(err, errlen, "%s: line %lld: %d fields, the header has %d", path,
                           (long long)line, nf, h.ncols);
        else if (grow(p, &rows_cap) < 0)
            rc = eldr_errf(err, errlen, "%s: out of memory at line %lld", path, (long long)line);
        else
            rc = read_row(path, line, f, &h, p, err, errlen);
    }
    if (rc == 0 && !have_header)
        rc = eldr_errf(err, errlen, "%s: empty file (no header row)", path);
    if (rc == 0 && p->n == 0)
        rc = eldr_errf(err, errlen, "%s: no data rows after the header", path);
    p->has_kv = have_header && h.seen[COL_KV];
    free(buf);
    free(f);
    header_free(&h);
    return rc;
}

int costfit_read_csv(const char *path, costfit_profile *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return eldr_errf(err, errlen, "%s: cannot open: %m", path);
    int rc = read_rows(fp, path, p, err, errlen);
    fclose(fp);
    if (rc < 0) {
        costfit_profile_free(p);
        return -1;
    }
    if (!p->has_kv) {
        free(p->kv);
        p->kv = NULL;
    }
    for (int64_t r = 0; r < p->n; r++) {
        if (p->layers[r] != p->layers[0])
            p->layers_vary = 1;
        if (p->layers[r] > p->L)
            p->L = (int)p->layers[r];
    }
    return 0;
}

void costfit_profile_free(costfit_profile *p)
{
    free(p->batch);
    free(p->kv);
    free(p->u_sum);
    free(p->layers);
    free(p->step_s);
    free(p->line);
    memset(p, 0, sizeof *p);
}

/* ---- the fit ---- */

/* The regressor of coefficient j in row r. */
static double regressor(const costfit_profile *p, int j, int64_t r)
{
    switch (j) {
    case COSTFIT_T0: return 1.0;
    case COSTFIT_A: return p->layers[r];
    case COSTFIT_B: return p->u_sum[r];
    case COSTFIT_C: return p->batch[r];
    default: return p->kv[r];
    }
}

static const char *column_name(const costfit_profile *p, int j)
{
    static const char *const names[] = {"(intercept)", "layers", "U", "batch", "kv_tokens"};
    (void)p;
    return names[j];
}

/* Least squares on the columns cols[0..nc) with unit-norm scaling:
 * coef[cols[i]] gets the solution, *rss the residual sum of squares,
 * *bad the first column whose R diagonal vanished (or -1). */
static int solve(const costfit_profile *p, const int *cols, int nc, double *coef, double *rss,
                 int *bad)
{
    int64_t m = p->n;
    double *A = malloc((size_t)m * (size_t)nc * sizeof *A);
    double *y = malloc((size_t)m * sizeof *y);
    double scale[COSTFIT_NCOEF];
    if (!A || !y) {
        free(A);
        free(y);
        return -1;
    }
    *bad = -1;
    for (int i = 0; i < nc; i++) {
        double s = 0;
        for (int64_t r = 0; r < m; r++) {
            double x = regressor(p, cols[i], r);
            A[(size_t)i * (size_t)m + (size_t)r] = x;   /* column major */
            s += x * x;
        }
        scale[i] = s > 0 ? sqrt(s) : 1.0;
        if (s == 0 && *bad < 0)
            *bad = cols[i];
        for (int64_t r = 0; r < m; r++)
            A[(size_t)i * (size_t)m + (size_t)r] /= scale[i];
    }
    for (int64_t r = 0; r < m; r++)
        y[r] = p->step_s[r];
    lapack_int info = *bad >= 0 ? 1 : LAPACKE_dgels(LAPACK_COL_MAJOR, 'N', (lapack_int)m,
                                                    (lapack_int)nc, 1, A, (lapack_int)m, y,
                                                    (lapack_int)m);
    for (int i = 0; info >= 0 && *bad < 0 && i < nc; i++)
        if (info > 0 || fabs(A[(size_t)i * (size_t)m + (size_t)i]) < RANK_TOL)
            *bad = cols[info > 0 ? (int)info - 1 : i];
    if (info < 0) {
        free(A);
        free(y);
        return -1;
    }
    for (int i = 0; i < nc; i++)
        coef[cols[i]] = y[i] / scale[i];
    /* RSS recomputed from the coefficients, not from dgels's tail of y:
     * the same formula serves every subset and the final report. */
    double s = 0;
    for (int64_t r = 0; r < m; r++) {
        double pred = 0;
        for (int i = 0; i < nc; i++)
            pred += coef[cols[i]] * regressor(p, cols[i], r);
        s += (p->step_s[r] - pred) * (p->step_s[r] - pred);
    }
    *rss = s;
    free(A);
    free(y);
    return 0;
}

/* Why column j cannot be fitted, as one line. */
static int rank_error(const costfit_profile *p, int j, char *err, size_t errlen)
{
    int constant = 1;
    for (int64_t r = 1; r < p->n; r++)
        constant = constant && regressor(p, j, r) == regressor(p, j, 0);
    if (constant && j != COSTFIT_T0)
        return eldr_errf(err, errlen, "profile is rank-deficient: column \"%s\" is constant "
                         "(%g in all %lld rows), so %s cannot be told apart from the intercept; "
                         "profile several values", column_name(p, j), regressor(p, j, 0),
                         (long long)p->n, costfit_coef_name(j));
    return eldr_errf(err, errlen, "profile is rank-deficient: column \"%s\" is a linear "
                     "combination of the other columns, so %s is not identifiable; vary it "
                     "independently", column_name(p, j), costfit_coef_name(j));
}

/* Exact non-negative least squares for a handful of columns: the NNLS
 * optimum is the unconstrained solution on its own support, so the best
 * feasible subset solution is it. */
static int fit_nonneg(const costfit_profile *p, const int *cols, int nc, double *coef)
{
    double best = INFINITY, tmp[COSTFIT_NCOEF];
    for (unsigned mask = 0; mask < (1u << nc); mask++) {
        int sub[COSTFIT_NCOEF], ns = 0, bad, feasible = 1;
        double rss = 0;
        for (int i = 0; i < nc; i++)
            if (mask & (1u << i))
                sub[ns++] = cols[i];
        memset(tmp, 0, sizeof tmp);
        if (ns == 0) {
            for (int64_t r = 0; r < p->n; r++)
                rss += p->step_s[r] * p->step_s[r];
        } else if (solve(p, sub, ns, tmp, &rss, &bad) < 0) {
            return -1;
        }
        for (int i = 0; i < ns; i++)
            feasible = feasible && tmp[sub[i]] >= 0;
        if (feasible && rss < best) {
            best = rss;
            memcpy(coef, tmp, sizeof tmp);
        }
    }
    return 0;
}

static void fill_result(const costfit_profile *p, const double *coef, costfit_result *r)
{
    double mean = 0, tss = 0, rss = 0;
    for (int64_t i = 0; i < p->n; i++)
        mean += p->step_s[i] / (double)p->n;
    for (int64_t i = 0; i < p->n; i++) {
        double pred = 0;
        for (int j = 0; j < COSTFIT_NCOEF; j++)
            if (r->fitted[j])
                pred += coef[j] * regressor(p, j, i);
        r->pred[i] = pred;
        rss += (p->step_s[i] - pred) * (p->step_s[i] - pred);
        tss += (p->step_s[i] - mean) * (p->step_s[i] - mean);
    }
    r->r2 = tss > 0 ? 1 - rss / tss : (rss == 0 ? 1.0 : NAN);
    r->rmse = sqrt(rss / (double)p->n);
    r->m.t0 = coef[COSTFIT_T0];
    r->m.a = coef[COSTFIT_A];
    r->m.b = coef[COSTFIT_B];
    r->m.c = coef[COSTFIT_C];
    r->m.d = coef[COSTFIT_D];
    r->intercept = r->m.t0 + (double)p->L * r->m.a;
}

int costfit_fit(const costfit_profile *p, costfit_result *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    int cols[COSTFIT_NCOEF], nc = 0;
    r->fitted[COSTFIT_T0] = r->fitted[COSTFIT_B] = r->fitted[COSTFIT_C] = 1;
    r->fitted[COSTFIT_A] = p->layers_vary;
    r->fitted[COSTFIT_D] = p->has_kv;
    for (int j = 0; j < COSTFIT_NCOEF; j++)
        if (r->fitted[j])
            cols[nc++] = j;
    r->n_params = nc;
    if (p->n < nc)
        return eldr_errf(err, errlen, "profile is rank-deficient: %lld rows for %d unknowns "
                         "(need at least %d rows)", (long long)p->n, nc, nc);
    double coef[COSTFIT_NCOEF] = {0}, rss;
    int bad;
    if (solve(p, cols, nc, coef, &rss, &bad) < 0)
        return eldr_errf(err, errlen, "costfit: out of memory or bad LAPACK argument");
    if (bad >= 0)
        return rank_error(p, bad, err, errlen);
    int negative = 0;
    for (int i = 0; i < nc; i++)
        negative = negative || coef[cols[i]] < 0;
    if (negative) {
        double unc[COSTFIT_NCOEF];
        memcpy(unc, coef, sizeof unc);
        if (fit_nonneg(p, cols, nc, coef) < 0)
            return eldr_errf(err, errlen, "costfit: out of memory");
        for (int i = 0; i < nc; i++)
            r->clamped[cols[i]] = coef[cols[i]] == 0 && unc[cols[i]] != 0;
    }
    r->pred = malloc((size_t)p->n * sizeof *r->pred);
    if (!r->pred)
        return eldr_errf(err, errlen, "costfit: out of memory");
    fill_result(p, coef, r);
    return 0;
}

void costfit_result_free(costfit_result *r)
{
    free(r->pred);
    r->pred = NULL;
}

int costfit_worst(const costfit_profile *p, const costfit_result *r, int want, int64_t *out)
{
    int n = 0;
    for (int64_t i = 0; i < p->n; i++) {
        double e = fabs(p->step_s[i] - r->pred[i]);
        int pos = n < want ? n++ : want;
        /* insertion into the sorted top list */
        while (pos > 0 && fabs(p->step_s[out[pos - 1]] - r->pred[out[pos - 1]]) < e) {
            if (pos < want)
                out[pos] = out[pos - 1];
            pos--;
        }
        if (pos < want)
            out[pos] = i;
    }
    return n;
}
