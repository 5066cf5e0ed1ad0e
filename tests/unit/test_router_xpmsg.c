/* test_router_xpmsg.c - the gateway picker's messages (src/router/extproc/
 * xp_msg.h, xp_sig.h) against bytes written here by hand from Envoy's
 * field numbers, not by protobuf-c: a request_headers message with its
 * headers (raw_value and value), protocol_config and the subset hint as a
 * list and as a comma string; a body chunk; the nesting bound (a value 32
 * levels deep passes, 35 do not); malformed bytes; the answers decoded back field by
 * field; the framed body chunk byte for byte against protobuf-c's packing
 * of the same message; the signature in the body. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xp.pb-c.h"
#include "xp_msg.h"
#include "xp_sig.h"

/* ---- a tiny protobuf writer (the test's own) ---- */

typedef struct buf {
    uint8_t b[1 << 16];
    size_t n;
} buf;

static void varint(buf *o, uint64_t v)
{
    do {
        uint8_t c = v & 0x7f;
        v >>= 7;
        o->b[o->n++] = (uint8_t)(c | (v ? 0x80 : 0));
    } while (v);
}

static void ld(buf *o, int num, const void *p, size_t n)
{
    varint(o, (uint64_t)num << 3 | 2);
    varint(o, n);
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

static void vint(buf *o, int num, uint64_t v)
{
    varint(o, (uint64_t)num << 3);
    varint(o, v);
}

static void str(buf *o, int num, const char *s)
{
    ld(o, num, s, strlen(s));
}

/* a google.protobuf.Value holding a string */
static void value_str(buf *o, const char *s)
{
    str(o, 3, s);
}

/* Metadata{filter_metadata{ns: Struct{key: value}}} with the value's
 * bytes given */
static void metadata(buf *o, const char *ns, const char *key, const buf *value)
{
    buf entry = {.n = 0}, st = {.n = 0}, fme = {.n = 0}, md = {.n = 0};
    str(&entry, 1, key);
    ld(&entry, 2, value->b, value->n);
    ld(&st, 1, entry.b, entry.n);
    str(&fme, 1, ns);
    ld(&fme, 2, st.b, st.n);
    ld(&md, 1, fme.b, fme.n);
    ld(o, 8, md.b, md.n);
}

static void header(buf *map, const char *k, const char *v, int raw)
{
    buf h = {.n = 0};
    str(&h, 1, k);
    str(&h, raw ? 3 : 2, v);
    ld(map, 1, h.b, h.n);
}

static buf *request_headers(const buf *hint)
{
    static buf o;
    buf map = {.n = 0}, hh = {.n = 0}, cfg = {.n = 0};
    o.n = 0;
    header(&map, ":path", "/v1/completions", 1);
    header(&map, "x-request-id", "req-7", 1);
    header(&map, "x-plain", "old-style", 0);
    ld(&hh, 1, map.b, map.n);
    vint(&hh, 3, 0);
    ld(&o, 2, hh.b, hh.n);
    vint(&cfg, 1, 4);
    vint(&cfg, 2, 4);
    ld(&o, 11, cfg.b, cfg.n);
    if (hint)
        metadata(&o, "envoy.lb.subset_hint", "x-gateway-destination-endpoint-subset", hint);
    return &o;
}

/* ---- reading, both ways ---- */

static void same_span(xp_span a, xp_span b)
{
    assert_int_equal(a.n, b.n);
    if (a.n)
        assert_memory_equal(a.p, b.p, a.n);
}

/* xp_read (on the wire where it can) held to xp_read_pb (protobuf-c) on
 * the same bytes: the same answer and the same view. in: xp_read's. */
static int read_both(const uint8_t *msg, size_t n, xp_in *in, char *why, size_t whylen)
{
    static xp_arena *a, *b;
    if (!a) {
        a = xp_arena_new();
        b = xp_arena_new();
    }
    xp_in p;
    char pwhy[160];
    int rc = xp_read(a, msg, n, in, why, whylen), rp = xp_read_pb(b, msg, n, &p, pwhy, sizeof pwhy);
    assert_int_equal(rc, rp);
    if (rc < 0) {
        assert_string_equal(why, pwhy);
        return rc;
    }
    assert_int_equal(in->kind, p.kind);
    assert_int_equal(in->end_of_stream, p.end_of_stream);
    assert_int_equal(in->has_config, p.has_config);
    assert_int_equal(in->request_body_mode, p.request_body_mode);
    assert_int_equal(in->response_body_mode, p.response_body_mode);
    assert_int_equal(in->observability, p.observability);
    same_span((xp_span){(const char *)in->body, in->body_len},
              (xp_span){(const char *)p.body, p.body_len});
    assert_int_equal(in->n_headers, p.n_headers);
    for (size_t i = 0; i < in->n_headers; i++) {
        same_span(in->headers[i].key, p.headers[i].key);
        same_span(in->headers[i].value, p.headers[i].value);
    }
    assert_int_equal(in->subset, p.subset);
    assert_int_equal(in->n_subset_items, p.n_subset_items);
    for (size_t i = 0; i < in->n_subset_items; i++)
        same_span(in->subset_items[i], p.subset_items[i]);
    assert_int_equal(!in->served.p, !p.served.p);
    same_span(in->served, p.served);
    xp_in_free(&p);
    return rc;
}

typedef struct seen {
    char s[8][32];
    int n;
} seen;

static void collect(void *cls, const char *s, size_t n)
{
    seen *v = cls;
    assert_true(n > 0 && n < 32 && v->n < 8);
    memcpy(v->s[v->n], s, n);
    v->s[v->n++][n] = '\0';
}

static void test_request_headers(void **state)
{
    (void)state;
    buf list = {.n = 0}, lv = {.n = 0}, e1 = {.n = 0}, e2 = {.n = 0};
    value_str(&e1, "10.0.0.1:8000");
    value_str(&e2, "10.0.0.2:8000");
    ld(&lv, 1, e1.b, e1.n);
    ld(&lv, 1, e2.b, e2.n);
    ld(&list, 6, lv.b, lv.n);   /* Value{list_value} */
    buf *m = request_headers(&list);
    xp_in in;
    char why[128];
    assert_int_equal(read_both(m->b, m->n, &in, why, sizeof why), 0);
    assert_null(in.pb);   /* as Envoy writes it: read on the wire */
    assert_int_equal(in.kind, XP_REQUEST_HEADERS);
    assert_int_equal(in.end_of_stream, 0);
    assert_true(in.has_config);
    assert_int_equal(in.request_body_mode, XP_MODE_FULL_DUPLEX);
    size_t n;
    const char *v = xp_header(&in, "x-request-id", &n);
    assert_non_null(v);
    assert_int_equal(n, 5);
    assert_memory_equal(v, "req-7", 5);
    v = xp_header(&in, "x-plain", &n);   /* value, not raw_value */
    assert_non_null(v);
    assert_memory_equal(v, "old-style", n);
    assert_null(xp_header(&in, "x-absent", &n));
    seen s = {.n = 0};
    assert_int_equal(xp_subset(&in, collect, &s), 1);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.s[0], "10.0.0.1:8000");
    assert_string_equal(s.s[1], "10.0.0.2:8000");
    xp_in_free(&in);

    /* the comma string form, spaces around */
    buf cs = {.n = 0};
    value_str(&cs, " 10.0.0.3:8000 , 10.0.0.4:8000,");
    m = request_headers(&cs);
    assert_int_equal(read_both(m->b, m->n, &in, why, sizeof why), 0);
    s.n = 0;
    assert_int_equal(xp_subset(&in, collect, &s), 1);
    assert_int_equal(s.n, 2);
    assert_string_equal(s.s[1], "10.0.0.4:8000");
    xp_in_free(&in);

    /* no hint; a hint of a number */
    m = request_headers(NULL);
    assert_int_equal(read_both(m->b, m->n, &in, why, sizeof why), 0);
    assert_int_equal(xp_subset(&in, collect, &s), 0);
    xp_in_free(&in);
    buf num = {.n = 0};
    varint(&num, 2 << 3 | 1);   /* number_value, a double */
    memset(num.b + num.n, 0, 8);
    num.n += 8;
    m = request_headers(&num);
    assert_int_equal(read_both(m->b, m->n, &in, why, sizeof why), 0);
    assert_int_equal(xp_subset(&in, collect, &s), -1);
    xp_in_free(&in);
}

static void test_body_and_malformed(void **state)
{
    (void)state;
    buf m = {.n = 0}, body = {.n = 0};
    str(&body, 1, "{\"prompt\":\"x\"}");
    vint(&body, 2, 1);
    ld(&m, 5, body.b, body.n);   /* response_body */
    xp_in in;
    char why[128];
    assert_int_equal(read_both(m.b, m.n, &in, why, sizeof why), 0);
    assert_null(in.pb);
    assert_int_equal(in.kind, XP_RESPONSE_BODY);
    assert_int_equal(in.end_of_stream, 1);
    assert_int_equal(in.body_len, 14);
    assert_memory_equal(in.body, "{\"prompt\":\"x\"}", 14);
    xp_in_free(&in);

    static const uint8_t junk[][4] = {{0x0a, 0x05, 0x01}, {0xff, 0xff, 0xff, 0xff}, {0x07}};
    for (size_t i = 0; i < sizeof junk / sizeof *junk; i++) {
        why[0] = '\0';
        assert_int_equal(read_both(junk[i], i == 2 ? 1 : 3 + (i == 1), &in, why, sizeof why), -1);
        assert_non_null(strstr(why, "ProcessingRequest"));
    }
    /* no phase at all: only observability_mode */
    buf none = {.n = 0};
    vint(&none, 10, 1);
    assert_int_equal(read_both(none.b, none.n, &in, why, sizeof why), -1);
    assert_non_null(strstr(why, "no phase"));
}

/* Messages that are not as Envoy writes them go through protobuf-c,
 * whose reading decides them, and give the view it gives; the ones that
 * are, on the wire. Each case: its bytes, and whether protobuf-c reads
 * it. */
/* request_headers holding one HeaderValue of the given bytes, into m */
static void one_header_message(const buf *hv, buf *m)
{
    buf map = {.n = 0}, hh = {.n = 0};
    ld(&map, 1, hv->b, hv->n);
    ld(&hh, 1, map.b, map.n);
    m->n = 0;
    ld(m, 2, hh.b, hh.n);
}

static void test_wire_or_protobuf_c(void **state)
{
    (void)state;
    static buf hv, m, body;
    xp_in in;
    char why[160];
    /* a header whose key comes twice: protobuf's last one wins */
    hv.n = body.n = 0;
    str(&hv, 1, "x-first");
    str(&hv, 1, "x-request-id");
    str(&hv, 3, "r-9");
    one_header_message(&hv, &m);
    assert_int_equal(read_both(m.b, m.n, &in, why, sizeof why), 0);
    assert_non_null(in.pb);
    size_t n;
    const char *v = xp_header(&in, "x-request-id", &n);
    assert_non_null(v);
    assert_memory_equal(v, "r-9", 3);
    xp_in_free(&in);
    /* a phase given twice (headers, then a body): the last one */
    str(&body, 1, "{}");
    ld(&m, 4, body.b, body.n);
    assert_int_equal(read_both(m.b, m.n, &in, why, sizeof why), 0);
    assert_non_null(in.pb);
    assert_int_equal(in.kind, XP_REQUEST_BODY);
    assert_int_equal(in.body_len, 2);
    xp_in_free(&in);
    /* end_of_stream written as 2, and as a 2-byte 1 */
    static const uint8_t eos2[] = {0x22, 0x02, 0x10, 0x02}, eos_long[] = {0x22, 0x03, 0x10, 0x81,
                                                                           0x00};
    assert_int_equal(read_both(eos2, sizeof eos2, &in, why, sizeof why), 0);
    assert_non_null(in.pb);
    assert_int_equal(in.end_of_stream, 1);
    xp_in_free(&in);
    assert_int_equal(read_both(eos_long, sizeof eos_long, &in, why, sizeof why), 0);
    assert_non_null(in.pb);
    xp_in_free(&in);
    /* a header key with a NUL: protobuf-c's C string ends there */
    hv.n = 0;
    ld(&hv, 1, "x-request-id\0zz", 15);
    str(&hv, 2, "r-1");
    one_header_message(&hv, &m);
    assert_int_equal(read_both(m.b, m.n, &in, why, sizeof why), 0);
    assert_non_null(in.pb);
    assert_non_null(xp_header(&in, "x-request-id", &n));
    xp_in_free(&in);
    /* unknown fields of every wire type beside the body: skipped, on the wire */
    static const uint8_t unknown[] = {0x22, 0x03, 0x0a, 0x01, 'x', 0x60, 0x05, 0x69, 1, 2, 3,
                                      4, 5, 6, 7, 8, 0x75, 1, 2, 3, 4, 0x7a, 0x01, 0x00};
    assert_int_equal(read_both(unknown, sizeof unknown, &in, why, sizeof why), 0);
    assert_null(in.pb);
    assert_int_equal(in.body_len, 1);
    xp_in_free(&in);
    /* a key written in six bytes (a field number padded with a zero
     * byte): protobuf-c reads keys of at most five and refuses it */
    static const uint8_t long_key[] = {0x22, 0x09, 0xb9, 0xbe, 0xbe, 0xa7, 0x8a, 0x00, 0x01,
                                       0x02, 0x03};
    assert_int_equal(read_both(long_key, sizeof long_key, &in, why, sizeof why), -1);
    /* a group (wire type 3) anywhere: refused by both */
    static const uint8_t group[] = {0x22, 0x02, 0x0b, 0x0c};
    assert_int_equal(read_both(group, sizeof group, &in, why, sizeof why), -1);
    /* a known field of the wrong wire type: protobuf-c decides */
    static const uint8_t wrong[] = {0x22, 0x02, 0x08, 0x01};   /* body as a varint */
    int rc = read_both(wrong, sizeof wrong, &in, why, sizeof why);
    if (rc == 0)
        xp_in_free(&in);
}

/* Value nested `levels` deep in Struct/Value pairs under the subset hint's
 * namespace: the bound is on the wire walk's depth (Metadata, its entry,
 * then each Struct, entry and Value count one). */
static int read_nested(int pairs)
{
    static buf inner, tmp;
    inner.n = 0;
    value_str(&inner, "leaf");
    for (int i = 0; i < pairs; i++) {
        tmp.n = 0;
        buf st = {.n = 0}, entry = {.n = 0};
        str(&entry, 1, "k");
        ld(&entry, 2, inner.b, inner.n);
        ld(&st, 1, entry.b, entry.n);
        ld(&tmp, 5, st.b, st.n);   /* Value{struct_value} */
        inner = tmp;
    }
    buf *m = request_headers(&inner);
    xp_in in;
    char why[128];
    int rc = read_both(m->b, m->n, &in, why, sizeof why);
    if (rc == 0)
        xp_in_free(&in);
    else
        assert_non_null(strstr(why, "deeper than 32"));
    return rc;
}

static void test_nesting_bound(void **state)
{
    (void)state;
    assert_int_equal(read_nested(9), 0);    /* the leaf at 5 + 9 x 3 = 32 levels */
    assert_int_equal(read_nested(10), -1);  /* 35 */
    assert_int_equal(read_nested(200), -1);
}

/* The answers, read back by the test's own walk. */
static const uint8_t *field_at(const uint8_t *p, size_t n, int num, size_t *len)
{
    const uint8_t *end = p + n;
    while (p < end) {
        uint64_t key = 0, v = 0;
        int sh = 0;
        do key |= (uint64_t)(*p & 0x7f) << sh, sh += 7; while (*p++ & 0x80);
        if ((key & 7) == 0) {
            sh = 0;
            do v |= (uint64_t)(*p & 0x7f) << sh, sh += 7; while (*p++ & 0x80);
            if ((int)(key >> 3) == num) {
                *len = v;
                return NULL;
            }
            continue;
        }
        assert_int_equal(key & 7, 2);
        sh = 0;
        do v |= (uint64_t)(*p & 0x7f) << sh, sh += 7; while (*p++ & 0x80);
        if ((int)(key >> 3) == num) {
            *len = v;
            return p;
        }
        p += v;
    }
    fail_msg("field %d absent", num);
    return NULL;
}

/* A framed body chunk as one message: head, body, tail. */
static void chunk_bytes(int response_side, const uint8_t *body, size_t n, int eos, buf *o)
{
    uint8_t head[XP_CHUNK_HEAD_MAX], tail[2];
    size_t hl, tl;
    xp_frame_stream_chunk(response_side, n, eos, head, &hl, tail, &tl);
    assert_true(hl <= XP_CHUNK_HEAD_MAX && tl <= 2);
    assert_true(hl + n + tl <= sizeof o->b);
    memcpy(o->b, head, hl);
    memcpy(o->b + hl, body, n);
    memcpy(o->b + hl + n, tail, tl);
    o->n = hl + n + tl;
}

/* The framed chunk is what protobuf-c packs for the same message, on
 * both sides, with and without end_of_stream, at every size where a
 * length's varint grows a byte (and the empty body, which proto3 leaves
 * out). */
static void test_chunk_frame_protobuf_c(void **state)
{
    (void)state;
    static const size_t sizes[] = {0, 1, 2, 100, 112, 113, 114, 115, 116, 117, 118, 119, 120,
                                   121, 122, 123, 124, 125, 126, 127, 128, 129, 4096, 16369,
                                   16370, 16371, 16372, 16375, 16377, 16380, 16383, 16384,
                                   16385, 30000, 61999, 62000};
    static buf a, b;
    static uint8_t body[62000];
    for (size_t i = 0; i < sizeof body; i++)
        body[i] = (uint8_t)(i * 7 + 3);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (int side = 0; side < 2; side++)
            for (int eos = 0; eos < 2; eos++) {
                size_t n = sizes[i];
                chunk_bytes(side, body, n, eos, &a);
                Xp__StreamedBodyResponse sb;
                xp__streamed_body_response__init(&sb);
                sb.body.data = body;
                sb.body.len = n;
                sb.end_of_stream = eos;
                Xp__BodyMutation bm;
                xp__body_mutation__init(&bm);
                bm.mutation_case = XP__BODY_MUTATION__MUTATION_STREAMED_RESPONSE;
                bm.streamed_response = &sb;
                Xp__CommonResponse cr;
                xp__common_response__init(&cr);
                cr.body_mutation = &bm;
                Xp__BodyResponse br;
                xp__body_response__init(&br);
                br.response = &cr;
                Xp__ProcessingResponse pr;
                xp__processing_response__init(&pr);
                pr.response_case = side ? XP__PROCESSING_RESPONSE__RESPONSE_RESPONSE_BODY
                                        : XP__PROCESSING_RESPONSE__RESPONSE_REQUEST_BODY;
                if (side)
                    pr.response_body = &br;
                else
                    pr.request_body = &br;
                b.n = protobuf_c_message_get_packed_size(&pr.base);
                assert_true(b.n <= sizeof b.b);
                protobuf_c_message_pack(&pr.base, b.b);
                if (a.n != b.n || memcmp(a.b, b.b, a.n))
                    fail_msg("chunk of %zu bytes (side %d, eos %d): %zu framed bytes, "
                             "protobuf-c packs %zu", n, side, eos, a.n, b.n);
            }
}

static void test_pick_answer(void **state)
{
    (void)state;
    xp_buf ob = {0};
    const uint8_t *out;
    size_t n, l1, l2, l3, l4, l5, l6, l7;
    assert_int_equal(xp_pack_pick("x-gateway-destination-endpoint", "envoy.lb", "10.0.0.9:8000",
                                  &ob, &n), 0);
    out = ob.p;
    /* ProcessingResponse.request_headers(1).response(1) */
    const uint8_t *hr = field_at(out, n, 1, &l1);
    const uint8_t *cr = field_at(hr, l1, 1, &l2);
    size_t crc;
    field_at(cr, l2, 5, &crc);
    assert_int_equal(crc, 1);   /* clear_route_cache */
    const uint8_t *hm = field_at(cr, l2, 2, &l3);
    const uint8_t *opt = field_at(hm, l3, 1, &l4);
    size_t action;
    field_at(opt, l4, 3, &action);
    assert_int_equal(action, 2);   /* OVERWRITE_IF_EXISTS_OR_ADD */
    const uint8_t *hv = field_at(opt, l4, 1, &l5);
    const uint8_t *key = field_at(hv, l5, 1, &l6);
    assert_memory_equal(key, "x-gateway-destination-endpoint", l6);
    const uint8_t *raw = field_at(hv, l5, 3, &l7);
    assert_int_equal(l7, 13);
    assert_memory_equal(raw, "10.0.0.9:8000", 13);
    /* dynamic_metadata(8): Struct{fields{"envoy.lb": {struct_value: ...}}} */
    const uint8_t *dm = field_at(out, n, 8, &l1);
    const uint8_t *fe = field_at(dm, l1, 1, &l2);
    const uint8_t *ns = field_at(fe, l2, 1, &l3);
    assert_memory_equal(ns, "envoy.lb", l3);
    const uint8_t *val = field_at(fe, l2, 2, &l3);
    const uint8_t *st = field_at(val, l3, 5, &l4);
    const uint8_t *fe2 = field_at(st, l4, 1, &l5);
    const uint8_t *v2 = field_at(fe2, l5, 2, &l6);
    const uint8_t *s2 = field_at(v2, l6, 3, &l7);
    assert_memory_equal(s2, "10.0.0.9:8000", l7);

    uint8_t body[70];
    memset(body, 'b', sizeof body);
    buf chunk = {.n = 0};
    chunk_bytes(0, body, sizeof body, 1, &chunk);
    out = chunk.b;
    n = chunk.n;
    const uint8_t *br = field_at(out, n, 3, &l1);   /* request_body */
    cr = field_at(br, l1, 1, &l2);
    const uint8_t *bm = field_at(cr, l2, 3, &l3);
    const uint8_t *sr = field_at(bm, l3, 3, &l4);   /* streamed_response */
    const uint8_t *b = field_at(sr, l4, 1, &l5);
    assert_int_equal(l5, sizeof body);
    assert_memory_equal(b, body, l5);
    size_t eos;
    field_at(sr, l4, 2, &eos);
    assert_int_equal(eos, 1);

    assert_int_equal(xp_pack_immediate(503, "{}", "application/json", "eldr", &ob, &n), 0);
    out = ob.p;
    const uint8_t *ir = field_at(out, n, 7, &l1);
    const uint8_t *hs = field_at(ir, l1, 1, &l2);
    size_t code;
    field_at(hs, l2, 1, &code);
    assert_int_equal(code, 503);
    /* headers (2): set_headers (1) { header (1) { key (1), raw_value (3) } } */
    size_t m6, m7, m8;
    const uint8_t *imh = field_at(ir, l1, 2, &m6);
    const uint8_t *so = field_at(imh, m6, 1, &m7);
    const uint8_t *imv = field_at(so, m7, 1, &m8);
    size_t kl, vl;
    const uint8_t *k = field_at(imv, m8, 1, &kl), *v = field_at(imv, m8, 3, &vl);
    assert_int_equal(kl, 12);
    assert_memory_equal(k, "content-type", 12);
    assert_int_equal(vl, 16);
    assert_memory_equal(v, "application/json", 16);
    xp_buf_free(&ob);
}

static void test_body_sig(void **state)
{
    (void)state;
    xp_buf sig = {0};
    size_t len;
    jspan claim;
    char why[128];
    const char *ok = "{\"prompt\":\"p\",\"kv_transfer_params\":{\"a\":[1,{\"b\":2}],"
                     "\"eldr_sig\":\"AQACAA==\"}}";
    assert_int_equal(xp_body_sig(ok, strlen(ok), &sig, &len, &claim, why, sizeof why), 1);
    assert_int_equal(claim.n, 0);
    assert_int_equal(len, 4);
    assert_int_equal(sig.p[0], 1);
    assert_int_equal(sig.p[2], 2);
    static const char *const none[] = {
        "{\"prompt\":\"p\"}", "{\"kv_transfer_params\":{\"eldr_sig\":null}}",
        "{\"kv_transfer_params\":[]}", "not json", "", "[1,2]",
        "{\"kv_transfer_params\":{}}",
    };
    for (size_t i = 0; i < sizeof none / sizeof *none; i++)
        assert_int_equal(xp_body_sig(none[i], strlen(none[i]), &sig, &len, &claim, why,
                                     sizeof why), 0);
    static const char *const bad[] = {
        "{\"kv_transfer_params\":{\"eldr_sig\":12}}",
        "{\"kv_transfer_params\":{\"eldr_sig\":\"@@@@\"}}",
        "{\"kv_transfer_params\":{\"eldr_sig\":\"AQ==\",\"eldr_sig\":\"AQ==\"}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(xp_body_sig(bad[i], strlen(bad[i]), &sig, &len, &claim, why,
                                     sizeof why), -1);
        assert_non_null(strstr(why, "eldr_sig"));
    }
    /* the claim's key is seen in the same walk, beside eldr_sig or
     * without it, and only inside kv_transfer_params; the claim is
     * kv_transfer_params' span, and only in a body that walks whole */
    static const struct {
        const char *body;
        int rc, claim;
    } claims[] = {
        {"{\"kv_transfer_params\":{\"eldr_sig\":\"AQACAA==\",\"eldr_block_hashes\":[1]}}", 1, 1},
        {"{\"kv_transfer_params\":{\"eldr_block_hashes\":[1],\"eldr_cached_blocks\":1}}", 0, 1},
        {"{\"eldr_block_hashes\":[1],\"kv_transfer_params\":{\"eldr_sig\":\"AQACAA==\"}}", 1, 0},
        {"{\"kv_transfer_params\":{\"x\":{\"eldr_block_hashes\":[1]}}}", 0, 0},
        {"{\"kv_transfer_params\":{\"eldr_block_hashes\":[1]},\"prompt\":tru}", 0, 0},
    };
    for (size_t i = 0; i < sizeof claims / sizeof *claims; i++) {
        assert_int_equal(xp_body_sig(claims[i].body, strlen(claims[i].body), &sig, &len, &claim,
                                     why, sizeof why), claims[i].rc);
        assert_int_equal(claim.n > 0, claims[i].claim);
        if (claim.n) {
            assert_true(claim.p[0] == '{' && claim.p[claim.n - 1] == '}');
            assert_non_null(memmem(claim.p, claim.n, "eldr_block_hashes", 17));
        }
    }
    /* the claim read from that span: the hashes, or none when absent */
    static const uint16_t counts[4] = {1, 2, 3, 4};
    rb_blocks bl;
    rb_err e;
    char pw[RB_NAME_MAX];
    const char *cl = "{\"kv_transfer_params\":{\"eldr_block_hashes\":[7,8],"
                     "\"eldr_prefill_worker\":\"p1\"}}";
    assert_int_equal(xp_body_sig(cl, strlen(cl), &sig, &len, &claim, why, sizeof why), 0);
    assert_int_equal(xp_body_claim(claim, 1, 4, counts, &bl, pw, sizeof pw, &e), 1);
    assert_int_equal(bl.n_hashes, 2);
    assert_string_equal(pw, "p1");
    rb_blocks_free(&bl);
    assert_int_equal(xp_body_claim((jspan){NULL, 0}, 1, 4, counts, &bl, pw, sizeof pw, &e), 0);
    xp_buf_free(&sig);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_headers),
        cmocka_unit_test(test_body_and_malformed),
        cmocka_unit_test(test_wire_or_protobuf_c),
        cmocka_unit_test(test_nesting_bound),
        cmocka_unit_test(test_pick_answer),
        cmocka_unit_test(test_chunk_frame_protobuf_c),
        cmocka_unit_test(test_body_sig),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
