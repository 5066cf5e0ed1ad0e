/* proxy_msg.c - the JSON of proxy mode (proxy_msg.h). */
#include "proxy_msg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "b64.h"

#define DUMP_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(17))

/* The prompt key: the reference hashes the prompt text, or for token ids
 * "".join(str(x)); a chat's key is its messages' string contents. */
static int append_key(pm_client *c, const char *s, size_t n)
{
    char *k = realloc(c->key, c->key_len + n + 1);
    if (!k)
        return -1;
    memcpy(k + c->key_len, s, n);
    c->key = k;
    c->key_len += n;
    k[c->key_len] = '\0';
    return 0;
}

static int completion_prompt(pm_client *c, rb_err *e)
{
    json_t *p = json_object_get(c->payload, "prompt");
    if (json_is_string(p))
        return append_key(c, json_string_value(p), json_string_length(p)) < 0
                   ? rb_fail(e, 503, "prompt", "out of memory")
                   : 0;
    if (!json_is_array(p) || json_array_size(p) == 0)
        return rb_fail(e, 400, "prompt", "a completion needs \"prompt\": one string or a "
                       "non-empty list of token ids");
    size_t i;
    json_t *t;
    json_array_foreach(p, i, t) {
        if (!json_is_integer(t))
            return rb_fail(e, 400, "prompt", "prompt[%zu] is not a token id (one prompt per "
                           "request: a list of strings is several)", i);
        char num[24];
        int n = snprintf(num, sizeof num, "%lld", (long long)json_integer_value(t));
        if (append_key(c, num, (size_t)n) < 0)
            return rb_fail(e, 503, "prompt", "out of memory");
    }
    return 0;
}

static int chat_messages(pm_client *c, rb_err *e)
{
    json_t *m = json_object_get(c->payload, "messages");
    if (!json_is_array(m) || json_array_size(m) == 0)
        return rb_fail(e, 400, "messages", "a chat completion needs a non-empty "
                       "\"messages\" array");
    size_t i;
    json_t *msg;
    json_array_foreach(m, i, msg) {
        if (!json_is_object(msg))
            return rb_fail(e, 400, "messages", "messages[%zu] is not an object", i);
        json_t *content = json_object_get(msg, "content");
        if (json_is_string(content) &&
            append_key(c, json_string_value(content), json_string_length(content)) < 0)
            return rb_fail(e, 503, "messages", "out of memory");
    }
    return 0;
}

/* Options the prefill-first handoff cannot serve, as the reference
 * refuses them. */
static int unsupported(const pm_client *c, rb_err *e)
{
    static const char *const keys[] = {"echo", "use_beam_search", "prompt_embeds", "suffix",
                                       "kv_transfer_params"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = json_object_get(c->payload, keys[i]);
        if (v && !json_is_null(v) && !json_is_false(v))
            return rb_fail(e, 400, keys[i], "\"%s\" is not supported through the proxy "
                           "(prefill-first handoff)", keys[i]);
    }
    static const char *const ones[] = {"n", "best_of"};
    for (size_t i = 0; i < 2; i++) {
        json_t *v = json_object_get(c->payload, ones[i]);
        if (v && !json_is_null(v) && !(json_is_integer(v) && json_integer_value(v) == 1))
            return rb_fail(e, 400, ones[i], "\"%s\" must be 1 through the proxy", ones[i]);
    }
    json_t *mt = json_object_get(c->payload, "max_tokens");
    if (mt && !json_is_null(mt) && !(json_is_integer(mt) && json_integer_value(mt) >= 1))
        return rb_fail(e, 400, "max_tokens", "\"max_tokens\" must be an integer >= 1");
    return 0;
}

/* Messages quote upstream and client text (jansson's error names the
 * token): control characters become spaces, so a message stays one line. */
static void one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = ' ';
}

static int client_parse(const char *text, size_t len, pm_kind kind, pm_client *c, rb_err *e);

int pm_client_parse(const char *text, size_t len, pm_kind kind, pm_client *c, rb_err *e)
{
    int rc = client_parse(text, len, kind, c, e);
    if (rc < 0)
        one_line(e->error);
    return rc;
}

static int client_parse(const char *text, size_t len, pm_kind kind, pm_client *c, rb_err *e)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    json_error_t je;
    c->payload = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!c->payload)
        return rb_fail(e, 400, "body", "malformed JSON at line %d column %d: %s", je.line,
                       je.column, je.text);
    if (!json_is_object(c->payload)) {
        pm_client_free(c);
        return rb_fail(e, 400, "body", "the body is not a JSON object");
    }
    json_t *s = json_object_get(c->payload, "stream");
    if (s && !json_is_boolean(s) && !json_is_null(s)) {
        pm_client_free(c);
        return rb_fail(e, 400, "stream", "\"stream\" is not a boolean");
    }
    c->stream = json_is_true(s);
    int rc = kind == PM_CHAT ? chat_messages(c, e) : completion_prompt(c, e);
    if (rc == 0)
        rc = unsupported(c, e);
    if (rc < 0)
        pm_client_free(c);
    return rc;
}

void pm_client_free(pm_client *c)
{
    json_decref(c->payload);
    free(c->key);
    memset(c, 0, sizeof *c);
}

char *pm_prefill_body(const pm_client *c, const char *request_id)
{
    json_t *b = json_copy(c->payload);   /* shallow: the prompt is shared, not copied */
    if (!b)
        return NULL;
    char xfer[RB_ID_MAX + 8];
    snprintf(xfer, sizeof xfer, "xfer-%s", request_id);
    json_object_set_new(b, "stream", json_false());
    json_object_del(b, "stream_options");
    json_object_set_new(b, "request_id", json_string(request_id));
    if (c->protocol == PM_VLLM) {
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

/* Find eldr_sig in the answer's kv_transfer_params, decode it and cut the
 * member out of p->text (with one comma). 0 (also when absent), -1 with
 * why. */
static int cut_sig(pm_prefill *p, size_t *len, char *why, size_t whylen)
{
    jspan all = {p->text, *len}, kvm, kv, sm, sv;
    const char *start = js_ws(p->text, p->text + *len);
    all.n -= (size_t)(start - p->text);
    all.p = start;
    if (js_member(all, "kv_transfer_params", &kvm, &kv) != 1 || kv.n == 0 || *kv.p != '{')
        return 0;   /* judged by the full parse */
    int found = js_member(kv, "eldr_sig", &sm, &sv);
    if (found < 0)
        return bad(why, whylen, "the prefill's kv_transfer_params are malformed");
    if (found == 0 || (sv.n == 4 && !memcmp(sv.p, "null", 4)))
        return 0;
    size_t at;
    if (sv.n < 2 || *sv.p != '"' || !(p->sig = malloc(b64_decoded_max(sv.n) + 1)) ||
        b64_decode(sv.p + 1, sv.n - 2, p->sig, &p->sig_len, &at) < 0)
        return bad(why, whylen, "the prefill's eldr_sig is not a base64 string");
    /* the member and a comma: the one after it, or else the one before */
    char *from = (char *)sm.p, *to = (char *)sm.p + sm.n;
    const char *end = p->text + *len;
    const char *after = js_ws(to, end);
    if (after < end && *after == ',') {
        to = (char *)after + 1;
    } else {
        char *b = from;
        while (b > kv.p && (b[-1] == ' ' || b[-1] == '\n' || b[-1] == '\r' || b[-1] == '\t'))
            b--;
        if (b > kv.p && b[-1] == ',')
            from = b - 1;
    }
    memmove(from, to, (size_t)(end - to));
    *len -= (size_t)(to - from);
    p->text[*len] = '\0';
    return 0;
}

/* The spans the decode body is spliced from. */
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

/* Stock vLLM: an object, eldr_sig out; the handoff as it comes. */
static int vllm_answer(pm_prefill *p, size_t len, char *why, size_t whylen)
{
    p->transfer = json_object_get(p->result, "kv_transfer_params");
    if (p->transfer && !json_is_object(p->transfer) && !json_is_null(p->transfer))
        return bad(why, whylen, "the prefill's kv_transfer_params is not an object");
    if (!json_is_object(p->transfer))
        p->transfer = NULL;
    if (json_object_get(p->transfer, "eldr_sig"))
        return bad(why, whylen, "the prefill's kv_transfer_params hold eldr_sig twice");
    find_spans(p, len);
    if (!p->transfer)
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
        one_line(why);
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
    if (cut_sig(p, &len, why, whylen) < 0) {
        pm_prefill_free(p);
        return -1;
    }
    json_error_t je;
    p->result = json_loadb(p->text, len, 0, &je);
    if (!json_is_object(p->result)) {
        snprintf(why, whylen, "the prefill's answer is not a JSON object (%s)",
                 p->result ? "another JSON value" : je.text);
        pm_prefill_free(p);
        return -1;
    }
    if (c->protocol == PM_VLLM) {
        if (vllm_answer(p, len, why, whylen) < 0) {
            pm_prefill_free(p);
            return -1;
        }
        return 0;
    }
    p->transfer = json_object_get(p->result, "kv_transfer_params");
    json_t *choices = json_object_get(p->result, "choices");
    int rc = 0;
    if (!json_is_object(p->transfer) || !json_is_array(choices) || json_array_size(choices) != 1)
        rc = bad(why, whylen, "the prefill's answer lacks the prefill-first handoff "
                 "(kv_transfer_params and one choice): is the prefill instance running "
                 "with its KV connector?");
    json_t *choice = json_array_get(choices, 0);
    json_t *first = json_object_get(p->transfer, "prefill_first_token_id");
    json_t *ids = json_object_get(choice, "token_ids");
    json_t *cont = json_object_get(p->transfer, "prefill_continues");
    if (!rc && (!json_is_integer(first) || !json_is_array(ids) || json_array_size(ids) != 1 ||
                !json_is_integer(json_array_get(ids, 0)) ||
                json_integer_value(json_array_get(ids, 0)) != json_integer_value(first) ||
                !json_is_boolean(cont)))
        rc = bad(why, whylen, "the prefill's token history is invalid (token_ids must be "
                 "[prefill_first_token_id], prefill_continues a boolean)");
    if (!rc && kind == PM_COMPLETIONS) {
        p->prompt_ids = json_object_get(choice, "prompt_token_ids");
        json_t *n = json_object_get(p->transfer, "prefill_prompt_tokens");
        if (!json_is_array(p->prompt_ids) || !json_is_integer(n) ||
            (json_int_t)json_array_size(p->prompt_ids) != json_integer_value(n))
            rc = bad(why, whylen, "the prefill's prompt_token_ids do not hold "
                     "prefill_prompt_tokens ids");
    }
    if (!rc && json_object_get(p->transfer, "eldr_sig"))
        rc = bad(why, whylen, "the prefill's kv_transfer_params hold eldr_sig twice");
    if (rc < 0) {
        pm_prefill_free(p);
        return -1;
    }
    find_spans(p, len);
    p->continues = json_is_true(cont);
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
    json_t *choice = json_copy(json_array_get(json_object_get(r, "choices"), 0));
    json_object_set_new(r, "choices", json_pack("[o]", choice));
    if (!json_is_true(json_object_get(c->payload, "return_token_ids"))) {
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
    json_t *opts = json_object_get(c->payload, "stream_options");
    json_t *usage = json_incref(json_object_get(first, "usage"));
    if (!json_is_true(json_object_get(opts, "continuous_usage_stats")))
        json_object_del(first, "usage");
    char *buf = NULL;
    *len = 0;
    int rc = add_event(&buf, len, first);
    if (!rc && !p->continues) {
        if (json_is_true(json_object_get(opts, "include_usage"))) {
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
char *pm_decode_body(const pm_client *c, const pm_prefill *p, const char *request_id)
{
    json_t *b = json_copy(c->payload);
    if (!b || (!p->kv.n && c->protocol == PM_ELDR))
        return json_decref(b), NULL;
    int ids = c->protocol == PM_ELDR && c->kind == PM_COMPLETIONS && p->ids.n;
    if (ids) {
        /* the exact prompt ids the prefill computed KV for, never a
         * retokenised text */
        json_object_del(b, "prompt");
        json_object_set_new(b, "add_special_tokens", json_false());
        json_object_del(b, "truncate_prompt_tokens");
    }
    json_object_set_new(b, "request_id", json_string(request_id));
    char *head = json_dumps(b, DUMP_FLAGS);   /* {...} */
    json_decref(b);
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
