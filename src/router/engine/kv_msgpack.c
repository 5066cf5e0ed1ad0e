/* kv_msgpack.c - vLLM's msgpack KVEventBatch into kv_batch (kv_msgpack.h). */
#include <msgpack.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_msgpack.h"

#define MAX_BLOCK_SIZE (1 << 20)

/* Walk the msgpack value at buf without building it: 0 when every
 * container claims no more items than bytes are left (msgpack-c's
 * unpacker allocates a container's items before reading them), there are
 * at most KV_MSGPACK_MAX_VALUES values in all (each costs msgpack-c 24
 * bytes, a map's 48), and the value ends within len; else -1. */
static int sane(const uint8_t *p, size_t len)
{
    const uint8_t *end = p + len;
    uint64_t pending = 1;        /* values still to read */
    uint64_t values = 0;
    while (pending > 0) {
        if (++values > KV_MSGPACK_MAX_VALUES)
            return -1;
        if (p >= end || pending > (uint64_t)(end - p))
            return -1;
        pending--;
        uint8_t b = *p++;
        uint64_t skip = 0, items = 0;
        int nlen = 0, extra = 0;
        if (b <= 0x7f || b >= 0xe0 || (b >= 0xc0 && b <= 0xc3 && b != 0xc1))
            continue;
        if (b >= 0x80 && b <= 0x8f)
            items = 2u * (b & 0x0f);
        else if (b >= 0x90 && b <= 0x9f)
            items = b & 0x0f;
        else if (b >= 0xa0 && b <= 0xbf)
            skip = b & 0x1f;
        else
            switch (b) {
            case 0xc4: case 0xd9: nlen = 1; break;                  /* bin8, str8 */
            case 0xc5: case 0xda: nlen = 2; break;
            case 0xc6: case 0xdb: nlen = 4; break;
            case 0xc7: nlen = 1; extra = 1; break;                  /* ext8..32 */
            case 0xc8: nlen = 2; extra = 1; break;
            case 0xc9: nlen = 4; extra = 1; break;
            case 0xca: skip = 4; break;
            case 0xcb: skip = 8; break;
            case 0xcc: case 0xd0: skip = 1; break;
            case 0xcd: case 0xd1: skip = 2; break;
            case 0xce: case 0xd2: skip = 4; break;
            case 0xcf: case 0xd3: skip = 8; break;
            case 0xd4: skip = 2; break;                             /* fixext */
            case 0xd5: skip = 3; break;
            case 0xd6: skip = 5; break;
            case 0xd7: skip = 9; break;
            case 0xd8: skip = 17; break;
            case 0xdc: nlen = -2; break;                            /* array16/32 */
            case 0xdd: nlen = -4; break;
            case 0xde: nlen = -2; items = 1; break;                 /* map16/32 */
            case 0xdf: nlen = -4; items = 1; break;
            default: return -1;                                     /* 0xc1 */
            }
        if (nlen) {
            int k = nlen < 0 ? -nlen : nlen;
            if ((size_t)(end - p) < (size_t)k)
                return -1;
            uint64_t n = 0;
            for (int i = 0; i < k; i++)
                n = (n << 8) | *p++;
            if (nlen > 0)
                skip = n + (uint64_t)extra;
            else
                items = items ? 2 * n : n;
        }
        if (skip > (uint64_t)(end - p))
            return -1;
        p += skip;
        pending += items;
    }
    return 0;
}

static int failf(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int failf(char *why, size_t whylen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
    return -1;
}

static int is_str(const msgpack_object *o, const char *s)
{
    size_t n = strlen(s);
    return o->type == MSGPACK_OBJECT_STR && o->via.str.size == n && !memcmp(o->via.str.ptr, s, n);
}

/* The value under key in map m, or NULL. */
static const msgpack_object *member(const msgpack_object *m, const char *key)
{
    for (uint32_t i = 0; i < m->via.map.size; i++)
        if (is_str(&m->via.map.ptr[i].key, key))
            return &m->via.map.ptr[i].val;
    return NULL;
}

static int read_hash(const msgpack_object *o, uint64_t *h)
{
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        *h = o->via.u64;
        return 0;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        *h = (uint64_t)o->via.i64;
        return 0;
    case MSGPACK_OBJECT_BIN:
        if (o->via.bin.size == 0)
            return -1;
        *h = kv_hash_of_bytes((const uint8_t *)o->via.bin.ptr, o->via.bin.size);
        return 0;
    default:
        return -1;
    }
}

/* The fields of one event, wherever its form put them (NULL: absent). */
typedef struct fields {
    const msgpack_object *hashes, *parent, *tokens, *size;
} fields;

static int read_event(const msgpack_object *o, kv_event *ev, char *why, size_t whylen)
{
    const msgpack_object *tag;
    fields f = {0};
    if (o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size >= 1) {
        const msgpack_object *a = o->via.array.ptr;
        uint32_t n = o->via.array.size;
        tag = &a[0];
        f.hashes = n > 1 ? &a[1] : NULL;
        f.parent = n > 2 ? &a[2] : NULL;
        f.tokens = n > 3 ? &a[3] : NULL;
        f.size = n > 4 ? &a[4] : NULL;
    } else if (o->type == MSGPACK_OBJECT_MAP) {
        if (!(tag = member(o, "type")))
            return failf(why, whylen, "no \"type\" (the event's tag)");
        f.hashes = member(o, "block_hashes");
        f.parent = member(o, "parent_block_hash");
        f.tokens = member(o, "token_ids");
        f.size = member(o, "block_size");
    } else {
        return failf(why, whylen, "neither a tagged array nor a map");
    }
    if (is_str(tag, "BlockStored"))
        ev->kind = KV_STORED;
    else if (is_str(tag, "BlockRemoved"))
        ev->kind = KV_REMOVED;
    else if (is_str(tag, "AllBlocksCleared"))
        return (ev->kind = KV_CLEARED), 0;
    else if (tag->type == MSGPACK_OBJECT_STR)
        return failf(why, whylen, "unknown event type '%.*s'",
                     (int)(tag->via.str.size > 40 ? 40 : tag->via.str.size), tag->via.str.ptr);
    else
        return failf(why, whylen, "the event type is not a string");
    if (!f.hashes || f.hashes->type != MSGPACK_OBJECT_ARRAY)
        return failf(why, whylen, "block_hashes missing or not an array");
    uint32_t n = f.hashes->via.array.size;
    if (n > RB_HASHES_MAX)
        return failf(why, whylen, "%u block hashes, more than %d", n, RB_HASHES_MAX);
    if (n && !(ev->hashes = malloc(n * sizeof *ev->hashes)))
        return failf(why, whylen, "out of memory");
    ev->n = (int)n;
    for (uint32_t i = 0; i < n; i++)
        if (read_hash(&f.hashes->via.array.ptr[i], &ev->hashes[i]) < 0)
            return failf(why, whylen, "block_hashes[%u] is neither an integer nor bytes", i);
    if (ev->kind == KV_REMOVED)
        return 0;
    if (f.parent && f.parent->type != MSGPACK_OBJECT_NIL) {
        if (read_hash(f.parent, &ev->parent) < 0)
            return failf(why, whylen, "parent_block_hash is neither an integer, bytes nor nil");
        ev->has_parent = 1;
    }
    if (f.size && f.size->type != MSGPACK_OBJECT_NIL) {
        if (f.size->type != MSGPACK_OBJECT_POSITIVE_INTEGER || f.size->via.u64 < 1 ||
            f.size->via.u64 > MAX_BLOCK_SIZE)
            return failf(why, whylen, "block_size is not an integer in 1..%d", MAX_BLOCK_SIZE);
        ev->block_size = (int)f.size->via.u64;
    }
    if (f.tokens && f.tokens->type != MSGPACK_OBJECT_NIL) {
        if (f.tokens->type != MSGPACK_OBJECT_ARRAY)
            return failf(why, whylen, "token_ids is not an array");
        uint32_t t = f.tokens->via.array.size;
        if (t && !(ev->tokens = malloc(t * sizeof *ev->tokens)))
            return failf(why, whylen, "out of memory");
        ev->n_tokens = (int)t;
        for (uint32_t i = 0; i < t; i++) {
            const msgpack_object *x = &f.tokens->via.array.ptr[i];
            if (x->type != MSGPACK_OBJECT_POSITIVE_INTEGER || x->via.u64 > INT32_MAX)
                return failf(why, whylen, "token_ids[%u] is not a token id (0..%d)", i,
                             INT32_MAX);
            ev->tokens[i] = (int32_t)x->via.u64;
        }
    }
    return 0;
}

/* The batch's ts and events array, in either form. */
static const msgpack_object *batch_events(const msgpack_object *o, double *ts)
{
    const msgpack_object *t = NULL, *ev = NULL;
    if (o->type == MSGPACK_OBJECT_ARRAY && o->via.array.size >= 2) {
        t = &o->via.array.ptr[0];
        ev = &o->via.array.ptr[1];
    } else if (o->type == MSGPACK_OBJECT_MAP) {
        t = member(o, "ts");
        ev = member(o, "events");
    }
    if (t && (t->type == MSGPACK_OBJECT_FLOAT64 || t->type == MSGPACK_OBJECT_FLOAT32))
        *ts = t->via.f64;
    else if (t && t->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        *ts = (double)t->via.u64;
    return ev && ev->type == MSGPACK_OBJECT_ARRAY ? ev : NULL;
}

int kv_msgpack_batch(const void *buf, size_t len, kv_batch *b, int *bad, char *why,
                     size_t whylen)
{
    memset(b, 0, sizeof *b);
    *bad = 0;
    why[0] = '\0';
    if (sane(buf, len) < 0)
        return failf(why, whylen, "not one msgpack value (%zu bytes) of at most %d values",
                     len, KV_MSGPACK_MAX_VALUES);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    int rc = msgpack_unpack_next(&u, buf, len, &off);
    const msgpack_object *events = NULL;
    if (rc != MSGPACK_UNPACK_SUCCESS || off != len)
        failf(why, whylen, "not one msgpack value (%zu bytes)", len);
    else if (!(events = batch_events(&u.data, &b->ts)))
        failf(why, whylen, "not a KVEventBatch: no events array");
    else if (events->via.array.size > RB_EVENTS_MAX)
        failf(why, whylen, "%u events, more than %d", events->via.array.size, RB_EVENTS_MAX);
    else if (events->via.array.size &&
             !(b->events = calloc(events->via.array.size, sizeof *b->events)))
        failf(why, whylen, "out of memory for %u events", events->via.array.size);
    else {
        for (uint32_t i = 0; i < events->via.array.size; i++) {
            kv_event *ev = &b->events[b->n];
            char w[160];
            if (read_event(&events->via.array.ptr[i], ev, w, sizeof w) < 0) {
                kv_event_free(ev);
                memset(ev, 0, sizeof *ev);
                if (!(*bad)++)
                    snprintf(why, whylen, "events[%u]: %s", i, w);
                continue;
            }
            b->n++;
        }
        msgpack_unpacked_destroy(&u);
        return 0;
    }
    msgpack_unpacked_destroy(&u);
    return -1;
}
