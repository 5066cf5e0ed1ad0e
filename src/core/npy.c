/* npy.c - parse numpy .npy images from memory (see npy.h).
 *
 * The header is a Python dict literal written by numpy's
 * _write_array_header; it is parsed with a small recursive-descent reader
 * that accepts exactly the literal forms numpy writes (quoted strings,
 * True/False, tuples of non-negative integers) in any key order. */
#include "npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

static const unsigned char MAGIC[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* ---- the header dict ---------------------------------------------------- */

typedef struct cursor {
    const char *p, *end;
} cursor;

static void skip_ws(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int eat(cursor *c, char ch)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* A quoted Python string without escapes (numpy never writes any). */
static int read_str(cursor *c, char *out, size_t outlen)
{
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return -1;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || n + 1 >= outlen)
            return -1;
        out[n++] = *c->p++;
    }
    if (c->p >= c->end)
        return -1;
    c->p++;
    out[n] = 0;
    return 0;
}

static int read_word(cursor *c, const char *w)
{
    skip_ws(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) >= n && !memcmp(c->p, w, n)) {
        c->p += n;
        return 1;
    }
    return 0;
}

/* (d0, d1, ...) with an optional trailing comma; () is a scalar. Python 2
 * era writers add an 'L' suffix to longs; accept it. */
static int read_shape(cursor *c, npy_array_t *a, char *err, size_t errlen)
{
    if (!eat(c, '('))
        return eldr_errf(err, errlen, "header 'shape' is not a tuple");
    a->ndim = 0;
    for (;;) {
        if (eat(c, ')'))
            return 0;
        skip_ws(c);
        if (c->p >= c->end || *c->p < '0' || *c->p > '9')
            return eldr_errf(err, errlen, "header 'shape' holds something other than "
                                          "non-negative integers");
        int64_t v = 0;
        while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
            if (v > (INT64_MAX - 9) / 10)
                return eldr_errf(err, errlen, "header 'shape' has a dimension too large");
            v = v * 10 + (*c->p++ - '0');
        }
        if (c->p < c->end && *c->p == 'L')
            c->p++;
        if (a->ndim == NPY_MAX_DIMS)
            return eldr_errf(err, errlen, "header 'shape' has more than %d dimensions",
                             NPY_MAX_DIMS);
        a->shape[a->ndim++] = v;
        if (!eat(c, ',')) {
            if (eat(c, ')'))
                return 0;
            return eldr_errf(err, errlen, "header 'shape' is not a well-formed tuple");
        }
    }
}

/* Decode a descr such as '<u2', '|S5', '>U10' into kind/itemsize/order. */
static int parse_descr(const char *d, npy_array_t *a, char *err, size_t errlen)
{
    snprintf(a->descr, sizeof a->descr, "%s", d);
    char order = d[0];
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return eldr_errf(err, errlen, "dtype '%s' has no byte-order mark", d);
    char kind = d[1];
    if (kind == 'O')
        return eldr_errf(err, errlen,
                         "dtype '%s' is an object array: it needs pickle, which eldr does "
                         "not load; save strings as fixed-width ('U' or 'S') arrays", d);
    if (!strchr("biufUS", kind) || kind == 0)
        return eldr_errf(err, errlen, "dtype '%s' is not supported (bool, integers, "
                                      "float32/64, 'U' and 'S' strings are)", d);
    char *end;
    long size = strtol(d + 2, &end, 10);
    /* size 0 ('<U0', '|S0') would make the element count unbounded by
     * the data: a 100-byte file could claim 2^62 strings */
    if (end == d + 2 || *end || size < 1 || size > (1L << 24))
        return eldr_errf(err, errlen, "dtype '%s' has a bad item size", d);
    a->kind = kind;
    a->big_endian = order == '>';
    switch (kind) {
    case 'b':
        if (size != 1)
            return eldr_errf(err, errlen, "dtype '%s': bool must be 1 byte", d);
        break;
    case 'i':
    case 'u':
        if (size != 1 && size != 2 && size != 4 && size != 8)
            return eldr_errf(err, errlen, "dtype '%s': integers must be 1, 2, 4 or 8 bytes", d);
        break;
    case 'f':
        if (size != 4 && size != 8)
            return eldr_errf(err, errlen, "dtype '%s': only float32 and float64 are supported", d);
        break;
    case 'U':
        size *= 4; /* UTF-32 code units */
        break;
    }
    a->itemsize = (int)size;
    return 0;
}

static int parse_header(const char *h, size_t hlen, npy_array_t *a, char *err, size_t errlen)
{
    cursor c = {h, h + hlen};
    int have_descr = 0, have_fortran = 0, have_shape = 0, fortran = 0;
    if (!eat(&c, '{'))
        return eldr_errf(err, errlen, "header is not a dict literal");
    for (;;) {
        if (eat(&c, '}'))
            break;
        char key[32];
        if (read_str(&c, key, sizeof key) || !eat(&c, ':'))
            return eldr_errf(err, errlen, "header dict is malformed");
        if (!strcmp(key, "descr")) {
            char d[32];
            skip_ws(&c);
            if (c.p < c.end && c.p[0] == '[')
                return eldr_errf(err, errlen, "structured (record) dtypes are not supported");
            if (read_str(&c, d, sizeof d))
                return eldr_errf(err, errlen, "header 'descr' is not a string");
            if (parse_descr(d, a, err, errlen))
                return -1;
            have_descr = 1;
        } else if (!strcmp(key, "fortran_order")) {
            if (read_word(&c, "True"))
                fortran = 1;
            else if (read_word(&c, "False"))
                fortran = 0;
            else
                return eldr_errf(err, errlen, "header 'fortran_order' is not True or False");
            have_fortran = 1;
        } else if (!strcmp(key, "shape")) {
            if (read_shape(&c, a, err, errlen))
                return -1;
            have_shape = 1;
        } else {
            return eldr_errf(err, errlen, "header has an unexpected key '%s'", key);
        }
        if (!eat(&c, ',')) {
            if (eat(&c, '}'))
                break;
            return eldr_errf(err, errlen, "header dict is malformed");
        }
    }
    if (!have_descr || !have_fortran || !have_shape)
        return eldr_errf(err, errlen, "header lacks '%s'",
                         !have_descr ? "descr" : !have_fortran ? "fortran_order" : "shape");
    return fortran;
}

/* ---- layout ------------------------------------------------------------- */

/* Rewrite a Fortran-ordered array into C order: element with multi-index
 * (i0..in-1) sits at sum(i_d * prod(shape[<d])) in Fortran order. */
static int to_c_order(npy_array_t *a, char *err, size_t errlen)
{
    if (a->ndim < 2 || a->count == 0 || a->itemsize == 0)
        return 0;
    size_t isz = (size_t)a->itemsize;
    unsigned char *dst = malloc((size_t)a->count * isz);
    if (!dst)
        return eldr_errf(err, errlen, "out of memory reordering a Fortran-ordered array");
    int64_t idx[NPY_MAX_DIMS] = {0}, fstride[NPY_MAX_DIMS];
    fstride[0] = 1;
    for (int d = 1; d < a->ndim; d++)
        fstride[d] = fstride[d - 1] * a->shape[d - 1];
    int64_t f = 0;
    for (int64_t i = 0; i < a->count; i++) {
        memcpy(dst + (size_t)i * isz, a->data + (size_t)f * isz, isz);
        /* advance the C-order multi-index (last dimension fastest) */
        for (int d = a->ndim - 1; d >= 0; d--) {
            idx[d]++;
            f += fstride[d];
            if (idx[d] < a->shape[d])
                break;
            f -= idx[d] * fstride[d];
            idx[d] = 0;
        }
    }
    a->owned = dst;
    a->data = dst;
    return 0;
}

int npy_parse(const void *buf, size_t len, npy_array_t *out, char *err, size_t errlen)
{
    const unsigned char *b = buf;
    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(b, MAGIC, sizeof MAGIC))
        return eldr_errf(err, errlen, "not a .npy array (no \\x93NUMPY magic)");
    int major = b[6];
    size_t hlen, hstart;
    if (major == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12)
            return eldr_errf(err, errlen, "truncated .npy header");
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        hstart = 12;
    } else {
        return eldr_errf(err, errlen, "unsupported .npy format version %d.%d", major, b[7]);
    }
    if (hlen > len - hstart)
        return eldr_errf(err, errlen, "truncated .npy header (%zu bytes announced, %zu present)",
                         hlen, len - hstart);
    out->version = major;
    int fortran = parse_header((const char *)b + hstart, hlen, out, err, errlen);
    if (fortran < 0)
        return -1;
    int64_t count = 1;
    for (int d = 0; d < out->ndim; d++) {
        if (out->shape[d] && count > INT64_MAX / out->shape[d])
            return eldr_errf(err, errlen, "shape is too large");
        count *= out->shape[d];
    }
    out->count = count;
    size_t have = len - hstart - hlen;
    if (out->itemsize && (uint64_t)count > SIZE_MAX / (size_t)out->itemsize)
        return eldr_errf(err, errlen, "shape is too large");
    size_t need = (size_t)count * (size_t)out->itemsize;
    char sh[256];
    if (have != need)
        return eldr_errf(err, errlen, "shape %s of dtype '%s' needs %zu data bytes, %s %zu",
                         npy_shape_str(out, sh, sizeof sh), out->descr, need,
                         have < need ? "but the data is truncated at" : "but it holds", have);
    out->data = b + hstart + hlen;
    return fortran ? to_c_order(out, err, errlen) : 0;
}

void npy_free(npy_array_t *a)
{
    if (!a)
        return;
    free(a->owned);
    a->owned = NULL;
    a->data = NULL;
}

const char *npy_shape_str(const npy_array_t *a, char *buf, size_t buflen)
{
    size_t n = 0;
    n += (size_t)snprintf(buf, buflen, "(");
    for (int d = 0; d < a->ndim && n < buflen; d++)
        n += (size_t)snprintf(buf + n, buflen - n, "%s%lld", d ? ", " : "",
                              (long long)a->shape[d]);
    if (n < buflen)
        snprintf(buf + n, buflen - n, a->ndim == 1 ? ",)" : ")");
    return buf;
}

/* ---- elements ----------------------------------------------------------- */

/* An unsigned integer of `size` bytes at p in the array's byte order:
 * a memcpy and at most one byte swap (this is the importers' inner loop). */
static uint64_t load_uint(const unsigned char *p, int size, int big)
{
    int swap = big != (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__);
    switch (size) {
    case 1:
        return p[0];
    case 2: {
        uint16_t v;
        memcpy(&v, p, 2);
        return swap ? __builtin_bswap16(v) : v;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, p, 4);
        return swap ? __builtin_bswap32(v) : v;
    }
    case 8: {
        uint64_t v;
        memcpy(&v, p, 8);
        return swap ? __builtin_bswap64(v) : v;
    }
    }
    return 0;
}

int npy_int_at(const npy_array_t *a, int64_t i, int64_t *out)
{
    const unsigned char *p = a->data + (size_t)i * (size_t)a->itemsize;
    uint64_t u = load_uint(p, a->itemsize, a->big_endian);
    if (a->kind == 'i') {
        int bits = 8 * a->itemsize;
        if (bits < 64 && (u >> (bits - 1)) & 1)
            u |= ~(uint64_t)0 << bits; /* sign-extend */
        *out = (int64_t)u;
        return 0;
    }
    if (u > (uint64_t)INT64_MAX)
        return -1;
    *out = (int64_t)u;
    return 0;
}

double npy_double_at(const npy_array_t *a, int64_t i)
{
    const unsigned char *p = a->data + (size_t)i * (size_t)a->itemsize;
    if (a->kind == 'f') {
        uint64_t u = load_uint(p, a->itemsize, a->big_endian);
        if (a->itemsize == 4) {
            uint32_t w = (uint32_t)u;
            float f;
            memcpy(&f, &w, sizeof f);
            return f;
        }
        double d;
        memcpy(&d, &u, sizeof d);
        return d;
    }
    if (a->kind == 'u')
        return (double)load_uint(p, a->itemsize, a->big_endian);
    int64_t v = 0;
    npy_int_at(a, i, &v);
    return (double)v;
}

static size_t utf8_put(uint32_t cp, char *o)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

int npy_string_at(const npy_array_t *a, int64_t i, char *out, size_t outlen,
                  char *err, size_t errlen)
{
    const unsigned char *p = a->data + (size_t)i * (size_t)a->itemsize;
    int unit = a->kind == 'U' ? 4 : 1;
    int n = a->itemsize / unit;
    while (n > 0 && load_uint(p + (size_t)(n - 1) * unit, unit, a->big_endian) == 0)
        n--; /* numpy pads with NULs and strips them on read */
    size_t o = 0;
    for (int j = 0; j < n; j++) {
        uint32_t cp = (uint32_t)load_uint(p + (size_t)j * unit, unit, a->big_endian);
        if (cp == 0)
            return eldr_errf(err, errlen, "element %lld holds an embedded NUL", (long long)i);
        if (unit == 4 && (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)))
            return eldr_errf(err, errlen, "element %lld holds an invalid code point U+%X",
                             (long long)i, (unsigned)cp);
        size_t w = unit == 1 ? 1 : cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        if (o + w + 1 > outlen)
            return eldr_errf(err, errlen, "element %lld is longer than %zu bytes",
                             (long long)i, outlen ? outlen - 1 : 0);
        if (unit == 1)
            out[o++] = (char)cp; /* bytes are passed through as they are */
        else
            o += utf8_put(cp, out + o);
    }
    if (!outlen)
        return eldr_errf(err, errlen, "no room for element %lld", (long long)i);
    out[o] = 0;
    return 0;
}
