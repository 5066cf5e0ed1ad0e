/* import_common.c - what the importers share (import_common.h): duplicate
 * request ids, the conservation check of one request's counts, label
 * names. import.c dispatches to the importers and the importers call
 * this file, so that no two of the import files call each other
 * (tests/arch/rooms.py). */
#include "import_common.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"

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
