/* xp_sig.c - the signature in a decode request (xp_sig.h). */
#include "xp_sig.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b64.h"
#include "jspan.h"

int xp_text_sig(const char *text, size_t n, xp_buf *sig, size_t *len, char *why,
                size_t whylen)
{
    size_t at = 0;
    *len = 0;
    if (xp_buf_reserve(sig, b64_decoded_max(n) + 1) < 0 ||
        b64_decode(text, n, sig->p, len, &at) < 0) {
        *len = 0;
        snprintf(why, whylen, "the signature is not base64 (at byte %zu)", at);
        return -1;
    }
    return 1;
}

/* One walk over the body: kv_transfer_params' eldr_sig value, its span,
 * and whether the signature cache's claim is beside it. */
typedef struct sig_walk {
    jspan kv, sig;
    int twice, claim;
} sig_walk;

static int read_kv(void *cls, const char *k, size_t kl, cj_t *s)
{
    sig_walk *w = cls;
    if (cj_key_is(k, kl, "eldr_block_hashes"))
        w->claim = 1;
    if (!cj_key_is(k, kl, "eldr_sig"))
        return cj_skip(s) < 0 ? -1 : 0;
    if (w->sig.n) {
        w->twice = 1;
        return -2;
    }
    const char *at = s->p;
    if (cj_skip(s) < 0)
        return -1;
    w->sig = (jspan){at, (size_t)(s->p - at)};
    return 0;
}

static int read_top(void *cls, const char *k, size_t kl, cj_t *s)
{
    sig_walk *w = cls;
    if (!cj_key_is(k, kl, "kv_transfer_params") || cj_peek(s) != '{')
        return cj_skip(s) < 0 ? -1 : 0;
    if (w->kv.n) {
        w->twice = 1;
        return -2;
    }
    const char *at = s->p;
    int rc = js_walk_at(s, read_kv, w);
    w->kv = (jspan){at, (size_t)(s->p - at)};
    return rc;
}

int xp_body_sig(const char *body, size_t n, xp_buf *sig, size_t *len, jspan *claim,
                char *why, size_t whylen)
{
    const char *end = body + n, *p = js_ws(body, end);
    *len = 0;
    *claim = (jspan){NULL, 0};
    if (p == end || *p != '{')
        return 0;
    sig_walk w = {{NULL, 0}, {NULL, 0}, 0, 0};
    cj_t s;
    cj_init(&s, p, (size_t)(end - p));
    int rc = js_walk_at(&s, read_top, &w);
    if (rc == 0 && w.claim)   /* the whole body walked: its kv_transfer_params */
        *claim = w.kv;
    if (rc == -2) {
        snprintf(why, whylen, "kv_transfer_params or its eldr_sig is given twice");
        return -1;
    }
    if (rc < 0 || !w.sig.n)
        return 0;   /* malformed JSON is the engine's to refuse, not the picker's */
    jspan v = w.sig;
    if (v.n == 4 && !memcmp(v.p, "null", 4))
        return 0;
    if (v.n < 2 || *v.p != '"' || memchr(v.p + 1, '\\', v.n - 2) ||
        xp_text_sig(v.p + 1, v.n - 2, sig, len, why, whylen) < 0) {
        *len = 0;
        snprintf(why, whylen, "kv_transfer_params.eldr_sig is not a base64 string");
        return -1;
    }
    return 1;
}

int xp_body_claim(jspan kv, int L, int E, const uint16_t *counts, rb_blocks *b, char *prefill,
                  size_t plen, rb_err *e)
{
    static const char *const keys[3] = {"eldr_block_hashes", "eldr_cached_blocks",
                                        "eldr_block_counts"};
    memset(b, 0, sizeof *b);
    prefill[0] = '\0';
    if (!kv.n)
        return 0;
    json_t *o = rb_load(kv.p, kv.n, e);
    if (!o)
        return -1;
    const json_t *h = json_object_get(o, keys[0]), *pw = json_object_get(o, "eldr_prefill_worker");
    int rc = 0;
    if (h && !json_is_null(h)) {
        rc = rb_blocks_parse(o, keys, L, E, counts, b, e) < 0 ? -1 : 1;
        if (rc > 0 && pw && !json_is_null(pw) &&
            rb_string(pw, prefill, plen, "eldr_prefill_worker", e) < 0) {
            rb_blocks_free(b);
            rc = -1;
        }
    }
    json_decref(o);
    return rc;
}

/* A string member's text between its quotes ("" when absent or not a
 * string). */
static jspan str_inside(jspan v)
{
    if (v.n >= 2 && *v.p == '"')
        return (jspan){v.p + 1, v.n - 2};
    return (jspan){v.p, 0};
}

int xp_transfer_ids(const char *body, size_t n, jspan *engine, jspan *request)
{
    static const char *const keys[2] = {"remote_engine_id", "remote_request_id"};
    const char *end = body + n, *p = js_ws(body, end);
    jspan kv, vals[2];
    *engine = *request = (jspan){body, 0};
    if (p == end || *p != '{' || js_member((jspan){p, (size_t)(end - p)}, "kv_transfer_params",
                                           NULL, &kv) != 1 || *kv.p != '{' ||
        js_members(kv, keys, 2, NULL, vals, NULL, NULL) < 0)
        return 0;
    *engine = str_inside(vals[0]);
    *request = str_inside(vals[1]);
    return engine->n || request->n;
}

jspan xp_prompt_key(const char *body, size_t n)
{
    static const char *const keys[3] = {"prompt", "messages", "token_ids"};
    const char *end = body + n, *p = js_ws(body, end);
    jspan vals[3];
    if (p != end && *p == '{' &&
        js_members((jspan){p, (size_t)(end - p)}, keys, 3, NULL, vals, NULL, NULL) == 0)
        for (int i = 0; i < 3; i++)
            if (vals[i].n)
                return vals[i];
    return (jspan){body, n};
}
