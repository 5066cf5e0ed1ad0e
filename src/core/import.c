/* import.c - what both importers share (see import.h): format names and
 * dispatch, and the duplicate-id check. */
#include "import.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "err.h"

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcasecmp(s + n - m, suffix);
}

static const char *const format_names[] = {"unknown", "npz", "jsonl", "npy", "frames"};

import_format import_format_of(const char *path)
{
    if (ends_with(path, ".npz"))
        return IMPORT_NPZ;
    if (ends_with(path, ".jsonl") || ends_with(path, ".ndjson"))
        return IMPORT_JSONL;
    if (ends_with(path, ".npy"))
        return IMPORT_NPY;
    if (ends_with(path, ".frames") || ends_with(path, ".bin"))
        return IMPORT_FRAMES;
    return IMPORT_UNKNOWN;
}

import_format import_sniff(const char *path)
{
    unsigned char magic[8] = {0};
    FILE *f = fopen(path, "rb");
    size_t got = f ? fread(magic, 1, sizeof magic, f) : 0;
    if (f)
        fclose(f);
    /* an HDF5 file is a trace whatever its name */
    if (got == 8 && !memcmp(magic, "\x89HDF\r\n\x1a\n", 8))
        return IMPORT_UNKNOWN;
    if (got >= 4 && !memcmp(magic, "PK\x03\x04", 4))
        return IMPORT_NPZ;
    if (got >= 6 && !memcmp(magic, "\x93NUMPY", 6))
        return IMPORT_NPY;
    import_format by_name = import_format_of(path);
    return by_name == IMPORT_FRAMES ? IMPORT_UNKNOWN : by_name;
}

import_format import_format_parse(const char *name)
{
    for (int f = IMPORT_NPZ; f <= IMPORT_FRAMES; f++)
        if (!strcmp(name, format_names[f]))
            return (import_format)f;
    return IMPORT_UNKNOWN;
}

const char *import_format_name(import_format f)
{
    return f >= IMPORT_NPZ && f <= IMPORT_FRAMES ? format_names[f] : "unknown";
}

int import_file_geometry(const char *path, import_format fmt, const import_geometry *g,
                         trace_t **out, char *err, size_t errlen)
{
    static const import_geometry none = {0, 0, 0};
    *out = NULL;
    if (fmt == IMPORT_UNKNOWN)
        fmt = import_format_of(path);
    switch (fmt) {
    case IMPORT_NPZ: return import_npz(path, out, err, errlen);
    case IMPORT_JSONL: return import_jsonl(path, out, err, errlen);
    case IMPORT_NPY: return import_npy(path, g ? g : &none, out, err, errlen);
    case IMPORT_FRAMES: return import_frames(path, g ? g : &none, out, err, errlen);
    default:
        return eldr_errf(err, errlen, "%s: unknown import format (name it .npz, .jsonl, .npy "
                         "or .frames, or say --format npz|jsonl|npy|frames)", path);
    }
}

int import_file(const char *path, import_format fmt, trace_t **out, char *err, size_t errlen)
{
    return import_file_geometry(path, fmt, NULL, out, err, errlen);
}

/* Sorting indices by (string, index) puts equal ids side by side, the
 * earliest occurrence first: O(n log n) with no hash table to tune. */
static int cmp_idx(const void *a, const void *b, void *ctx)
{
    char *const *ids = ctx;
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    int c = strcmp(ids[i], ids[j]);
    return c ? c : (i > j) - (i < j);
}

int import_find_duplicate(char *const *ids, int64_t n, int64_t *first, int64_t *second)
{
    if (n < 2)
        return 0;
    int64_t *idx = malloc((size_t)n * sizeof *idx);
    if (!idx)
        return -1;
    for (int64_t i = 0; i < n; i++)
        idx[i] = i;
    qsort_r(idx, (size_t)n, sizeof *idx, cmp_idx, (void *)ids);
    int found = 0;
    /* each run of equal ids starts at s; its first repeat is idx[s + 1];
     * report the run whose repeat comes earliest in the input */
    for (int64_t s = 0, e; s < n; s = e) {
        for (e = s + 1; e < n && !strcmp(ids[idx[s]], ids[idx[e]]); e++)
            ;
        if (e - s > 1 && (!found || idx[s + 1] < *second)) {
            *first = idx[s];
            *second = idx[s + 1];
            found = 1;
        }
    }
    free(idx);
    return found;
}

int import_check_counts(const uint16_t *row, int L, int E, int k, int64_t tokens,
                        char *msg, size_t msglen)
{
    for (int l = 0; l < L; l++) {
        const uint16_t *c = row + (size_t)l * (size_t)E;
        int64_t sum = 0;
        for (int e = 0; e < E; e++) {
            if (c[e] > tokens)
                return eldr_errf(msg, msglen,
                                 "layer %d expert %d: count %u exceeds the %lld tokens "
                                 "(a token picks %d distinct experts)",
                                 l, e, (unsigned)c[e], (long long)tokens, k);
            sum += c[e];
        }
        if (sum != tokens * k)
            return eldr_errf(msg, msglen,
                             "layer %d: counts sum to %lld, expected %lld tokens x top_k %d = %lld",
                             l, (long long)sum, (long long)tokens, k, (long long)(tokens * k));
    }
    return 0;
}

int import_label_index(import_labels *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->names[i], name))
            return i;
    if (l->n >= IMPORT_MAX_LABELS)
        return -1;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 8;
        char **names = realloc(l->names, (size_t)cap * sizeof *names);
        if (!names)
            return -1;
        l->names = names;
        l->cap = cap;
    }
    char *copy = strdup(name);
    if (!copy)
        return -1;
    l->names[l->n] = copy;
    return l->n++;
}

void import_labels_free(import_labels *l)
{
    for (int i = 0; i < l->n; i++)
        free(l->names[i]);
    free(l->names);
    memset(l, 0, sizeof *l);
}
