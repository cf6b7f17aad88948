/* The file system key, the HMAC-SHA256 proofs that a peer holds it, and the session keys a
 * connection derives from it (OpenSSL's libcrypto). */
#ifndef LOOM_COMMON_AUTH_H
#define LOOM_COMMON_AUTH_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LOOM_KEY_MAX 64 /* bytes */
#define LOOM_MAC_LEN 32

/* Where a client looks for the key when none is named, and a server without --key. */
#define LOOM_DEFAULT_KEY_FILE "/etc/loom/loom.key"

/* Whose a key is: the file system's (node "") or one client node's (wire_auth.h, "Node keys"). */
#define LOOM_NODE_NAME_LEN 32 /* 1..31 of [A-Za-z0-9._-], NUL-padded */
struct loom_key_id {
	char node[LOOM_NODE_NAME_LEN];
	uint32_t generation;
};

/* A key is stored as hex on one line (64 hex digits for the 32 bytes `loom_key_create` makes).
 * A node's key file has a second line, "node NAME GENERATION".
 * The file must be private, as ssh wants of a private key: neither its group nor others may read
 * or write it, and it belongs to the user running the program or to root.
 * Returns 0, -ENOENT, -EACCES, -EPERM for a file that is not private (loom_key_refusal says
 * why), or -EINVAL for a file that is not a key. id NULL: only the file system key will do (a
 * node's key is -EINVAL); else *id says whose the key is. */
int loom_key_load(const char *path, uint8_t *key, size_t *len, struct loom_key_id *id);
/* Why loom_key_load refused path with -EPERM, as one line for the user that ends with the fix:
 * "key file F is readable by its group and others (mode 0644): chmod 600 F". It names the file
 * twice: LOOM_KEY_REFUSAL_LEN holds any. 0 with the line in buf; -EAGAIN if the file is private
 * now, or stat's error: the caller then says what it would have said of the errno. */
#define LOOM_KEY_REFUSAL_LEN (2 * PATH_MAX + 160)
int loom_key_refusal(const char *path, char *buf, size_t cap);
/* loom_key_load of the file system key for a server's start: when it fails, the line the admin
 * needs is logged (the refusal and its fix, what is wrong with the file, or that it is a node's
 * key). */
int loom_key_load_logged(const char *path, uint8_t *key, size_t *len);
/* The key file a client uses: given (even "", which means none), else $LOOM_KEY_FILE, else
 * LOOM_DEFAULT_KEY_FILE if it exists, else NULL. NULL or "": no key. */
const char *loom_key_file_choose(const char *given);
/* Writes a new random 32-byte key to path (mode 0600); -EEXIST if the file exists. */
int loom_key_create(const char *path);

/* 0 if name can name a node (1..31 of [A-Za-z0-9._-]), else -EINVAL. */
int loom_node_name_check(const char *name);
/* A node's key: HMAC-SHA256(file system key, "loom-node" || name NUL-padded to
 * LOOM_NODE_NAME_LEN || generation, u32 little-endian). 0, -EINVAL (name), or -EIO. */
int loom_node_key(const uint8_t *fskey, size_t fslen, const char *name, uint32_t generation,
		  uint8_t out[LOOM_MAC_LEN]);
/* Writes node name's key of that generation to path (mode 0600, with its "node" line); -EEXIST
 * if the file exists. */
int loom_node_key_write(const char *path, const uint8_t *fskey, size_t fslen, const char *name,
			uint32_t generation);

/* HMAC-SHA256(key, label || a || b) with a and b of n bytes each. 0, or -EIO if libcrypto
 * failed (out is then unusable). */
int loom_auth_mac(const uint8_t *key, size_t keylen, const char *label, const uint8_t *a,
		   const uint8_t *b, size_t n, uint8_t out[LOOM_MAC_LEN]);
/* Constant-time comparison of two MACs: 1 if equal. */
int loom_auth_equal(const uint8_t *x, const uint8_t *y);
/* The label of the client's proof (from_server false) or the server's, by whether the connection
 * encrypts: "loom-auth-client", "loom-auth-client-encrypt", "loom-auth-server", ... (wire.h). The
 * choice is so bound by both proofs. */
const char *loom_auth_label(bool from_server, bool encrypt);

#define LOOM_SESSION_KEY_LEN 32
/*
 * The two session keys of one connection, one per direction: HKDF-SHA256 (RFC 5869) with the file
 * system key as input keying material, salt = client nonce || server nonce (n bytes each, the
 * nonces of the AUTH_* exchange) and info "loom c2s" (frames the client sends) or "loom s2c"
 * (frames the server sends). Fresh nonces on both sides make every connection's keys new, so a
 * frame recorded on one connection is worth nothing on another. 0, -EIO if libcrypto failed
 * (the keys are then zeroed), -EINVAL for nonces over 64 bytes.
 */
int loom_session_keys(const uint8_t *key, size_t keylen, const uint8_t *client_nonce,
		      const uint8_t *server_nonce, size_t n, uint8_t c2s[LOOM_SESSION_KEY_LEN],
		      uint8_t s2c[LOOM_SESSION_KEY_LEN]);

#endif
