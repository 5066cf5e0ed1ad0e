/* dash_cache.h - the dashboard's result cache: the refined results of one
 * setting (the current policy and the four baselines on every simulated
 * row, seed 0, and the header's CIs over the seeds; dash_refined), so
 * that opening the same trace with the same settings again shows the
 * refined numbers at once.
 *
 * Where: $ELDR_CACHE_DIR, else $XDG_CACHE_HOME/eldr, else ~/.cache/eldr;
 * never beside the trace, which may be read-only. One file a setting,
 * "dash-<key>.bin", written atomically (atomicfile.h), so a reader sees
 * a whole entry or none.
 *
 * Key: BLAKE2b-256 of the trace file's SHA-256 (its content, not its
 * name), the model's centroids and recipe, the split (mode, seed, rows),
 * the simulation settings (arrivals, rate, seed, batch, pool, cost
 * model), the policy, tau, K, the seeds and whether they redraw the
 * split, eldr's version and this format's. Anything that changes a
 * number changes the key.
 *
 * An entry (dash_cache.c: magic, key, an extra digest, length, payload,
 * BLAKE2b-256) that does not read back whole (a torn or edited file: wrong
 * magic, key, length, checksum or shape) is ignored with a note and
 * recomputed, never trusted and never a crash. Nothing is cached without
 * the trace's path (a trace from Lua) or with --no-cache. */
#ifndef ELDR_DASH_CACHE_H
#define ELDR_DASH_CACHE_H

#include <stddef.h>

#include "dash.h"

#define DASH_CACHE_KEY 65        /* 64 hex digits and a NUL */

/* The directory (not created), or -1 with err when no variable names
 * one (no ELDR_CACHE_DIR, XDG_CACHE_HOME or HOME). */
int dash_cache_dir(char *buf, size_t n, char *err, size_t errlen);

/* The key of (policy, tau) on m for d's trace and settings; 0 when d is
 * not cached (opts.no_cache, or the trace's content hash is unknown). */
int dash_cache_key(const dash_t *d, const model_t *m, route_kind policy, double tau,
                   char key[DASH_CACHE_KEY]);

/* 1 and r filled (r->cur, base, ci) on a hit; 0 on a miss; -1 when an
 * entry was there but unusable: note says which file and why (the caller
 * shows it and recomputes). */
int dash_cache_load(const dash_t *d, const char *key, dash_refined *r, char *note,
                    size_t notelen);

/* Write r's results under key. 0, or -1 with note (a cache that cannot
 * be written is a note, not a failure of the dashboard). The directory's
 * entries are then kept under DASH_CACHE_MAX_BYTES: the least recently
 * written go first (a what-if session writes one entry a setting, a few
 * hundred KB to 2 MB each). */
#define DASH_CACHE_MAX_BYTES ((long long)256 << 20)
int dash_cache_store(const dash_t *d, const char *key, const dash_refined *r, char *note,
                     size_t notelen);

/* ---- the default fit ----
 * Without -m the dashboard fits the default recipe on its calibration
 * rows (layer selection and K-means: most of a warm open's time); the
 * fit is a function of the trace's content, the split, K and the seed,
 * so it is cached too: "fit-<key>.h5" (the model, model_save) and
 * "fit-<key>.bin" (the fit report's curve, order and assignment, with
 * the model file's SHA-256 and a checksum). Either part missing or not
 * matching is a miss (a note when a part was there but unusable). */
int dash_fit_cache_key(const dash_t *d, char key[DASH_CACHE_KEY]);
/* 1 and *m, rep (curve, order, assign, n_rows) filled on a hit; 0 a
 * miss; -1 unusable (note). */
int dash_fit_cache_load(const dash_t *d, const char *key, model_t **m, model_fit_report *rep,
                        char *note, size_t notelen);
int dash_fit_cache_store(const dash_t *d, const char *key, const model_t *m,
                         const model_fit_report *rep, char *note, size_t notelen);

#endif
