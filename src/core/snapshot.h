/* snapshot.h - a saved eldrd /v1/snapshot (docs/http-api.md) as core
 * structs: the model it was serving, so that a snapshot taken with
 * ?centroids=1 can be opened offline (eldr.load_snapshot, eldr dash
 * --router-snapshot) and routed with like any model.
 *
 * Pure parsing, no I/O besides reading the file: the snapshot's model
 * summary (L, E, k, variant, layer_mask, sig_idf, centroids), its live
 * tau and its workers' names become an eldr model, validated like an
 * imported centroid JSON (model_from_json_text). */
#ifndef ELDR_SNAPSHOT_H
#define ELDR_SNAPSHOT_H

#include <jansson.h>
#include <stddef.h>

#include "model.h"

#define SNAPSHOT_FORMAT "eldr-router-snapshot"

/* From a parsed snapshot. where prefixes messages (a file name, a URL).
 * Fails naming the key when it is not a snapshot, was taken without
 * centroids, or its model is invalid. */
int snapshot_model_json(const json_t *snap, const char *where, model_t **out, char *err,
                        size_t errlen);

/* From snapshot text, or a file. */
int snapshot_model_text(const char *text, size_t len, const char *where, model_t **out,
                        char *err, size_t errlen);
int snapshot_model_load(const char *path, model_t **out, char *err, size_t errlen);

/* A model from JSON text that is either the reference centroid JSON (eldr
 * model export) or a snapshot taken with centroids (its top-level
 * "format" names it): what PUT /v1/model takes, so that a saved snapshot
 * goes back to a router as the docs promise. text is NUL-terminated. */
int snapshot_or_model_text(const char *text, size_t len, const char *where, model_t **out,
                           char *err, size_t errlen);

#endif
