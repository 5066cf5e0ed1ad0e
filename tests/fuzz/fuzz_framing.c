/* fuzz_framing.c - libFuzzer harness: the request framing verdict
 * (src/router/net/framing.h), which judges the Content-Length and
 * Transfer-Encoding lines of every request eldrd reads - the bytes of
 * anyone who reaches its port.
 *
 * The input is header lines "Name: value", cut at '\n' or NUL; a line
 * without a colon is skipped. Promises checked: never a crash or an
 * overread (ASan); the status is 0, 400, 413 or 501, and a refusal names
 * Content-Length or Transfer-Encoding in one printable line; an accepted
 * framing is what RFC 9112, 6.3 allows, by a second reading written
 * apart: at most one length and then no coding, the length 1*DIGIT that
 * strtoull reads to the same value without overflow, the codings (split
 * on commas, parameters dropped) with exactly one chunked and that one
 * last; and the lines of each header joined into one by commas (RFC 9110,
 * 5.3) get the same status. test_router_framing replays the corpus. */
#include <errno.h>
#include <stdlib.h>
#include <strings.h>

#include "framing.h"
#include "fuzz.h"

#define FZ_LINES 64

typedef struct fz_line {
    char name[64];
    char value[512];
} fz_line;

/* The lines of data (each cut to its buffer); returns how many. */
static int fz_lines(const uint8_t *data, size_t size, fz_line *out)
{
    int n = 0;
    size_t at = 0;
    while (at < size && n < FZ_LINES) {
        size_t end = at;
        while (end < size && data[end] != '\n' && data[end] != '\0')
            end++;
        const char *p = (const char *)data + at;
        const char *colon = memchr(p, ':', end - at);
        if (colon) {
            size_t kn = (size_t)(colon - p), vn = end - at - kn - 1;
            if (kn >= sizeof out[n].name)
                kn = sizeof out[n].name - 1;
            if (vn >= sizeof out[n].value)
                vn = sizeof out[n].value - 1;
            memcpy(out[n].name, p, kn);
            out[n].name[kn] = '\0';
            memcpy(out[n].value, colon + 1, vn);
            out[n].value[vn] = '\0';
            n++;
        }
        at = end + 1;
    }
    return n;
}

static int fz_judge(const fz_line *l, int n, framing *f, framing_verdict *v)
{
    framing_init(f);
    for (int i = 0; i < n; i++)
        framing_header(f, l[i].name, l[i].value);
    return framing_judge(f, v);
}

static const char *fz_skip_ows(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

/* The second reading of an accepted framing: the length. */
static void fz_check_length(const fz_line *l, int n, const framing *f)
{
    for (int i = 0; i < n; i++) {
        if (strcasecmp(l[i].name, "Content-Length"))
            continue;
        const char *v = fz_skip_ows(l[i].value);
        fuzz_check(*v);
        for (const char *p = v; *p; p++)
            fuzz_check(*p >= '0' && *p <= '9');
        errno = 0;
        unsigned long long want = strtoull(v, NULL, 10);
        fuzz_check(errno == 0 && want == f->length);
    }
}

/* ... and the codings: exactly one chunked, and it last. */
static void fz_check_codings(const fz_line *l, int n)
{
    int chunked = 0, last_chunked = 0, any = 0;
    for (int i = 0; i < n; i++) {
        if (strcasecmp(l[i].name, "Transfer-Encoding"))
            continue;
        any = 1;
        char buf[sizeof l[i].value];
        memcpy(buf, l[i].value, sizeof buf);
        char *save = NULL;
        for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            tok[strcspn(tok, ";")] = '\0';
            tok = (char *)fz_skip_ows(tok);
            size_t k = strlen(tok);
            while (k && (tok[k - 1] == ' ' || tok[k - 1] == '\t'))
                tok[--k] = '\0';
            if (!k)
                continue;
            last_chunked = !strcasecmp(tok, "chunked");
            chunked += last_chunked;
        }
    }
    if (any)
        fuzz_check(chunked == 1 && last_chunked);
}

/* The verdict on the lines with each of the two headers' values joined
 * into one line by commas (room for every line: nothing is cut). */
static int fz_judge_joined(const fz_line *l, int n, framing *f, framing_verdict *v)
{
    static const char *names[] = {"Content-Length", "Transfer-Encoding"};
    static char value[FZ_LINES * (sizeof l->value + 2)];
    framing_init(f);
    for (int k = 0; k < 2; k++) {
        size_t at = 0;
        int seen = 0;
        for (int i = 0; i < n; i++) {
            if (strcasecmp(l[i].name, names[k]))
                continue;
            at += (size_t)snprintf(value + at, sizeof value - at, "%s%s", seen++ ? ", " : "",
                                   l[i].value);
        }
        if (seen)
            framing_header(f, names[k], value);
    }
    return framing_judge(f, v);
}

static int fuzz_framing_one(const uint8_t *data, size_t size)
{
    static fz_line lines[FZ_LINES];
    int n = fz_lines(data, size, lines);
    framing f;
    framing_verdict v;
    int status = fz_judge(lines, n, &f, &v);
    fuzz_check(status == v.status);
    fuzz_check(status == 0 || status == 400 || status == 413 || status == 501);
    if (status) {
        fuzz_check(v.param && (!strcmp(v.param, "Content-Length") ||
                               !strcmp(v.param, "Transfer-Encoding")));
        fuzz_check_err(v.msg, sizeof v.msg);
        for (const char *p = v.msg; *p; p++)
            fuzz_check((unsigned char)*p >= 0x20 && *p != 0x7f);
    } else {
        fuzz_check(f.lengths <= 1 && !(f.lengths && f.codings));
        fz_check_length(lines, n, &f);
        fz_check_codings(lines, n);
    }
    framing g;
    framing_verdict w;
    fuzz_check(fz_judge_joined(lines, n, &g, &w) == status);
    return 0;
}

#ifndef FUZZ_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_framing_one(data, size);
}
#endif
