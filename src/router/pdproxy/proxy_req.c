/* proxy_req.c - a client's request to the proxy, read and checked
 * (proxy_msg.h: pm_client_parse, pm_client_parse_tree).
 *
 * Two readers, one set of rules. Every request takes the text scanner
 * (json_scan.h): one walk that checks the JSON and refuses a key given
 * twice in any object, then the members the proxy reads, from their
 * spans. A jansson tree of a chat or a long prompt costs more than the
 * rest of proxying the request. The tree reader stays for what only
 * unescaping can judge (a key written with escapes, "pr\u006fmpt" being
 * "prompt"), for nesting past the scanner's depth and objects of very
 * many keys, and as the tests' oracle: both must give the same answer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_scan.h"
#include "proxy_msg.h"

/* ---- shared by both readers: the refusals and the prompt key ---------- */

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

static int key_oom(rb_err *e, const char *where)
{
    return rb_fail(e, 503, where, "out of memory");
}

/* The reference hashes "".join(str(x)) of token ids. */
static int append_id(pm_client *c, long long id)
{
    char num[24];
    int n = snprintf(num, sizeof num, "%lld", id);
    return append_key(c, num, (size_t)n);
}

static int not_boolean_stream(rb_err *e)
{
    return rb_fail(e, 400, "stream", "\"stream\" is not a boolean");
}

static int bad_prompt(rb_err *e)
{
    return rb_fail(e, 400, "prompt", "a completion needs \"prompt\": one string or a "
                   "non-empty list of token ids");
}

static int bad_prompt_item(rb_err *e, size_t i)
{
    return rb_fail(e, 400, "prompt", "prompt[%zu] is not a token id (one prompt per request: a "
                   "list of strings is several)", i);
}

static int bad_messages(rb_err *e)
{
    return rb_fail(e, 400, "messages", "a chat completion needs a non-empty \"messages\" array");
}

static int bad_message(rb_err *e, size_t i)
{
    return rb_fail(e, 400, "messages", "messages[%zu] is not an object", i);
}

/* Options the prefill-first handoff cannot serve, as the reference
 * refuses them: set (not null, not false), they are refused. */
static const char *const unsupported_keys[] = {"echo", "use_beam_search", "prompt_embeds",
                                               "suffix", "kv_transfer_params"};
#define N_UNSUPPORTED 5
/* and these must be 1 */
static const char *const one_keys[] = {"n", "best_of"};

static int unsupported(rb_err *e, const char *key)
{
    return rb_fail(e, 400, key, "\"%s\" is not supported through the proxy (prefill-first "
                   "handoff)", key);
}

static int not_one(rb_err *e, const char *key)
{
    return rb_fail(e, 400, key, "\"%s\" must be 1 through the proxy", key);
}

static int bad_max_tokens(rb_err *e)
{
    return rb_fail(e, 400, "max_tokens", "\"max_tokens\" must be an integer >= 1");
}

static int not_object(rb_err *e)
{
    return rb_fail(e, 400, "body", "the body is not a JSON object");
}

/* ---- the text reader --------------------------------------------------- */

enum {
    F_STREAM, F_PROMPT, F_MESSAGES, F_UNSUPPORTED,
    F_ONE = F_UNSUPPORTED + N_UNSUPPORTED, F_MAX_TOKENS = F_ONE + 2, F_RETURN_IDS,
    F_STREAM_OPTIONS, F_COUNT
};
static const char *const field_names[F_COUNT] = {
    "stream", "prompt", "messages", "echo", "use_beam_search", "prompt_embeds", "suffix",
    "kv_transfer_params", "n", "best_of", "max_tokens", "return_token_ids", "stream_options"};

#define SCAN_KEYS_MAX 256   /* keys of one object the scanner compares; more go to the tree */

enum { SCAN_OK = 0, SCAN_BAD = -1, SCAN_TWICE = -2, SCAN_TREE = 1 };

/* Walk one value: its JSON checked, no object with a key twice. SCAN_TREE
 * when the tree must judge (an escaped key, deep nesting, very many
 * keys). */
static int scan_value(cj_t *s, int depth, const char **twice)
{
    int c = cj_peek(s), count = 0, more, rc;
    if (depth >= CJ_MAX_DEPTH && (c == '{' || c == '['))
        return SCAN_TREE;
    if (c == '[') {
        s->p++;
        while ((more = cj_next_item(s, &count)) == 1)
            if ((rc = scan_value(s, depth + 1, twice)) != SCAN_OK)
                return rc;
        return more < 0 ? SCAN_BAD : SCAN_OK;
    }
    if (c != '{')
        return cj_skip(s) < 0 ? SCAN_BAD : SCAN_OK;
    s->p++;
    const char *keys[SCAN_KEYS_MAX];
    size_t lens[SCAN_KEYS_MAX];
    const char *k;
    size_t kl;
    while ((more = cj_next_key(s, &count, &k, &kl)) == 1) {
        if (count > SCAN_KEYS_MAX || memchr(k, '\\', kl))
            return SCAN_TREE;
        for (int i = 0; i < count - 1; i++)
            if (lens[i] == kl && !memcmp(keys[i], k, kl)) {
                *twice = k;
                return SCAN_TWICE;
            }
        keys[count - 1] = k;
        lens[count - 1] = kl;
        if ((rc = scan_value(s, depth + 1, twice)) != SCAN_OK)
            return rc;
    }
    return more < 0 ? SCAN_BAD : SCAN_OK;
}

static int is_lit(jspan v, const char *lit)
{
    size_t n = strlen(lit);
    return v.n == n && !memcmp(v.p, lit, n);
}

/* An integer span, whole. */
static int span_int64(jspan v, int64_t *x)
{
    cj_t s;
    cj_init(&s, v.p, v.n);
    return v.n && cj_int(&s, x) == 0 && cj_peek(&s) < 0 ? 0 : -1;
}

/* A string span's text into the key: as it is, or unescaped when it has
 * escapes (rare in prompts; jansson does that). */
static int append_string(pm_client *c, jspan v)
{
    if (!memchr(v.p, '\\', v.n))
        return append_key(c, v.p + 1, v.n - 2);
    json_error_t je;
    json_t *j = json_loadb(v.p, v.n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    int rc = json_is_string(j) ? append_key(c, json_string_value(j), json_string_length(j)) : -1;
    json_decref(j);
    return rc;
}

static int scan_prompt(pm_client *c, jspan v, rb_err *e)
{
    if (v.n && *v.p == '"')
        return append_string(c, v) < 0 ? key_oom(e, "prompt") : 0;
    cj_t s;
    cj_init(&s, v.p, v.n);
    if (!v.n || cj_expect(&s, '[') < 0)
        return bad_prompt(e);
    int count = 0, more;
    while ((more = cj_next_item(&s, &count)) == 1) {
        int64_t id;
        cj_peek(&s);
        const char *at = s.p;
        if (cj_int(&s, &id) < 0 || (cj_peek(&s) != ',' && cj_peek(&s) != ']')) {
            s.p = at;
            return bad_prompt_item(e, (size_t)count - 1);
        }
        if (append_id(c, (long long)id) < 0)
            return key_oom(e, "prompt");
    }
    return count == 0 ? bad_prompt(e) : 0;
}

static int scan_messages(pm_client *c, jspan v, rb_err *e)
{
    cj_t s;
    cj_init(&s, v.p, v.n);
    if (!v.n || cj_expect(&s, '[') < 0)
        return bad_messages(e);
    int count = 0, more;
    while ((more = cj_next_item(&s, &count)) == 1) {
        cj_peek(&s);
        jspan msg = {s.p, 0};
        if (cj_skip(&s) < 0)
            return bad_messages(e);
        msg.n = (size_t)(s.p - msg.p);
        if (*msg.p != '{')
            return bad_message(e, (size_t)count - 1);
        jspan m, content;
        if (js_member(msg, "content", &m, &content) == 1 && *content.p == '"' &&
            append_string(c, content) < 0)
            return key_oom(e, "messages");
    }
    return count == 0 ? bad_messages(e) : 0;
}

/* The checks, on the members' spans. */
static int scan_fields(pm_client *c, const jspan *f, rb_err *e)
{
    if (f[F_STREAM].n && !is_lit(f[F_STREAM], "true") && !is_lit(f[F_STREAM], "false") &&
        !is_lit(f[F_STREAM], "null"))
        return not_boolean_stream(e);
    c->stream = is_lit(f[F_STREAM], "true");
    int rc = c->kind == PM_CHAT ? scan_messages(c, f[F_MESSAGES], e)
                                : scan_prompt(c, f[F_PROMPT], e);
    if (rc < 0)
        return rc;
    for (int i = 0; i < N_UNSUPPORTED; i++) {
        jspan v = f[F_UNSUPPORTED + i];
        if (v.n && !is_lit(v, "null") && !is_lit(v, "false"))
            return unsupported(e, unsupported_keys[i]);
    }
    for (int i = 0; i < 2; i++) {
        jspan v = f[F_ONE + i];
        int64_t x;
        if (v.n && !is_lit(v, "null") && (span_int64(v, &x) < 0 || x != 1))
            return not_one(e, one_keys[i]);
    }
    int64_t mt;
    jspan v = f[F_MAX_TOKENS];
    if (v.n && !is_lit(v, "null") && (span_int64(v, &mt) < 0 || mt < 1))
        return bad_max_tokens(e);
    c->return_ids = is_lit(f[F_RETURN_IDS], "true");
    jspan m, opt;
    if (f[F_STREAM_OPTIONS].n && *f[F_STREAM_OPTIONS].p == '{') {
        c->include_usage = js_member(f[F_STREAM_OPTIONS], "include_usage", &m, &opt) == 1 &&
                           is_lit(opt, "true");
        c->continuous_usage = js_member(f[F_STREAM_OPTIONS], "continuous_usage_stats", &m,
                                        &opt) == 1 &&
                              is_lit(opt, "true");
    }
    return 0;
}

/* SCAN_TREE when the tree must read it; else 0 or -1 with e. */
static int scan_client(pm_client *c, rb_err *e)
{
    const char *end = c->text + c->text_len, *start = js_ws(c->text, end), *twice = NULL;
    cj_t s;
    cj_init(&s, start, (size_t)(end - start));
    int rc = start < end ? scan_value(&s, 0, &twice) : SCAN_BAD;
    if (rc == SCAN_TREE)
        return SCAN_TREE;
    if (rc == SCAN_TWICE) {
        size_t n = strcspn(twice, "\"");
        return rb_fail(e, 400, "body", "malformed JSON: the key \"%.*s\" is given twice",
                       (int)(n < 60 ? n : 60), twice);
    }
    if (rc == SCAN_BAD || cj_peek(&s) >= 0)
        return rb_fail(e, 400, "body", "malformed JSON at byte %zu",
                       (size_t)(s.p - c->text));
    if (*start != '{')
        return not_object(e);
    jspan f[F_COUNT];
    js_members((jspan){start, (size_t)(s.p - start)}, field_names, F_COUNT, NULL, f, NULL,
               NULL);
    return scan_fields(c, f, e);
}

/* ---- the tree reader --------------------------------------------------- */

static int tree_prompt(pm_client *c, json_t *p, rb_err *e)
{
    if (json_is_string(p))
        return append_key(c, json_string_value(p), json_string_length(p)) < 0
                   ? key_oom(e, "prompt")
                   : 0;
    if (!json_is_array(p) || json_array_size(p) == 0)
        return bad_prompt(e);
    size_t i;
    json_t *t;
    json_array_foreach(p, i, t) {
        if (!json_is_integer(t))
            return bad_prompt_item(e, i);
        if (append_id(c, (long long)json_integer_value(t)) < 0)
            return key_oom(e, "prompt");
    }
    return 0;
}

static int tree_messages(pm_client *c, json_t *m, rb_err *e)
{
    if (!json_is_array(m) || json_array_size(m) == 0)
        return bad_messages(e);
    size_t i;
    json_t *msg;
    json_array_foreach(m, i, msg) {
        if (!json_is_object(msg))
            return bad_message(e, i);
        json_t *content = json_object_get(msg, "content");
        if (json_is_string(content) &&
            append_key(c, json_string_value(content), json_string_length(content)) < 0)
            return key_oom(e, "messages");
    }
    return 0;
}

static int tree_fields(pm_client *c, json_t *b, rb_err *e)
{
    json_t *s = json_object_get(b, "stream");
    if (s && !json_is_boolean(s) && !json_is_null(s))
        return not_boolean_stream(e);
    c->stream = json_is_true(s);
    int rc = c->kind == PM_CHAT ? tree_messages(c, json_object_get(b, "messages"), e)
                                : tree_prompt(c, json_object_get(b, "prompt"), e);
    if (rc < 0)
        return rc;
    for (int i = 0; i < N_UNSUPPORTED; i++) {
        json_t *v = json_object_get(b, unsupported_keys[i]);
        if (v && !json_is_null(v) && !json_is_false(v))
            return unsupported(e, unsupported_keys[i]);
    }
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(b, one_keys[i]);
        if (v && !json_is_null(v) && !(json_is_integer(v) && json_integer_value(v) == 1))
            return not_one(e, one_keys[i]);
    }
    json_t *mt = json_object_get(b, "max_tokens");
    if (mt && !json_is_null(mt) && !(json_is_integer(mt) && json_integer_value(mt) >= 1))
        return bad_max_tokens(e);
    c->return_ids = json_is_true(json_object_get(b, "return_token_ids"));
    json_t *opts = json_object_get(b, "stream_options");
    c->include_usage = json_is_true(json_object_get(opts, "include_usage"));
    c->continuous_usage = json_is_true(json_object_get(opts, "continuous_usage_stats"));
    return 0;
}

static int tree_client(pm_client *c, rb_err *e)
{
    json_error_t je;
    json_t *b = json_loadb(c->text, c->text_len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!b)
        return rb_fail(e, 400, "body", "malformed JSON at line %d column %d: %s", je.line,
                       je.column, je.text);
    int rc = json_is_object(b) ? tree_fields(c, b, e) : not_object(e);
    json_decref(b);
    return rc;
}

/* ---- the entry points -------------------------------------------------- */

void pm_one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = ' ';
}

static int client_parse(const char *text, size_t len, pm_kind kind, pm_client *c, rb_err *e,
                        int tree)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    if (!(c->text = malloc(len + 1)))
        return key_oom(e, "body");
    memcpy(c->text, text, len);
    c->text[len] = '\0';
    c->text_len = len;
    int rc = tree ? SCAN_TREE : scan_client(c, e);
    c->plain_keys = rc != SCAN_TREE;
    if (rc == SCAN_TREE) {
        free(c->key);
        c->key = NULL;
        c->key_len = 0;
        rc = tree_client(c, e);
    }
    if (rc < 0) {
        pm_client_free(c);
        pm_one_line(e->error);   /* jansson's error quotes the client's text */
    }
    return rc;
}

int pm_client_parse(const char *text, size_t len, pm_kind kind, pm_client *c, rb_err *e)
{
    return client_parse(text, len, kind, c, e, 0);
}

int pm_client_parse_tree(const char *text, size_t len, pm_kind kind, pm_client *c, rb_err *e)
{
    return client_parse(text, len, kind, c, e, 1);
}

void pm_client_free(pm_client *c)
{
    free(c->text);
    free(c->key);
    memset(c, 0, sizeof *c);
}
