/* body_kv.c - the body of POST /v1/kv-events: vLLM's KV cache events
 * (BlockStored, BlockRemoved, AllBlocksCleared) as JSON (body.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "body.h"
#include "json_in.h"

static int kind_of(const json_t *tag, kv_kind *k, const char *where, rb_err *e)
{
    if (!json_is_string(tag))
        return rb_fail(e, 400, where, "event type must be a string");
    const char *s = json_string_value(tag);
    if (!strcmp(s, "BlockStored"))
        *k = KV_STORED;
    else if (!strcmp(s, "BlockRemoved"))
        *k = KV_REMOVED;
    else if (!strcmp(s, "AllBlocksCleared"))
        *k = KV_CLEARED;
    else
        return rb_fail(e, 422, where,
                       "unknown event type '%.40s' (BlockStored, BlockRemoved, AllBlocksCleared)",
                       s);
    return 0;
}

/* The fields of a BlockStored beyond its hashes: parent, tokens, size. */
static int stored_extras(const json_t *parent, const json_t *tokens, const json_t *size,
                         kv_event *ev, const char *where, rb_err *e)
{
    char w[128];
    if (parent && !json_is_null(parent)) {
        snprintf(w, sizeof w, "%s.parent_block_hash", where);
        if (rb_hash(parent, &ev->parent, w, e) < 0)
            return -1;
        ev->has_parent = 1;
    }
    if (tokens && !json_is_null(tokens)) {
        snprintf(w, sizeof w, "%s.token_ids", where);
        if (!json_is_array(tokens))
            return rb_fail(e, 400, w, "must be an array");
        size_t n = json_array_size(tokens);
        if (n > (size_t)RB_HASHES_MAX * 256)
            return rb_fail(e, 422, w, "%zu token ids, more than %d", n, RB_HASHES_MAX * 256);
        if (n && !(ev->tokens = malloc(n * sizeof *ev->tokens)))
            return rb_fail(e, 500, w, "out of memory for %zu token ids", n);
        ev->n_tokens = (int)n;
        for (size_t j = 0; j < n; j++) {
            long long t;
            if (rb_array_int(tokens, j, 0, INT32_MAX, &t, w, "token id", e) < 0)
                return -1;
            ev->tokens[j] = (int32_t)t;
        }
    }
    if (size && !json_is_null(size)) {
        snprintf(w, sizeof w, "%s.block_size", where);
        if (!json_is_integer(size) || json_integer_value(size) < 1 ||
            json_integer_value(size) > 1 << 20)
            return rb_fail(e, 422, w, "must be an integer in 1..%d", 1 << 20);
        ev->block_size = (int)json_integer_value(size);
    }
    return 0;
}

static int parse_event(const json_t *v, kv_event *ev, const char *where, rb_err *e)
{
    const json_t *hashes, *parent = NULL, *tokens = NULL, *size = NULL;
    char w[128];
    if (json_is_object(v)) {
        snprintf(w, sizeof w, "%s.type", where);
        if (kind_of(json_object_get(v, "type"), &ev->kind, w, e) < 0)
            return -1;
        hashes = json_object_get(v, "block_hashes");
        parent = json_object_get(v, "parent_block_hash");
        tokens = json_object_get(v, "token_ids");
        size = json_object_get(v, "block_size");
    } else if (json_is_array(v) && json_array_size(v) >= 1) {
        snprintf(w, sizeof w, "%s[0]", where);
        if (kind_of(json_array_get(v, 0), &ev->kind, w, e) < 0)
            return -1;
        hashes = json_array_get(v, 1);
        if (ev->kind == KV_STORED) {
            parent = json_array_get(v, 2);
            tokens = json_array_get(v, 3);
            size = json_array_get(v, 4);
        }
    } else {
        return rb_fail(e, 400, where, "an event must be an object or a tagged array");
    }
    if (ev->kind == KV_CLEARED)
        return 0;
    snprintf(w, sizeof w, "%s.block_hashes", where);
    if (!hashes)
        return rb_fail(e, 400, w, "missing");
    if (rb_hash_array(hashes, &ev->hashes, &ev->n, w, e) < 0)
        return -1;
    return ev->kind == KV_STORED ? stored_extras(parent, tokens, size, ev, where, e) : 0;
}

/* Batch header: an object {ts, events, worker} or an array [ts, events, ...]. */
static const json_t *batch_events(const json_t *o, kv_batch *b, rb_err *e)
{
    const json_t *ts, *events;
    if (json_is_object(o)) {
        const json_t *w = json_object_get(o, "worker");
        if (w && !json_is_null(w) && rb_string(w, b->worker, RB_NAME_MAX, "worker", e) < 0)
            return NULL;
        ts = json_object_get(o, "ts");
        events = json_object_get(o, "events");
    } else if (json_is_array(o)) {
        ts = json_array_get(o, 0);
        events = json_array_get(o, 1);
    } else {
        rb_fail(e, 400, "body", "must be a KV event batch: an object or [ts, events, ...]");
        return NULL;
    }
    if (ts && !json_is_null(ts)) {
        if (!json_is_number(ts)) {
            rb_fail(e, 400, "ts", "must be a number");
            return NULL;
        }
        b->ts = json_number_value(ts);
    }
    if (!json_is_array(events)) {
        rb_fail(e, 400, "events", "missing or not an array");
        return NULL;
    }
    if (json_array_size(events) > RB_EVENTS_MAX) {
        rb_fail(e, 422, "events", "%zu events, more than %d", json_array_size(events),
                RB_EVENTS_MAX);
        return NULL;
    }
    return events;
}

int kv_body_parse(const char *text, size_t len, kv_batch *b, rb_err *e)
{
    memset(b, 0, sizeof *b);
    json_t *o = rb_load(text, len, e);
    if (!o)
        return -1;
    int rc = -1;
    const json_t *events = batch_events(o, b, e);
    size_t n = events ? json_array_size(events) : 0;
    if (events && n > 0 && !(b->events = calloc(n, sizeof *b->events)))
        rb_fail(e, 500, "events", "out of memory for %zu events", n);
    else if (events) {
        rc = 0;
        for (size_t i = 0; i < n && rc == 0; i++) {
            char w[64];
            snprintf(w, sizeof w, "events[%zu]", i);
            b->n = (int)i + 1;
            rc = parse_event(json_array_get(events, i), &b->events[i], w, e);
        }
    }
    json_decref(o);
    if (rc < 0)
        kv_batch_free(b);
    return rc;
}
