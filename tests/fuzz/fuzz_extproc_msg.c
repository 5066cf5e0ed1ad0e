/* fuzz_extproc_msg.c - libFuzzer harness: eldrd --ext-proc reading what a
 * gateway sends (src/router/extproc/xp_msg.c, xp_sig.c) - protobuf bytes
 * off the gRPC stream, before anything has checked them: Envoy's
 * ProcessingRequest (its nesting check, then protobuf-c), then what the
 * picker takes out of it: headers (x-request-id, :status,
 * x-eldr-signature), the subset hint, the endpoint that served, the
 * body's kv_transfer_params.eldr_sig and its signature cache claim
 * (eldr_block_hashes, ...: a refusal names its field, a claim holds no
 * more cached blocks than hashes); and grpc.health.v1's
 * HealthCheckRequest.
 *
 * Each input is decoded twice: by xp_read (eldrd's way: on the wire when
 * it is as Envoy writes it, else through protobuf-c) and by xp_read_pb
 * (protobuf-c alone, the reference): both must agree, on the refusal's
 * words or on every part of the view. Promises checked: never a crash, an overread or a leak
 * (ASan); a refusal is one line; a body chunk is bytes of the message (a
 * contiguous slice of the input); the kind is a phase; a header's value
 * and the served endpoint are no longer than the message; each subset
 * entry is non-empty, holds no NUL, no comma and no edge blank, and an
 * absent hint gives none; a signature is no longer than its text; the
 * health service name is NUL-terminated inside its buffer. The body
 * scanner also reads the raw input, as JSON. */
#include "xp_msg.h"
#include "xp_sig.h"
#include "fuzz.h"

static xp_arena *arena, *arena_pb;
static xp_buf sigbuf;

typedef struct entries {
    size_t n, bytes;
    uint64_t hash;               /* FNV-1a over the entries and their ends */
} entries;

static void subset_each(void *cls, const char *s, size_t n)
{
    entries *e = cls;
    fuzz_check(s && n > 0);
    fuzz_check(!memchr(s, '\0', n) && !memchr(s, ',', n));
    fuzz_check(s[0] != ' ' && s[n - 1] != ' ');
    e->n++;
    e->bytes += n;
    for (size_t i = 0; i <= n; i++)
        e->hash = (e->hash ^ (i < n ? (unsigned char)s[i] : 0x100u)) * 1099511628211ull;
}

static void check_sig(const char *body, size_t n)
{
    char why[256] = "";
    size_t len = 99;
    jspan claim = {NULL, 1};
    int rc = xp_body_sig(body, n, &sigbuf, &len, &claim, why, sizeof why);
    fuzz_check(rc >= -1 && rc <= 1);
    /* the claim is kv_transfer_params' object, a slice of the body */
    fuzz_check(!claim.n || (claim.p >= body && claim.p + claim.n <= body + n &&
                            claim.p[0] == '{' && claim.p[claim.n - 1] == '}'));
    if (rc < 0)
        fuzz_check_err(why, sizeof why);
    if (rc <= 0)
        fuzz_check(len == 0);
    else
        fuzz_check(len <= n && (!len || sigbuf.p));
    /* the claim beside it, for a 2 x 4 model whose counts are all 255 */
    static const uint16_t counts[8] = {255, 255, 255, 255, 255, 255, 255, 255};
    rb_blocks bl;
    rb_err e;
    char pw[RB_NAME_MAX];
    rc = xp_body_claim(claim, 2, 4, counts, &bl, pw, sizeof pw, &e);
    fuzz_check(rc >= -1 && rc <= 1);
    if (!claim.n)
        fuzz_check(rc == 0);
    if (rc < 0)
        fuzz_check_err(e.error, sizeof e.error);
    if (rc > 0) {
        fuzz_check(bl.cached_blocks >= 0 && bl.cached_blocks <= bl.n_hashes);
        fuzz_check(bl.n_block_counts <= bl.n_hashes - bl.cached_blocks);
        fuzz_check(memchr(pw, '\0', sizeof pw) != NULL);
        rb_blocks_free(&bl);
    }
}

static const char *const HEADERS[] = {"x-request-id", ":status", "x-eldr-signature",
                                      "content-type"};

static void check_in(const uint8_t *data, size_t size, const xp_in *a, const xp_in *b)
{
    fuzz_check(a->kind >= XP_REQUEST_HEADERS && a->kind <= XP_RESPONSE_TRAILERS);
    fuzz_check(a->kind == b->kind && a->end_of_stream == b->end_of_stream);
    fuzz_check(a->has_config == b->has_config && a->observability == b->observability);
    fuzz_check(a->request_body_mode == b->request_body_mode &&
               a->response_body_mode == b->response_body_mode);
    fuzz_check(a->body_len == b->body_len && a->body_len <= size);
    if (a->body_len) {
        fuzz_check(a->body && b->body && !memcmp(a->body, b->body, a->body_len));
        fuzz_check(a->kind == XP_REQUEST_BODY || a->kind == XP_RESPONSE_BODY);
        fuzz_check(memmem(data, size, a->body, a->body_len) != NULL);
    }
    for (size_t i = 0; i < sizeof HEADERS / sizeof *HEADERS; i++) {
        size_t na = 0, nb = 0;
        const char *va = xp_header(a, HEADERS[i], &na), *vb = xp_header(b, HEADERS[i], &nb);
        fuzz_check(!va == !vb);
        if (!va)
            continue;
        fuzz_check(a->kind == XP_REQUEST_HEADERS || a->kind == XP_RESPONSE_HEADERS);
        fuzz_check(na == nb && na <= size && !memcmp(va, vb, na));
        if (i == 2) {   /* the signature header, as the picker decodes it */
            char why[64] = "";
            size_t len = 0;
            int rc = xp_text_sig(va, na, &sigbuf, &len, why, sizeof why);
            fuzz_check(rc == 1 || rc == -1);
            if (rc < 0)
                fuzz_check_err(why, sizeof why);
            else
                fuzz_check(len <= na);
        }
    }
    entries ea = {0}, eb = {0};
    int ra = xp_subset(a, subset_each, &ea), rb = xp_subset(b, subset_each, &eb);
    fuzz_check(ra >= -1 && ra <= 1 && ra == rb);
    fuzz_check(ea.n == eb.n && ea.bytes == eb.bytes && ea.hash == eb.hash && ea.bytes <= size);
    if (ra == 0)
        fuzz_check(ea.n == 0);
    size_t sa = 0, sb = 0;
    const char *va = xp_served(a, &sa), *vb = xp_served(b, &sb);
    fuzz_check(!va == !vb);
    if (va) {
        fuzz_check(!memchr(va, '\0', sa) && sa <= size);
        fuzz_check(sa == sb && !memcmp(va, vb, sa));
    }
    if (a->body_len)
        check_sig((const char *)a->body, a->body_len);
}

static int fuzz_extproc_one(const uint8_t *data, size_t size)
{
    if (!arena)
        fuzz_check((arena = xp_arena_new()) != NULL && (arena_pb = xp_arena_new()) != NULL);
    xp_in a, b;
    char wa[160] = "", wb[160] = "";
    int ra = xp_read(arena, data, size, &a, wa, sizeof wa);
    int rb = xp_read_pb(arena_pb, data, size, &b, wb, sizeof wb);
    fuzz_check(ra == rb && (ra == 0 || ra == -1));
    if (ra < 0) {
        fuzz_check_err(wa, sizeof wa);
        fuzz_check(!strcmp(wa, wb));
        fuzz_check(!a.live && !b.live);
    } else {
        fuzz_check(a.live && b.live && b.pb && a.arena == arena && b.arena == arena_pb);
        check_in(data, size, &a, &b);
        fuzz_check(a.n_headers == b.n_headers);
        for (size_t i = 0; i < a.n_headers; i++)
            fuzz_check(a.headers[i].key.n == b.headers[i].key.n &&
                       !memcmp(a.headers[i].key.p, b.headers[i].key.p, a.headers[i].key.n) &&
                       a.headers[i].value.n == b.headers[i].value.n &&
                       !memcmp(a.headers[i].value.p, b.headers[i].value.p,
                               a.headers[i].value.n));
        xp_in_free(&a);
        xp_in_free(&b);
        fuzz_check(!a.live && !b.live);
    }
    char svc[128];
    memset(svc, 'x', sizeof svc);
    if (xp_read_health(data, size, svc, sizeof svc) == 0)
        fuzz_check(memchr(svc, '\0', sizeof svc) != NULL);
    /* the input as a decode body: the signature scanner alone */
    check_sig((const char *)data, size);
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_extproc_one(data, size);
}
#endif
