#include "common/auth.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/hmac.h>
#include <stdbool.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
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

/* Anyone else who can read the key is root on the file system (the MDS believes the uid a key
 * holder sends), and anyone who can write it chooses the key. Execute bits give nothing away.
 * A file of root's is as private as one's own: root can read anything anyway. */
#define KEY_FILE_SHARED_BITS (S_IRGRP | S_IWGRP | S_IROTH | S_IWOTH)

static bool key_file_owner_ok(const struct stat *st)
{
	return st->st_uid == geteuid() || st->st_uid == 0;
}

/* The "node NAME GENERATION" line of a node's key file, after its key line. Any other second
 * line is left alone, as it always was (only the first line was read). */
static int key_id_parse(const char *line, struct loom_key_id *id)
{
	char name[LOOM_NODE_NAME_LEN + 1], extra;
	unsigned long long gen;

	memset(id, 0, sizeof(*id));
	while (*line == '\n' || *line == '\r')
		line++;
	if (strncmp(line, "node ", 5) != 0)
		return 0;
	if (sscanf(line, "node %32s %llu %c", name, &gen, &extra) != 2 || loom_node_name_check(name) ||
	    gen == 0 || gen > UINT32_MAX)
		return -EINVAL;
	memcpy(id->node, name, strlen(name));
	id->generation = (uint32_t)gen;
	return 0;
}

int loom_key_load(const char *path, uint8_t *key, size_t *len, struct loom_key_id *id)
{
	/* The first line: 2 * LOOM_KEY_MAX hex digits and "\r\n"; a node's line after it. A byte
	 * more tells a file too long from one that fits. */
	char buf[2 * LOOM_KEY_MAX + 2 + 64 + 2];
	struct loom_key_id whose;
	struct stat st;
	size_t got = 0, n = 0, i;
	int fd, rc = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* Checked on the file that is read, not on a name that could change in between. */
	if (fstat(fd, &st) < 0)
		rc = -errno;
	else if ((st.st_mode & KEY_FILE_SHARED_BITS) || !key_file_owner_ok(&st))
		rc = -EPERM;
	while (rc == 0 && got < sizeof(buf) - 1) {
		ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			rc = -errno;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	buf[got] = '\0';
	if (rc == 0 && got == sizeof(buf) - 1)
		rc = -EINVAL; /* more than a key file holds */
	for (i = 0; rc == 0 && buf[i] && buf[i] != '\n' && buf[i] != '\r'; i += 2) {
		int hi = hexval(buf[i]), lo = buf[i + 1] ? hexval(buf[i + 1]) : -1;
		if (hi < 0 || lo < 0 || n == LOOM_KEY_MAX) {
			rc = -EINVAL;
			break;
		}
		key[n++] = (uint8_t)(hi << 4 | lo);
	}
	if (rc == 0 && n < 16)
		rc = -EINVAL; /* too short to be a key */
	if (rc == 0)
		rc = key_id_parse(buf + i, &whose);
	if (rc == 0 && !id && whose.node[0])
		rc = -EINVAL; /* a node's key where the file system's is wanted */
	OPENSSL_cleanse(buf, sizeof(buf));
	if (rc == 0) {
		*len = n;
		if (id)
			*id = whose;
	} else {
		OPENSSL_cleanse(key, LOOM_KEY_MAX);
	}
	return rc;
}

int loom_key_refusal(const char *path, char *buf, size_t cap)
{
	struct stat st;
	mode_t shared;

	if (stat(path, &st) < 0)
		return -errno;
	shared = st.st_mode & KEY_FILE_SHARED_BITS;
	if (shared) {
		bool r = shared & (S_IRGRP | S_IROTH), w = shared & (S_IWGRP | S_IWOTH);
		bool grp = shared & (S_IRGRP | S_IWGRP), oth = shared & (S_IROTH | S_IWOTH);

		snprintf(buf, cap, "key file %s is %s by %s (mode %04o): chmod 600 %s", path,
			 r && w ? "readable and writable" : r ? "readable" : "writable",
			 grp && oth ? "its group and others" : grp ? "its group" : "others",
			 (unsigned)(st.st_mode & 07777), path);
	} else if (!key_file_owner_ok(&st)) {
		snprintf(buf, cap, "key file %s belongs to uid %u, not to this user (uid %u) or root: "
			 "chown %u %s, or use a copy of your own with mode 600", path, (unsigned)st.st_uid,
			 (unsigned)geteuid(), (unsigned)geteuid(), path);
	} else {
		return -EAGAIN; /* fixed since it was refused */
	}
	return 0;
}

int loom_key_load_logged(const char *path, uint8_t *key, size_t *len)
{
	char why[LOOM_KEY_REFUSAL_LEN];
	struct loom_key_id id;
	int rc = loom_key_load(path, key, len, &id);

	if (rc == 0 && id.node[0]) {
		log_err("%s is node %s's key: a server needs the file system key", path, id.node);
		OPENSSL_cleanse(key, LOOM_KEY_MAX);
		rc = -EINVAL;
	} else if (rc == -EPERM && loom_key_refusal(path, why, sizeof(why)) == 0)
		log_err("%s", why);
	else if (rc)
		log_err("cannot read the file system key %s: %s", path,
			rc == -EINVAL ? "not a key" : strerror(-rc));
	return rc;
}

const char *loom_key_file_choose(const char *given)
{
	if (given)
		return given;
	given = getenv("LOOM_KEY_FILE");
	if (given)
		return given;
	return access(LOOM_DEFAULT_KEY_FILE, F_OK) == 0 ? LOOM_DEFAULT_KEY_FILE : NULL;
}

/* Writes key (as hex) and then tail to a new private file at path. */
static int key_file_write(const char *path, const uint8_t *key, size_t n, const char *tail)
{
	char text[2 * LOOM_KEY_MAX + 2 + 64];
	size_t len = 0;
	int fd, rc;

	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(text + len, sizeof(text) - len, "%02x", key[i]);
	len += (size_t)snprintf(text + len, sizeof(text) - len, "\n%s", tail);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	rc = write_full(fd, text, len);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	close(fd);
	if (rc)
		unlink(path);
out:
	OPENSSL_cleanse(text, sizeof(text));
	return rc;
}

int loom_key_create(const char *path)
{
	uint8_t key[32];
	int rc;

	rc = random_bytes(key, sizeof(key));
	if (rc == 0)
		rc = key_file_write(path, key, sizeof(key), "");
	OPENSSL_cleanse(key, sizeof(key));
	return rc;
}

int loom_node_name_check(const char *name)
{
	size_t n = strnlen(name, LOOM_NODE_NAME_LEN);

	if (n == 0 || n >= LOOM_NODE_NAME_LEN)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
		      c == '-' || c == '.'))
			return -EINVAL;
	}
	return 0;
}

int loom_node_key(const uint8_t *fskey, size_t fslen, const char *name, uint32_t generation,
		  uint8_t out[LOOM_MAC_LEN])
{
	static const char label[] = "loom-node";
	uint8_t msg[sizeof(label) - 1 + LOOM_NODE_NAME_LEN + 4];
	unsigned int outlen = LOOM_MAC_LEN;
	size_t off = sizeof(label) - 1;

	if (loom_node_name_check(name))
		return -EINVAL;
	memset(msg, 0, sizeof(msg));
	memcpy(msg, label, off);
	memcpy(msg + off, name, strlen(name));
	off += LOOM_NODE_NAME_LEN;
	for (int i = 0; i < 4; i++)
		msg[off + (size_t)i] = (uint8_t)(generation >> (8 * i));
	if (!HMAC(EVP_sha256(), fskey, (int)fslen, msg, sizeof(msg), out, &outlen) || outlen != LOOM_MAC_LEN)
		return -EIO;
	return 0;
}

int loom_node_key_write(const char *path, const uint8_t *fskey, size_t fslen, const char *name,
			uint32_t generation)
{
	uint8_t key[LOOM_MAC_LEN];
	char line[64];
	int rc = loom_node_key(fskey, fslen, name, generation, key);

	snprintf(line, sizeof(line), "node %s %u\n", name, (unsigned)generation);
	if (rc == 0)
		rc = key_file_write(path, key, sizeof(key), line);
	OPENSSL_cleanse(key, sizeof(key));
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

const char *loom_auth_label(bool from_server, bool encrypt)
{
	if (from_server)
		return encrypt ? "loom-auth-server-encrypt" : "loom-auth-server";
	return encrypt ? "loom-auth-client-encrypt" : "loom-auth-client";
}

/* HKDF-SHA256(ikm, salt, info) into out (extract, then expand). 0 or -EIO. */
static int hkdf_sha256(const uint8_t *ikm, size_t ikmlen, const uint8_t *salt, size_t saltlen,
		       const char *info, uint8_t *out, size_t outlen)
{
	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	EVP_KDF_CTX *kctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
	OSSL_PARAM params[5];
	int rc = -EIO;

	if (!kctx)
		goto out;
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0);
	params[1] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)ikm, ikmlen);
	params[2] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, saltlen);
	params[3] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, strlen(info));
	params[4] = OSSL_PARAM_construct_end();
	if (EVP_KDF_derive(kctx, out, outlen, params) == 1)
		rc = 0;
out:
	EVP_KDF_CTX_free(kctx);
	EVP_KDF_free(kdf);
	return rc;
}

int loom_session_keys(const uint8_t *key, size_t keylen, const uint8_t *client_nonce,
		      const uint8_t *server_nonce, size_t n, uint8_t c2s[LOOM_SESSION_KEY_LEN],
		      uint8_t s2c[LOOM_SESSION_KEY_LEN])
{
	uint8_t salt[2 * 64];
	int rc;

	if (n > 64)
		return -EINVAL;
	memcpy(salt, client_nonce, n);
	memcpy(salt + n, server_nonce, n);
	rc = hkdf_sha256(key, keylen, salt, 2 * n, "loom c2s", c2s, LOOM_SESSION_KEY_LEN);
	if (rc == 0)
		rc = hkdf_sha256(key, keylen, salt, 2 * n, "loom s2c", s2c, LOOM_SESSION_KEY_LEN);
	if (rc) {
		OPENSSL_cleanse(c2s, LOOM_SESSION_KEY_LEN);
		OPENSSL_cleanse(s2c, LOOM_SESSION_KEY_LEN);
	}
	return rc;
}
