/* trace_tokens.c - decode token rows read from the file as they are
 * needed (trace_tokens.h). */
#include "trace_tokens.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "h5util.h"

#define DS_EXPERTS "tokens/decode_experts"
#define DS_OFFSETS "tokens/decode_offsets"

struct trace_tokens {
    hid_t f, d;
    int L, E, k;
    int64_t n;                 /* trace rows served */
    int64_t *first;            /* [n] file token row of each row's first */
    int32_t *count;            /* [n] its token rows */
    int64_t *file_row;         /* [n] its request row in the file (messages) */
    hsize_t dims[3];           /* T x L x k */
    size_t stored;             /* bytes an id in the file */
    size_t cache;              /* bytes of chunk cache */
};

int64_t trace_tokens_n(const trace_tokens *tt)
{
    return tt->n;
}

int32_t trace_tokens_count(const trace_tokens *tt, int64_t i)
{
    return tt->count[i];
}

int trace_tokens_file_bytes(const trace_tokens *tt)
{
    return (int)tt->stored;
}

size_t trace_tokens_cache_bytes(const trace_tokens *tt)
{
    return tt->cache;
}

void trace_tokens_close(trace_tokens *tt)
{
    if (!tt)
        return;
    h5u_lock();
    if (tt->d >= 0)
        H5Dclose(tt->d);
    if (tt->f >= 0)
        H5Fclose(tt->f);
    h5u_unlock();
    free(tt->first);
    free(tt->count);
    free(tt->file_row);
    free(tt);
}

/* The file's offsets, checked as the loader checks them (they decide
 * which rows are read), then each listed row's first row and count,
 * which must be its decode_tokens. */
static int read_offsets(trace_tokens *tt, const trace_t *t, const trace_header_t *h,
                        const int64_t *rows, const char *path, char *err, size_t errlen)
{
    hsize_t d[1] = {(hsize_t)h->n + 1};
    int64_t *off = malloc(((size_t)h->n + 1) * sizeof *off);
    if (!off)
        return eldr_errf(err, errlen, "%s: out of memory for %s", path, DS_OFFSETS);
    int rc = h5u_read(tt->f, DS_OFFSETS, H5T_NATIVE_INT64, 1, d, off, path, err, errlen);
    for (int64_t r = 0; !rc && r <= h->n; r++)
        if (off[r] < 0 || off[r] > h->t_decode || (r ? off[r] < off[r - 1] : off[r] != 0) ||
            (r == h->n && off[r] != h->t_decode))
            rc = eldr_errf(err, errlen, "%s: %s row %lld: %lld is not in [previous offset, "
                           "%lld data rows]%s", path, DS_OFFSETS, (long long)r,
                           (long long)off[r], (long long)h->t_decode,
                           r == h->n ? " or is not the last data row" : "");
    for (int64_t i = 0; !rc && i < t->n; i++) {
        int64_t r = rows ? rows[i] : i;
        if (r < 0 || r >= h->n) {
            rc = eldr_errf(err, errlen, "%s: row %lld of the trace is file row %lld, outside "
                           "[0, %lld)", path, (long long)i, (long long)r, (long long)h->n);
            break;
        }
        int64_t len = off[r + 1] - off[r];
        if (len != t->decode_tokens[i])
            rc = eldr_errf(err, errlen, "%s: %s row %lld: %lld token rows, expected "
                           "decode_tokens = %d", path, DS_OFFSETS, (long long)r,
                           (long long)len, t->decode_tokens[i]);
        tt->first[i] = off[r];
        tt->count[i] = (int32_t)len;
        tt->file_row[i] = r;
    }
    free(off);
    return rc;
}

/* The dataset of file f with its chunk cache, shape checked: a few
 * chunks (cache_max 0), or as many as cache_max bytes hold. */
static hid_t open_rows(hid_t f, const hsize_t *dims, size_t cache_max, size_t *cache,
                       size_t *stored, const char *path, char *err, size_t errlen)
{
    /* no more than the rows themselves take, 2 B an id and a few chunks'
     * slack for a last chunk past them (the cache is a bound; HDF5 fills
     * it with the chunks read) */
    double all = ((double)dims[0] + 4096) * (double)dims[1] * (double)dims[2] * 2;
    if (cache_max && (double)cache_max > all)
        cache_max = (size_t)all;
    return h5u_open_rows(f, DS_EXPERTS, H5T_NATIVE_UINT16, 3, dims,
                         cache_max ? INT_MAX : TRACE_TOKENS_CACHE_CHUNKS,
                         cache_max ? cache_max : TRACE_TOKENS_CACHE_MAX, cache, stored, path,
                         err, errlen);
}

int trace_tokens_open(const char *path, const trace_t *t, const int64_t *rows,
                      trace_tokens **out, char *err, size_t errlen)
{
    return trace_tokens_open_cache(path, t, rows, 0, out, err, errlen);
}

int trace_tokens_open_cache(const char *path, const trace_t *t, const int64_t *rows,
                            size_t cache_max, trace_tokens **out, char *err, size_t errlen)
{
    *out = NULL;
    trace_header_t h;
    if (trace_read_header(path, &h, err, errlen))
        return -1;
    if (!h.has_tokens_decode)
        return eldr_errf(err, errlen, "%s: no dataset %s to read token rows from", path,
                         DS_EXPERTS);
    if (h.L != t->L || h.E != t->E || h.k != t->k)
        return eldr_errf(err, errlen, "%s: %d layers x %d experts top-%d, the trace in memory "
                         "%d x %d top-%d", path, h.L, h.E, h.k, t->L, t->E, t->k);
    if (!t->decode_counts || !t->decode_tokens)
        return eldr_errf(err, errlen, "%s: %s without decode_counts", path, DS_EXPERTS);
    trace_tokens *tt = calloc(1, sizeof *tt);
    if (!tt)
        return eldr_errf(err, errlen, "%s: out of memory", path);
    tt->f = tt->d = -1;
    tt->L = t->L, tt->E = t->E, tt->k = t->k, tt->n = t->n;
    tt->dims[0] = (hsize_t)h.t_decode, tt->dims[1] = (hsize_t)t->L, tt->dims[2] = (hsize_t)t->k;
    tt->first = malloc(((size_t)t->n + 1) * sizeof *tt->first);
    tt->count = malloc(((size_t)t->n + 1) * sizeof *tt->count);
    tt->file_row = malloc(((size_t)t->n + 1) * sizeof *tt->file_row);
    int rc = -1;
    if (!tt->first || !tt->count || !tt->file_row) {
        eldr_errf(err, errlen, "%s: out of memory for %lld rows' token offsets", path,
                  (long long)t->n);
        goto done;
    }
    h5u_lock();
    tt->f = h5u_open_read(path, err, errlen);
    if (tt->f >= 0 && !read_offsets(tt, t, &h, rows, path, err, errlen))
        tt->d = open_rows(tt->f, tt->dims, cache_max, &tt->cache, &tt->stored, path, err,
                          errlen);
    h5u_unlock();
    if (tt->d >= 0 && tt->stored != 1 && tt->stored != 2)
        eldr_errf(err, errlen, "%s: %s stores %zu-byte ids, expected 1 or 2", path, DS_EXPERTS,
                  tt->stored);
    else if (tt->d >= 0)
        rc = 0;
done:
    if (rc) {
        trace_tokens_close(tt);
        return -1;
    }
    *out = tt;
    return 0;
}

int trace_tokens_cache_plan(const char *path, size_t *bytes, char *err, size_t errlen)
{
    trace_header_t h;
    *bytes = 0;
    if (trace_read_header(path, &h, err, errlen))
        return -1;
    if (!h.has_tokens_decode)
        return 0;
    hsize_t dims[3] = {(hsize_t)h.t_decode, (hsize_t)h.L, (hsize_t)h.k};
    size_t stored;
    h5u_lock();
    hid_t f = h5u_open_read(path, err, errlen), d = -1;
    if (f >= 0 && (d = open_rows(f, dims, 0, bytes, &stored, path, err, errlen)) >= 0)
        H5Dclose(d);
    if (f >= 0)
        H5Fclose(f);
    h5u_unlock();
    return d >= 0 ? 0 : -1;
}

/* trace_tokens_read_range, its failure naming request row `req` when
 * req >= 0. */
static int read_range(trace_tokens *tt, int64_t a, int64_t b, void *out, int id_bytes,
                      int64_t req, char *err, size_t errlen)
{
    if (a < 0 || b < a || (hsize_t)b > tt->dims[0])
        return eldr_errf(err, errlen, "%s: token rows [%lld, %lld) outside [0, %llu)",
                         DS_EXPERTS, (long long)a, (long long)b,
                         (unsigned long long)tt->dims[0]);
    if (id_bytes != 1 && id_bytes != 2)
        return eldr_errf(err, errlen, "%s: ids of %d bytes asked, 1 or 2 expected", DS_EXPERTS,
                         id_bytes);
    size_t ids = (size_t)(b - a) * (size_t)tt->L * (size_t)tt->k;
    /* as stored, straight into out; a byte file into 2-byte ids lands in
     * out's upper half and widens forwards (element i is written over
     * bytes already read); 2-byte ids into bytes go through a copy */
    void *at = out, *tmp = NULL;
    if (tt->stored == 1 && id_bytes == 2)
        at = (char *)out + ids;
    else if (tt->stored == 2 && id_bytes == 1 && !(at = tmp = malloc(ids * 2 + 1)))
        return eldr_errf(err, errlen, "%s: out of memory for %zu ids", DS_EXPERTS, ids);
    h5u_lock();
    h5u_silence();   /* a thread-safe libhdf5 keeps a stack a thread */
    int rc = h5u_read_open(tt->d, tt->stored == 1 ? H5T_NATIVE_UINT8 : H5T_NATIVE_UINT16, 3,
                           tt->dims, (hsize_t)a, (hsize_t)b, at);
    h5u_unlock();
    if (rc == 0 && tt->stored == 1 && id_bytes == 2)
        for (size_t i = 0; i < ids; i++)
            ((uint16_t *)out)[i] = ((const uint8_t *)at)[i];
    else if (rc == 0 && tmp)
        for (size_t i = 0; i < ids; i++)
            ((uint8_t *)out)[i] = (uint8_t)((const uint16_t *)tmp)[i];
    free(tmp);
    char of[48] = "";
    if (req >= 0)
        snprintf(of, sizeof of, " of request row %lld", (long long)req);
    if (rc)
        return eldr_errf(err, errlen, "%s: token rows [%lld, %lld)%s could not be read (was the "
                         "file truncated or rewritten while it was read?)", DS_EXPERTS,
                         (long long)a, (long long)b, of);
    return 0;
}

int trace_tokens_read_range(trace_tokens *tt, int64_t a, int64_t b, void *out, int id_bytes,
                            char *err, size_t errlen)
{
    return read_range(tt, a, b, out, id_bytes, -1, err, errlen);
}

/* The ids' tally into acc [L][E], branch-free: non-zero when an id is
 * out of range or repeats within its token and layer (then acc is not
 * to be trusted). seen [L][E] holds the token (+1) that last took each
 * expert, so a repeat costs one look-up, not a pass over the k ids.
 * Inlined with a constant width, so each id is one load. */
static inline __attribute__((always_inline)) unsigned tally(const void *ids, int bytes,
                                                            int64_t m, int L, int E, int K,
                                                            uint32_t *acc, uint32_t *seen)
{
    const uint8_t *u8 = ids;
    const uint16_t *u16 = ids;
    unsigned bad = 0;
    size_t at = 0;
    for (int64_t tok = 0; tok < m; tok++) {
        uint32_t mark = (uint32_t)tok + 1;
        for (int l = 0; l < L; l++, at += (size_t)K) {
            uint32_t *al = acc + (size_t)l * (size_t)E, *sl = seen + (size_t)l * (size_t)E;
            for (int j = 0; j < K; j++) {
                unsigned e = bytes == 1 ? u8[at + (size_t)j] : u16[at + (size_t)j];
                bad |= e >= (unsigned)E;
                e = e < (unsigned)E ? e : 0;
                bad |= sl[e] == mark;
                sl[e] = mark;
                al[e]++;
            }
        }
    }
    return bad;
}

/* m token rows of request row i (ids of `bytes`), first file token row
 * a: ids < E, k distinct per token and layer, and their sum is counts.
 * The tally first; only a fault walks the rows again to name itself. */
static int check_rows(const trace_tokens *tt, int64_t i, const void *ids, int bytes, int64_t a,
                      int64_t m, const uint16_t *counts, char *err, size_t errlen)
{
    const int L = tt->L, E = tt->E, K = tt->k;
    size_t cells = (size_t)L * (size_t)E;
    uint32_t *acc = calloc(2 * cells, sizeof *acc);
    if (!acc)
        return eldr_errf(err, errlen, "%s: out of memory checking request row %lld", DS_EXPERTS,
                         (long long)tt->file_row[i]);
    uint32_t *seen = acc + cells;
    unsigned bad = bytes == 1 ? tally(ids, 1, m, L, E, K, acc, seen)
                              : tally(ids, 2, m, L, E, K, acc, seen);
    for (size_t c = 0; c < cells && !bad; c++)
        bad |= acc[c] != counts[c];
    if (!bad) {
        free(acc);
        return 0;
    }
    memset(acc, 0, cells * sizeof *acc);
    const uint8_t *u8 = ids;
    const uint16_t *u16 = ids;
    int rc = 0;
    for (int64_t tok = 0; tok < m && !rc; tok++)
        for (int l = 0; l < L && !rc; l++) {
            size_t at = ((size_t)tok * (size_t)L + (size_t)l) * (size_t)K;
            for (int j = 0; j < K && !rc; j++) {
                int e = bytes == 1 ? u8[at + (size_t)j] : u16[at + (size_t)j], dup = 0;
                for (int q = 0; q < j; q++)
                    dup |= (bytes == 1 ? u8[at + (size_t)q] : u16[at + (size_t)q]) == e;
                if (e >= E || dup)
                    rc = eldr_errf(err, errlen, "%s: token row %lld (request row %lld) layer "
                                   "%d: expert %d %s", DS_EXPERTS, (long long)(a + tok),
                                   (long long)tt->file_row[i], l, e,
                                   e >= E ? "outside the experts" : "picked twice");
                else
                    acc[(size_t)l * (size_t)E + (size_t)e]++;
            }
        }
    for (size_t c = 0; c < cells && !rc; c++)
        if (acc[c] != counts[c])
            rc = eldr_errf(err, errlen, "%s: request row %lld (token rows [%lld, %lld)) layer "
                           "%zu expert %zu: tokens give %u, decode_counts says %d", DS_EXPERTS,
                           (long long)tt->file_row[i], (long long)a, (long long)(a + m),
                           c / (size_t)E, c % (size_t)E, acc[c], counts[c]);
    free(acc);
    return rc;
}

int trace_tokens_read(trace_tokens *tt, int64_t i, const uint16_t *counts, void *out,
                      int id_bytes, char *err, size_t errlen)
{
    if (i < 0 || i >= tt->n)
        return eldr_errf(err, errlen, "%s: row %lld outside the reader's [0, %lld)", DS_EXPERTS,
                         (long long)i, (long long)tt->n);
    int64_t a = tt->first[i], m = tt->count[i];
    /* checked in a width that holds every stored id: a 2-byte file asked
     * for bytes is checked before it is narrowed */
    int wide = tt->stored == 2 && id_bytes == 1;
    void *buf = wide ? malloc((size_t)m * (size_t)tt->L * (size_t)tt->k * 2 + 1) : out;
    if (!buf)
        return eldr_errf(err, errlen, "%s: out of memory for request row %lld", DS_EXPERTS,
                         (long long)tt->file_row[i]);
    int rc = read_range(tt, a, a + m, buf, wide ? 2 : id_bytes, tt->file_row[i], err, errlen);
    if (!rc)
        rc = check_rows(tt, i, buf, wide ? 2 : id_bytes, a, m, counts, err, errlen);
    if (!rc && wide)
        for (size_t q = 0; q < (size_t)m * (size_t)tt->L * (size_t)tt->k; q++)
            ((uint8_t *)out)[q] = (uint8_t)((const uint16_t *)buf)[q];
    if (wide)
        free(buf);
    return rc;
}
