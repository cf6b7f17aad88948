/* AES-256-GCM over frames, through OpenSSL's EVP (AES-NI and PCLMULQDQ where the CPU has them). */
#include "net/seal.h"

#include <errno.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <string.h>

int seal_init(struct seal *s, const uint8_t key[32], bool encrypt, bool sending)
{
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();

	memset(s, 0, sizeof(*s));
	if (!ctx)
		return -ENOMEM;
	/* The key now (GCM's hash key is derived from it once); each frame then sets only its IV,
	 * which is 12 bytes, GCM's default. */
	if (EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, NULL, sending ? 1 : 0) != 1) {
		EVP_CIPHER_CTX_free(ctx);
		return -EIO;
	}
	s->ctx = ctx;
	s->encrypt = encrypt;
	s->sending = sending;
	return 0;
}

void seal_clear(struct seal *s)
{
	EVP_CIPHER_CTX_free(s->ctx); /* cleanses the key schedule */
	memset(s, 0, sizeof(*s));
}

int seal_begin(struct seal *s, const struct lw_hdr *h)
{
	uint8_t iv[12] = { 0 };
	uint64_t n = s->counter++;
	int outl;

	for (int i = 0; i < 8; i++)
		iv[4 + i] = (uint8_t)(n >> (56 - 8 * i));
	if (EVP_CipherInit_ex(s->ctx, NULL, NULL, NULL, iv, -1) != 1 ||
	    EVP_CipherUpdate(s->ctx, NULL, &outl, (const uint8_t *)h, (int)sizeof(*h)) != 1)
		return -EIO;
	return 0;
}

int seal_update(struct seal *s, const void *in, void *out, size_t len)
{
	const uint8_t *p = in;
	uint8_t *q = out;

	while (len > 0) {
		int n = len > INT_MAX / 2 ? INT_MAX / 2 : (int)len, outl;

		if (EVP_CipherUpdate(s->ctx, s->encrypt ? q : NULL, &outl, p, n) != 1)
			return -EIO;
		p += n;
		if (q)
			q += n;
		len -= (size_t)n;
	}
	return 0;
}

int seal_final(struct seal *s, uint8_t tag[LW_TAG_LEN])
{
	uint8_t none[16];
	int outl;

	if (EVP_CipherFinal_ex(s->ctx, none, &outl) != 1 ||
	    EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_GCM_GET_TAG, LW_TAG_LEN, tag) != 1)
		return -EIO;
	return 0;
}

int seal_check(struct seal *s, const uint8_t tag[LW_TAG_LEN])
{
	uint8_t none[16];
	int outl;

	/* GCM's final step compares the tags in constant time. */
	if (EVP_CIPHER_CTX_ctrl(s->ctx, EVP_CTRL_GCM_SET_TAG, LW_TAG_LEN, (void *)tag) != 1 ||
	    EVP_CipherFinal_ex(s->ctx, none, &outl) != 1)
		return -EBADMSG;
	return 0;
}

int seal_frame(struct seal *s, const struct lw_hdr *h, void *body, void *bulk,
	       uint8_t tag[LW_TAG_LEN])
{
	int rc = seal_begin(s, h);

	if (rc == 0 && h->body_len)
		rc = seal_update(s, body, body, h->body_len);
	if (rc == 0 && h->bulk_len)
		rc = seal_update(s, bulk, bulk, h->bulk_len);
	if (rc == 0)
		rc = seal_final(s, tag);
	return rc;
}
