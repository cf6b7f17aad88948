#include "common/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/util.h"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int loom_key_load(const char *path, uint8_t *key, size_t *len)
{
	char *buf = NULL;
	size_t n = 0, i;
	int rc = file_read_all(path, &buf, NULL);

	if (rc)
		return rc;
	for (i = 0; buf[i] && buf[i] != '\n' && buf[i] != '\r'; i += 2) {
		int hi = hexval(buf[i]), lo = buf[i + 1] ? hexval(buf[i + 1]) : -1;
		if (hi < 0 || lo < 0 || n == LOOM_KEY_MAX) {
			rc = -EINVAL;
			break;
		}
		key[n++] = (uint8_t)(hi << 4 | lo);
	}
	if (rc == 0 && n < 16)
		rc = -EINVAL; /* too short to be a key */
	OPENSSL_cleanse(buf, strlen(buf));
	free(buf);
	if (rc == 0)
		*len = n;
	return rc;
}

int loom_key_create(const char *path)
{
	uint8_t key[32];
	char hex[2 * sizeof(key) + 2];
	int fd, rc;

	rc = random_bytes(key, sizeof(key));
	if (rc)
		return rc;
	for (size_t i = 0; i < sizeof(key); i++)
		snprintf(hex + 2 * i, 3, "%02x", key[i]);
	hex[2 * sizeof(key)] = '\n';
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	rc = write_full(fd, hex, 2 * sizeof(key) + 1);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	close(fd);
	OPENSSL_cleanse(key, sizeof(key));
	OPENSSL_cleanse(hex, sizeof(hex));
	if (rc)
		unlink(path);
	return rc;
}

int loom_auth_mac(const uint8_t *key, size_t keylen, const char *label, const uint8_t *a,
		   const uint8_t *b, size_t n, uint8_t out[LOOM_MAC_LEN])
{
	uint8_t msg[64 + 2 * 64];
	size_t ll = strlen(label), len = 0;
	unsigned int outlen = LOOM_MAC_LEN;

	/* label || a || b; the callers' nonces are 32 bytes, labels short. */
	memcpy(msg, label, ll);
	len += ll;
	memcpy(msg + len, a, n);
	len += n;
	memcpy(msg + len, b, n);
	len += n;
	if (!HMAC(EVP_sha256(), key, (int)keylen, msg, len, out, &outlen) || outlen != LOOM_MAC_LEN)
		return -EIO;
	return 0;
}

int loom_auth_equal(const uint8_t *x, const uint8_t *y)
{
	return CRYPTO_memcmp(x, y, LOOM_MAC_LEN) == 0;
}
