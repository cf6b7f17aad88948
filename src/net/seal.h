/*
 * Sealed frames: after the AUTH_* exchange every frame, both ways, carries an AES-256-GCM tag
 * (wire.h, "Sealed frames"), so that a relay without the key can neither alter, inject, replay,
 * reorder nor drop one unseen. One struct seal is one direction of one connection: its session
 * key (common/auth.h, loom_session_keys) and its frame counter, which is the GCM nonce and is
 * never sent:
 *
 *   nonce (12 bytes) = 00 00 00 00 || counter (u64, big-endian); counter = 0, 1, 2, ... per frame
 *
 *   without encryption:  AAD = header || body || bulk, no ciphertext: the tag authenticates all
 *   with encryption:     AAD = header, ciphertext = body || bulk (in place, same lengths)
 *
 * A frame is sealed (or opened) in order: seal_begin with its header, seal_update over the body
 * and then the bulk, in as many pieces as they come, then seal_final (sending: the tag to append)
 * or seal_check (receiving: the tag that came). A frame lost, repeated or moved is opened with
 * another counter than it was sealed with, and fails its tag as surely as an altered one.
 *
 * Not thread-safe: each seal belongs to whoever sends (or receives) on its connection.
 */
#ifndef LOOM_NET_SEAL_H
#define LOOM_NET_SEAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/wire.h"

struct seal {
	void *ctx;        /* EVP_CIPHER_CTX with the key set; NULL: off (no key, or the handshake
	                   * is not over): frames go without a tag */
	uint64_t counter; /* the next frame's nonce */
	bool encrypt;     /* body and bulk are ciphertext */
	bool sending;
};

static inline bool seal_on(const struct seal *s)
{
	return s->ctx != NULL;
}

/* Sets s up for one direction (zeroed or cleared before). 0, -ENOMEM or -EIO. */
int seal_init(struct seal *s, const uint8_t key[32], bool encrypt, bool sending);
/* Frees s's state; s is off afterwards (and may be set up again). */
void seal_clear(struct seal *s);

/* Starts the next frame: its nonce is the counter, which moves on; the header is AAD. */
int seal_begin(struct seal *s, const struct lw_hdr *h);
/* The next len bytes of body or bulk: AAD without encryption (out unused, may be NULL); with it,
 * out = the encryption (sending) or decryption (receiving) of in, out == in allowed. */
int seal_update(struct seal *s, const void *in, void *out, size_t len);
/* Sending: the frame's tag. 0 or -EIO. */
int seal_final(struct seal *s, uint8_t tag[LW_TAG_LEN]);
/* Receiving: 0 if tag is the frame's, else -EBADMSG (the frame must not be used). */
int seal_check(struct seal *s, const uint8_t tag[LW_TAG_LEN]);

/* Seals one frame held in memory: header, body and bulk (in place with encryption), tag out. */
int seal_frame(struct seal *s, const struct lw_hdr *h, void *body, void *bulk,
	       uint8_t tag[LW_TAG_LEN]);

#endif
