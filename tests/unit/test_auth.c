/* common/auth.c: the session keys against a vector made with Python's cryptography (HKDF), and
 * the proofs' MAC. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "common/auth.h"

int check_failures;
const char *check_current = "";

/*
 * The vector, from python3-cryptography:
 *   HKDF(SHA256(), length=32, salt=cn + sn, info=b"loom c2s" / b"loom s2c").derive(key)
 * with key = bytes(range(32)), cn = bytes(0x40 + i for i in range(32)),
 * sn = bytes(0x80 + i for i in range(32)).
 */
static void test_session_keys_vector(void)
{
	uint8_t key[32], cn[32], sn[32], c2s[32], s2c[32], want_c2s[32], want_s2c[32];

	for (int i = 0; i < 32; i++) {
		key[i] = (uint8_t)i;
		cn[i] = (uint8_t)(0x40 + i);
		sn[i] = (uint8_t)(0x80 + i);
	}
	check_unhex("8b6bd98ff8937b4db2c3c2dcfce3560c7805b1470f1210e9fb84f34dba27f016", want_c2s, 32);
	check_unhex("dc9ebcd8aa35796c0642a03609f6263317a1ef0e5f9b7cf7e62e7e5ac3fe81ec", want_s2c, 32);
	CHECK_RC(loom_session_keys(key, sizeof(key), cn, sn, 32, c2s, s2c), 0);
	CHECK(memcmp(c2s, want_c2s, 32) == 0);
	CHECK(memcmp(s2c, want_s2c, 32) == 0);

	/* Either nonce changed: other keys (the salt is both, in order). */
	CHECK_RC(loom_session_keys(key, sizeof(key), sn, cn, 32, c2s, s2c), 0);
	CHECK(memcmp(c2s, want_c2s, 32) != 0 && memcmp(s2c, want_s2c, 32) != 0);
	CHECK_RC(loom_session_keys(key, sizeof(key), cn, sn, 65, c2s, s2c), -EINVAL);
}

static void test_mac(void)
{
	uint8_t key[32] = { 7 }, a[32] = { 1 }, b[32] = { 2 }, m1[LOOM_MAC_LEN], m2[LOOM_MAC_LEN];

	CHECK(strcmp(loom_auth_label(false, false), "loom-auth-client") == 0);
	CHECK(strcmp(loom_auth_label(false, true), "loom-auth-client-encrypt") == 0);
	CHECK(strcmp(loom_auth_label(true, false), "loom-auth-server") == 0);
	CHECK(strcmp(loom_auth_label(true, true), "loom-auth-server-encrypt") == 0);
	CHECK_RC(loom_auth_mac(key, sizeof(key), loom_auth_label(false, false), a, b, 32, m1), 0);
	CHECK_RC(loom_auth_mac(key, sizeof(key), loom_auth_label(false, true), a, b, 32, m2), 0);
	CHECK(!loom_auth_equal(m1, m2)); /* the mode is bound by the label */
	CHECK_RC(loom_auth_mac(key, sizeof(key), "loom-auth-client", a, b, 32, m2), 0);
	CHECK(loom_auth_equal(m1, m2));
}

int main(void)
{
	RUN(test_session_keys_vector);
	RUN(test_mac);
	return check_report();
}
