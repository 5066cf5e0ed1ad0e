/* import_jsonl.c - eldr's JSON-lines trace form into a trace (format in
 * docs/import.md): a header object on the first line, then one request
 * object per line.
 *
 * The file is streamed twice, a line at a time: the first pass reads the
 * header and counts requests so the trace is allocated once at its exact
 * size (and refused up front if it would not fit in memory); the second
 * parses each line with jansson straight into the trace. No line longer
 * than IMPORT_JSONL_MAX_LINE is accepted. Which optional keys exist is
 * fixed by the first request; every later request must agree. */
#include "import.h"
#include "import_common.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "err.h"

/* Optional keys of a request line (the first request decides). */
enum {
    HAS_ID = 1 << 0,
    HAS_DECODE = 1 << 1,
    HAS_LABEL = 1 << 2,
    HAS_ARRIVAL = 1 << 3,
    HAS_GATE_PROB = 1 << 4,
    HAS_GATE_LOGIT = 1 << 5,
};

static const struct optkey {
    unsigned bit;
    const char *key;
} OPTKEYS[] = {
    {HAS_ID, "request_id"},       {HAS_DECODE, "decode_tokens"}, {HAS_DECODE, "decode"},
    {HAS_LABEL, "label"},         {HAS_ARRIVAL, "arrival_s"},    {HAS_GATE_PROB, "gate_prob"},
    {HAS_GATE_LOGIT, "gate_logit"},
};
#define N_OPTKEYS (sizeof OPTKEYS / sizeof OPTKEYS[0])

typedef struct jl {
    const char *path;
    FILE *f;
    char *buf;                     /* the current line, NUL-terminated */
    size_t cap, len;
    int64_t lineno;                /* 1-based number of the current line */

    int L, E, k;
    char model[TRACE_MODEL_MAX];
    import_labels labels;
    int fixed_labels;              /* label_names came from the header */
    trace_t *t;
    unsigned has;                  /* HAS_* of the first request */
    int64_t first_line;            /* its line number */
    int64_t *line_of;              /* [n] line of each request, for messages */
    unsigned char *seen;           /* [L*E] scratch: cells a sparse list set */
} jl;

/* ---- lines -------------------------------------------------------------- */

/* Read the next line into j->buf (without "\n" or "\r\n"). 1 read, 0 end of
 * file, -1 error. getc_unlocked keeps embedded NULs from confusing the
 * length and lets the limit bite before the memory does. */
static int next_line(jl *j, char *err, size_t errlen)
{
    int c;
    j->len = 0;
    j->lineno++;
    while ((c = getc_unlocked(j->f)) != EOF && c != '\n') {
        if (j->len + 2 > j->cap) {
            if (j->cap >= IMPORT_JSONL_MAX_LINE)
                return eldr_errf(err, errlen, "%s: line %lld: longer than %u bytes", j->path,
                                 (long long)j->lineno, IMPORT_JSONL_MAX_LINE);
            size_t cap = j->cap ? 2 * j->cap : 65536;
            char *b = realloc(j->buf, cap);
            if (!b)
                return eldr_errf(err, errlen, "%s: line %lld: out of memory", j->path,
                                 (long long)j->lineno);
            j->buf = b;
            j->cap = cap;
        }
        j->buf[j->len++] = (char)c;
    }
    if (ferror(j->f))
        return eldr_errf(err, errlen, "%s: line %lld: read error", j->path,
                         (long long)j->lineno);
    if (c == EOF && j->len == 0)
        return 0;
    if (j->len && j->buf[j->len - 1] == '\r')
        j->len--;
    if (j->buf)
        j->buf[j->len] = 0;
    return 1;
}

static int blank(const jl *j)
{
    for (size_t i = 0; i < j->len; i++)
        if (!strchr(" \t\r\f\v", j->buf[i]))
            return 0;
    return 1;
}

/* Next non-blank line: 1, 0 at end, -1 error. */
static int next_content_line(jl *j, char *err, size_t errlen)
{
    int r;
    while ((r = next_line(j, err, errlen)) == 1 && blank(j))
        ;
    return r;
}

static json_t *parse_line(jl *j, char *err, size_t errlen)
{
    json_error_t je;
    json_t *v = json_loadb(j->buf, j->len, JSON_REJECT_DUPLICATES, &je);
    if (!v) {
        eldr_errf(err, errlen, "%s: line %lld: invalid JSON at column %d: %s", j->path,
                  (long long)j->lineno, je.column, je.text);
        return NULL;
    }
    if (!json_is_object(v)) {
        json_decref(v);
        eldr_errf(err, errlen, "%s: line %lld: not a JSON object", j->path,
                  (long long)j->lineno);
        return NULL;
    }
    return v;
}

/* "FILE: line N: key 'K': " then the message. */
#define KEYERR(j, key, ...)                                                              \
    key_error((j), (key), err, errlen, __VA_ARGS__)

static int key_error(const jl *j, const char *key, char *err, size_t errlen, const char *fmt,
                     ...) __attribute__((format(printf, 5, 6)));

static int key_error(const jl *j, const char *key, char *err, size_t errlen, const char *fmt,
                     ...)
{
    char msg[ELDR_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return eldr_errf(err, errlen, "%s: line %lld: key '%s': %s", j->path, (long long)j->lineno,
                     key, msg);
}

/* ---- header ------------------------------------------------------------- */

static int header_int(jl *j, json_t *h, const char *key, long long lo, long long hi, int *out,
                      char *err, size_t errlen)
{
    json_t *v = json_object_get(h, key);
    if (!v)
        return KEYERR(j, key, "missing from the header");
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return KEYERR(j, key, "not an integer in [%lld, %lld]", lo, hi);
    *out = (int)json_integer_value(v);
    return 0;
}

static int read_header(jl *j, char *err, size_t errlen)
{
    int r = next_content_line(j, err, errlen);
    if (r < 0)
        return -1;
    if (r == 0)
        return eldr_errf(err, errlen, "%s: empty file (want a header line, then one request "
                         "per line)", j->path);
    json_t *h = parse_line(j, err, errlen);
    if (!h)
        return -1;
    int rc = -1, version;
    const char *fmt = json_string_value(json_object_get(h, "format"));
    if (!fmt || strcmp(fmt, IMPORT_JSONL_FORMAT)) {
        KEYERR(j, "format", "%s%s%s, expected '%s' (the first line is the header)",
               fmt ? "'" : "", fmt ? fmt : "missing or not a string", fmt ? "'" : "",
               IMPORT_JSONL_FORMAT);
        goto out;
    }
    if (header_int(j, h, "version", 0, 1 << 30, &version, err, errlen))
        goto out;
    if (version != IMPORT_JSONL_VERSION) {
        KEYERR(j, "version", "%d is not supported (this eldr reads version %d)", version,
               IMPORT_JSONL_VERSION);
        goto out;
    }
    if (header_int(j, h, "layers", 1, 4096, &j->L, err, errlen) ||
        header_int(j, h, "experts", 1, 65535, &j->E, err, errlen) ||
        header_int(j, h, "top_k", 1, j->E, &j->k, err, errlen))
        goto out;
    json_t *m = json_object_get(h, "model");
    if (m && (!json_is_string(m) || strlen(json_string_value(m)) >= TRACE_MODEL_MAX)) {
        KEYERR(j, "model", "not a string of at most %d bytes", TRACE_MODEL_MAX - 1);
        goto out;
    }
    snprintf(j->model, sizeof j->model, "%s", m ? json_string_value(m) : "");
    json_t *names = json_object_get(h, "label_names");
    if (names) {
        if (!json_is_array(names)) {
            KEYERR(j, "label_names", "not an array of strings");
            goto out;
        }
        for (size_t i = 0; i < json_array_size(names); i++) {
            const char *s = json_string_value(json_array_get(names, i));
            if (!s || !*s || strlen(s) > IMPORT_MAX_STRING) {
                KEYERR(j, "label_names", "entry %zu is not a non-empty string of at most %d "
                       "bytes", i, IMPORT_MAX_STRING);
                goto out;
            }
            int before = j->labels.n;
            if (import_label_index(&j->labels, s) != before) {
                KEYERR(j, "label_names", "entry %zu: '%s' %s", i, s,
                       j->labels.n == before ? "appears twice" : "cannot be added");
                goto out;
            }
        }
        j->fixed_labels = 1;
    }
    rc = 0;
out:
    json_decref(h);
    return rc;
}

/* ---- cells: dense [[...E...] x L] or sparse [[layer, expert, value], ...] */

typedef struct cells {
    const char *key;
    uint16_t *counts;              /* integer counts, or */
    float *values;                 /* real values */
    int nonneg;                    /* values must be >= 0 */
} cells;

static int put_cell(jl *j, const cells *c, json_t *v, int l, int e, const char *where,
                    char *err, size_t errlen)
{
    size_t at = (size_t)l * (size_t)j->E + (size_t)e;
    if (c->counts) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 65535)
            return KEYERR(j, c->key, "%s: count is not an integer in [0, 65535]", where);
        c->counts[at] = (uint16_t)json_integer_value(v);
        return 0;
    }
    if (!json_is_number(v))
        return KEYERR(j, c->key, "%s: not a number", where);
    float x = (float)json_number_value(v);
    if (!isfinite(x) || (c->nonneg && x < 0))
        return KEYERR(j, c->key, "%s: %g is %s", where, json_number_value(v),
                      isfinite(x) ? "negative" : "not finite in float32");
    c->values[at] = x;
    return 0;
}

static int read_dense(jl *j, const cells *c, json_t *v, char *err, size_t errlen)
{
    char where[64];
    for (int l = 0; l < j->L; l++) {
        json_t *row = json_array_get(v, (size_t)l);
        if (!json_is_array(row) || json_array_size(row) != (size_t)j->E)
            return KEYERR(j, c->key, "dense row %d is not an array of %d values", l, j->E);
        for (int e = 0; e < j->E; e++) {
            snprintf(where, sizeof where, "layer %d expert %d", l, e);
            if (put_cell(j, c, json_array_get(row, (size_t)e), l, e, where, err, errlen))
                return -1;
        }
    }
    return 0;
}

static int read_sparse(jl *j, const cells *c, json_t *v, char *err, size_t errlen)
{
    memset(j->seen, 0, (size_t)j->L * (size_t)j->E);
    char where[96];
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *t = json_array_get(v, i);
        json_t *jl_ = json_array_get(t, 0), *je = json_array_get(t, 1);
        if (!json_is_array(t) || json_array_size(t) != 3 || !json_is_integer(jl_) ||
            !json_is_integer(je))
            return KEYERR(j, c->key, "entry %zu is not [layer, expert, value] (or a dense "
                          "list of %d rows of %d)", i, j->L, j->E);
        json_int_t l = json_integer_value(jl_), e = json_integer_value(je);
        if (l < 0 || l >= j->L || e < 0 || e >= j->E)
            return KEYERR(j, c->key, "entry %zu: layer %lld expert %lld outside %d x %d", i,
                          (long long)l, (long long)e, j->L, j->E);
        size_t at = (size_t)l * (size_t)j->E + (size_t)e;
        if (j->seen[at])
            return KEYERR(j, c->key, "entry %zu: layer %lld expert %lld given twice", i,
                          (long long)l, (long long)e);
        j->seen[at] = 1;
        snprintf(where, sizeof where, "entry %zu (layer %lld expert %lld)", i, (long long)l,
                 (long long)e);
        if (put_cell(j, c, json_array_get(t, 2), (int)l, (int)e, where, err, errlen))
            return -1;
    }
    return 0;
}

static int read_cells(jl *j, json_t *obj, const cells *c, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, c->key);
    if (!json_is_array(v))
        return KEYERR(j, c->key, "%s", v ? "not an array" : "missing");
    json_t *first = json_array_get(v, 0);
    /* dense when it has L rows of E; with E == 3 a list of exactly L
     * triples is therefore dense (docs/import.md) */
    int dense = json_array_size(v) == (size_t)j->L && json_is_array(first) &&
                json_array_size(first) == (size_t)j->E;
    return dense ? read_dense(j, c, v, err, errlen) : read_sparse(j, c, v, err, errlen);
}

/* ---- one request ------------------------------------------------------- */

static int read_tokens(jl *j, json_t *obj, const char *key, int32_t *out, char *err,
                       size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return KEYERR(j, key, "missing");
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
        return KEYERR(j, key, "not an integer in [0, %d]", INT32_MAX);
    *out = (int32_t)json_integer_value(v);
    return 0;
}

static unsigned keys_present(json_t *obj)
{
    unsigned has = 0;
    for (size_t i = 0; i < N_OPTKEYS; i++)
        if (json_object_get(obj, OPTKEYS[i].key))
            has |= OPTKEYS[i].bit;
    return has;
}

/* Every request carries the same optional keys as the first one. */
static int check_same_keys(jl *j, json_t *obj, char *err, size_t errlen)
{
    for (size_t i = 0; i < N_OPTKEYS; i++) {
        int here = json_object_get(obj, OPTKEYS[i].key) != NULL;
        int first = (j->has & OPTKEYS[i].bit) != 0;
        if (here != first)
            return KEYERR(j, OPTKEYS[i].key, "%s, but the first request (line %lld) %s it; "
                          "a key is in every request or in none", here ? "present" : "missing",
                          (long long)j->first_line, here ? "lacks" : "has");
    }
    return 0;
}

static int read_label(jl *j, json_t *obj, int64_t r, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, "label");
    int idx;
    if (json_is_integer(v)) {
        if (!j->fixed_labels)
            return KEYERR(j, "label", "an index needs label_names in the header");
        if (json_integer_value(v) < 0 || json_integer_value(v) >= j->labels.n)
            return KEYERR(j, "label", "index %lld outside label_names [0, %d)",
                          (long long)json_integer_value(v), j->labels.n);
        idx = (int)json_integer_value(v);
    } else if (json_is_string(v) && *json_string_value(v) &&
               strlen(json_string_value(v)) <= IMPORT_MAX_STRING) {
        int before = j->labels.n;
        idx = import_label_index(&j->labels, json_string_value(v));
        if (idx < 0)
            return KEYERR(j, "label", "too many distinct labels (or out of memory)");
        if (j->fixed_labels && j->labels.n != before)
            return KEYERR(j, "label", "'%s' is not in the header's label_names",
                          json_string_value(v));
    } else {
        return KEYERR(j, "label", "not a label name or index");
    }
    j->t->label[r] = idx;
    return 0;
}

static int read_request(jl *j, json_t *obj, int64_t r, char *err, size_t errlen)
{
    trace_t *t = j->t;
    size_t cells_n = TRACE_CELLS(t);
    char msg[ELDR_ERRLEN];
    if (check_same_keys(j, obj, err, errlen))
        return -1;
    j->line_of[r] = j->lineno;
    if (j->has & HAS_ID) {
        const char *id = json_string_value(json_object_get(obj, "request_id"));
        if (!id || !*id || strlen(id) > IMPORT_MAX_STRING)
            return KEYERR(j, "request_id", "not a non-empty string of at most %d bytes",
                          IMPORT_MAX_STRING);
        if (!(t->request_id[r] = strdup(id)))
            return KEYERR(j, "request_id", "out of memory");
    }
    cells pre = {"prefill", t->prefill_counts + (size_t)r * cells_n, NULL, 0};
    if (read_tokens(j, obj, "prompt_tokens", &t->prompt_tokens[r], err, errlen) ||
        read_cells(j, obj, &pre, err, errlen))
        return -1;
    if (import_check_counts(pre.counts, j->L, j->E, j->k, t->prompt_tokens[r], msg, sizeof msg))
        return KEYERR(j, "prefill", "%s", msg);
    if (j->has & HAS_DECODE) {
        cells dec = {"decode", t->decode_counts + (size_t)r * cells_n, NULL, 0};
        if (read_tokens(j, obj, "decode_tokens", &t->decode_tokens[r], err, errlen) ||
            read_cells(j, obj, &dec, err, errlen))
            return -1;
        if (import_check_counts(dec.counts, j->L, j->E, j->k, t->decode_tokens[r], msg,
                                sizeof msg))
            return KEYERR(j, "decode", "%s", msg);
    }
    json_t *ot = json_object_get(obj, "output_tokens");
    if (ot) {
        if (!(j->has & HAS_DECODE))
            return KEYERR(j, "output_tokens", "given without decode_tokens");
        if (!json_is_integer(ot))
            return KEYERR(j, "output_tokens", "not an integer");
        if (json_integer_value(ot) - 1 != t->decode_tokens[r])
            return KEYERR(j, "decode_tokens", "%d != output_tokens %lld - 1",
                          t->decode_tokens[r], (long long)json_integer_value(ot));
    }
    if ((j->has & HAS_LABEL) && read_label(j, obj, r, err, errlen))
        return -1;
    if (j->has & HAS_ARRIVAL) {
        json_t *v = json_object_get(obj, "arrival_s");
        if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0)
            return KEYERR(j, "arrival_s", "not a finite number of seconds >= 0");
        t->arrival_s[r] = json_number_value(v);
    }
    cells gp = {"gate_prob", NULL, t->gate_prob ? t->gate_prob + (size_t)r * cells_n : NULL, 1};
    cells gl = {"gate_logit", NULL, t->gate_logit ? t->gate_logit + (size_t)r * cells_n : NULL,
                0};
    if ((j->has & HAS_GATE_PROB) && read_cells(j, obj, &gp, err, errlen))
        return -1;
    if ((j->has & HAS_GATE_LOGIT) && read_cells(j, obj, &gl, err, errlen))
        return -1;
    return 0;
}

/* ---- passes ------------------------------------------------------------- */

/* Pass 1: the header, then count the non-blank lines after it. */
static int count_requests(jl *j, int64_t *n, char *err, size_t errlen)
{
    if (read_header(j, err, errlen))
        return -1;
    int r;
    *n = 0;
    while ((r = next_content_line(j, err, errlen)) == 1)
        (*n)++;
    if (r < 0)
        return -1;
    if (*n == 0)
        return eldr_errf(err, errlen, "%s: no requests after the header", j->path);
    return 0;
}

static int alloc_trace(jl *j, int64_t n, json_t *first, char *err, size_t errlen)
{
    char msg[ELDR_ERRLEN];
    j->has = keys_present(first);
    j->first_line = j->lineno;
    if ((j->has & HAS_DECODE) &&
        !(json_object_get(first, "decode") && json_object_get(first, "decode_tokens")))
        return KEYERR(j, json_object_get(first, "decode") ? "decode_tokens" : "decode",
                      "missing (decode and decode_tokens come together)");
    unsigned flags = 0;
    flags |= j->has & HAS_ID ? TRACE_HAS_REQUEST_ID : 0;
    flags |= j->has & HAS_DECODE ? TRACE_HAS_DECODE : 0;
    flags |= j->has & HAS_LABEL ? TRACE_HAS_LABEL : 0;
    flags |= j->has & HAS_ARRIVAL ? TRACE_HAS_ARRIVAL : 0;
    flags |= j->has & HAS_GATE_PROB ? TRACE_HAS_GATE_PROB : 0;
    flags |= j->has & HAS_GATE_LOGIT ? TRACE_HAS_GATE_LOGIT : 0;
    if (!(j->t = trace_new(n, j->L, j->E, j->k, msg, sizeof msg)) ||
        trace_alloc_optional(j->t, flags, msg, sizeof msg))
        return eldr_errf(err, errlen, "%s: %s", j->path, msg);
    snprintf(j->t->model, sizeof j->t->model, "%s", j->model);
    j->line_of = malloc((size_t)n * sizeof *j->line_of);
    j->seen = malloc((size_t)j->L * (size_t)j->E);
    if (!j->line_of || !j->seen)
        return eldr_errf(err, errlen, "%s: out of memory", j->path);
    return 0;
}

/* Pass 2: every request into the trace. */
static int read_requests(jl *j, int64_t n, char *err, size_t errlen)
{
    rewind(j->f);
    j->lineno = 0;
    if (next_content_line(j, err, errlen) != 1) /* the header, read in pass 1 */
        return eldr_errf(err, errlen, "%s: changed while being read", j->path);
    for (int64_t r = 0; r < n; r++) {
        int got = next_content_line(j, err, errlen);
        if (got <= 0)
            return got < 0 ? -1 : eldr_errf(err, errlen, "%s: changed while being read", j->path);
        json_t *obj = parse_line(j, err, errlen);
        if (!obj)
            return -1;
        int rc = (r == 0 ? alloc_trace(j, n, obj, err, errlen) : 0) ||
                 read_request(j, obj, r, err, errlen);
        json_decref(obj);
        if (rc)
            return -1;
    }
    return 0;
}

static int check_ids(jl *j, char *err, size_t errlen)
{
    if (!j->t->request_id)
        return 0;
    int64_t a, b;
    int dup = import_find_duplicate(j->t->request_id, j->t->n, &a, &b);
    if (dup < 0)
        return eldr_errf(err, errlen, "%s: out of memory checking request ids", j->path);
    if (dup)
        return eldr_errf(err, errlen, "%s: line %lld: key 'request_id': '%s' repeats line %lld",
                         j->path, (long long)j->line_of[b], j->t->request_id[b],
                         (long long)j->line_of[a]);
    return 0;
}

static int load(jl *j, char *err, size_t errlen)
{
    int64_t n;
    if (count_requests(j, &n, err, errlen) || read_requests(j, n, err, errlen) ||
        check_ids(j, err, errlen))
        return -1;
    if (j->has & HAS_LABEL) {
        if (trace_set_label_names(j->t, j->labels.n, (const char *const *)j->labels.names, err,
                                  errlen))
            return -1;
    }
    return trace_validate(j->t, j->path, err, errlen);
}

int import_jsonl(const char *path, trace_t **out, char *err, size_t errlen)
{
    *out = NULL;
    jl j = {.path = path};
    if (!(j.f = fopen(path, "rb")))
        return eldr_errf(err, errlen, "%s: cannot open: %m", path);
    struct stat st;
    if (fstat(fileno(j.f), &st) || !S_ISREG(st.st_mode)) {
        fclose(j.f);
        return eldr_errf(err, errlen, "%s: not a regular file (JSON lines are read in two "
                         "passes; save the stream to a file first)", path);
    }
    int rc = load(&j, err, errlen);
    fclose(j.f);
    free(j.buf);
    free(j.line_of);
    free(j.seen);
    import_labels_free(&j.labels);
    if (rc) {
        trace_free(j.t);
        return -1;
    }
    *out = j.t;
    return 0;
}
