/* window_stream.c - GET /v1/window as a stream (window_stream.h). */
#include "window_stream.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

struct window_stream {
    window_copy w;
    int next;                    /* the next record to format; n: the tail */
    int done;                    /* the tail is formatted */
    strbuf b;                    /* formatted, not yet sent: [off, b.len) */
    size_t off;
};

static void put(window_stream *s, const char *p, size_t n)
{
    sb_printf(&s->b, "%.*s", (int)n, p);
}

/* A real as jansson writes it with JSON_REAL_PRECISION(9): %.9g, and a
 * ".0" when that looks like an integer. */
static void put_real(window_stream *s, double v)
{
    char b[40];
    int n = snprintf(b, sizeof b, "%.9g", v);
    if (!strpbrk(b, ".eEni"))
        n += snprintf(b + n, sizeof b - (size_t)n, ".0");
    put(s, b, (size_t)n);
}

static void put_string(window_stream *s, const char *v)
{
    json_t *j = json_string(v);
    char *t = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    if (t)
        put(s, t, strlen(t));
    else
        put(s, "\"\"", 2);     /* an id jansson refuses (not UTF-8) */
    free(t);
    json_decref(j);
}

window_stream *window_stream_new(window_copy *w)
{
    window_stream *s = calloc(1, sizeof *s);
    if (!s) {
        window_copy_free(w);
        return NULL;
    }
    s->w = *w;
    memset(w, 0, sizeof *w);
    char b[160];
    int n = snprintf(b, sizeof b, "{\"model_generation\":%llu,\"dim\":%zu,\"capacity\":%d,"
                     "\"signatures\":[", (unsigned long long)s->w.gen, s->w.dim, s->w.cap);
    put(s, b, (size_t)n);
    return s;
}

void window_stream_free(void *ws)
{
    window_stream *s = ws;
    if (!s)
        return;
    window_copy_free(&s->w);
    free(s->b.s);
    free(s);
}

/* The next record, or the tail. */
static void format_next(window_stream *s)
{
    if (s->next >= s->w.n) {
        put(s, "]}", 2);
        s->done = 1;
        return;
    }
    const wrec *r = &s->w.rec[s->next];
    char b[160];
    put(s, s->next ? ",{\"request_id\":" : "{\"request_id\":", s->next ? 15 : 14);
    put_string(s, r->id);
    int n = snprintf(b, sizeof b, ",\"seq\":%llu,\"nearest\":%d,\"sim_max\":",
                     (unsigned long long)r->seq, r->nearest);
    put(s, b, (size_t)n);
    put_real(s, r->sim_max);
    put(s, ",\"signature\":[", 14);
    for (size_t i = 0; i < s->w.dim; i++) {
        if (i)
            put(s, ",", 1);
        put_real(s, r->sig[i]);
    }
    put(s, "]}", 2);
    s->next++;
}

ssize_t window_stream_read(void *ws, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    window_stream *s = ws;
    if (s->off == s->b.len) {
        s->off = s->b.len = 0;
        if (s->done || s->b.oom)
            return -1;       /* MHD_CONTENT_READER_END_OF_STREAM */
        format_next(s);
        if (s->b.oom)
            return -2;       /* MHD_CONTENT_READER_END_WITH_ERROR */
    }
    size_t n = s->b.len - s->off < max ? s->b.len - s->off : max;
    memcpy(buf, s->b.s + s->off, n);
    s->off += n;
    return (ssize_t)n;
}
