/* xp_msg.c - ext_proc messages through protobuf-c (xp_msg.h). */
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

int xp_read(xp_arena *a, const uint8_t *msg, size_t len, xp_in *in, char *why,
            size_t whylen)
{
    memset(in, 0, sizeof *in);
    int rc = walk((wire){msg, msg + len}, W_REQUEST, 0);
    if (rc == -2)
        return bad(why, whylen, "the ProcessingRequest's metadata nests deeper than 32 "
                   "levels");
    if (rc < 0)
        return bad(why, whylen, "not a ProcessingRequest (malformed protobuf)");
    Xp__ProcessingRequest *r = xp__processing_request__unpack(a ? &a->alloc : NULL, len, msg);
    if (!r) {
        if (a)
            arena_reset(a);   /* what the failed decode had taken */
        return bad(why, whylen, "not a ProcessingRequest (malformed protobuf)");
    }
    in->pb = r;
    in->arena = a;
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
        return 0;
    case XP__PROCESSING_REQUEST__REQUEST_REQUEST_BODY:
    case XP__PROCESSING_REQUEST__REQUEST_RESPONSE_BODY:
        in->kind = r->request_case == XP__PROCESSING_REQUEST__REQUEST_REQUEST_BODY
                       ? XP_REQUEST_BODY : XP_RESPONSE_BODY;
        in->end_of_stream = r->request_body->end_of_stream;
        in->body = r->request_body->body.data;
        in->body_len = r->request_body->body.len;
        return 0;
    case XP__PROCESSING_REQUEST__REQUEST_REQUEST_TRAILERS:
        in->kind = XP_REQUEST_TRAILERS;
        return 0;
    case XP__PROCESSING_REQUEST__REQUEST_RESPONSE_TRAILERS:
        in->kind = XP_RESPONSE_TRAILERS;
        return 0;
    default:
        xp_in_free(in);
        return bad(why, whylen, "the ProcessingRequest carries no phase (request_headers, "
                   "request_body, response_headers, ...)");
    }
}

void xp_in_free(xp_in *in)
{
    if (in->pb && in->arena)
        arena_reset(in->arena);
    else if (in->pb)
        xp__processing_request__free_unpacked(in->pb, NULL);
    in->pb = NULL;
}

const char *xp_header(const xp_in *in, const char *name, size_t *len)
{
    const Xp__ProcessingRequest *r = in->pb;
    if (in->kind != XP_REQUEST_HEADERS && in->kind != XP_RESPONSE_HEADERS)
        return NULL;
    const Xp__HttpHeaders *h = r->request_headers;   /* same union slot for both */
    if (!h || !h->headers)
        return NULL;
    for (size_t i = 0; i < h->headers->n_headers; i++) {
        const Xp__HeaderValue *v = h->headers->headers[i];
        if (strcmp(v->key, name))
            continue;
        if (v->raw_value.len) {
            *len = v->raw_value.len;
            return (const char *)v->raw_value.data;
        }
        *len = strlen(v->value);
        return v->value;
    }
    return NULL;
}

/* filter_metadata[ns][key], or NULL. */
static const Xp__Value *meta_value(const xp_in *in, const char *ns, const char *key)
{
    const Xp__ProcessingRequest *r = in->pb;
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

static void each_comma(const char *s, void (*each)(void *, const char *, size_t), void *cls)
{
    while (*s) {
        while (*s == ' ' || *s == ',')
            s++;
        const char *e = s;
        while (*e && *e != ',')
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
    const Xp__Value *v = meta_value(in, "envoy.lb.subset_hint",
                                    "x-gateway-destination-endpoint-subset");
    if (!v)
        return 0;
    if (v->kind_case == XP__VALUE__KIND_STRING_VALUE) {
        each_comma(v->string_value, each, cls);
        return 1;
    }
    if (v->kind_case != XP__VALUE__KIND_LIST_VALUE)
        return -1;
    for (size_t i = 0; i < v->list_value->n_values; i++) {
        const Xp__Value *e = v->list_value->values[i];
        if (e->kind_case != XP__VALUE__KIND_STRING_VALUE)
            return -1;
        each_comma(e->string_value, each, cls);
    }
    return 1;
}

const char *xp_served(const xp_in *in, size_t *len)
{
    const Xp__Value *v = meta_value(in, "envoy.lb", "x-gateway-destination-endpoint-served");
    if (!v || v->kind_case != XP__VALUE__KIND_STRING_VALUE)
        return NULL;
    *len = strlen(v->string_value);
    return v->string_value;
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

int xp_pack_immediate(int code, const char *body, const char *details, xp_buf *out,
                      size_t *len)
{
    Xp__HttpStatus st;
    xp__http_status__init(&st);
    st.code = code;
    Xp__ImmediateResponse ir;
    xp__immediate_response__init(&ir);
    ir.status = &st;
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
