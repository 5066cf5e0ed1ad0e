/* xp_msg.c - ext_proc messages, on the wire and through protobuf-c (xp_msg.h). */
#include "xp_msg.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xp.pb-c.h"

/* ---- the nesting check, on the wire ---- */

typedef struct wire {
    const uint8_t *p, *end;
} wire;

static int varint(wire *w, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && w->p < w->end; shift += 7) {
        uint8_t b = *w->p++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 0;
    }
    return -1;
}

/* The next field: its number, wire type, and for a length-delimited one
 * its bytes in sub. -1 when malformed. */
static int field(wire *w, uint32_t *num, int *type, wire *sub)
{
    uint64_t key, v;
    if (varint(w, &key) < 0 || key >> 3 == 0 || key >> 3 > 536870911u)
        return -1;
    *num = (uint32_t)(key >> 3);
    *type = (int)(key & 7);
    switch (*type) {
    case 0:
        return varint(w, &v);
    case 1:
        if (w->end - w->p < 8)
            return -1;
        w->p += 8;
        return 0;
    case 5:
        if (w->end - w->p < 4)
            return -1;
        w->p += 4;
        return 0;
    case 2:
        if (varint(w, &v) < 0 || v > (uint64_t)(w->end - w->p))
            return -1;
        sub->p = w->p;
        sub->end = w->p + v;
        w->p += v;
        return 0;
    default:
        return -1;   /* groups (3, 4) are not in these messages */
    }
}

/* Walk a message whose length-delimited field `into` (in a message of
 * kind `of`) holds a message of kind `next`: the nesting of Struct,
 * Value, ListValue. */
enum { W_STRUCT, W_ENTRY, W_VALUE, W_LIST, W_META, W_META_ENTRY, W_REQUEST };

static int walk(wire w, int kind, int depth)
{
    if (depth > XP_MAX_DEPTH)
        return -2;
    while (w.p < w.end) {
        uint32_t num;
        int type, next = -1, rc;
        wire sub;
        if (field(&w, &num, &type, &sub) < 0)
            return -1;
        if (type != 2)
            continue;
        switch (kind) {
        case W_REQUEST: next = num == 8 ? W_META : -1; break;
        case W_META: next = num == 1 ? W_META_ENTRY : -1; break;
        case W_META_ENTRY: next = num == 2 ? W_STRUCT : -1; break;
        case W_STRUCT: next = num == 1 ? W_ENTRY : -1; break;
        case W_ENTRY: next = num == 2 ? W_VALUE : -1; break;
        case W_VALUE: next = num == 5 ? W_STRUCT : num == 6 ? W_LIST : -1; break;
        case W_LIST: next = num == 1 ? W_VALUE : -1; break;
        }
        if (next >= 0 && (rc = walk(sub, next, depth + 1)) < 0)
            return rc;
    }
    return 0;
}

/* ---- buffers and the arena ---- */

int xp_buf_reserve(xp_buf *b, size_t n)
{
    if (n <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < n)
        cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

void xp_buf_free(xp_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->cap = 0;
}

/* One block, reused; what does not fit goes in blocks of its own, freed
 * at the reset (a large body chunk). */
#define ARENA_BLOCK (64u << 10)
#define ARENA_ALIGN 16u

typedef struct big {
    struct big *next;
    max_align_t pad[];           /* the allocation, aligned */
} big;

struct xp_arena {
    ProtobufCAllocator alloc;
    uint8_t *base;
    size_t used;
    big *bigs;
};

static void *arena_alloc(void *ad, size_t n)
{
    xp_arena *a = ad;
    n = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (n <= ARENA_BLOCK - a->used) {
        void *p = a->base + a->used;
        a->used += n;
        return p;
    }
    if (n > SIZE_MAX - sizeof(big))
        return NULL;
    big *b = malloc(sizeof *b + n);
    if (!b)
        return NULL;
    b->next = a->bigs;
    a->bigs = b;
    return b->pad;
}

static void arena_nofree(void *ad, void *p)
{
    (void)ad, (void)p;   /* all at once, in arena_reset */
}

static void arena_reset(xp_arena *a)
{
    while (a->bigs) {
        big *b = a->bigs;
        a->bigs = b->next;
        free(b);
    }
    a->used = 0;
}

xp_arena *xp_arena_new(void)
{
    xp_arena *a = calloc(1, sizeof *a);
    if (a && !(a->base = aligned_alloc(ARENA_ALIGN, ARENA_BLOCK))) {
        free(a);
        return NULL;
    }
    if (a)
        a->alloc = (ProtobufCAllocator){arena_alloc, arena_nofree, a};
    return a;
}

void xp_arena_free(xp_arena *a)
{
    if (!a)
        return;
    arena_reset(a);
    free(a->base);
    free(a);
}

static int bad(char *why, size_t n, const char *msg)
{
    snprintf(why, n, "%s", msg);
    return -1;
}

static void *arena_array(xp_arena *a, size_t n, size_t size)
{
    return n ? arena_alloc(a, n * size) : NULL;
}

/* ---- the view ---- */

#define NS_HINT "envoy.lb.subset_hint"
#define KEY_HINT "x-gateway-destination-endpoint-subset"
#define NS_LB "envoy.lb"
#define KEY_SERVED "x-gateway-destination-endpoint-served"

static int span_is(xp_span s, const char *lit)
{
    size_t n = strlen(lit);
    return s.n == n && !memcmp(s.p, lit, n);
}

const char *xp_header(const xp_in *in, const char *name, size_t *len)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < in->n_headers; i++) {
        const xp_hdr *h = &in->headers[i];
        if (h->key.n == n && !memcmp(h->key.p, name, n)) {
            *len = h->value.n;
            return h->value.p;
        }
    }
    return NULL;
}

/* Each part of a comma-separated string, spaces around it trimmed. */
static void each_comma(xp_span str, void (*each)(void *, const char *, size_t), void *cls)
{
    const char *s = str.p, *end = str.p + str.n;
    while (s < end) {
        while (s < end && (*s == ' ' || *s == ','))
            s++;
        const char *e = s;
        while (e < end && *e != ',')
            e++;
        const char *t = e;
        while (t > s && t[-1] == ' ')
            t--;
        if (t > s)
            each(cls, s, (size_t)(t - s));
        s = e;
    }
}

int xp_subset(const xp_in *in, void (*each)(void *cls, const char *s, size_t n), void *cls)
{
    if (in->subset <= 0)
        return in->subset;
    for (size_t i = 0; i < in->n_subset_items; i++)
        each_comma(in->subset_items[i], each, cls);
    return 1;
}

const char *xp_served(const xp_in *in, size_t *len)
{
    *len = in->served.n;
    return in->served.p;
}

void xp_in_free(xp_in *in)
{
    if (in->live)
        arena_reset(in->arena);
    in->live = 0;
    in->pb = NULL;
}

/* ---- through protobuf-c ---- */

static xp_span cstr(const char *s)
{
    return (xp_span){s, strlen(s)};
}

/* filter_metadata[ns][key], or NULL: the first entry named ns that has
 * the key, its first field of that name. */
static const Xp__Value *meta_value(const Xp__ProcessingRequest *r, const char *ns,
                                   const char *key)
{
    if (!r->metadata_context)
        return NULL;
    const Xp__Metadata *m = r->metadata_context;
    for (size_t i = 0; i < m->n_filter_metadata; i++) {
        const Xp__FilterMetadataEntry *e = m->filter_metadata[i];
        if (strcmp(e->key, ns) || !e->value)
            continue;
        for (size_t j = 0; j < e->value->n_fields; j++)
            if (!strcmp(e->value->fields[j]->key, key))
                return e->value->fields[j]->value;
    }
    return NULL;
}

static int pb_view(xp_in *in, const Xp__ProcessingRequest *r)
{
    xp_arena *a = in->arena;
    if (in->kind == XP_REQUEST_HEADERS || in->kind == XP_RESPONSE_HEADERS) {
        const Xp__HttpHeaders *hh = r->request_headers;   /* same union slot for both */
        const Xp__HeaderMap *hm = hh ? hh->headers : NULL;
        size_t n = hm ? hm->n_headers : 0;
        xp_hdr *h = arena_array(a, n, sizeof *h);
        if (n && !h)
            return -1;
        for (size_t i = 0; i < n; i++) {
            const Xp__HeaderValue *v = hm->headers[i];
            h[i].key = cstr(v->key);
            h[i].value = v->raw_value.len ? (xp_span){(const char *)v->raw_value.data,
                                                      v->raw_value.len}
                                          : cstr(v->value);
        }
        in->headers = h;
        in->n_headers = n;
    }
    const Xp__Value *v = meta_value(r, NS_HINT, KEY_HINT);
    if (v && v->kind_case == XP__VALUE__KIND_STRING_VALUE) {
        xp_span *it = arena_array(a, 1, sizeof *it);
        if (!it)
            return -1;
        it[0] = cstr(v->string_value);
        in->subset = 1;
        in->subset_items = it;
        in->n_subset_items = 1;
    } else if (v && v->kind_case == XP__VALUE__KIND_LIST_VALUE) {
        size_t n = v->list_value->n_values;
        xp_span *it = arena_array(a, n, sizeof *it);
        if (n && !it)
            return -1;
        in->subset = 1;
        for (size_t i = 0; i < n; i++) {
            const Xp__Value *e = v->list_value->values[i];
            if (e->kind_case != XP__VALUE__KIND_STRING_VALUE) {
                in->subset = -1;
                break;
            }
            it[i] = cstr(e->string_value);
        }
        in->subset_items = in->subset > 0 ? it : NULL;
        in->n_subset_items = in->subset > 0 ? n : 0;
    } else if (v) {
        in->subset = -1;
    }
    v = meta_value(r, NS_LB, KEY_SERVED);
    if (v && v->kind_case == XP__VALUE__KIND_STRING_VALUE)
        in->served = cstr(v->string_value);
    return 0;
}

int xp_read_pb(xp_arena *a, const uint8_t *msg, size_t len, xp_in *in, char *why,
               size_t whylen)
{
    memset(in, 0, sizeof *in);
    in->arena = a;
    int rc = walk((wire){msg, msg + len}, W_REQUEST, 0);
    if (rc == -2)
        return bad(why, whylen, "the ProcessingRequest's metadata nests deeper than 32 "
                   "levels");
    if (rc < 0)
        return bad(why, whylen, "not a ProcessingRequest (malformed protobuf)");
    Xp__ProcessingRequest *r = xp__processing_request__unpack(&a->alloc, len, msg);
    in->live = 1;   /* what a failed decode took is given back too */
    if (!r) {
        xp_in_free(in);
        return bad(why, whylen, "not a ProcessingRequest (malformed protobuf)");
    }
    in->pb = r;
    in->observability = r->observability_mode;
    if (r->protocol_config) {
        in->has_config = 1;
        in->request_body_mode = r->protocol_config->request_body_mode;
        in->response_body_mode = r->protocol_config->response_body_mode;
    }
    switch (r->request_case) {
    case XP__PROCESSING_REQUEST__REQUEST_REQUEST_HEADERS:
    case XP__PROCESSING_REQUEST__REQUEST_RESPONSE_HEADERS:
        in->kind = r->request_case == XP__PROCESSING_REQUEST__REQUEST_REQUEST_HEADERS
                       ? XP_REQUEST_HEADERS : XP_RESPONSE_HEADERS;
        in->end_of_stream = r->request_headers->end_of_stream;
        break;
    case XP__PROCESSING_REQUEST__REQUEST_REQUEST_BODY:
    case XP__PROCESSING_REQUEST__REQUEST_RESPONSE_BODY:
        in->kind = r->request_case == XP__PROCESSING_REQUEST__REQUEST_REQUEST_BODY
                       ? XP_REQUEST_BODY : XP_RESPONSE_BODY;
        in->end_of_stream = r->request_body->end_of_stream;
        in->body = r->request_body->body.data;
        in->body_len = r->request_body->body.len;
        break;
    case XP__PROCESSING_REQUEST__REQUEST_REQUEST_TRAILERS:
        in->kind = XP_REQUEST_TRAILERS;
        break;
    case XP__PROCESSING_REQUEST__REQUEST_RESPONSE_TRAILERS:
        in->kind = XP_RESPONSE_TRAILERS;
        break;
    default:
        xp_in_free(in);
        return bad(why, whylen, "the ProcessingRequest carries no phase (request_headers, "
                   "request_body, response_headers, ...)");
    }
    if (pb_view(in, r) < 0) {
        xp_in_free(in);
        return bad(why, whylen, "out of memory for the ProcessingRequest");
    }
    return 0;
}

/* ---- on the wire ----
 *
 * The common case read where it lies: a message whose every field is
 * there once (a repeated one any number of times), of the wire type its
 * number has, strings without NUL, booleans 0 or 1, enums 0..2^31-1 in at
 * most five bytes, keys and lengths in at most five bytes, no groups,
 * metadata no deeper than XP_MAX_DEPTH. That is what Envoy writes.
 * Anything else is left to protobuf-c (FALLBACK), so that its reading
 * decides every case where protobuf's rules of merging and last-one-wins,
 * or protobuf-c's own limits, would come in. */

enum { OK = 0, FALLBACK = 1, NOMEM = 2 };

/* One field: its number and wire type; a length-delimited one's bytes in
 * sub, a varint's value in v (written in vlen bytes). */
typedef struct fld {
    uint32_t num;
    int type;
    wire sub;
    uint64_t v;
    size_t vlen;
} fld;

/* The next field of w. FALLBACK when malformed, a group, or written
 * longer than protobuf-c reads (a key or a length in more than five
 * bytes). */
static int next_field(wire *w, fld *f)
{
    const uint8_t *at = w->p;
    uint64_t key;
    if (varint(w, &key) < 0 || w->p - at > 5 || key >> 3 == 0 || key >> 3 > 536870911u)
        return FALLBACK;
    f->num = (uint32_t)(key >> 3);
    f->type = (int)(key & 7);
    switch (f->type) {
    case 0:
        at = w->p;
        if (varint(w, &f->v) < 0)
            return FALLBACK;
        f->vlen = (size_t)(w->p - at);
        return OK;
    case 1:
    case 5: {
        size_t k = f->type == 1 ? 8 : 4;
        if ((size_t)(w->end - w->p) < k)
            return FALLBACK;
        w->p += k;
        return OK;
    }
    case 2:
        at = w->p;
        if (varint(w, &f->v) < 0 || w->p - at > 5 || f->v > (uint64_t)(w->end - w->p))
            return FALLBACK;
        f->sub = (wire){w->p, w->p + f->v};
        w->p += f->v;
        return OK;
    default:
        return FALLBACK;
    }
}

/* A known field as Envoy writes it, the first time (seen: a bit per
 * field number below 32): length-delimited; a string without NUL; a
 * boolean 0 or 1 in one byte; an enum or int32 non-negative in at most
 * five bytes. */
static int first(const fld *f, uint32_t *seen)
{
    if (*seen & (1u << f->num))
        return 0;
    *seen |= 1u << f->num;
    return 1;
}

static int is_len(const fld *f, uint32_t *seen)
{
    return f->type == 2 && first(f, seen);
}

static int is_text(const fld *f, uint32_t *seen)
{
    return is_len(f, seen) && !memchr(f->sub.p, '\0', (size_t)(f->sub.end - f->sub.p));
}

static int is_bool(const fld *f, uint32_t *seen)
{
    return f->type == 0 && f->vlen == 1 && f->v <= 1 && first(f, seen);
}

static int is_enum(const fld *f, uint32_t *seen)
{
    return f->type == 0 && f->vlen <= 5 && f->v <= 0x7fffffffu && first(f, seen);
}

static xp_span span_of(wire s)
{
    return (xp_span){(const char *)s.p, (size_t)(s.end - s.p)};
}

/* HeaderValue {key 1, value 2, raw_value 3}; h may be NULL (checked only). */
static int wire_header(wire w, xp_hdr *h)
{
    uint32_t seen = 0;
    fld f;
    xp_span key = {"", 0}, value = {"", 0}, raw = {"", 0};
    while (w.p < w.end) {
        if (next_field(&w, &f))
            return FALLBACK;
        if (f.num == 1 || f.num == 2) {
            if (!is_text(&f, &seen))
                return FALLBACK;
            *(f.num == 1 ? &key : &value) = span_of(f.sub);
        } else if (f.num == 3) {
            if (!is_len(&f, &seen))
                return FALLBACK;
            raw = span_of(f.sub);
        }
    }
    if (h) {
        h->key = key;
        h->value = raw.n ? raw : value;
    }
    return OK;
}

/* HeaderMap {repeated HeaderValue headers 1}: counted, then read into
 * the arena (out NULL: checked only). */
static int wire_header_map(wire w, xp_arena *a, const xp_hdr **out, size_t *n_out)
{
    fld f;
    size_t n = 0, i = 0;
    for (wire scan = w; scan.p < scan.end; n += f.num == 1)
        if (next_field(&scan, &f) || (f.num == 1 && f.type != 2))
            return FALLBACK;
    xp_hdr *h = out ? arena_array(a, n, sizeof *h) : NULL;
    if (out && n && !h)
        return NOMEM;
    while (w.p < w.end) {
        next_field(&w, &f);   /* checked above */
        if (f.num == 1 && wire_header(f.sub, h ? &h[i++] : NULL))
            return FALLBACK;
    }
    if (out) {
        *out = h;
        *n_out = n;
    }
    return OK;
}

/* HttpHeaders {HeaderMap headers 1, bool end_of_stream 3} or HttpTrailers
 * {HeaderMap trailers 1}; the headers go into in when keep. */
static int wire_headers(wire w, int trailers, xp_in *in, int keep)
{
    uint32_t seen = 0;
    int rc;
    fld f;
    while (w.p < w.end) {
        if (next_field(&w, &f))
            return FALLBACK;
        if (f.num == 1) {
            if (!is_len(&f, &seen))
                return FALLBACK;
            if ((rc = wire_header_map(f.sub, in->arena, keep ? &in->headers : NULL,
                                      &in->n_headers)))
                return rc;
        } else if (f.num == 3 && !trailers) {
            if (!is_bool(&f, &seen))
                return FALLBACK;
            in->end_of_stream = (int)f.v;
        }
    }
    return OK;
}

/* HttpBody {bytes body 1, bool end_of_stream 2} */
static int wire_body(wire w, xp_in *in)
{
    uint32_t seen = 0;
    fld f;
    while (w.p < w.end) {
        if (next_field(&w, &f))
            return FALLBACK;
        if (f.num == 1) {
            if (!is_len(&f, &seen))
                return FALLBACK;
            in->body = f.sub.p;
            in->body_len = (size_t)(f.sub.end - f.sub.p);
        } else if (f.num == 2) {
            if (!is_bool(&f, &seen))
                return FALLBACK;
            in->end_of_stream = (int)f.v;
        }
    }
    if (!in->body_len)
        in->body = NULL;   /* as protobuf-c leaves an empty bytes field */
    return OK;
}

/* ProtocolConfiguration {enum 1, enum 2, bool 3} */
static int wire_config(wire w, xp_in *in)
{
    uint32_t seen = 0;
    fld f;
    while (w.p < w.end) {
        if (next_field(&w, &f))
            return FALLBACK;
        if (f.num == 1 || f.num == 2) {
            if (!is_enum(&f, &seen))
                return FALLBACK;
            *(f.num == 1 ? &in->request_body_mode : &in->response_body_mode) = (int)f.v;
        } else if (f.num == 3 && !is_bool(&f, &seen)) {
            return FALLBACK;
        }
    }
    in->has_config = 1;
    return OK;
}

/* google.protobuf.Value, Struct and ListValue, checked to the depth
 * bound (numbered as walk() numbers it); a Value's kind (its one field,
 * 0 when none) and, for a string, a list or a struct, its bytes. */
static int wire_struct(wire w, int depth);
static int wire_value(wire w, int depth, uint32_t *kind, wire *body);

static int wire_list(wire w, int depth)
{
    fld f;
    uint32_t kind;
    wire body;
    if (depth > XP_MAX_DEPTH)
        return FALLBACK;
    while (w.p < w.end)
        if (next_field(&w, &f) ||
            (f.num == 1 && (f.type != 2 || wire_value(f.sub, depth + 1, &kind, &body))))
            return FALLBACK;
    return OK;
}

static int wire_value(wire w, int depth, uint32_t *kind, wire *body)
{
    uint32_t seen = 0;
    fld f;
    *kind = 0;
    if (depth > XP_MAX_DEPTH)
        return FALLBACK;
    while (w.p < w.end) {
        if (next_field(&w, &f))
            return FALLBACK;
        if (f.num < 1 || f.num > 6)
            continue;
        if (seen)   /* a second kind: protobuf-c's last-one-wins */
            return FALLBACK;
        int ok = f.num == 1 ? is_enum(&f, &seen)   /* null_value */
                 : f.num == 2 ? f.type == 1 && first(&f, &seen)   /* number_value */
                 : f.num == 3 ? is_text(&f, &seen)   /* string_value */
                 : f.num == 4 ? is_bool(&f, &seen)   /* bool_value */
                 : f.num == 5 ? is_len(&f, &seen) && !wire_struct(f.sub, depth + 1)
                              : is_len(&f, &seen) && !wire_list(f.sub, depth + 1);
        if (!ok)
            return FALLBACK;
        *kind = f.num;
        *body = f.sub;
    }
    return OK;
}

/* FieldsEntry {string key 1, Value value 2}: its key and value's bytes
 * (*has: a value was given). */
static int wire_entry(wire w, int depth, xp_span *key, wire *value, int *has)
{
    uint32_t seen = 0, kind;
    fld f;
    wire body;
    *key = (xp_span){"", 0};
    *has = 0;
    if (depth > XP_MAX_DEPTH)
        return FALLBACK;
    while (w.p < w.end) {
        if (next_field(&w, &f))
            return FALLBACK;
        if (f.num == 1) {
            if (!is_text(&f, &seen))
                return FALLBACK;
            *key = span_of(f.sub);
        } else if (f.num == 2) {
            if (!is_len(&f, &seen) || wire_value(f.sub, depth + 1, &kind, &body))
                return FALLBACK;
            *value = f.sub;
            *has = 1;
        }
    }
    return OK;
}

/* Struct {repeated FieldsEntry fields 1}, checked */
static int wire_struct(wire w, int depth)
{
    fld f;
    int has;
    wire val;
    xp_span key;
    if (depth > XP_MAX_DEPTH)
        return FALLBACK;
    while (w.p < w.end)
        if (next_field(&w, &f) ||
            (f.num == 1 && (f.type != 2 || wire_entry(f.sub, depth + 1, &key, &val, &has))))
            return FALLBACK;
    return OK;
}

/* What the picker looks up in the metadata: the first field `key` of the
 * first entry named ns that has it (protobuf-c's meta_value). */
typedef struct meta_find {
    const char *ns, *key;
    int found, has;              /* found: the key; has: with a value */
    wire value;
} meta_find;

/* In Struct w (checked before): field f->key, the first. */
static void find_in_struct(wire w, meta_find *mf)
{
    fld f;
    int has;
    wire val = {0};
    xp_span key;
    while (!mf->found && w.p < w.end) {
        next_field(&w, &f);
        if (f.num == 1 && !wire_entry(f.sub, 0, &key, &val, &has) && span_is(key, mf->key)) {
            mf->found = 1;
            mf->has = has;
            mf->value = val;
        }
    }
}

/* Metadata {repeated FilterMetadataEntry filter_metadata 1}, each
 * {string key 1, Struct value 2}: checked, then searched. An entry
 * without a value is passed over, as meta_value does. */
static int wire_metadata(wire w, meta_find *finds, int n_finds)
{
    fld f, g;
    while (w.p < w.end) {
        if (next_field(&w, &f))
            return FALLBACK;
        if (f.num != 1)
            continue;
        if (f.type != 2)
            return FALLBACK;
        uint32_t seen = 0;
        xp_span ns = {"", 0};
        wire st = {0}, e = f.sub;
        while (e.p < e.end) {
            if (next_field(&e, &g))
                return FALLBACK;
            if (g.num == 1) {
                if (!is_text(&g, &seen))
                    return FALLBACK;
                ns = span_of(g.sub);
            } else if (g.num == 2) {
                if (!is_len(&g, &seen) || wire_struct(g.sub, 3))
                    return FALLBACK;
                st = g.sub;
            }
        }
        for (int i = 0; (seen & (1u << 2)) && i < n_finds; i++)
            if (!finds[i].found && span_is(ns, finds[i].ns))
                find_in_struct(st, &finds[i]);
    }
    return OK;
}

/* The strings of a Value (checked before): kind 3 one; a list's, each
 * element a string (else -1, none); another kind -1. NOMEM. */
static int wire_strings(xp_arena *a, wire v, const xp_span **items, size_t *n_items)
{
    uint32_t kind, ek;
    wire body = {0}, eb;
    fld f;
    size_t n = 0, i = 0;
    wire_value(v, 0, &kind, &body);
    if (kind != 3 && kind != 6)
        return -1;
    for (wire l = body; kind == 6 && l.p < l.end; n += f.num == 1) {
        next_field(&l, &f);
        if (f.num == 1 && (wire_value(f.sub, 0, &ek, &eb), ek != 3))
            return -1;
    }
    xp_span *it = arena_array(a, kind == 3 ? 1 : n, sizeof *it);
    if (!it && (kind == 3 || n))
        return NOMEM;
    if (kind == 3)
        it[i++] = span_of(body);
    for (wire l = body; kind == 6 && l.p < l.end;) {
        next_field(&l, &f);
        if (f.num == 1) {
            wire_value(f.sub, 0, &ek, &eb);
            it[i++] = span_of(eb);
        }
    }
    *items = it;
    *n_items = i;
    return OK;
}

/* The metadata's two lookups into the view. */
static int wire_lookups(xp_in *in, wire meta)
{
    meta_find finds[2] = {{NS_HINT, KEY_HINT, 0, 0, {0}}, {NS_LB, KEY_SERVED, 0, 0, {0}}};
    if (wire_metadata(meta, finds, 2))
        return FALLBACK;
    if (finds[0].found && finds[0].has) {
        int rc = wire_strings(in->arena, finds[0].value, &in->subset_items,
                              &in->n_subset_items);
        if (rc == NOMEM)
            return NOMEM;
        in->subset = rc < 0 ? -1 : 1;
    }
    if (finds[1].found && finds[1].has) {
        uint32_t k;
        wire b = {0};
        wire_value(finds[1].value, 0, &k, &b);
        if (k == 3)
            in->served = span_of(b);
    }
    return OK;
}

static int wire_read(xp_in *in, const uint8_t *msg, size_t len)
{
    static const xp_kind kinds[] = {XP_REQUEST_HEADERS, XP_RESPONSE_HEADERS, XP_REQUEST_BODY,
                                    XP_RESPONSE_BODY, XP_REQUEST_TRAILERS,
                                    XP_RESPONSE_TRAILERS};
    wire w = {msg, msg + len}, phase = {0}, meta = {0};
    uint32_t seen = 0;
    int rc, kind = -1;
    fld f;
    while (w.p < w.end) {
        if (next_field(&w, &f))
            return FALLBACK;
        if (f.num >= 2 && f.num <= 7) {
            if (f.type != 2 || kind >= 0)   /* a second phase: protobuf-c's last-one-wins */
                return FALLBACK;
            kind = (int)f.num;
            phase = f.sub;
        } else if (f.num == 8) {
            if (!is_len(&f, &seen))
                return FALLBACK;
            meta = f.sub;
        } else if (f.num == 10) {
            if (!is_bool(&f, &seen))
                return FALLBACK;
            in->observability = (int)f.v;
        } else if (f.num == 11) {
            if (!is_len(&f, &seen) || wire_config(f.sub, in))
                return FALLBACK;
        }
    }
    if (kind < 0)
        return FALLBACK;   /* protobuf-c's path names it */
    in->kind = kinds[kind - 2];
    rc = kind <= 3 ? wire_headers(phase, 0, in, 1)
         : kind <= 5 ? wire_body(phase, in)
                     : wire_headers(phase, 1, in, 0);
    if (rc == OK && (seen & (1u << 8)))
        rc = wire_lookups(in, meta);
    return rc;
}

int xp_read(xp_arena *a, const uint8_t *msg, size_t len, xp_in *in, char *why,
            size_t whylen)
{
    memset(in, 0, sizeof *in);
    in->arena = a;
    in->live = 1;
    int rc = wire_read(in, msg, len);
    if (rc == OK)
        return 0;
    xp_in_free(in);
    if (rc == NOMEM)
        return bad(why, whylen, "out of memory for the ProcessingRequest");
    return xp_read_pb(a, msg, len, in, why, whylen);
}

/* ---- answers ---- */

static int pack(const ProtobufCMessage *m, xp_buf *out, size_t *len)
{
    *len = protobuf_c_message_get_packed_size(m);
    if (xp_buf_reserve(out, *len ? *len : 1) < 0)
        return -1;
    protobuf_c_message_pack(m, out->p);
    return 0;
}

int xp_pack_pick(const char *name, const char *ns, const char *value, xp_buf *out,
                 size_t *len)
{
    Xp__HeaderValue hv;
    xp__header_value__init(&hv);
    hv.key = (char *)name;
    hv.raw_value.data = (uint8_t *)value;
    hv.raw_value.len = strlen(value);
    Xp__HeaderValueOption opt;
    xp__header_value_option__init(&opt);
    opt.header = &hv;
    opt.append_action = 2;   /* OVERWRITE_IF_EXISTS_OR_ADD: a client's own value goes */
    Xp__HeaderValueOption *opts[1] = {&opt};
    Xp__HeaderMutation hm;
    xp__header_mutation__init(&hm);
    hm.n_set_headers = 1;
    hm.set_headers = opts;
    Xp__CommonResponse cr;
    xp__common_response__init(&cr);
    cr.header_mutation = &hm;
    cr.clear_route_cache = 1;
    Xp__HeadersResponse hr;
    xp__headers_response__init(&hr);
    hr.response = &cr;

    /* dynamic_metadata: {ns: {name: value}} */
    Xp__Value inner_v;
    xp__value__init(&inner_v);
    inner_v.kind_case = XP__VALUE__KIND_STRING_VALUE;
    inner_v.string_value = (char *)value;
    Xp__FieldsEntry inner_e;
    xp__fields_entry__init(&inner_e);
    inner_e.key = (char *)name;
    inner_e.value = &inner_v;
    Xp__FieldsEntry *inner_es[1] = {&inner_e};
    Xp__Struct inner;
    xp__struct__init(&inner);
    inner.n_fields = 1;
    inner.fields = inner_es;
    Xp__Value outer_v;
    xp__value__init(&outer_v);
    outer_v.kind_case = XP__VALUE__KIND_STRUCT_VALUE;
    outer_v.struct_value = &inner;
    Xp__FieldsEntry outer_e;
    xp__fields_entry__init(&outer_e);
    outer_e.key = (char *)ns;
    outer_e.value = &outer_v;
    Xp__FieldsEntry *outer_es[1] = {&outer_e};
    Xp__Struct dm;
    xp__struct__init(&dm);
    dm.n_fields = 1;
    dm.fields = outer_es;

    Xp__ProcessingResponse pr;
    xp__processing_response__init(&pr);
    pr.response_case = XP__PROCESSING_RESPONSE__RESPONSE_REQUEST_HEADERS;
    pr.request_headers = &hr;
    pr.dynamic_metadata = &dm;
    return pack(&pr.base, out, len);
}

/* ---- a body chunk, framed by hand ---- */

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80)
        v >>= 7, n++;
    return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* A length-delimited field's key and length (wire type 2). */
static uint8_t *put_len(uint8_t *p, unsigned num, uint64_t len)
{
    *p++ = (uint8_t)(num << 3 | 2);
    return put_varint(p, len);
}

void xp_frame_stream_chunk(int response_side, size_t n, int eos,
                           uint8_t head[XP_CHUNK_HEAD_MAX], size_t *head_len, uint8_t tail[2],
                           size_t *tail_len)
{
    /* ProcessingResponse.request_body(3) | response_body(4)
     *   BodyResponse.response(1)  CommonResponse.body_mutation(3)
     *   BodyMutation.streamed_response(3)
     *   StreamedBodyResponse { body(1), end_of_stream(2) }
     * with proto3's rule that a field at its default is not sent */
    uint64_t sb = (n ? 1 + varint_len(n) + n : 0) + (eos ? 2 : 0);
    uint64_t bm = 1 + varint_len(sb) + sb, cr = 1 + varint_len(bm) + bm;
    uint64_t br = 1 + varint_len(cr) + cr;
    uint8_t *p = put_len(head, response_side ? 4 : 3, br);
    p = put_len(p, 1, cr);
    p = put_len(p, 3, bm);
    p = put_len(p, 3, sb);
    if (n)
        p = put_len(p, 1, n);
    *head_len = (size_t)(p - head);
    *tail_len = 0;
    if (eos) {
        tail[0] = 2 << 3;   /* end_of_stream, varint */
        tail[1] = 1;
        *tail_len = 2;
    }
}

int xp_pack_continue(xp_kind kind, xp_buf *out, size_t *len)
{
    Xp__CommonResponse cr;
    xp__common_response__init(&cr);
    Xp__HeadersResponse hr;
    xp__headers_response__init(&hr);
    hr.response = &cr;
    Xp__BodyResponse br;
    xp__body_response__init(&br);
    br.response = &cr;
    Xp__TrailersResponse tr;
    xp__trailers_response__init(&tr);
    Xp__ProcessingResponse pr;
    xp__processing_response__init(&pr);
    switch (kind) {
    case XP_REQUEST_HEADERS:
        pr.response_case = XP__PROCESSING_RESPONSE__RESPONSE_REQUEST_HEADERS;
        pr.request_headers = &hr;
        break;
    case XP_RESPONSE_HEADERS:
        pr.response_case = XP__PROCESSING_RESPONSE__RESPONSE_RESPONSE_HEADERS;
        pr.response_headers = &hr;
        break;
    case XP_REQUEST_BODY:
        pr.response_case = XP__PROCESSING_RESPONSE__RESPONSE_REQUEST_BODY;
        pr.request_body = &br;
        break;
    case XP_RESPONSE_BODY:
        pr.response_case = XP__PROCESSING_RESPONSE__RESPONSE_RESPONSE_BODY;
        pr.response_body = &br;
        break;
    case XP_REQUEST_TRAILERS:
        pr.response_case = XP__PROCESSING_RESPONSE__RESPONSE_REQUEST_TRAILERS;
        pr.request_trailers = &tr;
        break;
    case XP_RESPONSE_TRAILERS:
        pr.response_case = XP__PROCESSING_RESPONSE__RESPONSE_RESPONSE_TRAILERS;
        pr.response_trailers = &tr;
        break;
    }
    return pack(&pr.base, out, len);
}

int xp_pack_immediate(int code, const char *body, const char *content_type,
                      const char *details, xp_buf *out, size_t *len)
{
    Xp__HttpStatus st;
    xp__http_status__init(&st);
    st.code = code;
    Xp__ImmediateResponse ir;
    xp__immediate_response__init(&ir);
    ir.status = &st;
    Xp__HeaderValue hv;
    Xp__HeaderValueOption hvo, *set[1] = {&hvo};
    Xp__HeaderMutation hm;
    if (content_type) {
        xp__header_value__init(&hv);
        hv.key = (char *)"content-type";
        hv.raw_value.data = (uint8_t *)content_type;   /* Envoy reads raw_value */
        hv.raw_value.len = strlen(content_type);
        xp__header_value_option__init(&hvo);
        hvo.header = &hv;
        xp__header_mutation__init(&hm);
        hm.n_set_headers = 1;
        hm.set_headers = set;
        ir.headers = &hm;
    }
    ir.body.data = (uint8_t *)body;
    ir.body.len = strlen(body);
    ir.details = (char *)details;
    Xp__ProcessingResponse pr;
    xp__processing_response__init(&pr);
    pr.response_case = XP__PROCESSING_RESPONSE__RESPONSE_IMMEDIATE_RESPONSE;
    pr.immediate_response = &ir;
    return pack(&pr.base, out, len);
}

int xp_read_health(const uint8_t *msg, size_t len, char *svc, size_t n)
{
    Xp__HealthCheckRequest *r = xp__health_check_request__unpack(NULL, len, msg);
    if (!r)
        return -1;
    snprintf(svc, n, "%s", r->service);
    xp__health_check_request__free_unpacked(r, NULL);
    return 0;
}

int xp_pack_health(int status, xp_buf *out, size_t *len)
{
    Xp__HealthCheckResponse r;
    xp__health_check_response__init(&r);
    r.status = status;
    return pack(&r.base, out, len);
}
