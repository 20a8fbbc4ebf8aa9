/* mk_sha256.h — SHA-256 for content hashes (cache keys, capture keys).
 * FIPS 180-4; tested against the standard vectors. */
#ifndef MK_SHA256_H
#define MK_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct mk_sha256 {
  uint32_t h[8];
  uint64_t nbytes;
  uint8_t block[64];
  size_t fill;
} mk_sha256;

void mk_sha256_init(mk_sha256 *s);
void mk_sha256_update(mk_sha256 *s, const void *data, size_t n);
void mk_sha256_final(mk_sha256 *s, uint8_t out[32]);
/* Hashes `data` and writes 64 lowercase hex digits plus NUL into hex. */
void mk_sha256_hex(const void *data, size_t n, char hex[65]);

#endif
