/* import_raw.c - bare prefill count arrays into a trace (import.h): a
 * numpy .npy [N, L, E] integer array, and the reference proxy's
 * --capture-output frames (a little-endian uint32 byte length, then that
 * many bytes of little-endian int16 [L, E]).
 *
 * Both hold prefill counts only: no top-k, no token counts, no decode, no
 * ids (the frames not even L and E). The caller names the top-k (and the
 * frames' geometry); every layer of a row must then sum to the same
 * multiple of top_k, and prompt_tokens is that sum / top_k. The checks of
 * the reference fitter apply too: counts in [0, 32767], no all-zero row. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "err.h"
#include "import.h"
#include "import_common.h"
#include "npy.h"

/* The largest count the reference's int16 wire and fitter accept. */
#define RAW_COUNT_MAX 32767

/* The whole file into memory (refused when larger than the machine's). */
static int read_whole(const char *path, unsigned char **buf, size_t *len, char *err, size_t errlen)
{
    *buf = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return eldr_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    size_t mem = eldr_phys_mem();
    if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) {
        fclose(f);
        return eldr_errf(err, errlen, "%s: not a regular file", path);
    }
    if ((mem && (size_t)st.st_size > mem) || (uint64_t)st.st_size > SIZE_MAX / 2) {
        fclose(f);
        return eldr_errf(err, errlen, "%s: %.1f GiB, more than this machine's memory", path,
                         (double)st.st_size / 1073741824.0);
    }
    *len = (size_t)st.st_size;
    *buf = malloc(*len ? *len : 1);
    if (!*buf || fread(*buf, 1, *len, f) != *len) {
        fclose(f);
        free(*buf);
        *buf = NULL;
        return eldr_errf(err, errlen, "%s: %s", path,
                         *len ? "read failed or out of memory" : "out of memory");
    }
    fclose(f);
    return 0;
}

/* Derive prompt_tokens of row r from its counts (already in the trace)
 * and check the row as the reference fitter would. */
static int finish_row(trace_t *t, int64_t r, const char *path, const char *unit, char *err,
                      size_t errlen)
{
    const uint16_t *row = trace_prefill_row(t, r);
    int64_t layer0 = 0;
    for (int e = 0; e < t->E; e++)
        layer0 += row[e];
    if (layer0 == 0)
        return eldr_errf(err, errlen,
                         "%s: %s %lld: layer 0 has no counts (a prefill token "
                         "is routed in every layer; the reference fitter refuses empty rows)",
                         path, unit, (long long)r);
    if (layer0 % t->k)
        return eldr_errf(err, errlen,
                         "%s: %s %lld: layer 0 sums to %lld, not a multiple of "
                         "top_k %d (is --top-k right?)",
                         path, unit, (long long)r, (long long)layer0, t->k);
    if (layer0 / t->k > INT32_MAX)
        return eldr_errf(err, errlen, "%s: %s %lld: too many tokens", path, unit, (long long)r);
    t->prompt_tokens[r] = (int32_t)(layer0 / t->k);
    char msg[ELDR_ERRLEN];
    if (import_check_counts(row, t->L, t->E, t->k, t->prompt_tokens[r], msg, sizeof msg))
        return eldr_errf(err, errlen, "%s: %s %lld %s (prompt_tokens = layer 0's sum / top_k)",
                         path, unit, (long long)r, msg);
    return 0;
}

static int need_top_k(const char *path, const import_geometry *g, int E, char *err, size_t errlen)
{
    if (g->top_k < 1)
        return eldr_errf(err, errlen,
                         "%s: the file holds no top-k; give it (eldr import "
                         "--top-k K)",
                         path);
    if (g->top_k > E)
        return eldr_errf(err, errlen, "%s: top-k %d is more than the %d experts", path, g->top_k,
                         E);
    return 0;
}

/* The counts of a parsed [N, L, E] integer array into a new trace. */
static trace_t *npy_to_trace(const char *path, const npy_array_t *a, const import_geometry *g,
                             char *err, size_t errlen)
{
    char sh[256], msg[ELDR_ERRLEN];
    if (!npy_is_integer(a)) {
        eldr_errf(err, errlen, "%s: dtype '%s' is not an integer type", path, a->descr);
        return NULL;
    }
    if (a->ndim != 3 || a->shape[0] < 1 || a->shape[1] < 1 || a->shape[2] < 1 ||
        a->shape[1] > 1 << 20 || a->shape[2] > 65535) {
        eldr_errf(err, errlen, "%s: shape %s is not [N, L, E] with N, L, E >= 1", path,
                  npy_shape_str(a, sh, sizeof sh));
        return NULL;
    }
    int L = (int)a->shape[1], E = (int)a->shape[2];
    if ((g->layers && g->layers != L) || (g->experts && g->experts != E)) {
        eldr_errf(err, errlen, "%s: shape %s does not match the given %d layers x %d experts", path,
                  npy_shape_str(a, sh, sizeof sh), g->layers ? g->layers : L,
                  g->experts ? g->experts : E);
        return NULL;
    }
    if (need_top_k(path, g, E, err, errlen))
        return NULL;
    trace_t *t = trace_new(a->shape[0], L, E, g->top_k, msg, sizeof msg);
    if (!t) {
        eldr_errf(err, errlen, "%s: %s", path, msg);
        return NULL;
    }
    size_t cells = TRACE_CELLS(t);
    for (int64_t i = 0; i < a->count; i++) {
        int64_t v;
        if (npy_int_at(a, i, &v) || v < 0 || v > RAW_COUNT_MAX) {
            eldr_errf(err, errlen,
                      "%s: row %lld layer %d expert %d: count %lld outside "
                      "[0, %d]",
                      path, (long long)(i / (int64_t)cells), (int)(i % (int64_t)cells / E),
                      (int)(i % E), (long long)v, RAW_COUNT_MAX);
            trace_free(t);
            return NULL;
        }
        t->prefill_counts[i] = (uint16_t)v;
    }
    for (int64_t r = 0; r < t->n; r++)
        if (finish_row(t, r, path, "row", err, errlen)) {
            trace_free(t);
            return NULL;
        }
    return t;
}

int import_npy(const char *path, const import_geometry *g, trace_t **out, char *err, size_t errlen)
{
    unsigned char *buf;
    size_t len;
    *out = NULL;
    if (read_whole(path, &buf, &len, err, errlen))
        return -1;
    npy_array_t a;
    char msg[ELDR_ERRLEN];
    if (npy_parse(buf, len, &a, msg, sizeof msg)) {
        free(buf);
        return eldr_errf(err, errlen, "%s: %s", path, msg);
    }
    trace_t *t = npy_to_trace(path, &a, g, err, errlen);
    npy_free(&a);
    free(buf);
    if (!t || trace_validate(t, path, err, errlen)) {
        trace_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Count the frames, checking every length field, before allocating. */
static int64_t count_frames(const char *path, const unsigned char *buf, size_t len, size_t frame,
                            char *err, size_t errlen)
{
    int64_t n = 0;
    for (size_t off = 0; off < len; n++) {
        if (len - off < 4)
            return eldr_errf(err, errlen,
                             "%s: frame %lld at byte %zu: truncated length "
                             "field",
                             path, (long long)n, off);
        uint32_t size = le32(buf + off);
        if (size != frame)
            return eldr_errf(err, errlen,
                             "%s: frame %lld at byte %zu: length %u, expected "
                             "L*E*2 = %zu (wrong --layers/--experts, or not a capture file?)",
                             path, (long long)n, off, size, frame);
        if (len - off - 4 < frame)
            return eldr_errf(err, errlen,
                             "%s: frame %lld at byte %zu: truncated (%zu of %zu "
                             "bytes)",
                             path, (long long)n, off, len - off - 4, frame);
        off += 4 + frame;
    }
    if (n == 0)
        return eldr_errf(err, errlen, "%s: the capture holds no frames", path);
    return n;
}

static trace_t *frames_to_trace(const char *path, const unsigned char *buf, size_t len,
                                const import_geometry *g, char *err, size_t errlen)
{
    if (g->layers < 1 || g->experts < 1 || g->experts > 65535) {
        eldr_errf(err, errlen,
                  "%s: capture frames hold no geometry; give it (eldr import "
                  "--layers L --experts E --top-k K)",
                  path);
        return NULL;
    }
    if (need_top_k(path, g, g->experts, err, errlen))
        return NULL;
    size_t cells = (size_t)g->layers * (size_t)g->experts, frame = cells * 2;
    if (frame > UINT32_MAX) {
        eldr_errf(err, errlen, "%s: %d layers x %d experts do not fit a frame", path, g->layers,
                  g->experts);
        return NULL;
    }
    int64_t n = count_frames(path, buf, len, frame, err, errlen);
    if (n < 0)
        return NULL;
    char msg[ELDR_ERRLEN];
    trace_t *t = trace_new(n, g->layers, g->experts, g->top_k, msg, sizeof msg);
    if (!t) {
        eldr_errf(err, errlen, "%s: %s", path, msg);
        return NULL;
    }
    for (int64_t r = 0; r < n; r++) {
        const unsigned char *p = buf + (size_t)r * (4 + frame) + 4;
        uint16_t *row = t->prefill_counts + (size_t)r * cells;
        for (size_t i = 0; i < cells; i++) {
            int16_t v = (int16_t)(uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
            if (v < 0) {
                eldr_errf(err, errlen, "%s: frame %lld layer %d expert %d: negative count %d", path,
                          (long long)r, (int)(i / (size_t)g->experts),
                          (int)(i % (size_t)g->experts), v);
                trace_free(t);
                return NULL;
            }
            row[i] = (uint16_t)v;
        }
        if (finish_row(t, r, path, "frame", err, errlen)) {
            trace_free(t);
            return NULL;
        }
    }
    return t;
}

int import_frames(const char *path, const import_geometry *g, trace_t **out, char *err,
                  size_t errlen)
{
    unsigned char *buf;
    size_t len;
    *out = NULL;
    if (read_whole(path, &buf, &len, err, errlen))
        return -1;
    trace_t *t = frames_to_trace(path, buf, len, g, err, errlen);
    free(buf);
    if (!t || trace_validate(t, path, err, errlen)) {
        trace_free(t);
        return -1;
    }
    *out = t;
    return 0;
}
