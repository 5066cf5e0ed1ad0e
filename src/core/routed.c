/* routed.c - routed experts out of an engine answer
 * (routed.h). The answer is walked once with the in-place scanner
 * (json_scan.h), keeping only the spans of the fields that matter; the
 * spans are decoded afterwards (routed_field.c), when the token counts
 * are known (a raw SGLang buffer needs them to find its item size, and
 * the keys may come in any order), and put together here. */
#include <stdlib.h>
#include <string.h>

#include "routed.h"
#include "routed_field.h"
#include "json_scan.h"
#include "err.h"

/* An SGLang place for routed experts: the flat buffer, the token counts
 * beside it (-1: absent), the dtype it names (n 0: none), its name. */
typedef struct sgl_place {
    span routes, dtype;
    int64_t p, c;
    const char *name;
} sgl_place;

/* What the walk found. */
typedef struct found {
    span prompt, gen;           /* vLLM: prompt_routed_experts; choices[0].routed_experts */
    sgl_place meta;             /* SGLang /generate: meta_info */
    sgl_place ext;              /* SGLang OpenAI endpoints: response-level sglext */
    sgl_place cmeta;            /* SGLang OpenAI endpoints, return_meta_info: choices[0].meta_info */
    int64_t usage_p, usage_c;   /* -1: absent */
} found;

/* ---- the walk ---- */

static void keep(span *sp, const char *from, const cj_t *s)
{
    while (from < s->p && (*from == ' ' || *from == '\n' || *from == '\r' || *from == '\t'))
        from++;
    sp->p = from;
    sp->n = (size_t)(s->p - from);
    if (sp->n == 4 && !memcmp(from, "null", 4))
        sp->n = 0;
}

/* An object holding token counts (usage, meta_info) and, for SGLang, the
 * routed experts and their dtype; pl may be NULL (usage). */
static int read_counts(cj_t *s, int64_t *p, int64_t *c, sgl_place *pl)
{
    const char *key;
    size_t kl;
    int n = 0, r;
    cj_expect(s, '{');
    while ((r = cj_next_key(s, &n, &key, &kl)) == 1) {
        int is_p = cj_key_is(key, kl, "prompt_tokens"), is_c = cj_key_is(key, kl, "completion_tokens");
        const char *v = s->p;
        if ((is_p || is_c) && cj_peek(s) != 'n') {
            if (cj_int(s, is_p ? p : c) < 0)
                return -1;
        } else if (pl && (cj_key_is(key, kl, "routed_experts") ||
                          cj_key_is(key, kl, "routed_experts_dtype"))) {
            int is_dtype = kl == sizeof "routed_experts_dtype" - 1;
            if (is_dtype && cj_peek(s) == '"') {
                const char *d;
                size_t dn;
                if (cj_string(s, &d, &dn) < 0)
                    return -1;
                pl->dtype.p = d;
                pl->dtype.n = dn;
            } else if (cj_skip_span(s) < 0) {
                return -1;
            } else if (!is_dtype) {
                keep(&pl->routes, v, s);
            }
        } else if (cj_skip(s) < 0) {
            return -1;
        }
    }
    return r;
}

static int walk_choice(cj_t *s, found *f)
{
    const char *key;
    size_t kl;
    int n = 0, r;
    if (cj_peek(s) != '{')
        return cj_skip(s);
    cj_expect(s, '{');
    while ((r = cj_next_key(s, &n, &key, &kl)) == 1) {
        const char *v = s->p;
        if (cj_key_is(key, kl, "routed_experts")) {
            if (cj_skip_span(s) < 0)
                return -1;
            keep(&f->gen, v, s);
        } else if (cj_key_is(key, kl, "meta_info") && cj_peek(s) == '{') {
            if (read_counts(s, &f->cmeta.p, &f->cmeta.c, &f->cmeta) < 0)
                return -1;
        } else if (cj_skip(s) < 0) {
            return -1;
        }
    }
    return r;
}

static int walk(cj_t *s, found *f)
{
    const char *key;
    size_t kl;
    int n = 0, r;
    int64_t none_p = -1, none_c = -1;
    if (cj_expect(s, '{') < 0)
        return -1;
    while ((r = cj_next_key(s, &n, &key, &kl)) == 1) {
        const char *v = s->p;
        if (cj_key_is(key, kl, "prompt_routed_experts")) {
            if (cj_skip_span(s) < 0)
                return -1;
            keep(&f->prompt, v, s);
        } else if (cj_key_is(key, kl, "choices") && cj_peek(s) == '[') {
            int m = 0, ri;
            cj_expect(s, '[');
            while ((ri = cj_next_item(s, &m)) == 1)
                if ((m == 1 ? walk_choice(s, f) : cj_skip(s)) < 0)
                    return -1;
            if (ri < 0)
                return -1;
        } else if (cj_key_is(key, kl, "usage") && cj_peek(s) == '{') {
            if (read_counts(s, &f->usage_p, &f->usage_c, NULL) < 0)
                return -1;
        } else if (cj_key_is(key, kl, "meta_info") && cj_peek(s) == '{') {
            if (read_counts(s, &f->meta.p, &f->meta.c, &f->meta) < 0)
                return -1;
        } else if (cj_key_is(key, kl, "sglext") && cj_peek(s) == '{') {
            /* SglExt holds no token counts: they are in usage */
            if (read_counts(s, &none_p, &none_c, &f->ext) < 0)
                return -1;
        } else if (cj_skip(s) < 0) {
            return -1;
        }
    }
    if (r < 0)
        return -1;
    return cj_peek(s) == -1 ? 0 : -1;
}

/* ---- putting the rows together ---- */

/* 1 when layer l holds 0 in every place of every kept row (k >= 2). */
static int layer_all_zero(const routed_t *o, int l)
{
    if (o->k < 2)
        return 0;
    int64_t rows = o->prompt_tokens + o->decode_rows;
    size_t row = (size_t)o->L * (size_t)o->k;
    for (int64_t t = 0; t < rows; t++) {
        const uint16_t *x = o->ids + (size_t)t * row + (size_t)l * (size_t)o->k;
        for (int a = 0; a < o->k; a++)
            if (x[a])
                return 0;
    }
    return rows > 0;
}

int routed_dense_layers(const routed_t *r, uint8_t *dense)
{
    int n = 0;
    for (int l = 0; l < r->L; l++)
        n += dense[l] = (uint8_t)layer_all_zero(r, l);
    return n;
}

#if defined(__SSE2__)
#include <emmintrin.h>
/* 1 when the 8 ids at x are distinct: v against itself turned by 1 to 4
 * places covers the 28 pairs (a turn by j and one by 8 - j meet the same
 * pairs). No branch, no memory: the common top-8 case (DeepSeek, Qwen3). */
static int distinct8(const uint16_t *x)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)x);
    __m128i r1 = _mm_or_si128(_mm_srli_si128(v, 2), _mm_slli_si128(v, 14));
    __m128i r2 = _mm_or_si128(_mm_srli_si128(v, 4), _mm_slli_si128(v, 12));
    __m128i r3 = _mm_or_si128(_mm_srli_si128(v, 6), _mm_slli_si128(v, 10));
    __m128i r4 = _mm_or_si128(_mm_srli_si128(v, 8), _mm_slli_si128(v, 8));
    __m128i eq = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi16(v, r1), _mm_cmpeq_epi16(v, r2)),
                              _mm_or_si128(_mm_cmpeq_epi16(v, r3), _mm_cmpeq_epi16(v, r4)));
    return _mm_movemask_epi8(eq) == 0;
}
#endif

/* Distinct ids of one token in one layer: 1, or 0 with *dup. Ids below
 * 256 (every vLLM uint8 answer) use a 256-bit mask on the stack; others
 * the thread's 65536-bit table, cleared after. */
static int distinct(const uint16_t *x, int k, int *dup)
{
    static _Thread_local uint64_t seen[65536 / 64];
    uint64_t m[4] = {0, 0, 0, 0};
    int a = 0, ok = 1;
    for (; a < k && x[a] < 256; a++) {
        uint64_t bit = UINT64_C(1) << (x[a] & 63);
        if (m[x[a] >> 6] & bit)
            *dup = x[a], ok = 0;
        m[x[a] >> 6] |= bit;
    }
    if (a == k)
        return ok;
    for (int j = 0; j < k; j++) {
        uint64_t bit = UINT64_C(1) << (x[j] & 63), *w = &seen[x[j] >> 6];
        if (*w & bit)
            *dup = x[j], ok = 0;
        *w |= bit;
    }
    for (int j = 0; j < k; j++)
        seen[x[j] >> 6] = 0;
    return ok;
}

/* The k ids of a token in a layer are distinct, but in a dense layer
 * (all 0): a duplicate asks whether its layer is one, once per layer.
 * max_id is over the rows kept (not the dropped last generated row, whose
 * contents are junk). */
static int check_ids(routed_t *o, char *err, size_t errlen)
{
    int64_t rows = o->prompt_tokens + o->decode_rows;
    const uint16_t *x = o->ids;
    unsigned max = 0;
    int8_t *dense = calloc((size_t)o->L + 1, 1);   /* 0 unknown, 1 dense, -1 routed */
    if (!dense)
        return eldr_errf(err, errlen, "out of memory");
    size_t n = (size_t)rows * (size_t)o->L * (size_t)o->k, i = 0;
#if defined(__SSE2__)
    /* 8 ids at a time; SSE2's 16-bit max is signed: flip the top bit */
    __m128i flip = _mm_set1_epi16((short)0x8000), mx = flip;
    for (; i + 8 <= n; i += 8)
        mx = _mm_max_epi16(mx, _mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)
                                                             (x + i)), flip));
    uint16_t lanes[8];
    _mm_storeu_si128((__m128i *)(void *)lanes, _mm_xor_si128(mx, flip));
    for (int j = 0; j < 8; j++)
        max = lanes[j] > max ? lanes[j] : max;
#endif
    for (; i < n; i++)
        max = x[i] > max ? x[i] : max;
    for (int64_t t = 0; t < rows; t++)
        for (int l = 0; l < o->L; l++, x += o->k) {
            int dup = -1;
#if defined(__SSE2__)
            if (o->k == 8 && distinct8(x))
                continue;
#endif
            if (distinct(x, o->k, &dup) || dense[l] > 0)
                continue;
            if (!dense[l])
                dense[l] = layer_all_zero(o, l) ? 1 : -1;
            if (dense[l] > 0)
                continue;
            free(dense);
            return eldr_errf(err, errlen, "%s token %lld layer %d: expert %d picked "
                             "twice (top-k ids must be distinct)",
                             t < o->prompt_tokens ? "prompt" : "decode",
                             (long long)(t < o->prompt_tokens ? t : t - o->prompt_tokens), l,
                             dup);
        }
    free(dense);
    o->max_id = rows ? (int)max : -1;
    return 0;
}

int routed_counts(const routed_t *r, int64_t row0, int64_t n, const uint8_t *keep, int E,
                  uint16_t *out, char *err, size_t errlen)
{
    size_t row = (size_t)r->L * (size_t)r->k;
    int nk = 0;
    for (int l = 0; l < r->L; l++)
        nk += !keep || keep[l];
    memset(out, 0, (size_t)nk * (size_t)E * sizeof *out);
    if (row0 < 0 || n < 0 || row0 + n > r->prompt_tokens + r->decode_rows)
        return eldr_errf(err, errlen, "rows %lld..%lld are outside the answer's %lld rows",
                         (long long)row0, (long long)(row0 + n),
                         (long long)(r->prompt_tokens + r->decode_rows));
    if (!keep && r->max_id < E && n * r->k <= UINT16_MAX) {
        /* every id is below E and no count can pass n * k: no checks */
        const uint16_t *x = r->ids + (size_t)row0 * row;
        for (int64_t t = 0; t < n; t++)
            for (int l = 0; l < r->L; l++, x += r->k) {
                uint16_t *c = out + (size_t)l * (size_t)E;
                for (int a = 0; a < r->k; a++)
                    c[x[a]]++;
            }
        return 0;
    }
    for (int64_t t = row0; t < row0 + n; t++) {
        const uint16_t *x = r->ids + (size_t)t * row;
        for (int l = 0, o = 0; l < r->L; l++, x += r->k) {
            if (keep && !keep[l])
                continue;
            uint16_t *c = out + (size_t)o++ * (size_t)E;
            for (int a = 0; a < r->k; a++) {
                if (x[a] >= E)
                    return eldr_errf(err, errlen, "token %lld layer %d: expert %u, but the "
                                     "model has %d experts", (long long)t, l, x[a], E);
                if (c[x[a]] == UINT16_MAX)
                    return eldr_errf(err, errlen, "layer %d expert %u: more than 65535 tokens",
                                     l, x[a]);
                c[x[a]]++;
            }
        }
    }
    return 0;
}

/* Prompt rows the engine marked -1 throughout (vLLM's prefix-cache hits)
 * leave the prompt; o->unrouted counts them. A -1 in a row that has
 * routing elsewhere, or in a decode row, is not that: refused. */
static int drop_unrouted(routed_t *o, char *err, size_t errlen)
{
    size_t row = (size_t)o->L * (size_t)o->k;
    uint16_t *ids = o->ids;
    int64_t kept = 0;
    for (int64_t t = 0; t < o->prompt_tokens + o->decode_rows; t++) {
        const uint16_t *x = ids + (size_t)t * row;
        size_t holes = 0, first = 0;
        for (size_t i = row; i-- > 0;)
            if (x[i] == ROUTED_NO_ROUTE)
                holes++, first = i;
        int prompt = t < o->prompt_tokens;
        if (holes == row && prompt) {
            o->unrouted_lead += kept == 0;   /* before any routed prompt row */
            continue;   /* a cached position: no routing, left out */
        }
        if (holes)
            return eldr_errf(err, errlen, "%s token %lld layer %zu: expert id -1 in a token "
                             "%s (the engine has no routing for this position)",
                             prompt ? "prompt" : "decode",
                             (long long)(prompt ? t : t - o->prompt_tokens), first / (size_t)o->k,
                             prompt ? "that has routing in other layers" : "it generated");
        if (kept != t)
            memmove(ids + (size_t)kept * row, x, row * sizeof *ids);
        kept++;
    }
    o->unrouted = o->prompt_tokens + o->decode_rows - kept;
    o->prompt_tokens -= o->unrouted;
    return 0;
}

/* out gets P prompt rows from a and D decode rows from g starting at row g0. */
static int assemble(routed_t *o, idbuf *a, int64_t P, const idbuf *g, int64_t g0,
                    int64_t C, char *err, size_t errlen)
{
    if (g->L != a->L || g->k != a->k)
        return eldr_errf(err, errlen, "prompt routing is %d layers x top-%d, generation %d x "
                         "top-%d (inconsistent shapes)", a->L, a->k, g->L, g->k);
    o->L = a->L;
    o->k = a->k;
    o->prompt_tokens = P;
    o->completion_tokens = C;
    o->decode_rows = C > 0 ? C - 1 : 0;
    o->encoding = a->encoding ? a->encoding : g->encoding;
    size_t row = (size_t)o->L * (size_t)o->k;
    if (a == g && g0 == P && a->ids) {
        /* one array over the sequence: its first P + D rows are the
         * answer's, in place (a 4,096-token prompt is 3 MB not copied) */
        o->ids = a->ids;
        a->ids = NULL;
        a->rows = a->cap = 0;
    } else if (!(o->ids = malloc(((size_t)(P + o->decode_rows) * row + 1) * sizeof *o->ids))) {
        return eldr_errf(err, errlen, "out of memory for %lld tokens",
                         (long long)(P + o->decode_rows));
    } else if (P) {
        memcpy(o->ids, a->ids, (size_t)P * row * sizeof *o->ids);
    }
    if (o->ids != g->ids && o->decode_rows && g->ids)
        memcpy(o->ids + (size_t)P * row, g->ids + (size_t)g0 * row,
               (size_t)o->decode_rows * row * sizeof *o->ids);
    if ((a->minus1 || g->minus1) && drop_unrouted(o, err, errlen) < 0)
        return -1;
    return check_ids(o, err, errlen);
}

/* vLLM with separate prompt and generation arrays. */
static int split_two(const found *f, const routed_hint *h, routed_t *o, char *err,
                     size_t errlen)
{
    idbuf a, g;
    const char *pn = "prompt_routed_experts", *gn = "choices[0].routed_experts";
    int64_t pw[1] = {f->usage_p}, gw[2] = {f->usage_c >= 1 ? f->usage_c - 1 : f->usage_c,
                                           f->usage_c};
    routed_hint hp = *h;
    hp.unrouted_ok = !h->require_full;   /* vLLM 0.21 marks prefix-cache rows -1 */
    int rc = routed_decode_field(f->prompt, &hp, pw, 1, (span){0}, pn, &a, err, errlen);
    if (rc == 0) {
        routed_hint h2 = *h;
        h2.L = a.L;
        h2.k = a.k;
        h2.from = pn;
        rc = routed_decode_field(f->gen, a.L ? &h2 : h, gw, 2, (span){0}, gn, &g, err, errlen);
        if (rc < 0) {
            routed_idbuf_free(&a);
            return -1;
        }
    } else {
        return -1;
    }
    int64_t C = f->usage_c >= 0 ? f->usage_c : g.rows;
    if (f->usage_p >= 0 && a.rows != f->usage_p)
        rc = eldr_errf(err, errlen, "%s has %lld tokens, usage.prompt_tokens says %lld "
                       "(inconsistent shapes)", pn, (long long)a.rows, (long long)f->usage_p);
    else if (g.rows > C || g.rows < (C > 0 ? C - 1 : 0))
        rc = eldr_errf(err, errlen, "%s has %lld tokens for %lld completion tokens (expected %lld "
                       "or %lld; inconsistent shapes)", gn, (long long)g.rows, (long long)C,
                       (long long)(C > 0 ? C - 1 : 0), (long long)C);
    else if (!a.L && !g.L)
        rc = eldr_errf(err, errlen, "%s and %s are both empty", pn, gn);
    else {
        if (!a.L)
            a.L = g.L, a.k = g.k;
        if (!g.L)
            g.L = a.L, g.k = a.k;
        rc = assemble(o, &a, a.rows, &g, 0, C, err, errlen);
    }
    routed_idbuf_free(&a);
    routed_idbuf_free(&g);
    return rc;
}

/* One array over the whole sequence: prompt rows, then generated ones.
 * SGLang's covers exactly P + C - 1 tokens; vLLM's .npy P + C - 1 (main;
 * P + C accepted from older builds). */
static int split_full(span full, span dtype, int sglang, const char *name, int64_t P, int64_t C,
                      const char *pname, const routed_hint *h, routed_t *o, char *err,
                      size_t errlen)
{
    if (P < 0 || C < 0)
        return eldr_errf(err, errlen, "%s covers prompt and completion, but the answer has no "
                         "%s.prompt_tokens and completion_tokens to split it", name, pname);
    int64_t want[2] = {C > 0 ? P + C - 1 : P, P + C};
    idbuf b;
    if (routed_decode_field(full, h, want, sglang ? 1 : 2, dtype, name, &b, err, errlen) < 0)
        return -1;
    int rc;
    if (b.rows != want[0] && b.rows != want[1])
        rc = eldr_errf(err, errlen, "%s has %lld tokens; %lld prompt + %lld completion tokens "
                       "make %lld (or %lld) (inconsistent shapes)", name, (long long)b.rows,
                       (long long)P, (long long)C, (long long)want[0], (long long)want[1]);
    else if (!b.L)
        rc = eldr_errf(err, errlen, "%s is empty", name);
    else
        rc = assemble(o, &b, P, &b, P, C, err, errlen);
    routed_idbuf_free(&b);
    return rc;
}

/* An SGLang place, its counts beside it or else in usage. */
static int split_sglang(const found *f, const sgl_place *pl, const routed_hint *h,
                        routed_t *o, char *err, size_t errlen)
{
    int own = pl->p >= 0 && pl->c >= 0;
    return split_full(pl->routes, pl->dtype, 1, pl->name, own ? pl->p : f->usage_p,
                      own ? pl->c : f->usage_c, own ? "meta_info" : "usage", h, o, err, errlen);
}

int routed_decode(const char *body, size_t len, const routed_hint *hint, routed_t *out,
                   char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->max_id = -1;
    found f = {.usage_p = -1, .usage_c = -1,
               .meta = {.p = -1, .c = -1, .name = "meta_info.routed_experts"},
               .ext = {.p = -1, .c = -1, .name = "sglext.routed_experts"},
               .cmeta = {.p = -1, .c = -1, .name = "choices[0].meta_info.routed_experts"}};
    cj_t s;
    cj_init(&s, body, len);
    if (cj_peek(&s) != '{') {
        char q[64];
        return eldr_errf(err, errlen, "the answer is not a JSON object: %s",
                         routed_quote(body, len, q, sizeof q));
    }
    if (walk(&s, &f) < 0)
        return eldr_errf(err, errlen, "the answer is not valid JSON (byte %zu of %zu)",
                         cj_where(&s), len);
    err[0] = 0;
    int rc;
    if (f.meta.routes.n)
        rc = split_sglang(&f, &f.meta, hint, out, err, errlen);
    else if (f.ext.routes.n)
        rc = split_sglang(&f, &f.ext, hint, out, err, errlen);
    else if (f.cmeta.routes.n)
        rc = split_sglang(&f, &f.cmeta, hint, out, err, errlen);
    else if (f.gen.n && f.prompt.n)
        rc = split_two(&f, hint, out, err, errlen);
    else if (f.gen.n) {
        /* vLLM's whole sequence: its prompt rows may be -1 too (an int32 .npy);
         * drop_unrouted refuses any -1 past them */
        routed_hint hv = *hint;
        hv.unrouted_ok = !hint->require_full;
        rc = split_full(f.gen, (span){0}, 0, "choices[0].routed_experts", f.usage_p, f.usage_c,
                        "usage", &hv, out, err, errlen);
    }
    else
        return eldr_errf(err, errlen, "the answer has no routed experts (%s)",
                         ROUTED_NO_ROUTES_HINT);
    if (rc < 0) {
        routed_free(out);
        if (!err[0])
            eldr_errf(err, errlen, "routed experts: bad answer");
    }
    return rc;
}

void routed_free(routed_t *r)
{
    free(r->ids);
    memset(r, 0, sizeof *r);
    r->max_id = -1;
}
