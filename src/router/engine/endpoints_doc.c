/* endpoints_doc.c - the endpoints file as a tree (endpoints_doc.h). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "endpoints_doc.h"
#include "endpoints_file.h"
#include "json_scan.h"

#define TD_DEPTH 32                  /* the format nests 4 deep */
#define TD_NODES (1L << 20)
#define TD_BYTES (16L << 20)         /* string bytes, aliases expanded */

typedef struct bctx {
    const char *source;
    const char *text;                /* JSON: for the lines */
    const char *lpos;                /* JSON: where `line` was counted to */
    int line;
    long nodes, bytes;
    char *err;
    size_t errlen;
} bctx;

static int bfail(bctx *b, int line, const char *what)
{
    snprintf(b->err, b->errlen, "%s:%d: %s", b->source, line, what);
    return -1;
}

/* Count a node of `bytes` string bytes against the budgets. */
static int budget(bctx *b, int line, int depth, size_t bytes)
{
    if (depth > TD_DEPTH)
        return bfail(b, line, "nested deeper than 32 (an alias that contains itself?)");
    b->nodes++;
    b->bytes += (long)bytes;
    if (b->nodes > TD_NODES || b->bytes > TD_BYTES)
        return bfail(b, line, "the document expands to more than 1M nodes or 16 MiB (aliases?)");
    return 0;
}

static int set_text(tnode *t, const char *s, size_t n)
{
    t->s = malloc(n + 1);
    if (!t->s)
        return -1;
    memcpy(t->s, s, n);
    t->s[n] = '\0';
    t->n = n;
    return 0;
}

/* Room for one more child (two for a mapping's pair). */
static tnode *add_kid(tnode *t)
{
    if ((t->nkid & (t->nkid - 1)) == 0) {   /* 0, 1, 2, 4, ...: grow */
        size_t cap = t->nkid ? (size_t)t->nkid * 2 : 2;
        tnode *k = realloc(t->kid, cap * sizeof *k);
        if (!k)
            return NULL;
        t->kid = k;
    }
    tnode *k = &t->kid[t->nkid++];
    memset(k, 0, sizeof *k);
    return k;
}

void tdoc_free(tnode *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->nkid; i++)
        tdoc_free(&t->kid[i]);
    free(t->kid);
    free(t->s);
    memset(t, 0, sizeof *t);
}

/* ---- YAML 1.1 plain scalars, as go-yaml v2 resolves them ---- */

static int in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(s, *list) == 0)
            return 1;
    return 0;
}

/* [-+]? then digits with underscores, 0x.., 0b.., 0o..: an int. */
static int yaml_int(const char *s)
{
    if (*s == '-' || *s == '+')
        s++;
    const char *digits = "0123456789_";
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
        s += 2, digits = "0123456789abcdefABCDEF_";
    else if (s[0] == '0' && (s[1] == 'b' || s[1] == 'o'))
        digits = s[1] == 'b' ? "01_" : "01234567_", s += 2;
    if (!*s || *s == '_')
        return 0;
    return strspn(s, digits) == strlen(s);
}

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?: a float. */
static int yaml_float(const char *s)
{
    if (*s == '-' || *s == '+')
        s++;
    size_t a = strspn(s, "0123456789");
    s += a;
    size_t f = 0;
    if (*s == '.') {
        f = strspn(s + 1, "0123456789");
        s += 1 + f;
    }
    if (a == 0 && f == 0)
        return 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '-' || *s == '+')
            s++;
        size_t e = strspn(s, "0123456789");
        if (e == 0)
            return 0;
        s += e;
    }
    return *s == '\0';
}

static int plain_kind(const char *s)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const others[] = {
        "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE",
        "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF", ".inf", ".Inf",
        ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF", ".nan", ".NaN", ".NAN",
        NULL};
    if (in_list(s, nulls))
        return TN_NULL;
    if (in_list(s, others) || yaml_int(s) || yaml_float(s))
        return TN_OTHER;
    return TN_STR;
}

/* ---- YAML ---- */

static int y_node(bctx *b, yaml_document_t *d, yaml_node_t *n, int depth, tnode *out);

static int y_scalar(bctx *b, yaml_node_t *n, tnode *out)
{
    if (set_text(out, (const char *)n->data.scalar.value, n->data.scalar.length) < 0)
        return bfail(b, out->line, "out of memory");
    if (strlen(out->s) != out->n)
        return bfail(b, out->line, "a string holds a NUL byte");
    out->kind = n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE ? plain_kind(out->s) : TN_STR;
    return 0;
}

static int y_kid(bctx *b, yaml_document_t *d, int idx, int depth, tnode *out)
{
    tnode *k = add_kid(out);
    yaml_node_t *n = yaml_document_get_node(d, idx);
    if (!k || !n)
        return bfail(b, out->line, k ? "a broken YAML node" : "out of memory");
    return y_node(b, d, n, depth, k);
}

static int y_node(bctx *b, yaml_document_t *d, yaml_node_t *n, int depth, tnode *out)
{
    out->line = (int)n->start_mark.line + 1;
    size_t bytes = n->type == YAML_SCALAR_NODE ? n->data.scalar.length : 0;
    if (budget(b, out->line, depth, bytes) < 0)
        return -1;
    if (n->type == YAML_SCALAR_NODE)
        return y_scalar(b, n, out);
    if (n->type == YAML_SEQUENCE_NODE) {
        out->kind = TN_SEQ;
        for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++)
            if (y_kid(b, d, *i, depth + 1, out) < 0)
                return -1;
        return 0;
    }
    out->kind = TN_MAP;
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++)
        if (y_kid(b, d, p->key, depth + 1, out) < 0 || y_kid(b, d, p->value, depth + 1, out) < 0)
            return -1;
    return 0;
}

static int yaml_build(bctx *b, const char *text, size_t len, tnode *root)
{
    yaml_parser_t p;
    yaml_document_t d;
    if (!yaml_parser_initialize(&p))
        return bfail(b, 0, "out of memory");
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int rc = 0;
    if (!yaml_parser_load(&p, &d)) {
        char what[320];
        snprintf(what, sizeof what, "not YAML: %s%s%s", p.problem ? p.problem : "unreadable",
                 p.context ? " " : "", p.context ? p.context : "");
        rc = bfail(b, (int)p.problem_mark.line + 1, what);
        yaml_parser_delete(&p);
        return rc;
    }
    yaml_node_t *top = yaml_document_get_root_node(&d);
    if (top)
        rc = y_node(b, &d, top, 0, root);
    else
        root->kind = TN_NULL, root->line = 1;   /* an empty document */
    yaml_document_delete(&d);
    yaml_parser_delete(&p);
    return rc;
}

/* ---- JSON ---- */

static int line_at(bctx *b, const char *p)
{
    for (; b->lpos < p; b->lpos++)
        if (*b->lpos == '\n')
            b->line++;
    return b->line;
}

/* A JSON string's raw text (between its quotes) decoded into t. */
static int j_string(bctx *b, const char *raw, size_t n, tnode *t)
{
    t->kind = TN_STR;
    if (!memchr(raw, '\\', n))
        return set_text(t, raw, n) < 0 ? bfail(b, t->line, "out of memory") : 0;
    json_error_t e;
    json_t *v = json_loadb(raw - 1, n + 2, JSON_DECODE_ANY, &e);
    int rc = v && json_is_string(v) ? set_text(t, json_string_value(v), json_string_length(v)) : -1;
    json_decref(v);
    return rc < 0 ? bfail(b, t->line, "a string that cannot be decoded") : 0;
}

static int j_value(bctx *b, cj_t *s, int depth, tnode *out);

static int j_object(bctx *b, cj_t *s, int depth, tnode *out)
{
    int count = 0, r;
    const char *key;
    size_t klen;
    out->kind = TN_MAP;
    cj_expect(s, '{');
    while ((r = cj_next_key(s, &count, &key, &klen)) == 1) {
        tnode *k = add_kid(out);
        if (!k)
            return bfail(b, out->line, "out of memory");
        k->line = line_at(b, key);
        if (budget(b, k->line, depth + 1, klen) < 0 || j_string(b, key, klen, k) < 0)
            return -1;
        tnode *v = add_kid(out);
        if (!v || j_value(b, s, depth + 1, v) < 0)
            return v ? -1 : bfail(b, out->line, "out of memory");
    }
    return r < 0 ? bfail(b, line_at(b, s->p), "not JSON") : 0;
}

static int j_array(bctx *b, cj_t *s, int depth, tnode *out)
{
    int count = 0, r;
    out->kind = TN_SEQ;
    cj_expect(s, '[');
    while ((r = cj_next_item(s, &count)) == 1) {
        tnode *v = add_kid(out);
        if (!v || j_value(b, s, depth + 1, v) < 0)
            return v ? -1 : bfail(b, out->line, "out of memory");
    }
    return r < 0 ? bfail(b, line_at(b, s->p), "not JSON") : 0;
}

static int j_value(bctx *b, cj_t *s, int depth, tnode *out)
{
    int c = cj_peek(s);
    out->line = line_at(b, s->p);
    if (budget(b, out->line, depth, 0) < 0)
        return -1;
    if (c == '{')
        return j_object(b, s, depth, out);
    if (c == '[')
        return j_array(b, s, depth, out);
    if (c == '"') {
        const char *raw;
        size_t n;
        if (cj_string(s, &raw, &n) < 0)
            return bfail(b, out->line, "not JSON");
        b->bytes += (long)n;
        return j_string(b, raw, n, out);
    }
    const char *from = s->p;
    if (cj_skip(s) < 0)
        return bfail(b, out->line, "not JSON");
    out->kind = c == 'n' ? TN_NULL : TN_OTHER;   /* null; a number, true, false */
    return set_text(out, from, (size_t)(s->p - from)) < 0 ? bfail(b, out->line, "out of memory") : 0;
}

static int json_build(bctx *b, const char *text, size_t len, tnode *root)
{
    json_error_t e;
    json_t *v = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
    if (!v) {
        char what[300];
        snprintf(what, sizeof what, "not JSON: %s (column %d)", e.text, e.column);
        return bfail(b, e.line > 0 ? e.line : 1, what);
    }
    json_decref(v);
    cj_t s;
    cj_init(&s, text, len);
    b->text = b->lpos = text;
    b->line = 1;
    return j_value(b, &s, 0, root);
}

int tdoc_build(const char *text, size_t len, int json, const char *source, tnode *root,
               char *err, size_t errlen)
{
    bctx b = {.source = source, .err = err, .errlen = errlen};
    memset(root, 0, sizeof *root);
    int rc = json ? json_build(&b, text, len, root) : yaml_build(&b, text, len, root);
    if (rc < 0)
        tdoc_free(root);
    return rc;
}
