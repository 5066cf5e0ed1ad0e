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

int xp_body_sig(const char *body, size_t n, xp_buf *sig, size_t *len, char *why,
                size_t whylen)
{
    const char *end = body + n, *p = js_ws(body, end);
    jspan kv, s;
    *len = 0;
    if (p == end || *p != '{')
        return 0;
    int rc = js_member((jspan){p, (size_t)(end - p)}, "kv_transfer_params", NULL, &kv);
    if (rc <= 0 || *kv.p != '{')
        return 0;   /* malformed JSON is the engine's to refuse, not the picker's */
    rc = js_member(kv, "eldr_sig", NULL, &s);
    if (rc < 0) {
        snprintf(why, whylen, "kv_transfer_params holds eldr_sig twice, or is malformed");
        return -1;
    }
    if (rc == 0 || (s.n == 4 && !memcmp(s.p, "null", 4)))
        return 0;
    if (s.n < 2 || *s.p != '"' || memchr(s.p + 1, '\\', s.n - 2)) {
        snprintf(why, whylen, "kv_transfer_params.eldr_sig is not a base64 string");
        return -1;
    }
    if (xp_text_sig(s.p + 1, s.n - 2, sig, len, why, whylen) < 0) {
        snprintf(why, whylen, "kv_transfer_params.eldr_sig is not a base64 string");
        return -1;
    }
    return 1;
}

int xp_body_claim(const char *body, size_t n, int L, int E, const uint16_t *counts,
                  rb_blocks *b, char *prefill, size_t plen, rb_err *e)
{
    static const char *const keys[3] = {"eldr_block_hashes", "eldr_cached_blocks",
                                        "eldr_block_counts"};
    memset(b, 0, sizeof *b);
    prefill[0] = '\0';
    if (!memmem(body, n, "\"eldr_block_hashes\"", 19))
        return 0;
    const char *end = body + n, *p = js_ws(body, end);
    jspan kv;
    if (p == end || *p != '{' ||
        js_member((jspan){p, (size_t)(end - p)}, "kv_transfer_params", NULL, &kv) <= 0 ||
        *kv.p != '{')
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
