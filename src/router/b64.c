/* b64.c - base64 decoding and encoding (b64.h). */
#include "b64.h"

static const char ALPHABET[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int value_of(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int b64_decode(const char *src, size_t n, uint8_t *out, size_t *outlen, size_t *bad_at)
{
    size_t body = n;
    /* at most two padding characters, and only when they complete a quad */
    if (n % 4 == 0) {
        if (body > 0 && src[body - 1] == '=')
            body--;
        if (body > 0 && src[body - 1] == '=')
            body--;
    }
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < body; i++) {
        int v = value_of((unsigned char)src[i]);
        if (v < 0) {
            *bad_at = i;
            return -1;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (body % 4 == 1) {   /* 6 bits cannot end a byte */
        *bad_at = body - 1;
        return -1;
    }
    *outlen = o;
    return 0;
}

void b64_encode(const uint8_t *src, size_t n, char *dst)
{
    size_t o = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)src[i] << 16 | (uint32_t)src[i + 1] << 8 | src[i + 2];
        dst[o++] = ALPHABET[v >> 18];
        dst[o++] = ALPHABET[(v >> 12) & 63];
        dst[o++] = ALPHABET[(v >> 6) & 63];
        dst[o++] = ALPHABET[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)src[i] << 16 | (i + 1 < n ? (uint32_t)src[i + 1] << 8 : 0);
        dst[o++] = ALPHABET[v >> 18];
        dst[o++] = ALPHABET[(v >> 12) & 63];
        dst[o++] = i + 1 < n ? ALPHABET[(v >> 6) & 63] : '=';
        dst[o++] = '=';
    }
    dst[o] = '\0';
}
