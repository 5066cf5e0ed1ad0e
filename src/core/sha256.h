/* sha256.h - SHA-256 (FIPS 180-4), for the model file's fingerprint of the
 * calibration trace it was fitted on.
 *
 * Streaming: sha256_init, any number of sha256_update, sha256_final.
 * sha256_file hashes a whole file and writes 64 lowercase hex digits. */
#ifndef ELDR_SHA256_H
#define ELDR_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST 32
#define SHA256_HEX (2 * SHA256_DIGEST + 1) /* hex digits plus NUL */

typedef struct sha256_ctx {
    uint32_t h[8];
    uint64_t bytes;          /* message length so far */
    uint8_t buf[64];         /* partial block */
    size_t nbuf;
} sha256_ctx;

void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t n);
void sha256_final(sha256_ctx *c, uint8_t digest[SHA256_DIGEST]);

/* digest -> 64 lowercase hex digits + NUL */
void sha256_hex(const uint8_t digest[SHA256_DIGEST], char hex[SHA256_HEX]);

/* Hash of a memory buffer, as hex. */
void sha256_buf_hex(const void *data, size_t n, char hex[SHA256_HEX]);

/* Hash of the bytes of a file, as hex. -1 (err names the file) when it
 * cannot be opened or read. */
int sha256_file(const char *path, char hex[SHA256_HEX], char *err, size_t errlen);

#endif
