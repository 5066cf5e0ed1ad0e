/* upstream_parse.c - one HTTP/1.x answer, fed in pieces (upstream_parse.h). */
#include "upstream_parse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum {
    S_HEAD = 0,      /* status line and headers */
    S_LENGTH,        /* a Content-Length body: left bytes */
    S_CHUNK_SIZE,    /* a chunk-size line */
    S_CHUNK_DATA,    /* left bytes of a chunk */
    S_CHUNK_END,     /* the CRLF after a chunk's data */
    S_TRAILER,       /* trailer lines up to the empty one */
    S_CLOSE,         /* everything up to the close */
    S_DONE
};

#define LINE_MAX_CHUNK 1024   /* a chunk-size line or a trailer line */
#define CL_NONE (~0ULL)

void upa_reset(upa *a)
{
    strbuf h = a->head;
    memset(a, 0, sizeof *a);
    a->head = h;
    a->head.len = 0;
    a->head.oom = 0;
}

void upa_free(upa *a)
{
    free(a->head.s);
    memset(a, 0, sizeof *a);
}

static upa_rc fail(char *why, size_t whylen, const char *msg)
{
    snprintf(why, whylen, "%s", msg);
    return UPA_ERROR;
}

static int keep(upa *a, const char *p, size_t n)
{
    sb_put(&a->head, p, n);
    return a->head.oom ? -1 : 0;
}

/* A value's comma-separated tokens, trimmed: does it hold tok? */
static int has_token(const char *v, size_t n, const char *tok)
{
    size_t tl = strlen(tok), i = 0;
    while (i < n) {
        while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
            i++;
        size_t s = i;
        while (i < n && v[i] != ',')
            i++;
        size_t e = i;
        while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
            e--;
        if (e - s == tl && !strncasecmp(v + s, tok, tl))
            return 1;
    }
    return 0;
}

/* Transfer-Encoding: only "chunked", once, is what we can read. */
static int te_chunked(const char *v, size_t n, char *why, size_t whylen)
{
    while (n && (*v == ' ' || *v == '\t'))
        v++, n--;
    if (n == 7 && !strncasecmp(v, "chunked", 7))
        return 1;
    snprintf(why, whylen, "the answer's transfer coding '%.*s' is not chunked", (int)(n < 60 ? n : 60),
             v);
    return -1;
}

/* The head (status line, headers, the empty line; n bytes, LF or CRLF
 * line ends): the status and how the body is framed. */
static upa_rc parse_head(upa *a, const char *h, size_t n, char *why, size_t whylen)
{
    const char *end = h + n, *eol = memchr(h, '\n', n);
    size_t l = (size_t)(eol - h);
    if (l && h[l - 1] == '\r')
        l--;
    if (l < 12 || memcmp(h, "HTTP/1.", 7) || (h[7] != '0' && h[7] != '1') || h[8] != ' ' ||
        h[9] < '1' || h[9] > '5' || h[10] < '0' || h[10] > '9' || h[11] < '0' || h[11] > '9' ||
        (l > 12 && h[12] != ' '))
        return fail(why, whylen, "the answer does not begin with an HTTP/1.x status line");
    a->status = (h[9] - '0') * 100 + (h[10] - '0') * 10 + (h[11] - '0');
    int http11 = h[7] == '1', close = 0, ka = 0, chunked = 0, te = 0;
    unsigned long long cl = CL_NONE;
    for (const char *p = eol + 1; p < end;) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        size_t ln = (size_t)(e - p);
        if (ln && p[ln - 1] == '\r')
            ln--;
        if (ln == 0)
            break;
        if (*p == ' ' || *p == '\t')
            return fail(why, whylen, "the answer folds a header line (obsolete, refused)");
        const char *colon = memchr(p, ':', ln);
        if (!colon || colon == p)
            return fail(why, whylen, "the answer has a header line without a name and a colon");
        size_t nl = (size_t)(colon - p);
        const char *v = colon + 1;
        size_t vl = ln - nl - 1;
        while (vl && (*v == ' ' || *v == '\t'))
            v++, vl--;
        while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
            vl--;
        if (nl == 14 && !strncasecmp(p, "content-length", 14)) {
            unsigned long long x = 0;
            if (vl == 0 || vl > 18)
                return fail(why, whylen, "the answer's Content-Length is not a number below 10^18");
            for (size_t i = 0; i < vl; i++) {
                if (v[i] < '0' || v[i] > '9')
                    return fail(why, whylen, "the answer's Content-Length is not a number");
                x = x * 10 + (unsigned)(v[i] - '0');
            }
            if (cl != CL_NONE && cl != x)
                return fail(why, whylen, "the answer gives two different Content-Lengths");
            cl = x;
        } else if (nl == 17 && !strncasecmp(p, "transfer-encoding", 17)) {
            if (te++ || (chunked = te_chunked(v, vl, why, whylen)) < 0)
                return te > 1 ? fail(why, whylen, "the answer gives Transfer-Encoding twice")
                              : UPA_ERROR;
        } else if (nl == 10 && !strncasecmp(p, "connection", 10)) {
            close |= has_token(v, vl, "close");
            ka |= has_token(v, vl, "keep-alive");
        }
        p = e + 1;
    }
    if (a->status < 200) {
        if (a->status == 101)
            return fail(why, whylen, "the answer switches protocols (101), which was not asked");
        a->state = S_HEAD;   /* an interim answer: the final one follows */
        return UPA_MORE;
    }
    if (chunked && cl != CL_NONE)
        return fail(why, whylen, "the answer gives both Content-Length and chunked coding");
    a->keep_alive = !close && (http11 || ka);
    if (a->status == 204 || a->status == 304) {
        a->state = S_DONE;
    } else if (chunked) {
        a->state = S_CHUNK_SIZE;
    } else if (cl != CL_NONE) {
        a->left = cl;
        a->state = cl ? S_LENGTH : S_DONE;
    } else {
        a->state = S_CLOSE;
        a->until_close = 1;
        a->keep_alive = 0;
    }
    return UPA_MORE;
}

/* The head's end in buf[0..n): the offset just past the empty line, or
 * 0. from: where to look from (the bytes before were searched). */
static size_t head_end(const char *buf, size_t n, size_t from)
{
    for (size_t i = from; i < n; i++) {
        if (buf[i] != '\n')
            continue;
        if (i >= 1 && buf[i - 1] == '\n')
            return i + 1;
        if (i >= 2 && buf[i - 1] == '\r' && buf[i - 2] == '\n')
            return i + 1;
    }
    return 0;
}

/* Read the head from data[*i..n): 1 when it is complete and parsed, 0
 * when more is needed (kept), < 0 on error. */
static int take_head(upa *a, const char *data, size_t n, size_t *i, const upa_sink *s,
                     char *why, size_t whylen)
{
    const char *p = data + *i;
    size_t avail = n - *i, end;
    int rc;
    if (a->head.len == 0 && (end = head_end(p, avail, 0))) {
        if (end > UPA_HEAD_MAX) {
            snprintf(why, whylen, "the answer's head is over %d KiB", UPA_HEAD_MAX / 1024);
            return UPA_TOO_BIG;
        }
        *i += end;   /* the whole head in this piece: parsed in place */
        rc = parse_head(a, p, end, why, whylen);
    } else {
        size_t old = a->head.len;
        size_t room = UPA_HEAD_MAX - old;
        size_t take = avail < room ? avail : room;
        if (keep(a, p, take) < 0)
            return fail(why, whylen, "out of memory for the answer's head");
        end = head_end(a->head.s, a->head.len, old > 2 ? old - 2 : 0);
        if (!end) {
            *i += take;
            if (a->head.len >= UPA_HEAD_MAX) {
                snprintf(why, whylen, "the answer's head is over %d KiB", UPA_HEAD_MAX / 1024);
                return UPA_TOO_BIG;
            }
            return 0;
        }
        *i += end - old;
        a->head.len = 0;
        rc = parse_head(a, a->head.s, end, why, whylen);
    }
    if (rc < 0)
        return rc;
    if (a->state != S_HEAD && s->on_status)
        s->on_status(s->cls, a->status);
    return 1;
}

/* A line (chunk size, trailer) from data[*i..n): 1 with *line, *len
 * (without the line end) when complete, 0 when kept for more. */
static int take_line(upa *a, const char *data, size_t n, size_t *i, const char **line,
                     size_t *len, char *why, size_t whylen)
{
    const char *p = data + *i, *nl = memchr(p, '\n', n - *i);
    if (!nl) {
        if (a->head.len + (n - *i) > LINE_MAX_CHUNK) {
            snprintf(why, whylen, "a chunk-size or trailer line is over %d bytes", LINE_MAX_CHUNK);
            return UPA_TOO_BIG;
        }
        if (keep(a, p, n - *i) < 0)
            return fail(why, whylen, "out of memory for a chunk line");
        *i = n;
        return 0;
    }
    size_t l = (size_t)(nl - p);
    *i += l + 1;
    if (a->head.len) {
        if (a->head.len + l > LINE_MAX_CHUNK) {
            snprintf(why, whylen, "a chunk-size or trailer line is over %d bytes", LINE_MAX_CHUNK);
            return UPA_TOO_BIG;
        }
        if (keep(a, p, l) < 0)
            return fail(why, whylen, "out of memory for a chunk line");
        *line = a->head.s;
        *len = a->head.len;
        a->head.len = 0;   /* read before the next keep */
    } else {
        if (l > LINE_MAX_CHUNK) {
            snprintf(why, whylen, "a chunk-size or trailer line is over %d bytes", LINE_MAX_CHUNK);
            return UPA_TOO_BIG;
        }
        *line = p;
        *len = l;
    }
    if (*len && (*line)[*len - 1] == '\r')
        (*len)--;
    return 1;
}

static upa_rc chunk_size(upa *a, const char *l, size_t n, char *why, size_t whylen)
{
    unsigned long long x = 0;
    size_t i = 0;
    for (; i < n; i++) {
        char c = l[i];
        int d = c >= '0' && c <= '9' ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            break;
        if (x >> 58) {
            snprintf(why, whylen, "a chunk size is over 2^62 bytes");
            return UPA_TOO_BIG;
        }
        x = x * 16 + (unsigned)d;
    }
    while (i < n && (l[i] == ' ' || l[i] == '\t'))
        i++;
    if (i == 0 || (i < n && l[i] != ';'))
        return fail(why, whylen, "a chunk-size line is not a hexadecimal size");
    a->left = x;
    a->state = x ? S_CHUNK_DATA : S_TRAILER;
    return UPA_MORE;
}

/* Body bytes data[*i..n) of a framed part: up to left of them. */
static upa_rc give(upa *a, const char *data, size_t n, size_t *i, const upa_sink *s,
                   char *why, size_t whylen)
{
    size_t avail = n - *i;
    size_t take = a->state == S_CLOSE || a->left > avail ? avail : (size_t)a->left;
    if (take && s->on_body && s->on_body(s->cls, data + *i, take) < 0) {
        snprintf(why, whylen, "the reader stopped");
        return UPA_STOPPED;
    }
    *i += take;
    if (a->state != S_CLOSE)
        a->left -= take;
    return UPA_MORE;
}

upa_rc upa_feed(upa *a, const char *data, size_t n, size_t *used, const upa_sink *s,
                char *why, size_t whylen)
{
    size_t i = 0;
    upa_rc rc = UPA_MORE;
    const char *line;
    size_t len;
    while (i < n && a->state != S_DONE) {
        int got;
        switch (a->state) {
        case S_HEAD:
            got = take_head(a, data, n, &i, s, why, whylen);
            if (got < 0)
                rc = (upa_rc)got;
            break;
        case S_LENGTH:
            rc = give(a, data, n, &i, s, why, whylen);
            if (!rc && a->left == 0)
                a->state = S_DONE;
            break;
        case S_CHUNK_DATA:
            rc = give(a, data, n, &i, s, why, whylen);
            if (!rc && a->left == 0)
                a->state = S_CHUNK_END;
            break;
        case S_CLOSE:
            rc = give(a, data, n, &i, s, why, whylen);
            break;
        case S_CHUNK_SIZE:
        case S_CHUNK_END:
        case S_TRAILER:
            got = take_line(a, data, n, &i, &line, &len, why, whylen);
            if (got < 0)
                rc = (upa_rc)got;
            else if (got && a->state == S_CHUNK_SIZE)
                rc = chunk_size(a, line, len, why, whylen);
            else if (got && a->state == S_CHUNK_END)
                rc = len ? fail(why, whylen, "a chunk's data is not followed by its line end")
                         : (a->state = S_CHUNK_SIZE, UPA_MORE);
            else if (got && len == 0)
                a->state = S_DONE;   /* the trailers' end */
            break;
        }
        if (rc != UPA_MORE)
            break;
    }
    a->seen += i;
    *used = i;
    if (rc != UPA_MORE)
        return rc;
    return a->state == S_DONE ? UPA_DONE : UPA_MORE;
}

upa_rc upa_close(upa *a, char *why, size_t whylen)
{
    if (a->state == S_CLOSE || a->state == S_DONE)
        return UPA_DONE;
    return fail(why, whylen, a->seen ? "the upstream closed the connection mid-answer"
                                     : "the upstream closed the connection without answering");
}
