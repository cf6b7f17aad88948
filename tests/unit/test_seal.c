/* net/seal.c: sealed frames against vectors made with Python's cryptography (AESGCM), both
 * modes; and a frame altered, replayed, reordered or dropped failing its tag. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "common/auth.h"
#include "common/crc.h"
#include "net/seal.h"
#include "proto/codec.h"

int check_failures;
const char *check_current = "";

/* The c2s key of test_auth.c's vector. */
static void c2s_key(uint8_t key[32])
{
	check_unhex("8b6bd98ff8937b4db2c3c2dcfce3560c7805b1470f1210e9fb84f34dba27f016", key, 32);
}

/* A PING, req_id 1, body "body", bulk "bulk": the header loomwire.pack_header makes too. */
static void ping_frame(struct lw_hdr *h, uint8_t body[4], uint8_t bulk[4])
{
	memcpy(body, "body", 4);
	memcpy(bulk, "bulk", 4);
	lw_hdr_fill(h, LW_OP_PING, 0, 0, 1, body, 4, 4, crc32c(0, bulk, 4));
	/* The vectors below are of a version 9 header, whatever this build speaks. */
	h->version = 9;
	h->hdr_crc = 0;
	h->hdr_crc = crc32c(crc32c(0, h, sizeof(*h)), body, 4);
}

/*
 * From python3-cryptography, with h the header's 40 bytes (…0900010000…86, version 9) and
 * nonce = 4 zero bytes || (5).to_bytes(8, "big"):
 *   AESGCM(c2s).encrypt(nonce, b"", h + b"body" + b"bulk")   (authenticated only: the tag)
 *   AESGCM(c2s).encrypt(nonce, b"bodybulk", h)                (encrypted: ciphertext || tag)
 */
static void test_vectors(void)
{
	uint8_t key[32], body[4], bulk[4], tag[LW_TAG_LEN], want[24], raw[40];
	struct lw_hdr h;
	struct seal s = { 0 };

	c2s_key(key);
	ping_frame(&h, body, bulk);
	check_unhex("4c4f4f4d0900010000000000000000000100000000000000040000000400000032acd24d803a3e86", raw, 40);
	REQUIRE(memcmp(&h, raw, 40) == 0);

	REQUIRE_RC(seal_init(&s, key, false, true), 0);
	s.counter = 5;
	CHECK_RC(seal_frame(&s, &h, body, bulk, tag), 0);
	check_unhex("1e6713d9e47c1ebc0cbd6ca2c823cabc", want, 16);
	CHECK(memcmp(tag, want, 16) == 0);
	CHECK(memcmp(body, "body", 4) == 0 && memcmp(bulk, "bulk", 4) == 0); /* left plain */
	CHECK_EQ(s.counter, 6);
	seal_clear(&s);

	REQUIRE_RC(seal_init(&s, key, true, true), 0);
	s.counter = 5;
	CHECK_RC(seal_frame(&s, &h, body, bulk, tag), 0);
	check_unhex("c5635df3826a5bd240ffb96868ab241d8fd7d92c8caf8612", want, 24);
	CHECK(memcmp(body, want, 4) == 0 && memcmp(bulk, want + 4, 4) == 0);
	CHECK(memcmp(tag, want + 8, 16) == 0);
	seal_clear(&s);
	CHECK(!seal_on(&s));
}

/* Sends frames 0..n-1 through one seal and opens them through another, in pieces. */
struct frame {
	struct lw_hdr h;
	uint8_t body[64], bulk[1000], tag[LW_TAG_LEN];
};

static void make_frames(struct seal *tx, struct frame *f, int n)
{
	for (int i = 0; i < n; i++) {
		for (int k = 0; k < 64; k++)
			f[i].body[k] = (uint8_t)(i + k);
		for (int k = 0; k < 1000; k++)
			f[i].bulk[k] = (uint8_t)(i * 3 + k);
		lw_hdr_fill(&f[i].h, LW_OP_OST_WRITE, 0, 0, (uint64_t)i + 1, f[i].body, 64, 1000,
			    crc32c(0, f[i].bulk, 1000));
		REQUIRE_RC(seal_frame(tx, &f[i].h, f[i].body, f[i].bulk, f[i].tag), 0);
	}
}

/* Opens a copy of f (the receiver must not spoil the test's frames) in uneven pieces. */
static int open_frame(struct seal *rx, const struct frame *f, struct frame *out)
{
	*out = *f;
	REQUIRE_RC(seal_begin(rx, &out->h), 0);
	REQUIRE_RC(seal_update(rx, out->body, out->body, 64), 0);
	REQUIRE_RC(seal_update(rx, out->bulk, out->bulk, 1), 0);
	REQUIRE_RC(seal_update(rx, out->bulk + 1, out->bulk + 1, 600), 0);
	REQUIRE_RC(seal_update(rx, out->bulk + 601, out->bulk + 601, 399), 0);
	return seal_check(rx, out->tag);
}

static void test_tampering(bool encrypt)
{
	uint8_t key[32];
	struct seal tx = { 0 }, rx = { 0 };
	struct frame f[4], got, bad;

	c2s_key(key);
	REQUIRE_RC(seal_init(&tx, key, encrypt, true), 0);
	make_frames(&tx, f, 4);

	/* In order: every frame opens, and is what was sealed. */
	REQUIRE_RC(seal_init(&rx, key, encrypt, false), 0);
	for (int i = 0; i < 4; i++) {
		CHECK_RC(open_frame(&rx, &f[i], &got), 0);
		CHECK_EQ(got.body[5], (uint8_t)(i + 5));
		CHECK_EQ(got.bulk[999], (uint8_t)(i * 3 + 999));
	}
	seal_clear(&rx);

	/* One byte of header, body, bulk or tag altered; a frame replayed, two swapped, one
	 * dropped: each fails where it is opened. */
	for (int what = 0; what < 7; what++) {
		REQUIRE_RC(seal_init(&rx, key, encrypt, false), 0);
		CHECK_RC(open_frame(&rx, &f[0], &got), 0);
		bad = f[1];
		switch (what) {
		case 0: ((uint8_t *)&bad.h)[20] ^= 1; break;
		case 1: bad.body[7] ^= 0x80; break;
		case 2: bad.bulk[500] ^= 1; break;
		case 3: bad.tag[15] ^= 1; break;
		case 4: bad = f[0]; break; /* replayed */
		case 5: bad = f[2]; break; /* reordered (or f[1] dropped) */
		case 6: memset(bad.tag, 0, sizeof(bad.tag)); break; /* injected, tag made up */
		}
		CHECK_RC(open_frame(&rx, &bad, &got), -EBADMSG);
		seal_clear(&rx);
	}
	/* Another direction's (or connection's) key opens nothing. */
	key[0] ^= 1;
	REQUIRE_RC(seal_init(&rx, key, encrypt, false), 0);
	CHECK_RC(open_frame(&rx, &f[0], &got), -EBADMSG);
	seal_clear(&rx);
	/* Nor does the other mode. */
	key[0] ^= 1;
	REQUIRE_RC(seal_init(&rx, key, !encrypt, false), 0);
	CHECK_RC(open_frame(&rx, &f[0], &got), -EBADMSG);
	seal_clear(&rx);
	seal_clear(&tx);
}

static void test_tampering_authenticated(void)
{
	test_tampering(false);
}

static void test_tampering_encrypted(void)
{
	test_tampering(true);
}

int main(void)
{
	RUN(test_vectors);
	RUN(test_tampering_authenticated);
	RUN(test_tampering_encrypted);
	return check_report();
}
