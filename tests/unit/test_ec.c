/* Reed-Solomon (common/ec.c): any k of the k + m units give back every other one, byte for byte,
 * for every way of losing up to m of them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "common/ec.h"

int check_failures;
const char *check_current = "";

#define LEN 4099 /* not a multiple of anything ISA-L vectorises by */

/* Every subset of up to m lost units of a k + m row (bit i of `lost`: unit i), decoded from the
 * first k units still held, gives back the lost units. */
static void roundtrip(uint32_t k, uint32_t m)
{
	uint32_t n = k + m;
	struct ec_codec *c;
	uint8_t *units[32], *got[32];
	uint32_t checked = 0;

	REQUIRE_RC(ec_codec_new(k, m, &c), 0);
	for (uint32_t i = 0; i < n; i++) {
		units[i] = malloc(LEN);
		got[i] = malloc(LEN);
		for (uint32_t b = 0; b < LEN && i < k; b++)
			units[i][b] = (uint8_t)rand();
	}
	ec_encode(c, LEN, units, units + k);
	/* A parity unit depends on every data byte: one byte changed changes every parity unit. */
	{
		uint8_t *p2[16];

		for (uint32_t j = 0; j < m; j++)
			p2[j] = malloc(LEN);
		units[k - 1][7] ^= 0x5a;
		ec_encode(c, LEN, units, p2);
		units[k - 1][7] ^= 0x5a;
		for (uint32_t j = 0; j < m; j++) {
			CHECK(p2[j][7] != units[k + j][7]);
			CHECK(memcmp(p2[j], units[k + j], 7) == 0);
			free(p2[j]);
		}
	}
	for (uint32_t lost = 1; lost < (1u << n); lost++) {
		uint32_t have[32], want[32], nh = 0, nw = 0;
		uint8_t *src[32], *dst[32];

		if ((uint32_t)__builtin_popcount(lost) > m)
			continue;
		for (uint32_t i = 0; i < n; i++) {
			if (lost & (1u << i)) {
				want[nw] = i;
				dst[nw++] = got[i];
			} else if (nh < k) {
				have[nh] = i;
				src[nh++] = units[i];
			}
		}
		memset(got[want[0]], 0xEE, LEN);
		REQUIRE_RC(ec_decode(c, LEN, have, src, want, nw, dst), 0);
		for (uint32_t w = 0; w < nw; w++)
			CHECK(memcmp(got[want[w]], units[want[w]], LEN) == 0);
		checked++;
	}
	CHECK(checked > 0);
	/* Bad arguments. */
	{
		uint32_t have[32], want[1] = { 0 };
		uint8_t *src[32], *dst[1] = { got[0] };

		for (uint32_t i = 0; i < k; i++) {
			have[i] = i + m;
			src[i] = units[i + m];
		}
		if (k > 1) {
			have[1] = have[0];
			CHECK_RC(ec_decode(c, LEN, have, src, want, 1, dst), -EINVAL);
			have[1] = 1 + m;
		}
		want[0] = n;
		CHECK_RC(ec_decode(c, LEN, have, src, want, 1, dst), -EINVAL);
	}
	for (uint32_t i = 0; i < n; i++) {
		free(units[i]);
		free(got[i]);
	}
	ec_codec_free(c);
}

static void test_roundtrips(void)
{
	roundtrip(1, 1);
	roundtrip(2, 1);
	roundtrip(4, 2);
	roundtrip(6, 3);
	roundtrip(8, 2);
	roundtrip(10, 4);
}

static void test_limits(void)
{
	struct ec_codec *c = (struct ec_codec *)1;

	CHECK_RC(ec_codec_new(0, 2, &c), -EINVAL);
	CHECK(c == NULL);
	CHECK_RC(ec_codec_new(4, 0, &c), -EINVAL);
	CHECK_RC(ec_codec_new(250, 6, &c), -EINVAL);
	REQUIRE_RC(ec_codec_new(239, 16, &c), 0);
	ec_codec_free(c);
}

int main(void)
{
	srand(4242);
	RUN(test_roundtrips);
	RUN(test_limits);
	return check_report();
}
