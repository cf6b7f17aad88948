/* The file system key and the HMAC-SHA256 proofs that a peer holds it (OpenSSL's libcrypto). */
#ifndef LOOM_COMMON_AUTH_H
#define LOOM_COMMON_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define LOOM_KEY_MAX 64 /* bytes */
#define LOOM_MAC_LEN 32

/* A key is stored as hex on one line (64 hex digits for the 32 bytes `loom_key_create` makes).
 * Returns 0, -ENOENT, -EACCES, or -EINVAL for a file that is not a key. */
int loom_key_load(const char *path, uint8_t *key, size_t *len);
/* Writes a new random 32-byte key to path (mode 0600); -EEXIST if the file exists. */
int loom_key_create(const char *path);

/* HMAC-SHA256(key, label || a || b) with a and b of n bytes each. 0, or -EIO if libcrypto
 * failed (out is then unusable). */
int loom_auth_mac(const uint8_t *key, size_t keylen, const char *label, const uint8_t *a,
		   const uint8_t *b, size_t n, uint8_t out[LOOM_MAC_LEN]);
/* Constant-time comparison of two MACs: 1 if equal. */
int loom_auth_equal(const uint8_t *x, const uint8_t *y);

#endif
