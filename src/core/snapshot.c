/* snapshot.c - the model inside a saved eldrd snapshot (snapshot.h). */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "json_scan.h"
#include "model_json.h"
#include "snapshot.h"

/* The snapshot's model summary in the reference centroid JSON's keys,
 * so that one validator (model_from_json_text) judges both. */
static json_t *as_centroid_json(const json_t *snap, const json_t *m)
{
    json_t *o = json_object(), *names = json_array(), *w;
    size_t i;
    json_array_foreach(json_object_get(snap, "workers"), i, w)
        json_array_append(names, json_object_get(w, "name"));
    static const char *const same[] = {"L", "K", "variant", "layer_mask", "sig_idf",
                                       "centroids", "rho", "sizes", "nearest_share",
                                       "created"};
    for (size_t j = 0; o && j < sizeof same / sizeof same[0]; j++) {
        json_t *v = json_object_get(m, same[j]);
        if (v)
            json_object_set(o, same[j], v);
    }
    json_object_set(o, "e", json_object_get(m, "E"));
    /* the snapshot's k is the top-k; the centroid JSON's k is K */
    if (json_object_get(m, "k"))
        json_object_set(o, "top_k", json_object_get(m, "k"));
    if (json_is_number(json_object_get(snap, "tau")))
        json_object_set(o, "tau", json_object_get(snap, "tau"));
    if (json_array_size(names))
        json_object_set(o, "workers", names);
    json_decref(names);
    return o;
}

int snapshot_model_json(const json_t *snap, const char *where, model_t **out, char *err,
                        size_t errlen)
{
    *out = NULL;
    const char *fmt = json_string_value(json_object_get(snap, "format"));
    if (!fmt || strcmp(fmt, SNAPSHOT_FORMAT))
        return eldr_errf(err, errlen, "%s: key format: not \"%s\"", where, SNAPSHOT_FORMAT);
    const json_t *m = json_object_get(snap, "model");
    if (!json_is_object(m))
        return eldr_errf(err, errlen, "%s: key model: missing or not an object", where);
    if (!json_is_array(json_object_get(m, "centroids")))
        return eldr_errf(err, errlen,
                         "%s: key model.centroids: missing (save the snapshot with "
                         "GET /v1/snapshot?centroids=1)", where);
    const char *variant = json_string_value(json_object_get(m, "variant"));
    if (variant && !strcmp(variant, "count_idf") && !json_is_array(json_object_get(m, "sig_idf")))
        return eldr_errf(err, errlen, "%s: key model.sig_idf: missing for count_idf", where);
    json_t *o = as_centroid_json(snap, m);
    if (!o)
        return eldr_errf(err, errlen, "%s: out of memory", where);
    int rc = model_from_json_value(o, where, out, err, errlen);
    json_decref(o);
    if (rc == 0)
        (*out)->snapshot = 1;
    return rc;
}

int snapshot_model_text(const char *text, size_t len, const char *where, model_t **out,
                        char *err, size_t errlen)
{
    json_error_t je;
    json_t *snap = json_loadb(text, len, 0, &je);
    *out = NULL;
    if (!snap)
        return eldr_errf(err, errlen, "%s: line %d column %d: %s", where, je.line, je.column,
                         je.text);
    int rc = snapshot_model_json(snap, where, out, err, errlen);
    json_decref(snap);
    return rc;
}

/* 1 when the top-level object's "format" is the snapshot's (a scan of
 * the top level only: no tree for a model's megabytes of centroids). */
static int is_snapshot(const char *text, size_t len)
{
    cj_t s;
    const char *k, *v;
    size_t kl, vl;
    int n = 0;
    cj_init(&s, text, len);
    if (cj_expect(&s, '{') < 0)
        return 0;
    while (cj_next_key(&s, &n, &k, &kl) == 1) {
        if (cj_key_is(k, kl, "format") && cj_peek(&s) == '"')
            return cj_string(&s, &v, &vl) == 0 && vl == sizeof SNAPSHOT_FORMAT - 1 &&
                   !memcmp(v, SNAPSHOT_FORMAT, vl);
        if (cj_skip(&s) < 0)
            return 0;
    }
    return 0;
}

int snapshot_or_model_text(const char *text, size_t len, const char *where, model_t **out,
                           char *err, size_t errlen)
{
    if (is_snapshot(text, len))
        return snapshot_model_text(text, len, where, out, err, errlen);
    return model_from_json_text(text, where, out, err, errlen);
}

int snapshot_model_load(const char *path, model_t **out, char *err, size_t errlen)
{
    json_error_t je;
    *out = NULL;
    json_t *snap = json_load_file(path, 0, &je);
    if (!snap)
        return eldr_errf(err, errlen, "%s: line %d column %d: %s", path, je.line, je.column,
                         je.text);
    int rc = snapshot_model_json(snap, path, out, err, errlen);
    json_decref(snap);
    return rc;
}

/* model.h's model_load_json: here, above the model JSON reader, because a
 * saved snapshot is one of the two files it opens (the reader itself knows
 * nothing of snapshots; tests/arch/rooms.py: no call cycle in the core). */
int model_load_json(const char *path, model_t **out, char *err, size_t errlen)
{
    json_error_t je;
    *out = NULL;
    json_t *o = json_load_file(path, 0, &je);
    if (!o) {
        if (je.line < 1)
            return eldr_errf(err, errlen, "%s: %s", path, je.text);
        return eldr_errf(err, errlen, "%s: line %d column %d: %s", path, je.line, je.column,
                         je.text);
    }
    /* a snapshot taken with centroids is a whole model (docs/http-api.md) */
    json_t *fmt = json_object_get(o, "format");
    if (json_is_string(fmt) && !strcmp(json_string_value(fmt), SNAPSHOT_FORMAT)) {
        int rc = snapshot_model_json(o, path, out, err, errlen);
        json_decref(o);
        return rc;
    }
    int rc = model_from_json_value(o, path, out, err, errlen);
    json_decref(o);
    return rc;
}
