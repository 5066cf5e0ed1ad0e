/* capture_dense.c - the dense layers of a capture (capture_dense.h). */
#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture_dense.h"
#include "err.h"
#include "h5util.h"
#include "routed.h"

void capture_dense_free(capture_dense *d)
{
    free(d->layers);
    free(d->is_dense);
    memset(d, 0, sizeof *d);
}

/* A layer is dense when it is in every answer (routed_dense_layers: all 0
 * there, k >= 2); dense in some answers only, it is neither: refused,
 * naming the first answer where it is 0 throughout. */
int capture_dense_find(const capture_job *jobs, const capture_prompts *ps, int L, int k,
                       capture_dense *d, char *err, size_t errlen)
{
    (void)k;
    memset(d, 0, sizeof *d);
    d->L = L;
    size_t n = (size_t)(L > 0 ? L : 1);
    uint8_t *one = malloc(n);
    int *hits = calloc(n, sizeof *hits), *first = malloc(n * sizeof *first);
    d->is_dense = calloc(n, 1);
    int answers = 0, rc = 0;
    if (!one || !hits || !first || !d->is_dense)
        rc = eldr_errf(err, errlen, "out of memory");
    for (int64_t i = 0; rc == 0 && i < ps->n; i++) {
        if (jobs[i].state != JOB_OK)
            continue;
        answers++;
        routed_dense_layers(&jobs[i].routes, one);
        for (int l = 0; l < L; l++)
            if (one[l] && !hits[l]++)
                first[l] = (int)i;
    }
    for (int l = 0; rc == 0 && l < L; l++) {
        if (hits[l] && hits[l] < answers)
            rc = eldr_errf(err, errlen,
                           "layer %d is 0 for every token of request '%s' (line %d) but routes "
                           "the tokens of %d other answers: neither a dense layer nor routing",
                           l, ps->p[first[l]].id, ps->p[first[l]].line, answers - hits[l]);
        d->is_dense[l] = hits[l] && hits[l] == answers;
        d->n += d->is_dense[l];
    }
    if (rc == 0 && L > 0 && d->n == L)
        rc = eldr_errf(err, errlen, "every id of all %d layers is 0 in every answer: the "
                       "engine returned no routing (is the model a mixture of experts?)", L);
    if (rc == 0 && d->n && !(d->layers = malloc((size_t)d->n * sizeof *d->layers)))
        rc = eldr_errf(err, errlen, "out of memory");
    for (int l = 0, j = 0; rc == 0 && l < L; l++)
        if (d->is_dense[l])
            d->layers[j++] = l;
    free(one);
    free(hits);
    free(first);
    if (rc < 0)
        capture_dense_free(d);
    return rc;
}

void capture_dense_list(const capture_dense *d, char *buf, size_t len)
{
    size_t at = 0;
    if (len)
        buf[0] = '\0';
    for (int j = 0; j < d->n && len; j++) {
        int w = snprintf(buf + at, len - at, "%s%d", j ? "," : "", d->layers[j]);
        if (w < 0 || (size_t)w >= len - at) {
            snprintf(buf + (len > 4 ? len - 4 : 0), len > 4 ? 4 : len, "...");
            return;
        }
        at += (size_t)w;
    }
}

int capture_dense_mark(const char *path, const capture_dense *d, char *err, size_t errlen)
{
    char list[4096 * 6];
    capture_dense_list(d, list, sizeof list);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        return eldr_errf(err, errlen, "%s: cannot reopen the trace to name its dense layers",
                         path);
    int rc = h5u_write_int_attr(f, CAPTURE_ATTR_ENGINE_LAYERS, d->L, path, err, errlen) ||
                     h5u_write_str_attr(f, CAPTURE_ATTR_DENSE_LAYERS, list, path, err, errlen)
                 ? -1
                 : 0;
    if (H5Fclose(f) < 0 && rc == 0)
        rc = eldr_errf(err, errlen, "%s: closing the trace failed", path);
    return rc;
}

int capture_dense_save(const trace_t *t, const char *path, const capture_dense *d, char *err,
                       size_t errlen)
{
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.capture-%ld.tmp", path, (long)getpid()) >=
        sizeof tmp)
        return eldr_errf(err, errlen, "%s: path too long", path);
    if (trace_save(t, tmp, err, errlen) < 0 || capture_dense_mark(tmp, d, err, errlen) < 0) {
        unlink(tmp);
        return -1;
    }
    if (rename(tmp, path) < 0) {
        int e = errno;
        unlink(tmp);
        return eldr_errf(err, errlen, "%s: cannot rename the written trace into place: %s",
                         path, strerror(e));
    }
    return 0;
}
