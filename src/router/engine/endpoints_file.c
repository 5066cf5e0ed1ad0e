/* endpoints_file.c - the endpoints file: read, validate, map
 * (endpoints_file.h). The table with its reload is endpoints_table.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "endpoints_doc.h"
#include "endpoints_file.h"

typedef struct vctx {
    const char *source;
    char *err;
    size_t errlen;
} vctx;

static int vfail(vctx *v, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int vfail(vctx *v, int line, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (line > 0)
        snprintf(v->err, v->errlen, "%s:%d: %s", v->source, line, what);
    else
        snprintf(v->err, v->errlen, "%s: %s", v->source, what);
    return -1;
}

/* The value of `key` in map m, or NULL; -1 in *twice when it is there twice. */
static const tnode *map_get(const tnode *m, const char *key, int *twice)
{
    const tnode *found = NULL;
    for (int i = 0; i + 1 < m->nkid; i += 2) {
        const tnode *k = &m->kid[i];
        if (k->kind == TN_STR && strcmp(k->s, key) == 0) {
            if (found)
                *twice = k->line;
            found = &m->kid[i + 1];
        }
    }
    return found;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    return d ? memcpy(d, s, n) : NULL;
}

static const char *kind_name(int kind)
{
    static const char *const names[] = {"null", "a string", "a number or a boolean", "a list",
                                        "a mapping"};
    return names[kind];
}

/* Field `f` of entry i as a string: 0 and *out (NULL when absent or null
 * and not required), or -1. */
static int get_str(vctx *v, const tnode *m, int i, const char *f, int required, char **out)
{
    int twice = 0;
    const tnode *t = map_get(m, f, &twice);
    *out = NULL;
    if (twice)
        return vfail(v, twice, "endpoints[%d].%s: given twice", i, f);
    if (!t || t->kind == TN_NULL) {
        if (required)
            return vfail(v, t ? t->line : m->line, "endpoints[%d]: no %s (it is required)", i, f);
        return 0;
    }
    if (t->kind == TN_OTHER)
        return vfail(v, t->line, "endpoints[%d].%s: %s is not a string (llm-d reads strings "
                     "only: quote it, \"%s\")", i, f, t->s, t->s);
    if (t->kind != TN_STR)
        return vfail(v, t->line, "endpoints[%d].%s: is %s, not a string", i, f, kind_name(t->kind));
    if (t->n == 0 && required)
        return vfail(v, t->line, "endpoints[%d].%s: is empty", i, f);
    if (t->n > EP_STR_MAX)
        return vfail(v, t->line, "endpoints[%d].%s: longer than %d bytes", i, f, EP_STR_MAX);
    *out = dup_str(t->s);
    return *out ? 0 : vfail(v, t->line, "out of memory");
}

static int check_address(vctx *v, const tnode *m, int i, const char *a)
{
    struct in_addr in;
    if (inet_pton(AF_INET, a, &in) == 1)
        return 0;
    int twice = 0;
    int line = map_get(m, "address", &twice)->line;
    if (strchr(a, ':'))
        return vfail(v, line, "endpoints[%d].address: \"%s\" is IPv6; llm-d's file discovery "
                     "takes IPv4 only", i, a);
    return vfail(v, line, "endpoints[%d].address: \"%s\" is not a dotted IPv4 address", i, a);
}

/* llm-d: strconv.Atoi, then 1..65535 (an optional '+', decimal digits). */
static int parse_port(vctx *v, const tnode *m, int i, const char *p, int *port)
{
    const char *d = *p == '+' ? p + 1 : p;
    size_t nd = strspn(d, "0123456789");
    long val = 0;
    for (size_t j = 0; j < nd && val <= 65535; j++)
        val = val * 10 + (d[j] - '0');
    if (nd > 0 && d[nd] == '\0' && val >= 1 && val <= 65535) {
        *port = (int)val;
        return 0;
    }
    int twice = 0;
    return vfail(v, map_get(m, "port", &twice)->line,
                 "endpoints[%d].port: \"%s\" is not a port (1..65535)", i, p);
}

static int get_labels(vctx *v, const tnode *m, int i, endpoint *e)
{
    int twice = 0;
    const tnode *l = map_get(m, "labels", &twice);
    if (twice)
        return vfail(v, twice, "endpoints[%d].labels: given twice", i);
    if (!l || l->kind == TN_NULL)
        return 0;
    if (l->kind != TN_MAP)
        return vfail(v, l->line, "endpoints[%d].labels: is %s, not a mapping", i, kind_name(l->kind));
    if (l->nkid / 2 > EP_LABELS_MAX)
        return vfail(v, l->line, "endpoints[%d].labels: more than %d", i, EP_LABELS_MAX);
    e->labels = calloc((size_t)l->nkid / 2 + 1, sizeof *e->labels);
    if (!e->labels)
        return vfail(v, l->line, "out of memory");
    for (int j = 0; j + 1 < l->nkid; j += 2) {
        const tnode *k = &l->kid[j], *val = &l->kid[j + 1];
        if (k->kind != TN_STR)
            return vfail(v, k->line, "endpoints[%d].labels: a key is %s, not a string", i,
                         kind_name(k->kind));
        int tw = 0;
        map_get(l, k->s, &tw);
        if (tw)
            return vfail(v, tw, "endpoints[%d].labels.%s: given twice", i, k->s);
        if (val->kind != TN_STR && val->kind != TN_NULL)
            return vfail(v, val->line, "endpoints[%d].labels.%s: is %s, not a string (quote it)",
                         i, k->s, kind_name(val->kind));
        if (k->n > EP_STR_MAX || val->n > EP_STR_MAX)
            return vfail(v, k->line, "endpoints[%d].labels.%s: longer than %d bytes", i, k->s,
                         EP_STR_MAX);
        ep_label *lb = &e->labels[e->nlabels++];
        lb->key = dup_str(k->s);
        lb->value = dup_str(val->kind == TN_STR ? val->s : "");   /* null: "" as in llm-d */
        if (!lb->key || !lb->value)
            return vfail(v, k->line, "out of memory");
    }
    return 0;
}

/* llm-d's roles (pkg/epp/framework/plugins/scheduling/filter/bylabel/
 * roles.go): which of its filters take an endpoint with each value. */
static const struct {
    const char *name;
    int roles;
} role_names[] = {
    {"decode", EP_ROLE_DECODE},
    {"prefill", EP_ROLE_PREFILL},
    {"encode", EP_ROLE_ENCODE},
    {"prefill-decode", EP_ROLE_PREFILL | EP_ROLE_DECODE},
    {"both", EP_ROLE_PREFILL | EP_ROLE_DECODE},
    {"encode-prefill", EP_ROLE_ENCODE | EP_ROLE_PREFILL},
    {"encode-prefill-decode", EP_ROLE_ENCODE | EP_ROLE_PREFILL | EP_ROLE_DECODE},
};

static const char *label_of(const endpoint *e, const char *key)
{
    for (int j = 0; j < e->nlabels; j++)
        if (!strcmp(e->labels[j].key, key))
            return e->labels[j].value;
    return NULL;
}

static int get_roles(vctx *v, const tnode *m, int i, endpoint *e)
{
    const char *key = "llm-d.ai/role", *r = label_of(e, key);
    if (!r)
        r = label_of(e, key = "role");
    if (!r) {
        e->roles = EP_ROLE_DECODE;   /* llm-d's decode filter takes unlabelled endpoints */
        return 0;
    }
    for (size_t j = 0; j < sizeof role_names / sizeof *role_names; j++)
        if (!strcmp(r, role_names[j].name)) {
            e->roles = role_names[j].roles;
            return 0;
        }
    return vfail(v, m->line, "endpoints[%d].labels.%s: \"%.64s\" is not one of llm-d's roles "
                 "(decode, prefill, encode, prefill-decode, both, encode-prefill, "
                 "encode-prefill-decode)", i, key, r);
}

static int get_entry(vctx *v, const tnode *m, int i, endpoint *e)
{
    e->line = m->line;
    if (m->kind != TN_MAP)
        return vfail(v, m->line, "endpoints[%d]: is %s, not a mapping", i, kind_name(m->kind));
    char *port = NULL;
    int rc = get_str(v, m, i, "name", 1, &e->name);
    if (rc == 0)
        rc = get_str(v, m, i, "namespace", 0, &e->ns);
    if (rc == 0 && (!e->ns || !*e->ns)) {
        free(e->ns);
        e->ns = dup_str("default");
        rc = e->ns ? 0 : vfail(v, m->line, "out of memory");
    }
    if (rc == 0)
        rc = get_str(v, m, i, "address", 1, &e->address);
    if (rc == 0)
        rc = check_address(v, m, i, e->address);
    if (rc == 0)
        rc = get_str(v, m, i, "port", 1, &port);
    if (rc == 0)
        rc = parse_port(v, m, i, port, &e->port);
    free(port);
    if (rc == 0)
        rc = get_labels(v, m, i, e);
    if (rc == 0)
        rc = get_roles(v, m, i, e);
    if (rc == 0)
        snprintf(e->hostport, sizeof e->hostport, "%s:%d", e->address, e->port);
    return rc;
}

/* ---- duplicates, by sorting indices ---- */

typedef int (*idx_cmp)(const void *a, const void *b, void *ctx);

static int by_ns_name(const void *a, const void *b, void *ctx)
{
    const endpoint *v = ctx, *x = &v[*(const int *)a], *y = &v[*(const int *)b];
    int c = strcmp(x->ns, y->ns);
    return c ? c : strcmp(x->name, y->name);
}

static int by_hostport(const void *a, const void *b, void *ctx)
{
    const endpoint *v = ctx;
    return strcmp(v[*(const int *)a].hostport, v[*(const int *)b].hostport);
}

/* 0 and the indices 0..n-1 sorted by cmp into idx, or -1 out of memory. */
static int *sorted_idx(int n, idx_cmp cmp, void *ctx)
{
    int *idx = malloc((size_t)(n > 0 ? n : 1) * sizeof *idx);
    if (!idx)
        return NULL;
    for (int i = 0; i < n; i++)
        idx[i] = i;
    qsort_r(idx, (size_t)n, sizeof *idx, cmp, ctx);
    return idx;
}

/* The later of the first two entries equal under cmp, or -1 (none); -2
 * out of memory. */
static int first_twice(const endpoint_set *s, idx_cmp cmp, int *other)
{
    int *idx = sorted_idx(s->n, cmp, s->v);
    if (!idx)
        return -2;
    int found = -1;
    for (int j = 1; j < s->n && found < 0; j++)
        if (cmp(&idx[j - 1], &idx[j], s->v) == 0) {
            int a = idx[j - 1], b = idx[j];
            found = a > b ? a : b;
            *other = a > b ? b : a;
        }
    free(idx);
    return found;
}

static int check_unique(vctx *v, const endpoint_set *s)
{
    int o = 0, i = first_twice(s, by_ns_name, &o);
    if (i >= 0)
        return vfail(v, s->v[i].line, "endpoints[%d]: %s/%s is endpoints[%d] again", i,
                     s->v[i].ns, s->v[i].name, o);
    if (i == -1)
        i = first_twice(s, by_hostport, &o);
    if (i >= 0)
        return vfail(v, s->v[i].line, "endpoints[%d]: address %s is endpoints[%d]'s too", i,
                     s->v[i].hostport, o);
    return i == -2 ? vfail(v, 0, "out of memory") : 0;
}

/* ---- the file ---- */

static int get_list(vctx *v, const tnode *root, const tnode **list)
{
    int twice = 0;
    if (root->kind == TN_NULL)
        return vfail(v, root->line, "no endpoints (the file is empty)");
    if (root->kind != TN_MAP)
        return vfail(v, root->line, "the top level is %s, not a mapping with `endpoints`",
                     kind_name(root->kind));
    *list = map_get(root, "endpoints", &twice);
    if (twice)
        return vfail(v, twice, "endpoints: given twice");
    if (!*list || (*list)->kind == TN_NULL)
        return vfail(v, root->line, "no endpoints (`endpoints` is missing or null)");
    if ((*list)->kind != TN_SEQ)
        return vfail(v, (*list)->line, "endpoints: is %s, not a list", kind_name((*list)->kind));
    if ((*list)->nkid == 0)
        return vfail(v, (*list)->line, "no endpoints (the list is empty)");
    if ((*list)->nkid > EP_MAX)
        return vfail(v, (*list)->line, "%d endpoints, more than %d", (*list)->nkid, EP_MAX);
    return 0;
}

static int from_tree(vctx *v, const tnode *root, endpoint_set *out)
{
    const tnode *list = NULL;
    if (get_list(v, root, &list) < 0)
        return -1;
    out->v = calloc((size_t)list->nkid, sizeof *out->v);
    if (!out->v)
        return vfail(v, 0, "out of memory");
    for (int i = 0; i < list->nkid; i++) {
        out->n = i + 1;
        if (get_entry(v, &list->kid[i], i, &out->v[i]) < 0)
            return -1;
    }
    return check_unique(v, out);
}

/* JSON when the first byte past white space (and a UTF-8 BOM) is '{'. */
static const char *json_start(const char *text, size_t len)
{
    size_t i = len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    while (i < len && strchr(" \t\r\n", text[i]) && text[i])
        i++;
    return i < len && text[i] == '{' ? text + i : NULL;
}

static int build(const char *text, size_t len, const char *source, tnode *root, char *err,
                 size_t errlen)
{
    const char *j = json_start(text, len);
    if (!j)
        return tdoc_build(text, len, 0, source, root, err, errlen);
    if (tdoc_build(j, len - (size_t)(j - text), 1, source, root, err, errlen) == 0)
        return 0;
    /* YAML's flow style ({endpoints: [...]}) is not JSON but llm-d takes it */
    char yerr[8];
    return tdoc_build(text, len, 0, source, root, yerr, sizeof yerr);
}

int endpoints_parse(const char *text, size_t len, const char *source, endpoint_set *out,
                    char *err, size_t errlen)
{
    vctx v = {.source = source, .err = err, .errlen = errlen};
    tnode root;
    memset(out, 0, sizeof *out);
    if (build(text, len, source, &root, err, errlen) < 0)
        return -1;
    int rc = from_tree(&v, &root, out);
    tdoc_free(&root);
    if (rc == 0 && !(out->source = dup_str(source)))
        rc = vfail(&v, 0, "out of memory");
    if (rc < 0)
        endpoints_free(out);
    return rc;
}

static int read_all(int fd, char *buf, size_t cap, size_t *len)
{
    *len = 0;
    for (;;) {
        ssize_t r = read(fd, buf + *len, cap - *len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return r < 0 ? -1 : 0;
        *len += (size_t)r;
        if (*len == cap)
            return 0;
    }
}

int endpoints_read(const char *path, char **buf, size_t *len, char *err, size_t errlen)
{
    *buf = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    const char *why = !S_ISREG(st.st_mode) ? "not a regular file"
                      : st.st_size > (off_t)EP_FILE_MAX ? "larger than 4 MiB" : NULL;
    *buf = why ? NULL : malloc(EP_FILE_MAX + 1);
    if (!why && (!*buf || read_all(fd, *buf, EP_FILE_MAX + 1, len) < 0))
        why = *buf ? strerror(errno) : "out of memory";
    if (!why && *len > EP_FILE_MAX)
        why = "larger than 4 MiB";   /* it grew while read */
    close(fd);
    if (why) {
        snprintf(err, errlen, "%s: %s", path, why);
        free(*buf);
        *buf = NULL;
        return -1;
    }
    return 0;
}

int endpoints_load(const char *path, endpoint_set *out, char *err, size_t errlen)
{
    char *buf;
    size_t len;
    memset(out, 0, sizeof *out);
    if (endpoints_read(path, &buf, &len, err, errlen) < 0)
        return -1;
    int rc = endpoints_parse(buf, len, path, out, err, errlen);
    free(buf);
    return rc;
}

void endpoints_free(endpoint_set *s)
{
    for (int i = 0; s->v && i < s->n; i++) {
        endpoint *e = &s->v[i];
        for (int j = 0; j < e->nlabels; j++) {
            free(e->labels[j].key);
            free(e->labels[j].value);
        }
        free(e->labels);
        free(e->name);
        free(e->ns);
        free(e->address);
    }
    free(s->v);
    free(s->source);
    memset(s, 0, sizeof *s);
}

/* ---- the mapping ---- */

static int by_worker_name(const void *a, const void *b, void *ctx)
{
    char *const *w = ctx;
    return strcmp(w[*(const int *)a], w[*(const int *)b]);
}

typedef struct name_key {
    const char *name;
    char *const *workers;
} name_key;

static int find_worker(const void *key, const void *elem)
{
    const name_key *k = key;
    return strcmp(k->name, k->workers[*(const int *)elem]);
}

/* By name: the number of entries (sel[n], indices into s) whose name is
 * a worker's (K when the mapping is complete, ep_of_worker filled); -1
 * when the worker names are not distinct; -2 out of memory. */
static int map_by_name(const endpoint_set *s, const int *sel, int n, char *const *workers, int K,
                       int *ep_of_worker)
{
    int *idx = sorted_idx(K, by_worker_name, (void *)workers);
    if (!idx)
        return -2;
    int matched = 0;
    for (int j = 1; j < K && matched >= 0; j++)
        if (strcmp(workers[idx[j - 1]], workers[idx[j]]) == 0)
            matched = -1;
    for (int k = 0; k < K; k++)
        ep_of_worker[k] = -1;
    for (int i = 0; i < n && matched >= 0; i++) {
        name_key key = {s->v[sel[i]].name, workers};
        int *hit = bsearch(&key, idx, (size_t)K, sizeof *idx, find_worker);
        if (hit && ep_of_worker[*hit] < 0) {
            ep_of_worker[*hit] = sel[i];
            matched++;
        }
    }
    free(idx);
    return matched;
}

int endpoints_map_role(const endpoint_set *s, int role, char *const *workers, int K,
                       int *ep_of_worker, char *err, size_t errlen)
{
    int *sel = malloc((size_t)(s->n > 0 ? s->n : 1) * sizeof *sel), n = 0;
    if (!sel) {
        snprintf(err, errlen, "%s: out of memory", s->source);
        return -1;
    }
    for (int i = 0; i < s->n; i++)
        if (s->v[i].roles & role)
            sel[n++] = i;
    const char *what = n == s->n ? "" : role == EP_ROLE_PREFILL ? "prefill " : "decode ";
    if (n != K) {
        if (role == EP_ROLE_PREFILL)
            snprintf(err, errlen, "%s has %d prefill endpoint%s; --prefill-workers names %d",
                     s->source, n, n == 1 ? "" : "s", K);
        else
            snprintf(err, errlen, "%s has %d %sendpoint%s; the model has %d worker%s", s->source,
                     n, what, n == 1 ? "" : "s", K, K == 1 ? "" : "s");
        free(sel);
        return -1;
    }
    err[0] = '\0';
    int matched = workers ? map_by_name(s, sel, n, workers, K, ep_of_worker) : 0;
    int rc = 0;
    if (matched == -2) {
        snprintf(err, errlen, "%s: out of memory", s->source);
        rc = -1;
    } else if (matched == K) {
        rc = 1;
    } else {
        for (int k = 0; k < K; k++)
            ep_of_worker[k] = sel[k];
        if (matched > 0)
            snprintf(err, errlen, "%s: mapped by file order: only %d of %d %sendpoint names are "
                     "%s names", s->source, matched, K, what,
                     role == EP_ROLE_PREFILL ? "prefill worker" : "worker");
    }
    free(sel);
    return rc;
}

int endpoints_map(const endpoint_set *s, char *const *workers, int K, int *ep_of_worker,
                  char *err, size_t errlen)
{
    return endpoints_map_role(s, EP_ROLE_DECODE, workers, K, ep_of_worker, err, errlen);
}

int64_t endpoints_address_key(const char *a, size_t len)
{
    char buf[16];
    if (len == 0 || len >= sizeof buf || memchr(a, ':', len))
        return -1;
    memcpy(buf, a, len);
    buf[len] = '\0';
    struct in_addr in;
    if (inet_pton(AF_INET, buf, &in) != 1)
        return -1;
    return (int64_t)ntohl(in.s_addr) << 16;
}

int64_t endpoints_hostport_key(const char *hp, size_t len)
{
    char buf[EP_HOSTPORT_MAX];
    const char *colon = memchr(hp, ':', len);
    if (!colon || (size_t)(colon - hp) >= sizeof buf || len - (size_t)(colon - hp) > 6)
        return -1;
    memcpy(buf, hp, (size_t)(colon - hp));
    buf[colon - hp] = '\0';
    struct in_addr in;
    if (inet_pton(AF_INET, buf, &in) != 1)
        return -1;
    long port = 0;
    size_t np = len - (size_t)(colon - hp) - 1;
    for (size_t j = 0; j < np; j++) {
        if (colon[1 + j] < '0' || colon[1 + j] > '9')
            return -1;
        port = port * 10 + (colon[1 + j] - '0');
    }
    if (np == 0 || port < 1 || port > 65535)
        return -1;
    return ((int64_t)ntohl(in.s_addr) << 16) | port;
}
