/* framing.c - the request framing verdict (framing.h). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "framing.h"

void framing_init(framing *f)
{
    memset(f, 0, sizeof *f);
}

static int ows(char c)
{
    return c == ' ' || c == '\t';
}

/* At most 40 bytes of v[0..n) into out, control bytes as '?', so that the
 * message stays one printable line. */
static void quote(char *out, size_t cap, const char *v, size_t n)
{
    size_t k = n < 40 ? n : 40;
    if (k >= cap)
        k = cap - 1;
    for (size_t i = 0; i < k; i++) {
        unsigned char ch = (unsigned char)v[i];
        out[i] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    }
    out[k] = '\0';
}

/* A Content-Length value: 1*DIGIT and nothing else (RFC 9110, 8.6). */
static void read_length(framing *f, const char *v)
{
    quote(f->length_text, sizeof f->length_text, v, strlen(v));
    unsigned long long n = 0;
    const char *p = v;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (n > (~0ULL - d) / 10)
            f->huge_length = 1;
        else
            n = n * 10 + d;
    }
    if (p == v || *p) {
        f->bad_length = 1;
        f->huge_length = 0;
    } else if (!f->huge_length) {
        f->length = n;
    }
}

/* The codings of one Transfer-Encoding value, comma-separated, in order
 * (RFC 9112, 6.1): each noted; chunked_last says whether the last one
 * seen so far is chunked. Empty list elements are skipped (RFC 9110,
 * 5.6.1); parameters (;q=...) belong to their coding. */
static void read_codings(framing *f, const char *v)
{
    while (*v) {
        while (ows(*v) || *v == ',')
            v++;
        const char *e = v;
        while (*e && *e != ',' && *e != ';')
            e++;
        const char *end = e;
        while (end > v && ows(end[-1]))
            end--;
        size_t n = (size_t)(end - v);
        if (n) {
            int is_chunked = n == 7 && !strncasecmp(v, "chunked", 7);
            f->chunked += is_chunked;
            f->chunked_last = is_chunked;
            if (!is_chunked && !f->unknown++)
                quote(f->first_unknown, sizeof f->first_unknown, v, n);
        }
        while (*e && *e != ',')
            e++;
        v = e;
    }
}

void framing_header(framing *f, const char *name, const char *value)
{
    const char *v = value ? value : "";
    while (ows(*v))
        v++;
    if (!strcasecmp(name, "Content-Length")) {
        if (!f->lengths++)
            read_length(f, v);
    } else if (!strcasecmp(name, "Transfer-Encoding")) {
        f->codings++;
        read_codings(f, v);
    }
}

int framing_judge(const framing *f, framing_verdict *v)
{
    v->status = 400;
    v->param = "Content-Length";
    v->msg[0] = '\0';
    if (f->lengths > 1) {
        snprintf(v->msg, sizeof v->msg, "%d Content-Length headers; send one", f->lengths);
    } else if (f->lengths && f->codings) {
        v->param = "Transfer-Encoding";
        snprintf(v->msg, sizeof v->msg, "Transfer-Encoding and Content-Length both given; "
                 "send one (RFC 9112, 6.3)");
    } else if (f->lengths && f->bad_length) {
        snprintf(v->msg, sizeof v->msg, "Content-Length '%s' is not a number of bytes "
                 "(RFC 9110, 8.6: digits only; no sign, space or list)", f->length_text);
    } else if (f->lengths && f->huge_length) {
        v->status = 413;
        snprintf(v->msg, sizeof v->msg, "Content-Length %s is past 2^64-1 bytes, more than "
                 "any body eldrd takes", f->length_text);
    } else if (f->codings && (f->chunked != 1 || !f->chunked_last) &&
               (f->chunked || !f->unknown)) {
        v->param = "Transfer-Encoding";
        snprintf(v->msg, sizeof v->msg, "chunked must be the last transfer coding, once "
                 "(RFC 9112, 6.3): the body's length cannot be known");
    } else if (f->unknown) {
        v->status = 501;
        v->param = "Transfer-Encoding";
        snprintf(v->msg, sizeof v->msg, "transfer coding '%s' is not implemented (eldrd "
                 "reads chunked only; RFC 9112, 6.1)", f->first_unknown);
    } else {
        v->status = 0;
        v->param = NULL;
    }
    return v->status;
}
