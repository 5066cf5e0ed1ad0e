/* b64.h - base64 decoding (RFC 4648, standard alphabet) for request bodies.
 *
 * Padding '=' is optional; anything else outside the alphabet (whitespace
 * included) is refused, as is a length that cannot come from whole bytes.
 * Bits left over after the last whole byte are ignored. A route body's
 * counts are thousands of characters and sit on eldrd's hot path:
 * decoding runs sixteen characters at a time where the CPU has SSSE3
 * (x86-64), else four at a time from tables; both give the same bytes
 * and name the same offending offset. */
#ifndef ELDR_ROUTER_B64_H
#define ELDR_ROUTER_B64_H

#include <stddef.h>
#include <stdint.h>

/* Bytes that decoding n characters yields at most. */
static inline size_t b64_decoded_max(size_t n)
{
    return n / 4 * 3 + 3;
}

/* The exact number of bytes src[0..n) decodes to, judged from its length
 * and padding alone (the characters are not checked); (size_t)-1 when no
 * whole-byte string has that shape. */
size_t b64_decoded_len(const char *src, size_t n);

/* Decode src[0..n) into out; *outlen gets the number of bytes. Writes at
 * most b64_decoded_len(src, n) bytes (so a buffer of exactly that size is
 * enough), never more than b64_decoded_max(n). Returns 0, or -1 with
 * *bad_at the offending offset. */
int b64_decode(const char *src, size_t n, uint8_t *out, size_t *outlen, size_t *bad_at);
/* The same, four characters at a time on every CPU (the tests hold the
 * two against each other). */
int b64_decode_scalar(const char *src, size_t n, uint8_t *out, size_t *outlen,
                      size_t *bad_at);

/* Bytes b64_encode writes for n bytes, its NUL included. */
static inline size_t b64_encoded_size(size_t n)
{
    return 4 * ((n + 2) / 3) + 1;
}

/* Encode n bytes into dst (b64_encoded_size(n) bytes, NUL-terminated). */
void b64_encode(const uint8_t *src, size_t n, char *dst);

#endif
