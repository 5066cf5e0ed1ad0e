/* import_common.h - the internals the importers (import_npz.c,
 * import_jsonl.c, import_raw.c) share; import_common.c. Not for callers
 * outside the import files (they use import.h). */
#ifndef ELDR_IMPORT_COMMON_H
#define ELDR_IMPORT_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* Find two equal strings among ids[0..n).
 * Returns 1 and the two indices (first < second, the earliest repeat)
 * when there is a duplicate, 0 when all differ, -1 out of memory. */
int import_find_duplicate(char *const *ids, int64_t n, int64_t *first, int64_t *second);

/* Check one request's counts [L][E] against its token count: in every
 * layer the counts sum to tokens * k, and no expert has more than tokens
 * (a token picks k distinct experts). -1 with "layer l: ..." in msg. */
int import_check_counts(const uint16_t *row, int L, int E, int k, int64_t tokens,
                        char *msg, size_t msglen);

/* Label names in order of first appearance. */
typedef struct import_labels {
    char **names;
    int n, cap;
} import_labels;
#define IMPORT_MAX_LABELS 65536

/* The index of name, added if new; -1 when out of memory or past
 * IMPORT_MAX_LABELS. */
int import_label_index(import_labels *l, const char *name);
void import_labels_free(import_labels *l);

#endif
