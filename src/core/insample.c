/* insample.c - a model's calibration rows against the evaluated ones
 * (insample.h). */
#include "insample.h"

#include <stdio.h>
#include <string.h>

#include "err.h"
#include "sha256.h"
#include "split.h"

int64_t insample_rows(const model_t *m, const char *trace_path, const trace_t *all,
                      const int64_t *eval, int64_t n_eval, char sha[13])
{
    char hex[SHA256_HEX], err[ELDR_ERRLEN];
    if (sha)
        sha[0] = '\0';
    if (!m || !m->calib_sha256[0] || !trace_path ||
        sha256_file(trace_path, hex, err, sizeof err) < 0)
        return 0;
    return insample_rows_hex(m, hex, all, eval, n_eval, sha);
}

int64_t insample_rows_hex(const model_t *m, const char *hex, const trace_t *all,
                          const int64_t *eval, int64_t n_eval, char sha[13])
{
    char err[ELDR_ERRLEN];
    if (sha)
        sha[0] = '\0';
    if (!m || !m->calib_sha256[0] || !hex || !hex[0] || strcmp(hex, m->calib_sha256))
        return 0;
    if (sha)
        snprintf(sha, 13, "%.12s", hex);
    split_mode mode;
    int64_t n_calib;
    uint64_t seed;
    int kind = split_provenance_parse(m->calib_split, &mode, &n_calib, &seed);
    if (kind == 1)
        return n_eval;
    if (kind < 0 || !all || n_calib > all->n)
        return -1;
    split_rows theirs;
    if (split_make_count(all, mode, seed, n_calib, &theirs, err, sizeof err) < 0)
        return -1;
    int64_t both = 0, i = 0, j = 0;   /* both lists ascend */
    while (i < theirs.n_calib && j < n_eval) {
        if (theirs.calib[i] == eval[j])
            both++, i++, j++;
        else if (theirs.calib[i] < eval[j])
            i++;
        else
            j++;
    }
    split_rows_free(&theirs);
    return both;
}
