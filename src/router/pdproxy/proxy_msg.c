/* proxy_msg.c - the JSON of proxy mode (proxy_msg.h). */
#include "proxy_msg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b64.h"
#include "json_scan.h"
#include "strbuf.h"

#define DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(17))

/* A JSON string of s (a request id: printable ASCII, so only '"' and
 * '\\' need escapes). */
static void ob_json_string(strbuf *o, const char *prefix, const char *s)
{
    sb_put(o, "\"", 1);
    sb_str(o, prefix);   /* plain ASCII of ours */
    for (const char *q = s; *q; q++) {
        if (*q == '"' || *q == '\\')
            sb_put(o, "\\", 1);
        sb_put(o, q, 1);
    }
    sb_put(o, "\"", 1);
}

typedef struct copy_ctx {
    strbuf *o;
    const char *const *drop;
    int ndrop, first;
} copy_ctx;

static int copy_visit(void *cls, const char *key, size_t klen, jspan member, jspan value)
{
    (void)value;
    copy_ctx *k = cls;
    for (int i = 0; i < k->ndrop; i++)
        if (cj_key_is(key, klen, k->drop[i]))
            return 0;
    if (!k->first)
        sb_put(k->o, ",", 1);
    k->first = 0;
    sb_put(k->o, member.p, member.n);
    return 0;
}

/* "{" and the client's members, as its text has them, but those named
 * in drop: the caller appends its own members and the '}'. Splicing
 * keeps the client's values byte for byte (a long prompt is never copied
 * into a tree and printed again). *first: 1 when no member was copied. */
static void client_members(strbuf *o, const pm_client *c, const char *const *drop, int ndrop,
                           int *first)
{
    copy_ctx k = {o, drop, ndrop, 1};
    const char *start = js_ws(c->text, c->text + c->text_len);
    sb_put(o, "{", 1);
    if (js_foreach((jspan){start, (size_t)(c->text + c->text_len - start)}, copy_visit, &k,
                   NULL) != 0)
        o->oom = 1;   /* pm_client_parse checked it: cannot happen */
    *first = k.first;
}

/* PM_ELDR's prefill body, spliced. */
static char *eldr_prefill_body(const pm_client *c, const char *request_id)
{
    static const char *const drop[] = {"stream", "stream_options", "request_id",
                                       "return_token_ids", "kv_transfer_params"};
    strbuf o = {0};
    int first;
    client_members(&o, c, drop, 5, &first);
    sb_str(&o, first ? "\"stream\":false,\"request_id\":" : ",\"stream\":false,\"request_id\":");
    ob_json_string(&o, "", request_id);
    sb_str(&o, ",\"return_token_ids\":true,\"kv_transfer_params\":{\"do_remote_decode\":true,"
               "\"do_remote_prefill\":false,\"transfer_id\":");
    ob_json_string(&o, "xfer-", request_id);
    sb_str(&o, ",\"prefill_first\":true}}");
    if (o.oom) {
        free(o.s);
        return NULL;
    }
    return o.s;
}

/* The client's body as a tree, for the bodies splicing does not build
 * (stock vLLM's, a body with escaped keys). */
static json_t *client_tree(const pm_client *c)
{
    json_error_t je;
    return json_loadb(c->text, c->text_len, JSON_ALLOW_NUL, &je);
}

char *pm_prefill_body(const pm_client *c, const char *request_id)
{
    if (c->protocol == PM_ELDR && c->plain_keys)
        return eldr_prefill_body(c, request_id);
    json_t *b = client_tree(c);
    if (!b)
        return NULL;
    char xfer[RB_ID_MAX + 8];
    snprintf(xfer, sizeof xfer, "xfer-%s", request_id);
    json_object_set_new(b, "stream", json_false());
    json_object_del(b, "stream_options");
    json_object_set_new(b, "request_id", json_string(request_id));
    if (c->protocol == PM_VLLM) {
        /* the prompt's token ids name its KV blocks for the signature
         * cache (a stock engine's routed experts, docs/eldrd.md) */
        json_object_set_new(b, "return_token_ids", json_true());
        json_object_set_new(b, "max_tokens", json_integer(1));
        if (json_object_get(b, "max_completion_tokens"))
            json_object_set_new(b, "max_completion_tokens", json_integer(1));
        json_object_del(b, "min_tokens");
        json_object_del(b, "min_completion_tokens");
        json_object_set_new(b, "kv_transfer_params",
                            json_pack("{s:b, s:b, s:n, s:n, s:n, s:n}", "do_remote_decode", 1,
                                      "do_remote_prefill", 0, "remote_engine_id",
                                      "remote_block_ids", "remote_host", "remote_port"));
    } else {
        json_object_set_new(b, "return_token_ids", json_true());
        json_object_set_new(b, "kv_transfer_params",
                            json_pack("{s:b, s:b, s:s, s:b}", "do_remote_decode", 1,
                                      "do_remote_prefill", 0, "transfer_id", xfer,
                                      "prefill_first", 1));
    }
    char *text = json_dumps(b, DUMP_FLAGS);
    json_decref(b);
    return text;
}

static int bad(char *why, size_t n, const char *msg)
{
    snprintf(why, n, "%s", msg);
    return -1;
}

/* Decode eldr_sig's value (a base64 string, or null for none) into
 * p->sig. */
static int decode_sig(pm_prefill *p, jspan sv, char *why, size_t whylen)
{
    size_t at;
    if (sv.n == 4 && !memcmp(sv.p, "null", 4))
        return 0;   /* no signature */
    if (sv.n < 2 || *sv.p != '"' || !(p->sig = malloc(b64_decoded_max(sv.n) + 1)) ||
        b64_decode(sv.p + 1, sv.n - 2, p->sig, &p->sig_len, &at) < 0)
        return bad(why, whylen, "the prefill's eldr_sig is not a base64 string");
    return 0;
}

/* Cut the member span m out of the object obj in p->text[0..*len), with
 * one comma: the one after it, or else the one before. Returns where the
 * cut began; *cut gets how many bytes went. */
static const char *cut_member(pm_prefill *p, size_t *len, jspan obj, jspan m, size_t *cut)
{
    char *from = (char *)m.p, *to = (char *)m.p + m.n;
    const char *end = p->text + *len;
    const char *after = js_ws(to, end);
    if (after < end && *after == ',') {
        to = (char *)after + 1;
    } else {
        char *b = from;
        while (b > obj.p && (b[-1] == ' ' || b[-1] == '\n' || b[-1] == '\r' || b[-1] == '\t'))
            b--;
        if (b > obj.p && b[-1] == ',')
            from = b - 1;
    }
    memmove(from, to, (size_t)(end - to));
    *cut = (size_t)(to - from);
    *len -= *cut;
    p->text[*len] = '\0';
    return from;
}

/* Stock vLLM's answer: find eldr_sig in its kv_transfer_params, decode it
 * and cut the member out of p->text. 0 (also when absent), -1 with why. */
static int cut_sig(pm_prefill *p, size_t *len, char *why, size_t whylen)
{
    jspan all = {p->text, *len}, kvm, kv, sm, sv;
    const char *start = js_ws(p->text, p->text + *len);
    all.n -= (size_t)(start - p->text);
    all.p = start;
    if (js_member(all, "kv_transfer_params", &kvm, &kv) != 1 || kv.n == 0 || *kv.p != '{')
        return 0;   /* judged by the full parse */
    static const char *const sig_name = "eldr_sig";
    int found = js_members(kv, &sig_name, 1, &sm, &sv, NULL, NULL);
    if (found == -2)
        return bad(why, whylen, "the prefill's kv_transfer_params hold eldr_sig twice");
    if (found < 0)
        return bad(why, whylen, "the prefill's kv_transfer_params are malformed");
    if (sv.n == 0)
        return 0;
    if (decode_sig(p, sv, why, whylen) < 0)
        return -1;
    size_t cut;
    cut_member(p, len, kv, sm, &cut);
    return 0;
}

/* The spans the decode body is spliced from (stock vLLM's answer, checked
 * by jansson). */
static void find_spans(pm_prefill *p, size_t len)
{
    jspan all = {p->text, len}, m, choices;
    const char *start = js_ws(p->text, p->text + len);
    all.n -= (size_t)(start - p->text);
    all.p = start;
    js_member(all, "kv_transfer_params", &m, &p->kv);
    js_member(all, "created", &m, &p->created);
    if (js_member(all, "choices", &m, &choices) == 1 && choices.n > 1 && *choices.p == '[') {
        jspan first = {js_ws(choices.p + 1, choices.p + choices.n), 0};
        const char *e = js_value(first.p, choices.p + choices.n);
        if (e) {
            first.n = (size_t)(e - first.p);
            js_member(first, "prompt_token_ids", &m, &p->ids);
        }
    }
}

/* ---- the prefill-first answer, checked on its text ---------------------- */

/* An integer value span. */
static int span_int(jspan v, int64_t *x)
{
    cj_t s;
    cj_init(&s, v.p, v.n);
    return v.n && cj_int(&s, x) == 0 && cj_peek(&s) < 0 ? 0 : -1;
}

static int dup_refusal(char *why, size_t whylen, const char *name)
{
    snprintf(why, whylen, "the prefill's answer gives \"%s\" twice (duplicate key)", name);
    return -1;
}

static const char *const handoff_msg =
    "the prefill's answer lacks the prefill-first handoff (kv_transfer_params and one "
    "choice): is the prefill instance running with its KV connector?";

/* The reference's checks of a prefill-first answer, on the text (text[0..
 * len), eldr_sig already out): kv_transfer_params an object, one choice,
 * token_ids == [prefill_first_token_id], prefill_continues a boolean, and
 * for a completion prompt_token_ids a list of prefill_prompt_tokens ids.
 * Sets the spans and continues. No tree is built: a jansson tree of the
 * answer's ids costs more than the whole rest of proxying it. */
static void shift_after(jspan *sp, const char *at, size_t cut)
{
    if (sp->n && sp->p > at)
        sp->p -= cut;
}

/* What one walk over a prefill-first answer finds. Each member the proxy
 * reads or splices is taken once; a second is `twice` (the spliced and
 * the checked value could differ). */
typedef struct answer_walk {
    jspan kv, created;           /* top level: the handoff, created */
    int choices;                 /* how many choices */
    jspan first, cont, n_prompt; /* in the handoff: prefill_first_token_id, ... */
    jspan sig, sig_member;       /* eldr_sig: its value and its "key": value span */
    long n_token_ids;            /* the first choice's token_ids: count, -1 not ints */
    int64_t token0;
    jspan ids;                   /* its prompt_token_ids */
    long n_ids;                  /* their count, -1 not a list of ints */
    int seen_ids, seen_tokens;
    const char *twice;
} answer_walk;

/* A list of integers at s, read once: the count, the first in *first; -1
 * (the value skipped and checked) when it is something else, -2 when it is
 * not JSON. */
static long read_ints(cj_t *s, int64_t *first)
{
    cj_t t = *s;
    int count = 0, more;
    if (cj_expect(&t, '[') == 0) {
        while ((more = cj_next_item(&t, &count)) == 1) {
            int64_t x;
            if (cj_int(&t, &x) < 0)
                break;
            if (count == 1)
                *first = x;
        }
        if (more == 0) {
            *s = t;
            return count;
        }
    }
    return cj_skip(s) < 0 ? -2 : -1;
}

/* A member taken once: its value skipped (checked) into *v. */
static int take_once(answer_walk *w, const char *name, jspan *v, cj_t *s)
{
    if (v->n) {
        w->twice = name;
        return -2;
    }
    const char *at = s->p;
    if (cj_skip(s) < 0)
        return -1;
    *v = (jspan){at, (size_t)(s->p - at)};
    return 0;
}

static int read_kv(void *cls, const char *k, size_t kl, cj_t *s)
{
    answer_walk *w = cls;
    if (cj_key_is(k, kl, "prefill_first_token_id"))
        return take_once(w, "prefill_first_token_id", &w->first, s);
    if (cj_key_is(k, kl, "prefill_continues"))
        return take_once(w, "prefill_continues", &w->cont, s);
    if (cj_key_is(k, kl, "prefill_prompt_tokens"))
        return take_once(w, "prefill_prompt_tokens", &w->n_prompt, s);
    if (cj_key_is(k, kl, "eldr_sig")) {
        int rc = take_once(w, "eldr_sig", &w->sig, s);
        w->sig_member = (jspan){k - 1, (size_t)(s->p - (k - 1))};
        return rc;
    }
    return cj_skip(s) < 0 ? -1 : 0;
}

static int read_choice(void *cls, const char *k, size_t kl, cj_t *s)
{
    answer_walk *w = cls;
    int ids = cj_key_is(k, kl, "prompt_token_ids");
    if (!ids && !cj_key_is(k, kl, "token_ids"))
        return cj_skip(s) < 0 ? -1 : 0;
    int *seen = ids ? &w->seen_ids : &w->seen_tokens;
    if (*seen) {
        w->twice = ids ? "prompt_token_ids" : "token_ids";
        return -2;
    }
    *seen = 1;
    const char *at = s->p;
    int64_t first = 0;
    long n = read_ints(s, &first);
    if (n == -2)
        return -1;
    if (ids) {
        w->n_ids = n;
        w->ids = (jspan){at, (size_t)(s->p - at)};
    } else {
        w->n_token_ids = n;
        w->token0 = first;
    }
    return 0;
}

/* choices: a list whose first element (an object) is read, the rest
 * skipped and counted. */
static int read_choices(answer_walk *w, cj_t *s)
{
    if (w->choices) {
        w->twice = "choices";
        return -2;
    }
    if (cj_peek(s) != '[')
        return cj_skip(s) < 0 ? -1 : 0;   /* not a list: the handoff check refuses it */
    s->p++;
    int count = 0, more, rc;
    while ((more = cj_next_item(s, &count)) == 1) {
        rc = count == 1 && cj_peek(s) == '{' ? js_walk_at(s, read_choice, w)
                                             : (cj_skip(s) < 0 ? -1 : 0);
        if (rc != 0)
            return rc;
    }
    w->choices = count ? count : -1;   /* -1: an empty list */
    return more < 0 ? -1 : 0;
}

static int read_top(void *cls, const char *k, size_t kl, cj_t *s)
{
    answer_walk *w = cls;
    if (cj_key_is(k, kl, "choices"))
        return read_choices(w, s);
    if (cj_key_is(k, kl, "created"))
        return take_once(w, "created", &w->created, s);
    if (!cj_key_is(k, kl, "kv_transfer_params"))
        return cj_skip(s) < 0 ? -1 : 0;
    if (w->kv.n) {
        w->twice = "kv_transfer_params";
        return -2;
    }
    const char *at = s->p;
    int rc = cj_peek(s) == '{' ? js_walk_at(s, read_kv, w) : (cj_skip(s) < 0 ? -1 : 0);
    w->kv = (jspan){at, (size_t)(s->p - at)};
    return rc;
}

static int eldr_answer(pm_prefill *p, size_t *len, pm_kind kind, char *why, size_t whylen)
{
    const char *end = p->text + *len, *start = js_ws(p->text, end);
    answer_walk w = {.n_token_ids = -1, .n_ids = -1};
    cj_t s;
    cj_init(&s, start, (size_t)(end - start));
    /* one checking walk over the whole answer */
    int rc = start < end && *start == '{' ? js_walk_at(&s, read_top, &w) : -1;
    if (rc == -1 || (rc == 0 && cj_peek(&s) >= 0))
        return bad(why, whylen, start < end && *start != '{' && js_value(start, end) == end
                                    ? "the prefill's answer is not a JSON object (another JSON "
                                      "value)"
                                    : "the prefill's answer is not a JSON object (malformed JSON)");
    if (rc == -2)
        return strcmp(w.twice, "eldr_sig")
                   ? dup_refusal(why, whylen, w.twice)
                   : bad(why, whylen, "the prefill's kv_transfer_params hold eldr_sig twice");
    if (!w.kv.n || *w.kv.p != '{' || w.choices != 1)
        return bad(why, whylen, handoff_msg);
    int64_t first, n_prompt;
    int cont_true = w.cont.n == 4 && !memcmp(w.cont.p, "true", 4);
    int cont_false = w.cont.n == 5 && !memcmp(w.cont.p, "false", 5);
    if (span_int(w.first, &first) < 0 || w.n_token_ids != 1 || w.token0 != first ||
        !(cont_true || cont_false))
        return bad(why, whylen, "the prefill's token history is invalid (token_ids must be "
                   "[prefill_first_token_id], prefill_continues a boolean)");
    if (kind == PM_COMPLETIONS && (span_int(w.n_prompt, &n_prompt) < 0 || w.n_ids != n_prompt))
        return bad(why, whylen, "the prefill's prompt_token_ids do not hold "
                   "prefill_prompt_tokens ids");
    p->kv = w.kv;
    p->created = w.created;
    p->ids = w.ids;
    p->continues = cont_true;
    if (w.sig.n) {   /* eldr_sig: decoded from the text, then cut out of it */
        if (decode_sig(p, w.sig, why, whylen) < 0)
            return -1;
        size_t cut;
        const char *at = cut_member(p, len, p->kv, w.sig_member, &cut);
        p->kv.n -= cut;
        shift_after(&p->created, at, cut);
        shift_after(&p->ids, at, cut);
    }
    return 0;
}

/* Stock vLLM: an object, eldr_sig out; the handoff as it comes. Checked
 * on the text, with no tree: a stock prefill's routed experts make the
 * answer kilobytes to megabytes of base64, which jansson would copy and
 * check character by character (it was 40% of eldrd's CPU per proxied
 * request), while the decode body is spliced from spans anyway. The
 * whole text must be valid JSON (cj_skip checks every value, strings as
 * RFC 8259 wants them); the keys eldrd reads come once;
 * kv_transfer_params is an object or null. */
static int vllm_answer(pm_prefill *p, size_t len, char *why, size_t whylen)
{
    static const char *const once[] = {"kv_transfer_params", "created", "choices", "usage",
                                       "prompt_routed_experts", "prompt_token_ids"};
    int seen[6] = {0}, kv = 0, n = 0, r;
    const char *k;
    size_t kl;
    cj_t s;
    cj_init(&s, p->text, len);
    if (cj_peek(&s) != '{') {
        int value = cj_skip(&s) == 0 && cj_peek(&s) == -1;
        return bad(why, whylen, value ? "the prefill's answer is not a JSON object (another "
                                        "JSON value)"
                                      : "the prefill's answer is not a JSON object (not JSON)");
    }
    cj_expect(&s, '{');
    while ((r = cj_next_key(&s, &n, &k, &kl)) == 1) {
        for (int i = 0; i < 6; i++)
            if (cj_key_is(k, kl, once[i]) && seen[i]++)
                return dup_refusal(why, whylen, once[i]);
        if (cj_key_is(k, kl, "kv_transfer_params")) {
            int c = cj_peek(&s);
            if (c != '{' && c != 'n')
                return bad(why, whylen, "the prefill's kv_transfer_params is not an object");
            kv = c == '{';
        }
        if (cj_skip(&s) < 0)
            break;
    }
    if (r != 0 || cj_peek(&s) != -1) {
        snprintf(why, whylen, "the prefill's answer is not a JSON object (invalid JSON near "
                 "byte %zu of %zu)", cj_where(&s), len);
        return -1;
    }
    find_spans(p, len);
    if (!kv)
        p->kv.n = 0;
    p->continues = 1;
    return 0;
}

static int prefill_parse(const char *text, size_t len, const pm_client *c, pm_prefill *p,
                         char *why, size_t whylen);

int pm_prefill_parse(const char *text, size_t len, const pm_client *c, pm_prefill *p,
                     char *why, size_t whylen)
{
    int rc = prefill_parse(text, len, c, p, why, whylen);
    if (rc < 0)
        pm_one_line(why);
    return rc;
}

static int prefill_parse(const char *text, size_t len, const pm_client *c, pm_prefill *p,
                         char *why, size_t whylen)
{
    pm_kind kind = c->kind;
    memset(p, 0, sizeof *p);
    if (!(p->text = malloc(len + 1)))
        return bad(why, whylen, "out of memory");
    memcpy(p->text, text, len);
    p->text[len] = '\0';
    if (c->protocol == PM_VLLM && cut_sig(p, &len, why, whylen) < 0) {
        pm_prefill_free(p);
        return -1;
    }
    if (c->protocol == PM_ELDR) {
        if (eldr_answer(p, &len, kind, why, whylen) < 0) {
            pm_prefill_free(p);
            return -1;
        }
        /* the tree only where the client's first answer is built from it:
         * a stream's first token, or an answer the prefill ended */
        p->text_len = len;
        if (!c->stream && p->continues)
            return 0;
    }
    if (c->protocol == PM_VLLM) {
        if (vllm_answer(p, len, why, whylen) < 0) {
            pm_prefill_free(p);
            return -1;
        }
        p->text_len = len;
        return 0;
    }
    /* Duplicate keys are refused: the spans take a key's first occurrence
     * and jansson its last. */
    json_error_t je;
    p->result = json_loadb(p->text, len, JSON_REJECT_DUPLICATES, &je);
    if (!json_is_object(p->result)) {
        snprintf(why, whylen, "the prefill's answer is not a JSON object (%s)",
                 p->result ? "another JSON value" : je.text);
        pm_prefill_free(p);
        return -1;
    }
    p->text_len = len;
    return 0;
}

void pm_prefill_free(pm_prefill *p)
{
    free(p->text);
    json_decref(p->result);
    free(p->sig);
    memset(p, 0, sizeof *p);
}

json_t *pm_public_first(const pm_prefill *p, const pm_client *c)
{
    json_t *r = json_copy(p->result);
    if (!r)
        return NULL;
    json_object_del(r, "kv_transfer_params");
    /* the engine's routing is eldrd's signal, never the client's */
    json_object_del(r, "prompt_routed_experts");
    json_object_del(r, "sglext");
    json_t *choice = json_copy(json_array_get(json_object_get(r, "choices"), 0));
    json_object_del(choice, "routed_experts");
    json_object_set_new(r, "choices", json_pack("[o]", choice));
    if (!c->return_ids) {
        json_object_del(choice, "token_ids");
        json_object_del(choice, "prompt_token_ids");
    }
    if (p->continues) {
        json_object_set_new(choice, "finish_reason", json_null());
        json_object_set_new(choice, "stop_reason", json_null());
    }
    return r;
}

static int add_event(char **buf, size_t *len, json_t *v)
{
    char *s = json_dumps(v, DUMP_FLAGS);
    if (!s)
        return -1;
    size_t n = strlen(s);
    char *b = realloc(*buf, *len + n + 9);
    if (!b) {
        free(s);
        return -1;
    }
    memcpy(b + *len, "data: ", 6);
    memcpy(b + *len + 6, s, n);
    memcpy(b + *len + 6 + n, "\n\n", 3);
    *buf = b;
    *len += n + 8;
    free(s);
    return 0;
}

char *pm_first_events(const pm_prefill *p, const pm_client *c, size_t *len)
{
    json_t *first = pm_public_first(p, c);
    if (!first)
        return NULL;
    json_t *usage = json_incref(json_object_get(first, "usage"));
    if (!c->continuous_usage)
        json_object_del(first, "usage");
    char *buf = NULL;
    *len = 0;
    int rc = add_event(&buf, len, first);
    if (!rc && !p->continues) {
        if (c->include_usage) {
            json_t *u = json_copy(first);
            json_object_set_new(u, "choices", json_array());
            json_object_set(u, "usage", usage ? usage : json_null());
            rc = add_event(&buf, len, u);
            json_decref(u);
        }
        static const char done[] = "data: [DONE]\n\n";
        char *b = rc ? NULL : realloc(buf, *len + sizeof done);
        if (b) {
            memcpy(b + *len, done, sizeof done);
            buf = b;
            *len += sizeof done - 1;
        } else {
            rc = -1;
        }
    }
    json_decref(usage);
    json_decref(first);
    if (rc < 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

char *pm_first_answer(const pm_prefill *p, const pm_client *c, size_t *len)
{
    json_t *first = pm_public_first(p, c);
    char *s = first ? json_dumps(first, DUMP_FLAGS) : NULL;
    json_decref(first);
    *len = s ? strlen(s) : 0;
    return s;
}

/* Spliced, not printed: the client's own keys from jansson (small), the
 * prompt ids and the KV handoff as the prefill's text had them. */
/* The decode body's client part: "{...}" with request_id set and, with
 * ids, add_special_tokens false, prompt and truncate_prompt_tokens out
 * (the prefill's ids replace the prompt). malloc'd. */
static char *decode_head(const pm_client *c, int ids, const char *request_id)
{
    if (!c->plain_keys) {   /* keys with escapes: only a tree can tell them */
        json_t *b = client_tree(c);
        if (!b)
            return NULL;
        json_object_del(b, "kv_transfer_params");   /* a client's null: the handoff's place */
        if (ids) {
            json_object_del(b, "prompt");
            json_object_set_new(b, "add_special_tokens", json_false());
            json_object_del(b, "truncate_prompt_tokens");
        }
        json_object_set_new(b, "request_id", json_string(request_id));
        char *head = json_dumps(b, DUMP_FLAGS);
        json_decref(b);
        return head;
    }
    static const char *const drop[] = {"request_id", "kv_transfer_params", "add_special_tokens",
                                       "prompt", "truncate_prompt_tokens"};
    strbuf o = {0};
    int first;
    client_members(&o, c, drop, ids ? 5 : 2, &first);
    if (ids)
        sb_str(&o, first ? "\"add_special_tokens\":false," : ",\"add_special_tokens\":false,");
    else if (!first)
        sb_put(&o, ",", 1);
    sb_str(&o, "\"request_id\":");
    ob_json_string(&o, "", request_id);
    sb_put(&o, "}", 1);
    if (o.oom) {
        free(o.s);
        return NULL;
    }
    return o.s;
}

char *pm_decode_body(const pm_client *c, const pm_prefill *p, const char *request_id)
{
    if (!p->kv.n && c->protocol == PM_ELDR)
        return NULL;
    /* the exact prompt ids the prefill computed KV for, never a
     * retokenised text */
    int ids = c->protocol == PM_ELDR && c->kind == PM_COMPLETIONS && p->ids.n;
    char *head = decode_head(c, ids, request_id);   /* {...} */
    if (!head)
        return NULL;
    size_t hn = strlen(head) - 1;             /* without its '}' */
    if (!p->kv.n)                             /* vLLM without a handoff */
        return head;
    size_t kn = p->kv.n - 1;                  /* without its '}' */
    int kv_empty = js_ws(p->kv.p + 1, p->kv.p + kn) == p->kv.p + kn;
    size_t cap = hn + p->ids.n + kn + p->created.n + 96;
    char *out = malloc(cap);
    if (out) {
        char *o = out;
        memcpy(o, head, hn);
        o += hn;
        if (ids) {
            o += sprintf(o, "%s\"prompt\":", hn > 1 ? "," : "");
            memcpy(o, p->ids.p, p->ids.n);
            o += p->ids.n;
        }
        o += sprintf(o, "%s\"kv_transfer_params\":", hn > 1 || ids ? "," : "");
        memcpy(o, p->kv.p, kn);
        o += kn;
        if (p->created.n && c->protocol == PM_ELDR) {
            o += sprintf(o, "%s\"prefill_created\":", kv_empty ? "" : ",");
            memcpy(o, p->created.p, p->created.n);
            o += p->created.n;
        }
        memcpy(o, "}}", 3);
    }
    free(head);
    return out;
}

char *pm_release_body(const pm_prefill *p)
{
    return p->kv.n ? strndup(p->kv.p, p->kv.n) : NULL;
}
